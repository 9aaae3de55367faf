package gateway

import (
	"encoding/json"
	"fmt"

	"github.com/contextos/ledger/kernel"
)

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

// Reply is the decision reply.
type Reply struct {
	Status       kernel.Status   `json:"status"`
	Code         kernel.Code     `json:"code,omitempty"`
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

// GuaranteeRow is one guarantee's balances in a reply.
type GuaranteeRow struct {
	GuaranteeID string `json:"guarantee_id"`
	Resource    string `json:"resource"`
	kernel.Balance
}

// maxIDBytes bounds run ids, operation keys and capability ids.
const maxIDBytes = 256

// ParseProposal decodes a proposal strictly (kernel.DecodeRequest: one JSON
// object, no member twice, exact member names, no unknown fields, no
// trailing data), with arguments an object and ids present and bounded.
// Errors carry request_malformed.
func ParseProposal(b []byte) (Proposal, *kernel.Refusal) {
	bad := func(format string, args ...any) (Proposal, *kernel.Refusal) {
		return Proposal{}, &kernel.Refusal{Code: kernel.CodeRequestMalformed, Reason: fmt.Sprintf(format, args...)}
	}
	var p Proposal
	if err := kernel.DecodeRequest(b, &p); err != nil {
		return bad("proposal: %v", err)
	}
	for _, f := range []struct{ name, v string }{{"run_id", p.RunID}, {"operation_key", p.OperationKey}, {"capability_id", p.CapabilityID}} {
		if f.v == "" {
			return bad("%s is required", f.name)
		}
		if len(f.v) > maxIDBytes {
			return bad("%s is longer than %d bytes", f.name, maxIDBytes)
		}
	}
	if len(p.Arguments) == 0 || p.Arguments[0] != '{' {
		return bad("arguments must be a JSON object")
	}
	if len(p.EvidenceRefs) > 256 {
		return bad("more than 256 evidence refs")
	}
	for _, r := range p.EvidenceRefs {
		if r == "" || len(r) > 1024 {
			return bad("evidence refs must be non-empty and at most 1024 bytes")
		}
	}
	if len(p.ApprovalID) > maxIDBytes {
		return bad("approval_id is longer than %d bytes", maxIDBytes)
	}
	return p, nil
}

func (r *Reply) setBalance(rows []GuaranteeRow) {
	r.Guarantees = rows
	if len(rows) == 0 {
		return
	}
	b := rows[0]
	r.Resource = b.Resource
	r.Limit, r.Committed, r.Held, r.Available = &b.Limit, &b.Committed, &b.Held, &b.Available
}
