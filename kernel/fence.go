package kernel

import (
	"encoding/json"

	"github.com/contextos/ledger/wire"
)

// The same-action fence: a new operation whose action equals that of an
// attempt still unresolved on the same resource ledger is refused
// (CodeUnresolvedAttempt) until that attempt is reconciled. A fresh
// operation key does not make the earlier effect disappear: an agent (or a
// client that keeps no keys) resending a refund under a new key while the
// first is pending or unknown would otherwise be dispatched again, a second
// real effect within the ceiling.

// SameActionKey is the key the fence compares: the digest of the
// capability and its canonical bound arguments. The operation key, the run,
// the principal and the evidence refs are left out, so the same refund sent
// under a new key, by another run or another agent of the tenant, is the
// same action; the tenant is the ledger's own (its subject is the
// tenant's), so no other tenant shares it. canon must be the canonical
// arguments (Canonical).
func SameActionKey(capabilityID string, canon json.RawMessage) (string, error) {
	return Digest(struct {
		CapabilityID string          `json:"capability_id"`
		Arguments    json.RawMessage `json:"arguments"`
	}{capabilityID, canon})
}

// sameAction is the SameActionKey of a proposal both proposal steps
// reserve with; a key that cannot be computed refuses the proposal.
func sameAction(capabilityID string, canon json.RawMessage) (string, *Refusal) {
	k, err := SameActionKey(capabilityID, canon)
	if err != nil {
		return "", refuse(wire.CodeRequestMalformed, "the action cannot be digested: %v", err)
	}
	return k, nil
}

// SameActionFenced reports whether proposals of a capability are fenced:
// by default every effectful one (a read cannot duplicate an effect), unless
// its configuration turns the fence off. The fence acts only on the ledgers
// a proposal holds, so a capability no guarantee covers is never fenced.
func SameActionFenced(effectful, off bool) bool { return effectful && !off }

// SameActionFenced reports whether the capability's proposals are fenced
// (the package function).
func (c *Capability) SameActionFenced() bool {
	return SameActionFenced(c.Effectful, c.NoSameActionFence)
}
