package kernel

import (
	"fmt"
	"time"

	"github.com/contextos/ledger/wire"
)

// This file holds the types of the context compiler: its inputs (ContextPack,
// RunContext, EvidenceCandidate, EvidenceConflictMarker), its output
// (CompiledContext with its EvidenceGate) and its typed input error. The
// compiler itself is in context_compile.go, marker rules in
// context_markers.go, strict parsers in context_parse.go. docs/context.md
// describes the semantics.

// ContextPackSchema is the schema tag every ContextPack carries; a pack with
// any other tag is refused.
const ContextPackSchema = "context_pack.v1"

// CompiledContextSchema is the schema tag of every CompiledContext.
const CompiledContextSchema = "compiled_context.v1"

// maxJSONSafeInt is 2^53-1, the largest integer RFC 8785 numbers carry
// exactly; budgets, token counts and ranks are bounded by it.
const maxJSONSafeInt = 1<<53 - 1

// ContextPack is a versioned context policy: the buckets that bound the
// payload, the decision specs with the evidence each decision requires, the
// tool exposure rules, the trust rules (which source may satisfy which
// requirement) and the deterministic conflict resolution rules. Lists are
// sets: their order never changes a compiled result or the pack digest.
type ContextPack struct {
	Schema          string           `json:"schema"`
	PackID          string           `json:"pack_id"`
	Version         string           `json:"version"`
	Buckets         []ContextBucket  `json:"buckets"`
	Decisions       []DecisionSpec   `json:"decisions"`
	Tools           []ToolRule       `json:"tools,omitempty"`
	Trust           []TrustRule      `json:"trust,omitempty"`
	ResolutionRules []ResolutionRule `json:"resolution_rules,omitempty"`
}

// ContextBucket is a named payload budget. At least one of MaxTokens and
// MaxBytes is positive; a zero axis is not limited. Tokens are the counts
// declared by candidates (the kernel has no tokenizer); bytes are the UTF-8
// length of a candidate's content.
type ContextBucket struct {
	Name      string `json:"name"`
	MaxTokens int64  `json:"max_tokens,omitempty"`
	MaxBytes  int64  `json:"max_bytes,omitempty"`
}

// DecisionSpec names a governed decision and the evidence requirements
// (obligations) that must all be satisfied before it may commit.
// Independence raises the bar of some of them: without an entry, one usable
// candidate satisfies a requirement.
type DecisionSpec struct {
	DecisionKey      string               `json:"decision_key"`
	RequiredEvidence []string             `json:"required_evidence,omitempty"`
	Independence     []IndependenceDemand `json:"independence,omitempty"`
}

// IndependenceDemand asks that a required obligation be satisfied by usable
// evidence from at least MinFamilies distinct source families. Two refs
// from one family count once: five reports derived from one export are one
// witness, not five. A source's family is its TrustRule's Family, or the
// source itself when the rule names none.
type IndependenceDemand struct {
	Requirement string `json:"requirement"`
	MinFamilies int64  `json:"min_families"`
}

// maxFamilies bounds MinFamilies; no decision needs more independent
// witnesses than this, and a larger demand is a typo, not a policy.
const maxFamilies = 64

// ToolRule exposes a capability to runs whose principal holds it. When
// GatedBy names a decision key, dispatch is allowed only when that
// decision's gate allows commit in the same compiled context.
type ToolRule struct {
	CapabilityID string `json:"capability_id"`
	GatedBy      string `json:"gated_by,omitempty"`
}

// TrustRule declares a source the pack trusts and the requirements its
// evidence may satisfy. A source with no rule is untrusted: its candidates
// are rejected. A source whose rule does not name a requirement cannot
// satisfy that requirement (its evidence may still be payload). Family
// names the source family it derives from, for IndependenceDemand: sources
// sharing a family are one witness. Empty, the source is its own family.
type TrustRule struct {
	Source       string   `json:"source"`
	Family       string   `json:"family,omitempty"`
	Requirements []string `json:"requirements,omitempty"`
}

// ResolutionRule is a deterministic conflict resolution rule of a pack. It
// applies to a marker when Predicate is empty or equals the marker's
// predicate, and Requirements is empty or shares a requirement with the
// marker. A source_priority rule selects the one evidence ref whose source
// ranks first in SourceOrder (every ref's source must be listed and the best
// rank must hold exactly one ref). An authoritative_refresh rule selects the
// single newest observation among the marker's refs when it comes from
// SystemOfRecord. Either rule needs every ref of the marker to be a known
// candidate and the selected one to be eligible; otherwise it does not
// decide and the marker stays unresolved.
type ResolutionRule struct {
	RuleID         string         `json:"rule_id"`
	Kind           ResolutionKind `json:"kind"`
	Predicate      string         `json:"predicate,omitempty"`
	Requirements   []string       `json:"requirements,omitempty"`
	SourceOrder    []string       `json:"source_order,omitempty"`
	SystemOfRecord string         `json:"system_of_record,omitempty"`
}

// RunContext is who is deciding what, and when. DecisionTime is the instant
// evidence currency is judged at; the kernel never reads a clock.
// AllowedSources and Capabilities are the principal's authority: evidence
// from a source not listed is never usable, and a capability not listed is
// never exposed. An empty list grants nothing.
type RunContext struct {
	Tenant         string    `json:"tenant"`
	Principal      string    `json:"principal"`
	RunID          string    `json:"run_id"`
	DecisionKey    string    `json:"decision_key"`
	DecisionTime   time.Time `json:"decision_time"`
	AllowedSources []string  `json:"allowed_sources,omitempty"`
	Capabilities   []string  `json:"capabilities,omitempty"`
}

// InstructionTreatment says whether text may instruct the model. Its zero
// value is invalid.
type InstructionTreatment string

// The instruction treatments.
const (
	// TreatmentDataOnly marks text the model reads as data, never as instructions.
	TreatmentDataOnly InstructionTreatment = "data_only"
	// TreatmentInstruction marks text claiming instruction authority; a
	// candidate carrying it is rejected, since retrieved, remembered and
	// tool-produced text never instructs.
	TreatmentInstruction InstructionTreatment = "instruction"
)

// EvidenceCandidate is one piece of retrieved, remembered or tool-produced
// evidence offered to the compiler. ContentHash is the lowercase hex SHA-256
// of Content's UTF-8 bytes. The candidate is current at t when
// ObservedAt <= t < ValidUntil. Requirements are the obligations it claims
// to cover; Rank orders candidates within a bucket (lower first) and never
// affects the gate.
type EvidenceCandidate struct {
	Ref                  string               `json:"ref"`
	Source               string               `json:"source"`
	Version              string               `json:"version,omitempty"`
	Tenant               string               `json:"tenant"`
	ContentHash          string               `json:"content_hash"`
	Content              string               `json:"content"`
	Tokens               int64                `json:"tokens,omitempty"`
	Bucket               string               `json:"bucket"`
	Requirements         []string             `json:"requirements,omitempty"`
	Rank                 int64                `json:"rank,omitempty"`
	ObservedAt           time.Time            `json:"observed_at"`
	ValidUntil           time.Time            `json:"valid_until"`
	Verified             bool                 `json:"verified"`
	Admitted             bool                 `json:"admitted"`
	InstructionTreatment InstructionTreatment `json:"instruction_treatment"`
}

// GateRefusal returns nil when the gate allows commit, and otherwise a
// refusal with CodeEvidenceInsufficient naming the unresolved obligations.
func GateRefusal(g EvidenceGate) *Refusal {
	if g.CommitAllowed {
		return nil
	}
	return refuse(wire.CodeEvidenceInsufficient, "decision %s: unresolved evidence %v", g.DecisionKey, g.Unresolved)
}

// The evidence gate's wire types (package wire holds them: agents read them
// in every decision).
type (
	EvidenceGate           = wire.EvidenceGate
	EvidenceConflictMarker = wire.EvidenceConflictMarker
	ConflictResolution     = wire.ConflictResolution
	Sufficiency            = wire.Sufficiency
	ConflictStatus         = wire.ConflictStatus
	ResolutionKind         = wire.ResolutionKind
)

// The gate's verdicts, conflict statuses and resolution kinds.
const (
	Sufficient                     = wire.Sufficient
	Insufficient                   = wire.Insufficient
	ConflictUnresolved             = wire.ConflictUnresolved
	ConflictResolved               = wire.ConflictResolved
	ResolutionSourcePriority       = wire.ResolutionSourcePriority
	ResolutionAuthoritativeRefresh = wire.ResolutionAuthoritativeRefresh
	ResolutionAccountableReview    = wire.ResolutionAccountableReview
)

// The reasons a candidate cannot satisfy a requirement. The first group is
// decided per candidate in the eligibility stage; the second per requirement.
const (
	ReasonCrossTenant           = "cross_tenant"
	ReasonNotAdmitted           = "not_admitted"
	ReasonNotVerified           = "not_verified"
	ReasonNotYetValid           = "not_yet_valid"
	ReasonStale                 = "stale"
	ReasonSourceNotAuthorized   = "source_not_authorized"
	ReasonUntrustedSource       = "untrusted_source"
	ReasonInstructionTreatment  = "instruction_treatment_violation"
	ReasonContentHashMismatch   = "content_hash_mismatch"
	ReasonUnknownBucket         = "unknown_bucket"
	ReasonUntrustedForReq       = "untrusted_for_requirement"
	ReasonBudgetExceeded        = "budget_exceeded"
	ReasonSupersededResolution  = "superseded_by_resolution"
	ReasonUnresolvedConflict    = "unresolved_conflict"
	ReasonRequirementNotCovered = "not_covered"
	ReasonNoUsableEvidence      = "no_usable_evidence"
	// ReasonInsufficientIndependence: usable evidence exists, but from
	// fewer source families than the decision's IndependenceDemand.
	ReasonInsufficientIndependence = "insufficient_independence"
)

// CompiledContext is the compiler's output: a proof-carrying view of the
// run's evidence. The same inputs give the same value, the same canonical
// bytes and the same Digest, whatever the order of the input lists.
type CompiledContext struct {
	Schema       string                   `json:"schema"`
	Run          RunContext               `json:"run"`
	Dependencies ContextDependencies      `json:"dependencies"`
	Eligibility  []EligibilityDecision    `json:"eligibility"`
	Conflicts    []EvidenceConflictMarker `json:"conflicts"`
	Payload      []PayloadBucket          `json:"payload"`
	Negative     NegativeState            `json:"negative_state"`
	Requirements []RequirementStatus      `json:"requirements"`
	Tools        []ToolExposure           `json:"tools"`
	// Inputs judges the policy and tool registry snapshots; absent when
	// the compilation had neither.
	Inputs      []InputStatus `json:"inputs,omitempty"`
	Gate        EvidenceGate  `json:"gate"`
	StageHashes StageHashes   `json:"stage_hashes"`
	// Digest is the hex SHA-256 of the canonical (JCS) encoding of this value
	// with Digest empty.
	Digest string `json:"digest,omitempty"`
}

// ContextDependencies lists what the compiled context was derived from, for
// replay and invalidation.
type ContextDependencies struct {
	Pack     PackDependency       `json:"pack"`
	Evidence []EvidenceDependency `json:"evidence"`
	Markers  []MarkerDependency   `json:"markers"`
	// Inputs pins the typed inputs (policy, tool registry, memory,
	// session), sorted by kind then ref; absent when there were none.
	Inputs []InputDependency `json:"inputs,omitempty"`
}

// PackDependency pins the pack: id, version and the digest of its
// normalized canonical form.
type PackDependency struct {
	PackID  string `json:"pack_id"`
	Version string `json:"version"`
	Digest  string `json:"digest"`
}

// EvidenceDependency pins one candidate, sorted by Ref. Digest is the hex
// SHA-256 of the candidate's canonical form (every field, requirements
// sorted), so any change to a candidate changes the inputs stage hash.
type EvidenceDependency struct {
	Ref         string    `json:"ref"`
	Source      string    `json:"source"`
	Version     string    `json:"version,omitempty"`
	ContentHash string    `json:"content_hash"`
	ObservedAt  time.Time `json:"observed_at"`
	Digest      string    `json:"digest"`
}

// MarkerDependency pins one input marker by the digest of its normalized
// canonical form, sorted by ConflictID.
type MarkerDependency struct {
	ConflictID string `json:"conflict_id"`
	Digest     string `json:"digest"`
}

// EligibilityDecision is the per-candidate verdict, sorted by Ref. Reasons
// lists every failed axis (sorted); Eligible is true when it is empty.
// TrustedFor lists the claimed requirements the pack trusts the source for.
//
// Kind is "memory" or "session" for a data_only input, empty for evidence.
type EligibilityDecision struct {
	Ref          string   `json:"ref"`
	Kind         string   `json:"kind,omitempty"`
	Source       string   `json:"source"`
	Eligible     bool     `json:"eligible"`
	Reasons      []string `json:"reasons"`
	Requirements []string `json:"requirements"`
	TrustedFor   []string `json:"trusted_for"`
}

// PayloadBucket is one bucket's bounded payload. Blocks are in budgeting
// order. Truncated is true when some eligible candidate did not fit; its
// ref is in DroppedRefs (sorted) and in NegativeState.Omissions. A block is
// never cut: partial text would no longer match its content hash.
type PayloadBucket struct {
	Bucket      string         `json:"bucket"`
	MaxTokens   int64          `json:"max_tokens"`
	MaxBytes    int64          `json:"max_bytes"`
	UsedTokens  int64          `json:"used_tokens"`
	UsedBytes   int64          `json:"used_bytes"`
	Truncated   bool           `json:"truncated"`
	Blocks      []PayloadBlock `json:"blocks"`
	DroppedRefs []string       `json:"dropped_refs"`
}

// PayloadBlock is one piece of evidence the model receives, always as data.
// Kind is "memory" or "session" for a data_only input, empty for evidence.
type PayloadBlock struct {
	Ref                  string               `json:"ref"`
	Kind                 string               `json:"kind,omitempty"`
	Source               string               `json:"source"`
	ContentHash          string               `json:"content_hash"`
	InstructionTreatment InstructionTreatment `json:"instruction_treatment"`
	Tokens               int64                `json:"tokens"`
	Bytes                int64                `json:"bytes"`
	Requirements         []string             `json:"requirements"`
	Content              string               `json:"content"`
}

// NegativeState is what the context does not support: rejected candidates,
// budget omissions, unresolved conflicts and superseded evidence. Every
// list is sorted by its first field.
type NegativeState struct {
	Rejected            []RejectedCandidate  `json:"rejected"`
	Omissions           []Omission           `json:"omissions"`
	UnresolvedConflicts []UnresolvedConflict `json:"unresolved_conflicts"`
	Superseded          []SupersededEvidence `json:"superseded"`
}

// RejectedCandidate is an ineligible candidate and its reasons.
type RejectedCandidate struct {
	Ref     string   `json:"ref"`
	Reasons []string `json:"reasons"`
}

// Omission is an eligible candidate left out of the payload.
type Omission struct {
	Ref    string `json:"ref"`
	Bucket string `json:"bucket"`
	Reason string `json:"reason"`
}

// UnresolvedConflict is an unresolved marker; Blocks lists the required
// obligations of the run's decision it blocks (empty when it is not
// material to this decision).
type UnresolvedConflict struct {
	ConflictID   string   `json:"conflict_id"`
	Requirements []string `json:"requirements"`
	Blocks       []string `json:"blocks"`
}

// SupersededEvidence is evidence a resolution did not select. It stays
// visible, is left out of the payload and never satisfies a requirement.
type SupersededEvidence struct {
	Ref           string `json:"ref"`
	ConflictID    string `json:"conflict_id"`
	ResolutionRef string `json:"resolution_ref"`
	Status        string `json:"status"`
}

// RequirementStatus explains one required obligation: whether it is
// satisfied, by which refs, which conflicts block it, and why each claiming
// candidate does or does not count.
//
// MinFamilies and Families appear only when the decision declares an
// IndependenceDemand for the requirement: the demand, and the distinct
// families (sorted) of the usable evidence.
type RequirementStatus struct {
	Requirement       string             `json:"requirement"`
	Satisfied         bool               `json:"satisfied"`
	Reasons           []string           `json:"reasons"`
	SatisfiedBy       []string           `json:"satisfied_by"`
	BlockingConflicts []string           `json:"blocking_conflicts"`
	MinFamilies       int64              `json:"min_families,omitempty"`
	Families          []string           `json:"families,omitempty"`
	Evidence          []RequirementCheck `json:"evidence"`
}

// RequirementCheck is one claiming candidate's verdict for one requirement.
type RequirementCheck struct {
	Ref     string   `json:"ref"`
	Usable  bool     `json:"usable"`
	Reasons []string `json:"reasons"`
}

// ToolExposure is the derived exposure of one tool rule, sorted by
// CapabilityID. Reason says why a tool is not exposed or not dispatchable.
type ToolExposure struct {
	CapabilityID string `json:"capability_id"`
	Exposed      bool   `json:"exposed"`
	GatedBy      string `json:"gated_by,omitempty"`
	// Version is the tool's version in the registry snapshot, when one
	// was compiled.
	Version         string `json:"version,omitempty"`
	DispatchAllowed bool   `json:"dispatch_allowed"`
	Reason          string `json:"reason,omitempty"`
}

// The reasons a tool is not exposed or not dispatchable.
const (
	ToolReasonCapabilityNotHeld = "capability_not_held"
	ToolReasonGateInsufficient  = "gate_insufficient"
	ToolReasonGateNotCompiled   = "gate_not_compiled_for_run"
)

// StageHashes are the hex SHA-256 digests of each compiler stage's output,
// in pipeline order. Comparing two with FirstDriftedStage names the first
// stage at which a replay diverged.
type StageHashes struct {
	Inputs      string `json:"inputs"`
	Eligibility string `json:"eligibility"`
	Conflicts   string `json:"conflicts"`
	Budgeting   string `json:"budgeting"`
	Gate        string `json:"gate"`
}

// FirstDriftedStage returns the name of the first stage (in pipeline order:
// inputs, eligibility, conflicts, budgeting, gate) whose hash differs
// between want and got, or "" when all agree.
func FirstDriftedStage(want, got StageHashes) string {
	switch {
	case want.Inputs != got.Inputs:
		return "inputs"
	case want.Eligibility != got.Eligibility:
		return "eligibility"
	case want.Conflicts != got.Conflicts:
		return "conflicts"
	case want.Budgeting != got.Budgeting:
		return "budgeting"
	case want.Gate != got.Gate:
		return "gate"
	}
	return ""
}

// ContextInputError is a refusal of compiler input: a malformed or
// inconsistent pack, run, evidence candidate or conflict marker. Input is
// "pack", "run", "evidence" or "markers"; Index is the element's position in
// its input list (-1 when the error is not about one element) and ID its
// ref, conflict id or name when known. Its code is always CodeContextInvalid.
type ContextInputError struct {
	Input  string
	Index  int
	ID     string
	Reason string
}

// Code returns CodeContextInvalid.
func (e *ContextInputError) Code() wire.Code { return wire.CodeContextInvalid }

// Error renders the error with its code and location.
func (e *ContextInputError) Error() string {
	return string(wire.CodeContextInvalid) + ": " + e.detail()
}

// Refusal converts the error to a kernel Refusal with CodeContextInvalid.
func (e *ContextInputError) Refusal() *Refusal {
	return &Refusal{Code: wire.CodeContextInvalid, Reason: e.detail()}
}

func (e *ContextInputError) detail() string {
	loc := e.Input
	if e.Index >= 0 {
		loc = fmt.Sprintf("%s[%d]", loc, e.Index)
	}
	if e.ID != "" {
		loc = fmt.Sprintf("%s %q", loc, e.ID)
	}
	return loc + ": " + e.Reason
}

func inputErr(input string, index int, id, format string, args ...any) *ContextInputError {
	return &ContextInputError{Input: input, Index: index, ID: id, Reason: fmt.Sprintf(format, args...)}
}
