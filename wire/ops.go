package wire

import "fmt"

// OpRequest is the body of exposure, attempts, reconcile, close-attempt,
// assert-absence and kill-switch. A verb ignores the fields it does not
// read.
type OpRequest struct {
	GuaranteeID string `json:"guarantee_id,omitempty"`
	Resource    string `json:"resource,omitempty"`
	// ResourceDigest names a resource by its digest, as the views show it
	// beside a shortened id (exposure's filter, close-attempt's
	// tombstone); it excludes Resource.
	ResourceDigest string `json:"resource_digest,omitempty"`
	AttemptID      string `json:"attempt_id,omitempty"`
	Reason         string `json:"reason,omitempty"`
	ArtifactRef    string `json:"artifact_ref,omitempty"`
	Engaged        *bool  `json:"engaged,omitempty"`
	All            bool   `json:"all,omitempty"`
	// Limit and Cursor page exposure and attempts (paging.go).
	Limit  int    `json:"limit,omitempty"`
	Cursor string `json:"cursor,omitempty"`
}

// OpReply is the reply of every operator verb: OK, or a refusal's Code and
// Reason, then the members of the verb that answered (each verb sets only
// its own, every other is left out of the JSON).
type OpReply struct {
	OK         bool              `json:"ok"`
	Code       Code              `json:"code,omitempty"`
	Reason     string            `json:"reason,omitempty"`
	Exposure   []ExposureRow     `json:"exposure,omitempty"`
	Attempts   []AttemptRow      `json:"attempts,omitempty"`
	Settled    []SettleRow       `json:"settled,omitempty"`
	Versions   []VersionRow      `json:"versions,omitempty"`
	Approvals  []PendingApproval `json:"approvals,omitempty"`
	Incidents  []Incident        `json:"incidents,omitempty"`
	Decisions  []DecisionRow     `json:"decisions,omitempty"`
	KillSwitch *bool             `json:"kill_switch,omitempty"`
	Data       map[string]any    `json:"data,omitempty"`
	// NextCursor is the cursor of the next page of a list verb; absent on
	// its last page.
	NextCursor string `json:"next_cursor,omitempty"`
	// Breakers are the tenant's circuit breakers (breaker).
	Breakers []BreakerRow `json:"breakers,omitempty"`
	// Items are the page's records (audit-export), signed checkpoints
	// (audit-checkpoints) or events.jsonl lines without their newline
	// (events-export). Exported files travel as standard base64 of their
	// exact bytes, so that no JSON re-encoding on the way (HTML escaping,
	// say) can alter a canonical record.
	Items [][]byte `json:"items,omitempty"`
	Next  uint64   `json:"next,omitempty"` // the From of the next export page
	Done  bool     `json:"done,omitempty"` // no more items now
	// File is keys.json (audit-keys), proof.json (audit-prove),
	// consistency.json (audit-prove-consistency) or view.json
	// (exposure-view).
	File []byte `json:"file,omitempty"`
	// Imports are the results of guarantee-import, one a row in order.
	Imports []ImportResult `json:"imports,omitempty"`
	// Outcomes are the rows of report.
	Outcomes []OutcomeRow `json:"outcomes,omitempty"`
}

// Refused returns the refusal reply of code, its reason formatted.
func Refused(code Code, format string, args ...any) OpReply {
	return OpReply{Code: code, Reason: fmt.Sprintf(format, args...)}
}

// SettleRow reports what reconciliation or an operator action did to one
// attempt.
type SettleRow struct {
	AttemptID string  `json:"attempt_id"`
	Outcome   Outcome `json:"outcome,omitempty"`
	Status    Status  `json:"status,omitempty"`
	Code      Code    `json:"code,omitempty"`
	Reason    string  `json:"reason,omitempty"`
	// ReasonDigest is set when Reason is shown shortened.
	ReasonDigest string `json:"reason_digest,omitempty"`
}

// GuardrailRequest is the guardrail verb's body: set the guardrail
// GuardrailID over CapabilityID (Disabled, or a positive MaxAmount per
// proposal), or Remove it.
type GuardrailRequest struct {
	GuardrailID  string `json:"guardrail_id"`
	CapabilityID string `json:"capability_id,omitempty"`
	Disabled     bool   `json:"disabled,omitempty"`
	MaxAmount    int64  `json:"max_amount,omitempty"`
	Remove       bool   `json:"remove,omitempty"`
	Reason       string `json:"reason,omitempty"`
}

// WaiverRequest is the waiver verb's body: let the proposals of RunID, or
// on Resource, through GuardrailID until Until (RFC 3339); with Revoke,
// end the waiver WaiverID now (Reason optional, nothing else read).
type WaiverRequest struct {
	Revoke      bool   `json:"revoke,omitempty"`
	WaiverID    string `json:"waiver_id"`
	GuardrailID string `json:"guardrail_id"`
	RunID       string `json:"run_id,omitempty"`
	Resource    string `json:"resource,omitempty"`
	Until       string `json:"until,omitempty"`
	Reason      string `json:"reason,omitempty"`
}
