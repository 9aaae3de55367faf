package kernel

import (
	"time"

	"github.com/contextos/ledger/wire"
)

// Manifest is what a runtime is configured with, as the steps read it:
// capabilities, guarantees and tenants, each already validated (the
// configuration's loader builds it; the kernel reads no file). It is pure
// data and never changes while steps read it: a new configuration is a new
// manifest.
type Manifest struct {
	// Capabilities are the surfaced capabilities, by id.
	Capabilities map[string]*Capability
	// Guarantees are the configured guarantees, in configuration order:
	// the order of a proposal's holds, its reply's balances and its
	// decision record.
	Guarantees []Guarantee
	// Tenants are the configured tenants, by id.
	Tenants map[string]*Tenant
	// MaxProposalBytes bounds a proposal's body; 0 or less bounds nothing.
	MaxProposalBytes int
	// Digest identifies the configuration the manifest was built from
	// (config.Config.Digest); every decision record carries it.
	Digest string
}

// Capability is one surfaced capability of the manifest.
type Capability struct {
	ID        string
	Version   string
	Risk      string // "low", "medium" or "high"
	Effectful bool
	// Approval is ApprovalRequired, ApprovalNone, or "": an approval is
	// required exactly when the risk is high.
	Approval string
	// RunAmount is the JSON pointer of the amount a proposal consumes
	// from its run's budget: the capability's amount pointer, else its
	// policy's. Empty: proposals consume calls only.
	RunAmount string
	// Policy constrains the arguments; nil is the empty policy.
	Policy *CompiledPolicy
	// DecisionKey names the decision of Pack whose evidence gate must
	// allow commit before a proposal is dispatched; Pack is nil without
	// one.
	DecisionKey string
	Pack        *ContextPack
	// Breaker trips the capability's breaker after repeated provider
	// failures; a zero Threshold declares none.
	Breaker BreakerRule
	// Grace is how long an attempt is left to its executor before
	// reconciliation may act on it (its provider call may be in flight).
	Grace time.Duration
	// NoSameActionFence turns the same-action fence off for an effectful
	// capability (SameActionFenced).
	NoSameActionFence bool
}

// Approval rules of a capability.
const (
	ApprovalRequired = "required"
	ApprovalNone     = "none"
)

// ApprovalRequiredBy reports whether a proposal of the capability needs an
// operator's approval: as its rule says, and by default when its risk is
// high.
func (c *Capability) ApprovalRequiredBy() bool {
	switch c.Approval {
	case ApprovalRequired:
		return true
	case ApprovalNone:
		return false
	}
	return c.Risk == "high"
}

// emptyPolicy is the policy of a capability that declares none.
var emptyPolicy = func() *CompiledPolicy {
	p, err := CompilePolicy(Policy{})
	if err != nil {
		panic("kernel: the empty policy does not compile: " + err.Error())
	}
	return p
}()

// CompiledPolicy returns the capability's policy, the empty one when it
// declares none.
func (c *Capability) CompiledPolicy() *CompiledPolicy {
	if c == nil || c.Policy == nil {
		return emptyPolicy
	}
	return c.Policy
}

// Guarantee is one configured guarantee.
type Guarantee struct {
	Definition Definition
	// Zone is the time zone of a calendar window (the loader resolves
	// Definition.TimeZone; the kernel reads no time zone database). Nil
	// reads as UTC.
	Zone *time.Location
}

// Tenant is one configured tenant.
type Tenant struct {
	ID string
	// Agents are the tenant's agents, by id.
	Agents map[string]*Agent
	// AllowUnadmitted says what a proposal may do in a run no operator
	// admitted: consume without a limit (true) or nothing.
	AllowUnadmitted bool
	// Pins are the tenant's pins of the configured guarantees as the
	// runtime read them at start, by guarantee id. Pins never change once
	// made; later versions of a guarantee's limit and mode live on the
	// tenant's control subject, which every proposal reads.
	Pins map[string]PinnedGuarantee
}

// Agent is one agent of a tenant.
type Agent struct {
	ID string
	// Capabilities are the capabilities its configuration grants;
	// operators' grants and revocations override them (Authority).
	Capabilities []string
	// EvidenceSources are the evidence sources it may rely on (the
	// RunContext's allowed sources of its evidence gates).
	EvidenceSources []string
}

// Grants reports whether the agent's configuration grants capabilityID.
func (a *Agent) Grants(capabilityID string) bool {
	for _, c := range a.Capabilities {
		if c == capabilityID {
			return true
		}
	}
	return false
}

// PinnedGuarantee is a configured guarantee as pinned in a tenant's stream:
// its pin, or the refusal of every proposal it covers when the configured
// definition means something else than the pin (or it could not be pinned).
type PinnedGuarantee struct {
	Pin     *Pin
	Refusal *Refusal
	// Replaced are the guarantees it replaces, nearest first
	// (Control.Replaced once it was pinned): a proposal reads their
	// ledgers on its resource, whose exposure counts against its limit.
	Replaced []string
}

// Capability returns a surfaced capability.
func (m *Manifest) Capability(id string) (*Capability, bool) {
	c, ok := m.Capabilities[id]
	return c, ok && c != nil
}

// Tenant returns a configured tenant.
func (m *Manifest) Tenant(id string) (*Tenant, bool) {
	t, ok := m.Tenants[id]
	return t, ok && t != nil
}

// GuaranteesFor returns the configured guarantees that cover a capability,
// in configuration order.
func (m *Manifest) GuaranteesFor(capabilityID string) []Guarantee {
	var out []Guarantee
	for _, g := range m.Guarantees {
		if g.Definition.Covers(capabilityID) {
			out = append(out, g)
		}
	}
	return out
}

// amountPointers are the amount pointers of the guarantees that cover a
// capability (DecodeArguments refuses an inexact number there as an
// invalid amount).
func (m *Manifest) amountPointers(capabilityID string) []Pointer {
	var out []Pointer
	for _, g := range m.GuaranteesFor(capabilityID) {
		if p, err := ParsePointer(g.Definition.AmountPointer); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// pinned returns the pin of a configured guarantee, or the refusal of every
// proposal it covers.
func (t *Tenant) pinned(guaranteeID string) (PinnedGuarantee, *Refusal) {
	p, ok := t.Pins[guaranteeID]
	return ResolvePin(guaranteeID, p, ok)
}

// ResolvePin is the rule of a configured guarantee's pin as a runtime holds
// it (ok: it holds an entry for the guarantee): the pin, or the refusal of
// every proposal the guarantee covers (definition_mismatch when it is not
// pinned, else the refusal its pinning recorded).
func ResolvePin(guaranteeID string, p PinnedGuarantee, ok bool) (PinnedGuarantee, *Refusal) {
	switch {
	case !ok || (p.Pin == nil && p.Refusal == nil):
		return PinnedGuarantee{}, refuse(wire.CodeDefinitionMismatch, "guarantee %s is not pinned", guaranteeID)
	case p.Refusal != nil:
		return PinnedGuarantee{}, p.Refusal
	}
	return p, nil
}

// CheckPinnedHistory refuses to list the versions of a guarantee the
// tenant has not pinned: its history starts at its pin.
func CheckPinnedHistory(p *Pin, guaranteeID, tenant string) *Refusal {
	if !p.Pinned() {
		return refuse(wire.CodeDefinitionMismatch, "guarantee %s is not pinned in tenant %s", guaranteeID, tenant)
	}
	return nil
}
