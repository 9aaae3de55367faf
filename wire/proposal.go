package wire

import "encoding/json"

// Proposal is what an agent publishes on ctx.v1.<tenant>.<principal>.propose.
// Tenant and principal come from the subject, never from the body.
type Proposal struct {
	RunID        string          `json:"run_id"`
	OperationKey string          `json:"operation_key"`
	CapabilityID string          `json:"capability_id"`
	Arguments    json.RawMessage `json:"arguments"`
	EvidenceRefs []string        `json:"evidence_refs,omitempty"`
	ApprovalID   string          `json:"approval_id,omitempty"`
}

// Bounds of a proposal's members; a proposal past one is refused
// request_malformed.
const (
	// MaxIDBytes bounds run ids, operation keys, capability ids and
	// approval ids.
	MaxIDBytes = 256
	// MaxEvidenceRefs bounds the evidence refs of one proposal, and
	// MaxEvidenceRefBytes each of them.
	MaxEvidenceRefs     = 256
	MaxEvidenceRefBytes = 1024
)

// Reply is the decision reply to a proposal. Resource, Limit, Committed,
// Held and Available repeat the first of Guarantees (SetGuarantees).
type Reply struct {
	Status       Status          `json:"status"`
	Code         Code            `json:"code,omitempty"`
	Reason       string          `json:"reason,omitempty"`
	OperationID  string          `json:"operation_id,omitempty"`
	AttemptID    string          `json:"attempt_id,omitempty"`
	ActionDigest string          `json:"action_digest,omitempty"`
	Resource     string          `json:"resource,omitempty"`
	Limit        *int64          `json:"limit,omitempty"`
	Committed    *int64          `json:"committed,omitempty"`
	Held         *int64          `json:"held,omitempty"`
	Available    *int64          `json:"available,omitempty"`
	Guarantees   []GuaranteeRow  `json:"guarantees,omitempty"`
	Gate         json.RawMessage `json:"evidence_gate,omitempty"`
}

// SetGuarantees sets the reply's guarantee rows and, from the first, its
// top-level balance.
func (r *Reply) SetGuarantees(rows []GuaranteeRow) {
	r.Guarantees = rows
	if len(rows) == 0 {
		return
	}
	b := rows[0]
	r.Resource = b.Resource
	r.Limit, r.Committed, r.Held, r.Available = &b.Limit, &b.Committed, &b.Held, &b.Available
}

// GuaranteeRow is one guarantee's balances in a reply.
type GuaranteeRow struct {
	GuaranteeID string `json:"guarantee_id"`
	Resource    string `json:"resource"`
	Balance
}

// Balance is the accounting view of one resource. Carried is what the
// guarantees a guarantee replaces hold and committed on the resource, which
// counts against its limit: Available = Limit - Committed - Held - Carried.
// It has kernel.Balance's fields (TestMirrors).
type Balance struct {
	Limit     int64 `json:"limit"`
	Committed int64 `json:"committed"`
	Held      int64 `json:"held"`
	Available int64 `json:"available"`
	Carried   int64 `json:"carried,omitempty"`
}
