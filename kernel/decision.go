package kernel

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"

	"github.com/gowebpki/jcs"

	"github.com/contextos/ledger/wire"
)

// MaxRecordedArguments bounds the arguments a decision record carries. A
// proposal may be 64 KiB; the record of every decision is signed, stored
// and folded by each reader of its operation, so arguments past this bound
// are recorded by their digest alone (ArgumentsOmitted says so).
const MaxRecordedArguments = 4096

// DecisionTrace is what a decision depended on beyond its controls: the
// compiled context its evidence gate came from, the evidence it cited and
// which of it satisfied each obligation, the arguments, the configuration
// it was decided under and the trace it belongs to. Every field is
// optional, so records stored before it decode unchanged.
type DecisionTrace struct {
	// ContextDigest is the digest of the compiled context (CompiledContext.Digest)
	// of a gated capability's decision.
	ContextDigest string `json:"context_digest,omitempty"`
	// EvidenceRefs are the refs the proposal cited, in its order.
	EvidenceRefs []string `json:"evidence_refs,omitempty"`
	// Obligations are, per required obligation, the refs that satisfied
	// it (none when it was not satisfied).
	Obligations []ObligationRefs `json:"obligations,omitempty"`
	// ResolutionRefs are the resolutions of the conflicts the gate read
	// (sorted): a decision derived from a resolution names it here.
	ResolutionRefs []string `json:"resolution_refs,omitempty"`
	// ArgumentsDigest is the hex SHA-256 of the canonical arguments.
	ArgumentsDigest string `json:"arguments_digest,omitempty"`
	// Arguments are the canonical arguments, up to MaxRecordedArguments
	// bytes; over it, or when a signed event cannot carry them (sealable),
	// they are omitted and ArgumentsOmitted is set.
	Arguments        json.RawMessage `json:"arguments,omitempty"`
	ArgumentsOmitted bool            `json:"arguments_omitted,omitempty"`
	// ManifestDigest is the digest of the configuration the deciding
	// runtime loaded (Manifest.Digest).
	ManifestDigest string `json:"manifest_digest,omitempty"`
	// TraceID is the OpenTelemetry trace id of the proposal's span, when
	// one was active.
	TraceID string `json:"trace_id,omitempty"`
}

// ObligationRefs is one required obligation and the refs that satisfied it
// (package wire holds it: decisions lists it as recorded).
type ObligationRefs = wire.ObligationRefs

// TraceInput is what TraceOf makes a DecisionTrace of.
type TraceInput struct {
	Context        *CompiledContext // nil for a capability without a gate, or inputs that did not compile
	EvidenceRefs   []string
	Arguments      json.RawMessage // canonical when the arguments were bound
	ManifestDigest string
	TraceID        string
}

// TraceOf builds the trace of a decision. Both proposal paths call it, so
// the record of a decision does not depend on the path that made it.
func TraceOf(in TraceInput) DecisionTrace {
	t := DecisionTrace{EvidenceRefs: slices.Clone(in.EvidenceRefs), ManifestDigest: in.ManifestDigest, TraceID: in.TraceID}
	if len(t.EvidenceRefs) == 0 {
		t.EvidenceRefs = nil
	}
	if len(in.Arguments) > 0 {
		sum := sha256.Sum256(in.Arguments)
		t.ArgumentsDigest = hex.EncodeToString(sum[:])
		if len(in.Arguments) <= MaxRecordedArguments && sealable(in.Arguments) {
			t.Arguments = slices.Clone(in.Arguments)
		} else {
			t.ArgumentsOmitted = true
		}
	}
	if cc := in.Context; cc != nil {
		t.ContextDigest = cc.Digest
		for _, r := range cc.Requirements {
			t.Obligations = append(t.Obligations, ObligationRefs{Requirement: r.Requirement, SatisfiedBy: slices.Clone(r.SatisfiedBy)})
		}
		for _, m := range cc.Conflicts {
			if m.Resolution != nil && m.Resolution.ResolutionRef != "" && !slices.Contains(t.ResolutionRefs, m.Resolution.ResolutionRef) {
				t.ResolutionRefs = append(t.ResolutionRefs, m.Resolution.ResolutionRef)
			}
		}
		slices.Sort(t.ResolutionRefs)
	}
	return t
}

// sealable reports whether arguments can be carried inside a signed event,
// whose seal runs RFC 8785 over the whole body: a number out of float64
// range (1e400) or a lone surrogate escape passes the arguments' own
// binding but not that transform. Such arguments are recorded by their
// digest alone, so the record of their refusal can still be sealed.
func sealable(args json.RawMessage) bool {
	if n, ok := CanonicalPrefix(args); ok && n == len(args) {
		return true
	}
	_, err := jcs.Transform(args)
	return err == nil
}

// decisionRecord is the one constructor of a decision record: the
// operation it belongs to, what was decided, the controls it was decided
// under and the trace they carry (Controls.Trace).
func decisionRecord(op OperationOpened, attemptID string, status wire.Status, code wire.Code, reason string, controls Controls) DecisionRecorded {
	rec := DecisionRecorded{OperationID: op.OperationID, Principal: op.Principal, RunID: op.RunID, CapabilityID: op.CapabilityID,
		ActionDigest: op.ActionDigest, AttemptID: attemptID, Status: status, Code: code, Reason: reason, Controls: controls,
		DecisionTrace: controls.Trace}
	recordPack(&rec, op.Pack)
	return rec
}

// opIdentity is the identity of a folded operation, as its opening named it.
func opIdentity(o *Operation) OperationOpened {
	return OperationOpened{OperationID: o.OperationID, Principal: o.Principal, RunID: o.RunID, CapabilityID: o.CapabilityID, ActionDigest: o.ActionDigest, Pack: o.Pack}
}
