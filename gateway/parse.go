package gateway

import (
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
)

// ParseProposal decodes a proposal strictly (kernel.ParseProposal).
// Errors carry request_malformed.
func ParseProposal(b []byte) (wire.Proposal, *kernel.Refusal) {
	p, r := kernel.ParseProposal(b)
	return wire.Proposal(p), r
}
