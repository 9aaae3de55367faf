package gateway

import (
	"fmt"

	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
)

// ParseProposal decodes a proposal strictly (kernel.DecodeRequest: one JSON
// object, no member twice, exact member names, no unknown fields, no
// trailing data), with arguments an object and ids present and bounded.
// Errors carry request_malformed.
func ParseProposal(b []byte) (wire.Proposal, *kernel.Refusal) {
	bad := func(format string, args ...any) (wire.Proposal, *kernel.Refusal) {
		return wire.Proposal{}, &kernel.Refusal{Code: wire.CodeRequestMalformed, Reason: fmt.Sprintf(format, args...)}
	}
	var p wire.Proposal
	if err := kernel.DecodeRequest(b, &p); err != nil {
		return bad("proposal: %v", err)
	}
	for _, f := range []struct{ name, v string }{{"run_id", p.RunID}, {"operation_key", p.OperationKey}, {"capability_id", p.CapabilityID}} {
		if f.v == "" {
			return bad("%s is required", f.name)
		}
		if len(f.v) > wire.MaxIDBytes {
			return bad("%s is longer than %d bytes", f.name, wire.MaxIDBytes)
		}
	}
	if len(p.Arguments) == 0 || p.Arguments[0] != '{' {
		return bad("arguments must be a JSON object")
	}
	if len(p.EvidenceRefs) > wire.MaxEvidenceRefs {
		return bad("more than %d evidence refs", wire.MaxEvidenceRefs)
	}
	for _, r := range p.EvidenceRefs {
		if r == "" || len(r) > wire.MaxEvidenceRefBytes {
			return bad("evidence refs must be non-empty and at most %d bytes", wire.MaxEvidenceRefBytes)
		}
	}
	if len(p.ApprovalID) > wire.MaxIDBytes {
		return bad("approval_id is longer than %d bytes", wire.MaxIDBytes)
	}
	return p, nil
}
