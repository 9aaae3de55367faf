package kernel

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/contextos/ledger/wire"
)

// This file holds the compiler's typed inputs beside evidence: the policy
// snapshot, the tool registry snapshot, promoted memory and durable session
// state. Each carries provenance and freshness like evidence, and the
// compiled context pins each in dependencies.inputs, so its digest covers
// them. Memory and session state have data_only authority: they reach the
// payload as data and can never satisfy an obligation nor grant a tool.

// InputAuthority is what an input may decide. Its zero value is invalid.
type InputAuthority string

// The input authorities.
const (
	// AuthorityAuthoritative marks an input that may narrow what a run can
	// do (a policy or tool registry snapshot). It never widens authority:
	// the run's capabilities still bound every tool.
	AuthorityAuthoritative InputAuthority = "authoritative"
	// AuthorityDataOnly marks an input the model reads as data: it never
	// satisfies an evidence obligation and never exposes a tool.
	AuthorityDataOnly InputAuthority = "data_only"
)

// The input kinds, as they appear in dependencies.inputs, in eligibility
// (memory and session) and in payload blocks.
const (
	InputKindPolicy       = "policy"
	InputKindToolRegistry = "tool_registry"
	InputKindMemory       = "memory"
	InputKindSession      = "session"
)

// The reasons of the typed inputs.
const (
	// ReasonDataOnlyAuthority: memory or session state claimed an
	// obligation; data_only inputs never satisfy one.
	ReasonDataOnlyAuthority = "data_only_authority"
	// ToolReasonPolicyDenied: the policy snapshot does not permit the tool.
	ToolReasonPolicyDenied = "policy_denied"
	// ToolReasonPolicyUnusable: the policy snapshot is stale, not yet valid
	// or of another tenant, so it permits nothing.
	ToolReasonPolicyUnusable = "policy_snapshot_unusable"
	// ToolReasonNotRegistered: the tool registry snapshot has no such tool.
	ToolReasonNotRegistered = "tool_not_registered"
	// ToolReasonRegistryUnusable: the tool registry snapshot is stale, not
	// yet valid or of another tenant, so it exposes nothing.
	ToolReasonRegistryUnusable = "tool_registry_unusable"
)

// maxInputItems bounds the memory list and each snapshot's list; a larger
// input is a wiring error, not a context.
const maxInputItems = 4096

// Provenance is where an input came from and when it is current:
// ObservedAt <= t < ValidUntil at the run's decision time, like evidence.
// Version is required: inputs are versioned so a replay pins them.
type Provenance struct {
	Ref        string    `json:"ref"`
	Source     string    `json:"source"`
	Version    string    `json:"version"`
	Tenant     string    `json:"tenant"`
	ObservedAt time.Time `json:"observed_at"`
	ValidUntil time.Time `json:"valid_until"`
}

// PolicySnapshot is the policy in force for the run, as of ObservedAt.
// Capabilities are the tools it permits to dispatch. It only narrows: a
// tool it permits still needs the run's capability and its gate. While the
// snapshot is unusable (stale, not yet valid, other tenant) it permits
// nothing: a compiled context never dispatches under a policy it cannot
// vouch for.
type PolicySnapshot struct {
	Provenance
	Capabilities []string `json:"capabilities"`
}

// RegisteredTool is one tool of a registry snapshot and its version.
type RegisteredTool struct {
	CapabilityID string `json:"capability_id"`
	Version      string `json:"version"`
}

// ToolRegistrySnapshot is the tool registry as of ObservedAt. A tool rule
// whose capability it does not list is not exposed; while unusable it
// exposes nothing.
type ToolRegistrySnapshot struct {
	Provenance
	Tools []RegisteredTool `json:"tools"`
}

// MemoryItem is one piece of promoted memory or the durable session state.
// Authority must be data_only. It is budgeted into its bucket like
// evidence and shown with its kind; claimed Requirements are recorded and
// never satisfied (data_only_authority).
type MemoryItem struct {
	Provenance
	Authority    InputAuthority `json:"authority"`
	ContentHash  string         `json:"content_hash"`
	Content      string         `json:"content"`
	Tokens       int64          `json:"tokens,omitempty"`
	Bucket       string         `json:"bucket"`
	Requirements []string       `json:"requirements,omitempty"`
	Rank         int64          `json:"rank,omitempty"`
}

// ContextInputs are the compiler's typed inputs beside evidence. Every
// field is optional; without them a compilation gives the same bytes as
// before they existed.
type ContextInputs struct {
	Policy       *PolicySnapshot       `json:"policy,omitempty"`
	ToolRegistry *ToolRegistrySnapshot `json:"tool_registry,omitempty"`
	Memory       []MemoryItem          `json:"memory,omitempty"`
	Session      *MemoryItem           `json:"session,omitempty"`
}

// InputDependency pins one typed input, sorted by (Kind, Ref). Digest is
// the hex SHA-256 of the input's canonical form (lists sorted).
type InputDependency struct {
	Kind       string         `json:"kind"`
	Ref        string         `json:"ref"`
	Source     string         `json:"source"`
	Version    string         `json:"version"`
	Authority  InputAuthority `json:"authority"`
	ObservedAt time.Time      `json:"observed_at"`
	ValidUntil time.Time      `json:"valid_until"`
	Digest     string         `json:"digest"`
}

// InputStatus is the verdict on a policy or tool registry snapshot:
// usable when of the run's tenant and current at its decision time.
type InputStatus struct {
	Kind    string   `json:"kind"`
	Ref     string   `json:"ref"`
	Usable  bool     `json:"usable"`
	Reasons []string `json:"reasons"`
}

// ParseContextInputs decodes and validates ContextInputs strictly (see
// ParseContextPack).
func ParseContextInputs(b []byte) (ContextInputs, error) {
	var in ContextInputs
	if err := decodeStrict(b, '{', &in); err != nil {
		return ContextInputs{}, inputErr("inputs", -1, "", "%v", err)
	}
	in = normalizeInputs(in)
	if err := validateInputs(in); err != nil {
		return ContextInputs{}, err
	}
	return in, nil
}

func normalizeProvenance(p Provenance) Provenance {
	p.ObservedAt = p.ObservedAt.UTC()
	p.ValidUntil = p.ValidUntil.UTC()
	return p
}

func normalizeInputs(in ContextInputs) ContextInputs {
	if in.Policy != nil {
		p := *in.Policy
		p.Provenance = normalizeProvenance(p.Provenance)
		p.Capabilities = nilIfEmpty(p.Capabilities)
		in.Policy = &p
	}
	if in.ToolRegistry != nil {
		r := *in.ToolRegistry
		r.Provenance = normalizeProvenance(r.Provenance)
		r.Tools = nilIfEmpty(r.Tools)
		in.ToolRegistry = &r
	}
	mem := make([]MemoryItem, len(in.Memory))
	for i, m := range in.Memory {
		mem[i] = normalizeMemory(m)
	}
	in.Memory = nilIfEmpty(mem)
	if in.Session != nil {
		s := normalizeMemory(*in.Session)
		in.Session = &s
	}
	return in
}

func normalizeMemory(m MemoryItem) MemoryItem {
	m.Provenance = normalizeProvenance(m.Provenance)
	m.Requirements = nilIfEmpty(m.Requirements)
	return m
}

func validateProvenance(p Provenance) error {
	if p.Ref == "" || p.Source == "" || p.Version == "" || p.Tenant == "" {
		return errors.New("ref, source, version and tenant are required")
	}
	if err := checkTime("observed_at", p.ObservedAt); err != nil {
		return err
	}
	if err := checkTime("valid_until", p.ValidUntil); err != nil {
		return err
	}
	if !p.ValidUntil.After(p.ObservedAt) {
		return errors.New("valid_until must be after observed_at")
	}
	return nil
}

func validateMemory(m MemoryItem) error {
	if err := validateProvenance(m.Provenance); err != nil {
		return err
	}
	if m.Authority != AuthorityDataOnly {
		return fmt.Errorf("authority must be %q, got %q: memory and session state never instruct or authorize", AuthorityDataOnly, m.Authority)
	}
	if m.Bucket == "" {
		return errors.New("bucket is required")
	}
	if len(m.ContentHash) != 64 || !isLowerHex(m.ContentHash) {
		return errors.New("content_hash must be 64 lowercase hex digits (SHA-256)")
	}
	if err := checkRange("tokens", m.Tokens); err != nil {
		return err
	}
	if err := checkRange("rank", m.Rank); err != nil {
		return err
	}
	return checkSet("requirements", m.Requirements, 0)
}

func validateInputs(in ContextInputs) error {
	refs := map[string]string{}
	claim := func(input string, i int, ref string) error {
		if prev, dup := refs[ref]; dup {
			return inputErr(input, i, ref, "ref repeats the ref of %s", prev)
		}
		refs[ref] = input
		return nil
	}
	if p := in.Policy; p != nil {
		if err := validateProvenance(p.Provenance); err != nil {
			return inputErr("inputs.policy", -1, p.Ref, "%v", err)
		}
		if len(p.Capabilities) > maxInputItems {
			return inputErr("inputs.policy", -1, p.Ref, "more than %d capabilities", maxInputItems)
		}
		if err := checkSet("capabilities", p.Capabilities, 0); err != nil {
			return inputErr("inputs.policy", -1, p.Ref, "%v", err)
		}
		if err := claim("inputs.policy", -1, p.Ref); err != nil {
			return err
		}
	}
	if r := in.ToolRegistry; r != nil {
		if err := validateProvenance(r.Provenance); err != nil {
			return inputErr("inputs.tool_registry", -1, r.Ref, "%v", err)
		}
		if len(r.Tools) > maxInputItems {
			return inputErr("inputs.tool_registry", -1, r.Ref, "more than %d tools", maxInputItems)
		}
		ids := map[string]bool{}
		for i, t := range r.Tools {
			if t.CapabilityID == "" || t.Version == "" {
				return inputErr("inputs.tool_registry", i, r.Ref, "tool capability_id and version are required")
			}
			if ids[t.CapabilityID] {
				return inputErr("inputs.tool_registry", i, r.Ref, "tool %q repeats", t.CapabilityID)
			}
			ids[t.CapabilityID] = true
		}
		if err := claim("inputs.tool_registry", -1, r.Ref); err != nil {
			return err
		}
	}
	if len(in.Memory) > maxInputItems {
		return inputErr("inputs.memory", -1, "", "more than %d items", maxInputItems)
	}
	for i, m := range in.Memory {
		if err := validateMemory(m); err != nil {
			return inputErr("inputs.memory", i, m.Ref, "%v", err)
		}
		if err := claim("inputs.memory", i, m.Ref); err != nil {
			return err
		}
	}
	if s := in.Session; s != nil {
		if err := validateMemory(*s); err != nil {
			return inputErr("inputs.session", -1, s.Ref, "%v", err)
		}
		if err := claim("inputs.session", -1, s.Ref); err != nil {
			return err
		}
	}
	return nil
}

// dataOnlyCandidates turns memory and session state into candidates the
// eligibility and budgeting stages treat like evidence, keyed by ref to
// their kind. They are admitted and verified by construction (promotion and
// the session store vouch for their bytes; the content hash is still
// checked) and always data_only.
func dataOnlyCandidates(in ContextInputs) ([]EvidenceCandidate, map[string]string) {
	kinds := map[string]string{}
	var out []EvidenceCandidate
	add := func(kind string, m MemoryItem) {
		kinds[m.Ref] = kind
		out = append(out, EvidenceCandidate{
			Ref: m.Ref, Source: m.Source, Version: m.Version, Tenant: m.Tenant,
			ContentHash: m.ContentHash, Content: m.Content, Tokens: m.Tokens, Bucket: m.Bucket,
			Requirements: m.Requirements, Rank: m.Rank, ObservedAt: m.ObservedAt, ValidUntil: m.ValidUntil,
			Verified: true, Admitted: true, InstructionTreatment: TreatmentDataOnly,
		})
	}
	for _, m := range in.Memory {
		add(InputKindMemory, m)
	}
	if in.Session != nil {
		add(InputKindSession, *in.Session)
	}
	return out, kinds
}

// inputDependencies pins every typed input.
func inputDependencies(in ContextInputs) ([]InputDependency, error) {
	var deps []InputDependency
	add := func(kind string, p Provenance, auth InputAuthority, v any) error {
		d, err := Digest(v)
		if err != nil {
			return fmt.Errorf("context: %s digest: %w", kind, err)
		}
		deps = append(deps, InputDependency{Kind: kind, Ref: p.Ref, Source: p.Source, Version: p.Version,
			Authority: auth, ObservedAt: p.ObservedAt, ValidUntil: p.ValidUntil, Digest: d})
		return nil
	}
	if p := in.Policy; p != nil {
		q := *p
		q.Capabilities = nilIfEmpty(sortedCopy(p.Capabilities))
		if err := add(InputKindPolicy, p.Provenance, AuthorityAuthoritative, q); err != nil {
			return nil, err
		}
	}
	if r := in.ToolRegistry; r != nil {
		q := *r
		q.Tools = slices.Clone(r.Tools)
		slices.SortFunc(q.Tools, func(a, b RegisteredTool) int { return strings.Compare(a.CapabilityID, b.CapabilityID) })
		if err := add(InputKindToolRegistry, r.Provenance, AuthorityAuthoritative, q); err != nil {
			return nil, err
		}
	}
	mems := slices.Clone(in.Memory)
	if in.Session != nil {
		mems = append(mems, *in.Session)
	}
	for i, m := range mems {
		kind := InputKindMemory
		if in.Session != nil && i == len(mems)-1 {
			kind = InputKindSession
		}
		q := m
		q.Requirements = nilIfEmpty(sortedCopy(m.Requirements))
		if err := add(kind, m.Provenance, AuthorityDataOnly, q); err != nil {
			return nil, err
		}
	}
	slices.SortFunc(deps, func(a, b InputDependency) int {
		if c := strings.Compare(a.Kind, b.Kind); c != 0 {
			return c
		}
		return strings.Compare(a.Ref, b.Ref)
	})
	return deps, nil
}

// snapshotStatus judges a policy or registry snapshot at the run's time.
func snapshotStatus(kind string, p Provenance, run RunContext) InputStatus {
	st := InputStatus{Kind: kind, Ref: p.Ref, Reasons: []string{}}
	if p.Tenant != run.Tenant {
		st.Reasons = append(st.Reasons, ReasonCrossTenant)
	}
	if run.DecisionTime.Before(p.ObservedAt) {
		st.Reasons = append(st.Reasons, ReasonNotYetValid)
	}
	if !run.DecisionTime.Before(p.ValidUntil) {
		st.Reasons = append(st.Reasons, ReasonStale)
	}
	slices.Sort(st.Reasons)
	st.Usable = len(st.Reasons) == 0
	return st
}

// ServeContextWith is ServeContext with the typed inputs the daemon feeds
// at run time (the policy and tool registry snapshots of its
// configuration): what an agent is served and what its proposal is gated
// on are one compilation of the same inputs.
func ServeContextWith(pack ContextPack, run RunContext, records []*EvidenceRecord, inputs ContextInputs) (CompiledContext, []byte, *Refusal) {
	cc, r := CheckEvidenceContextWith(pack, run, records, inputs)
	if cc == nil {
		return CompiledContext{}, nil, r
	}
	b, err := json.Marshal(cc)
	if err != nil {
		return CompiledContext{}, nil, refuse(wire.CodeContextInvalid, "%v", err)
	}
	if len(b) > wire.MaxContextBytes {
		return CompiledContext{}, nil, refuse(wire.CodeContextTooLarge, "the compiled context is %d bytes, more than %d; name fewer evidence refs", len(b), wire.MaxContextBytes)
	}
	return *cc, b, nil
}

// CheckEvidenceContextWith is CheckEvidenceContext with the typed inputs.
// The inputs never change the gate (data_only inputs satisfy nothing, and
// the snapshots only narrow tools); they are pinned in the compiled
// context a decision record cites.
func CheckEvidenceContextWith(pack ContextPack, run RunContext, records []*EvidenceRecord, inputs ContextInputs) (*CompiledContext, *Refusal) {
	cands, markers := EvidenceOf(records)
	cc, err := CompileContextWith(pack, run, cands, markers, inputs)
	if err != nil {
		if ce, ok := err.(*ContextInputError); ok {
			return nil, ce.Refusal()
		}
		return nil, refuse(wire.CodeContextInvalid, "%v", err)
	}
	return &cc, GateRefusal(cc.Gate)
}
