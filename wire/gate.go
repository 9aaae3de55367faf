package wire

// ResolutionKind names where a conflict resolution comes from. Its zero value
// is invalid. A model's output is never a resolution kind.
type ResolutionKind string

// The resolution kinds.
const (
	// ResolutionSourcePriority is a deterministic source-priority rule of the pack.
	ResolutionSourcePriority ResolutionKind = "source_priority"
	// ResolutionAuthoritativeRefresh is a newer observation from the declared system of record.
	ResolutionAuthoritativeRefresh ResolutionKind = "authoritative_refresh"
	// ResolutionAccountableReview is a named principal's review with a resolution receipt.
	ResolutionAccountableReview ResolutionKind = "accountable_review"
)

// ConflictStatus is the status of an EvidenceConflictMarker. Its zero value
// is invalid.
type ConflictStatus string

// The conflict statuses.
const (
	// ConflictUnresolved blocks every required obligation the marker names.
	ConflictUnresolved ConflictStatus = "unresolved"
	// ConflictResolved carries a resolution selecting some of the marker's refs.
	ConflictResolved ConflictStatus = "resolved"
)

// EvidenceConflictMarker is relation-level conflict state: evidence refs
// that disagree on (Subject, Predicate), the requirements the disagreement
// is material to, and, when resolved, the resolution. Its JSON field names
// are those of DESIGN section 6.
type EvidenceConflictMarker struct {
	ConflictID   string              `json:"conflict_id"`
	EvidenceRefs []string            `json:"evidence_refs"`
	Requirements []string            `json:"requirements"`
	Status       ConflictStatus      `json:"status"`
	Subject      string              `json:"subject"`
	Predicate    string              `json:"predicate"`
	Values       []string            `json:"values"`
	Resolution   *ConflictResolution `json:"resolution,omitempty"`
}

// ConflictResolution selects the evidence a resolved conflict relies on.
// ResolutionRef names the resolution artifact (a review receipt, or the pack
// rule). Kind says where the resolution comes from; an accountable review
// names its reviewer in ResolvedBy, a rule-based resolution names its rule in
// RuleID. Kind, ResolvedBy and RuleID are additive to the article's fields.
type ConflictResolution struct {
	ResolutionRef        string         `json:"resolution_ref"`
	SelectedEvidenceRefs []string       `json:"selected_evidence_refs"`
	Kind                 ResolutionKind `json:"kind,omitempty"` // empty: the article's shape, resolved outside the pack's rules
	ResolvedBy           string         `json:"resolved_by,omitempty"`
	RuleID               string         `json:"rule_id,omitempty"`
}

// Sufficiency is the verdict of an EvidenceGate.
type Sufficiency string

// The sufficiency verdicts.
const (
	// Sufficient means every required obligation is satisfied.
	Sufficient Sufficiency = "sufficient"
	// Insufficient means at least one required obligation is not.
	Insufficient Sufficiency = "insufficient"
)

// EvidenceGate is the proof obligation of a decision, with exactly the
// fields of DESIGN section 6. Required, Satisfied and Unresolved are sorted;
// Unresolved is Required minus Satisfied; Conflicts are the markers (after
// rule resolution) naming a required obligation, sorted by conflict id.
// CommitAllowed is true exactly when Sufficiency is sufficient.
type EvidenceGate struct {
	DecisionKey   string                   `json:"decision_key"`
	Required      []string                 `json:"required"`
	Satisfied     []string                 `json:"satisfied"`
	Unresolved    []string                 `json:"unresolved"`
	Conflicts     []EvidenceConflictMarker `json:"conflicts"`
	Sufficiency   Sufficiency              `json:"sufficiency"`
	CommitAllowed bool                     `json:"commit_allowed"`
}
