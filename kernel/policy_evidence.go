package kernel

import (
	"fmt"
	"slices"
	"sort"

	"github.com/contextos/ledger/wire"
)

// EvidenceRecord is the state of one evidence subject
// (ctx.ev.<tenant>.evidence.<ref>): the candidate a system of record or an
// operator published under the ref, and every conflict marker that names
// the ref, at its latest version. Agents never write here: a proposal only
// names refs, and the gateway compiles what the records hold.
type EvidenceRecord struct {
	Ref       string                            `json:"ref"`
	Candidate *EvidenceCandidate                `json:"candidate,omitempty"`
	Markers   map[string]EvidenceConflictMarker `json:"markers,omitempty"`
}

// Evidence event types.
const (
	TypeEvidencePublished = "evidence.published"
	TypeEvidenceMarked    = "evidence.marked"
)

// EvidencePublished publishes a candidate under its ref. A ref's candidate
// is immutable: a new observation is a new ref (for example a new snapshot).
type EvidencePublished struct {
	Ref       string            `json:"ref"`
	Candidate EvidenceCandidate `json:"candidate"`
	Operator  string            `json:"operator"`
}

// EvidenceMarked records a conflict marker on one of the refs it names. The
// gateway appends it to every named ref's subject in one atomic batch, so
// the marker is found through any of its refs.
type EvidenceMarked struct {
	Ref      string                 `json:"ref"`
	Marker   EvidenceConflictMarker `json:"marker"`
	Operator string                 `json:"operator"`
}

// EventType implements Event.
func (EvidencePublished) EventType() string { return TypeEvidencePublished }

// EventType implements Event.
func (EvidenceMarked) EventType() string { return TypeEvidenceMarked }

func init() {
	register[EvidencePublished](TypeEvidencePublished)
	register[EvidenceMarked](TypeEvidenceMarked)
}

// EvidenceRefOf returns the ref an evidence event names.
func EvidenceRefOf(ev Event) string {
	switch e := ev.(type) {
	case EvidencePublished:
		return e.Ref
	case EvidenceMarked:
		return e.Ref
	}
	return ""
}

// Apply folds an evidence event.
func (r *EvidenceRecord) Apply(ev Event) error {
	ref := EvidenceRefOf(ev)
	if ref == "" || (r.Ref != "" && ref != r.Ref) {
		return fmt.Errorf("event %T names ref %q on the subject of %q", ev, ref, r.Ref)
	}
	switch e := ev.(type) {
	case EvidencePublished:
		if r.Candidate != nil {
			return fmt.Errorf("evidence %s published twice", ref)
		}
		if e.Candidate.Ref != ref {
			return fmt.Errorf("candidate %q published under ref %q", e.Candidate.Ref, ref)
		}
		c := normalizeCandidate(e.Candidate)
		r.Candidate = &c
	case EvidenceMarked:
		if !slices.Contains(e.Marker.EvidenceRefs, ref) {
			return fmt.Errorf("marker %s does not name ref %s", e.Marker.ConflictID, ref)
		}
		if r.Markers == nil {
			r.Markers = map[string]EvidenceConflictMarker{}
		}
		r.Markers[e.Marker.ConflictID] = canonicalMarker(normalizeMarker(e.Marker))
	default:
		return fmt.Errorf("event %T does not belong to an evidence subject", ev)
	}
	r.Ref = ref
	return nil
}

// PublishEvidence is a command to publish a candidate for Tenant.
type PublishEvidence struct {
	Tenant    string
	Operator  string
	Candidate EvidenceCandidate
}

// DecidePublishEvidence publishes a candidate under its ref. The candidate
// must be well formed (CodeContextInvalid) and of the publisher's tenant
// (CodeAuthorityDenied). Publishing the same candidate again is a no-op; a
// different one under a published ref is refused with
// CodeEvidenceRecordConflict.
func DecidePublishEvidence(r *EvidenceRecord, c PublishEvidence) Decision {
	cand := normalizeCandidate(c.Candidate)
	if err := validateEvidence([]EvidenceCandidate{cand}); err != nil {
		return no(wire.CodeContextInvalid, "%v", err)
	}
	if cand.Tenant != c.Tenant {
		return no(wire.CodeAuthorityDenied, "evidence of tenant %s cannot be published by an operator of %s", cand.Tenant, c.Tenant)
	}
	if c.Operator == "" {
		return no(wire.CodeRequestMalformed, "evidence names its publisher")
	}
	if r.Candidate != nil {
		if same(*r.Candidate, cand) {
			return Decision{}
		}
		return no(wire.CodeEvidenceRecordConflict, "evidence %s is already published with other content; publish a new ref", cand.Ref)
	}
	return Decision{Events: []Event{EvidencePublished{Ref: cand.Ref, Candidate: cand, Operator: c.Operator}}}
}

// MarkEvidence is a command to record a conflict marker, or its resolution,
// on one of its refs.
type MarkEvidence struct {
	Ref      string
	Operator string
	Marker   EvidenceConflictMarker
}

// DecideMarkEvidence records a marker on the record of one of its refs.
// The marker must pass ValidateMarkers (CodeContextInvalid) and name the
// ref. An accountable review must name the publishing operator as its
// reviewer (CodeAuthorityDenied): a review is accountable only to whoever
// signs it. A marker may move from unresolved to resolved, keeping its
// refs, subject, predicate, values and requirements; any other change, and
// any change after a resolution, is refused with
// CodeEvidenceRecordConflict. The same marker again is a no-op.
func DecideMarkEvidence(r *EvidenceRecord, c MarkEvidence) Decision {
	m := canonicalMarker(normalizeMarker(c.Marker))
	if err := ValidateMarkers([]EvidenceConflictMarker{m}); err != nil {
		return no(wire.CodeContextInvalid, "%v", err)
	}
	if c.Operator == "" {
		return no(wire.CodeRequestMalformed, "a marker names its publisher")
	}
	if !slices.Contains(m.EvidenceRefs, c.Ref) {
		return no(wire.CodeRequestMalformed, "marker %s does not name ref %s", m.ConflictID, c.Ref)
	}
	if res := m.Resolution; res != nil && res.Kind == ResolutionAccountableReview && res.ResolvedBy != c.Operator {
		return no(wire.CodeAuthorityDenied, "a review resolution published by operator %s must name %s as resolved_by, not %q", c.Operator, c.Operator, res.ResolvedBy)
	}
	if prev, ok := r.Markers[m.ConflictID]; ok {
		switch {
		case same(prev, m):
			return Decision{}
		case prev.Status == ConflictResolved:
			return no(wire.CodeEvidenceRecordConflict, "conflict %s is already resolved; a resolution is final", m.ConflictID)
		case !slices.Equal(prev.EvidenceRefs, m.EvidenceRefs) || !slices.Equal(prev.Requirements, m.Requirements) ||
			!slices.Equal(prev.Values, m.Values) || prev.Subject != m.Subject || prev.Predicate != m.Predicate:
			return no(wire.CodeEvidenceRecordConflict, "conflict %s is recorded with other refs, values or requirements", m.ConflictID)
		case m.Status != ConflictResolved:
			return no(wire.CodeEvidenceRecordConflict, "conflict %s is recorded; only its resolution may follow", m.ConflictID)
		}
	}
	return Decision{Events: []Event{EvidenceMarked{Ref: c.Ref, Marker: m, Operator: c.Operator}}}
}

// EvidenceOf gathers the candidates and markers of the records a proposal
// named, as compiler inputs. A marker found on several records at
// different versions counts at its most advanced one (resolved over
// unresolved): resolutions are final and are appended to every ref of the
// marker atomically, so the records only disagree when read across that
// append.
func EvidenceOf(records []*EvidenceRecord) ([]EvidenceCandidate, []EvidenceConflictMarker) {
	var cands []EvidenceCandidate
	markers := map[string]EvidenceConflictMarker{}
	for _, r := range records {
		if r == nil {
			continue
		}
		if r.Candidate != nil {
			cands = append(cands, *r.Candidate)
		}
		for id, m := range r.Markers {
			if prev, ok := markers[id]; !ok || prev.Status != ConflictResolved {
				markers[id] = m
			}
		}
	}
	ids := make([]string, 0, len(markers))
	for id := range markers {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	ms := make([]EvidenceConflictMarker, len(ids))
	for i, id := range ids {
		ms[i] = markers[id]
	}
	return cands, ms
}

// CheckEvidence compiles the named evidence for run (its DecisionKey and
// DecisionTime) and returns the gate. The refusal is CodeEvidenceInsufficient
// when the gate does not allow commit, and CodeContextInvalid (with a nil
// gate) when the inputs do not compile.
func CheckEvidence(pack ContextPack, run RunContext, records []*EvidenceRecord) (*EvidenceGate, *Refusal) {
	cc, r := CheckEvidenceContext(pack, run, records)
	if cc == nil {
		return nil, r
	}
	return &cc.Gate, r
}

// CheckEvidenceContext is CheckEvidence with the whole compiled context
// (nil when the inputs do not compile), which a decision record cites.
func CheckEvidenceContext(pack ContextPack, run RunContext, records []*EvidenceRecord) (*CompiledContext, *Refusal) {
	return CheckEvidenceContextWith(pack, run, records, ContextInputs{})
}

// ServeContext compiles the named evidence for run and returns the compiled
// context an agent is served, with its JSON encoding: the same compilation
// as CheckEvidence, so what an agent reads is what its proposal will be
// gated on. The refusal is CodeContextInvalid when the inputs do not
// compile and CodeContextTooLarge when the encoding exceeds
// wire.MaxContextBytes (a context is never cut: a cut block would no longer
// match its content hash).
func ServeContext(pack ContextPack, run RunContext, records []*EvidenceRecord) (CompiledContext, []byte, *Refusal) {
	return ServeContextWith(pack, run, records, ContextInputs{})
}

// same compares two values by their canonical encoding.
func same(a, b any) bool {
	da, err1 := Digest(a)
	db, err2 := Digest(b)
	return err1 == nil && err2 == nil && da == db
}
