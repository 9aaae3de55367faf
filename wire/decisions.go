package wire

// VerbDecisions lists and looks up decision records (DecisionsRequest).
const VerbDecisions = "decisions"

// DecisionsRequest is the body of decisions: a page of the tenant's
// decision records, oldest first, that match every filter it sets. Since
// and Until are RFC 3339 times bounding the record's time (Since inclusive,
// Until exclusive).
type DecisionsRequest struct {
	Limit         int    `json:"limit,omitempty"`
	Cursor        string `json:"cursor,omitempty"`
	RunID         string `json:"run_id,omitempty"`
	OperationID   string `json:"operation_id,omitempty"`
	Principal     string `json:"principal,omitempty"`
	EvidenceRef   string `json:"evidence_ref,omitempty"`
	ResolutionRef string `json:"resolution_ref,omitempty"`
	Since         string `json:"since,omitempty"`
	Until         string `json:"until,omitempty"`
}

// DecisionRow is one decision record as decisions lists it: what was
// decided and what it depended on (the record's trace). Seq is the stream
// sequence of the record, its place in the list.
type DecisionRow struct {
	Seq              uint64           `json:"seq"`
	At               string           `json:"at"`
	OperationID      string           `json:"operation_id"`
	Principal        string           `json:"principal"`
	RunID            string           `json:"run_id"`
	CapabilityID     string           `json:"capability_id"`
	ActionDigest     string           `json:"action_digest"`
	AttemptID        string           `json:"attempt_id,omitempty"`
	Status           Status           `json:"status"`
	Code             Code             `json:"code,omitempty"`
	Reason           string           `json:"reason,omitempty"`
	ContextDigest    string           `json:"context_digest,omitempty"`
	EvidenceRefs     []string         `json:"evidence_refs,omitempty"`
	Obligations      []ObligationRefs `json:"obligations,omitempty"`
	ResolutionRefs   []string         `json:"resolution_refs,omitempty"`
	ArgumentsDigest  string           `json:"arguments_digest,omitempty"`
	ArgumentsOmitted bool             `json:"arguments_omitted,omitempty"`
	ManifestDigest   string           `json:"manifest_digest,omitempty"`
	TraceID          string           `json:"trace_id,omitempty"`
	// ReasonDigest is set when Reason is shown shortened (Shorten).
	ReasonDigest string `json:"reason_digest,omitempty"`
}

// ObligationRefs is one required obligation of a gated decision and the
// evidence refs that satisfied it (none when it was not satisfied).
type ObligationRefs struct {
	Requirement string   `json:"requirement"`
	SatisfiedBy []string `json:"satisfied_by,omitempty"`
}
