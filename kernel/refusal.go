package kernel

import (
	"fmt"

	"github.com/contextos/ledger/wire"
)

// Refusal is a kernel decision not to act. It carries a stable Code and a
// human-readable reason; a refusal never changes state.
type Refusal struct {
	Code   wire.Code
	Reason string
}

// Error makes a Refusal usable as an error value.
func (r *Refusal) Error() string { return string(r.Code) + ": " + r.Reason }

func refuse(code wire.Code, format string, args ...any) *Refusal {
	return &Refusal{Code: code, Reason: fmt.Sprintf(format, args...)}
}

// TypeProposalRefused is the type of ProposalRefused.
const TypeProposalRefused = "proposal.refused"

// ProposalRefused records a proposal refused before it could name an
// operation (malformed, oversized, unknown principal): nothing is dropped
// silently. Count, when above zero, makes the record an aggregate
// (RefusalTally): it stands for Count refusals of the same principal, code
// and capability, of which BodyDigest and BodyBytes describe the last.
type ProposalRefused struct {
	Principal  string    `json:"principal"`
	Code       wire.Code `json:"code"`
	Reason     string    `json:"reason"`
	BodyDigest string    `json:"body_digest"`
	BodyBytes  int       `json:"body_bytes"`
	Count      int       `json:"count,omitempty"`
	// CapabilityID is the capability an aggregate counts refusals of, when
	// it is a configured one.
	CapabilityID string `json:"capability_id,omitempty"`
}

// EventType implements Event.
func (ProposalRefused) EventType() string { return TypeProposalRefused }

// RefusalLog is the state of a principal's refusal subject (an agent's
// proposals, an operator's verbs): only a count, since refusals change
// nothing but the record.
type RefusalLog struct{ Count int }

// Apply folds a refusal.
func (l *RefusalLog) Apply(ev Event) error {
	if _, ok := ev.(OperatorRefused); ok {
		l.Count++
		return nil
	}
	r, ok := ev.(ProposalRefused)
	if !ok {
		return fmt.Errorf("event %T does not belong to a refusal log", ev)
	}
	if r.Count < 0 {
		return fmt.Errorf("refusal aggregate of %d", r.Count)
	}
	l.Count += max(1, r.Count)
	return nil
}

func init() { register[ProposalRefused](TypeProposalRefused) }

// TypeKillSwitchSet is the type of KillSwitchSet.
const TypeKillSwitchSet = "control.kill_switch"

// KillSwitchSet engages or releases a tenant's kill switch. While engaged,
// every new proposal is refused; settlement and reconciliation go on.
type KillSwitchSet struct {
	Engaged  bool   `json:"engaged"`
	Operator string `json:"operator"`
	Reason   string `json:"reason,omitempty"`
}

// EventType implements Event.
func (KillSwitchSet) EventType() string { return TypeKillSwitchSet }

// Control is the state of a tenant's control subject: the kill switch, the
// versions of its guarantees' limits and modes, and the enforcement domain.
type Control struct {
	Engaged    bool
	Guarantees map[string]GuaranteeVersion `json:",omitempty"` // by guarantee id
	// Domain is every guarantee pinned in the tenant's stream, by id, as
	// its pin defines it (GuaranteeEnrolled).
	Domain map[string]Pin `json:",omitempty"`
	// Guardrails are the tenant's guardrails by id, and Waivers the
	// waivers granted since the last one ended, by id (guardrail.go).
	Guardrails map[string]GuardrailSet  `json:",omitempty"`
	Waivers    map[string]WaiverGranted `json:",omitempty"`
}

// Apply folds a control event.
func (c *Control) Apply(ev Event) error {
	switch e := ev.(type) {
	case KillSwitchSet:
		c.Engaged = e.Engaged
	case GuaranteeRedefined:
		return c.applyRedefined(e)
	case GuaranteeEnrolled:
		return c.applyEnrolled(e)
	case GuardrailSet:
		return c.applyGuardrail(e)
	case WaiverGranted:
		return c.applyWaiver(e)
	case WaiverRevoked:
		return c.applyWaiverRevoked(e)
	default:
		return fmt.Errorf("event %T does not belong to a control subject", ev)
	}
	return nil
}

func init() { register[KillSwitchSet](TypeKillSwitchSet) }
