package config

import (
	"time"

	"github.com/contextos/ledger/kernel"
)

// Manifest is the configuration as the kernel's steps read it: pure data,
// built once per configuration and set of pins. pins are the tenants' pins
// of the configured guarantees as the runtime made them, by tenant id then
// guarantee id; a guarantee missing there refuses the proposals it covers.
func (c *Config) Manifest(pins map[string]map[string]kernel.PinnedGuarantee) *kernel.Manifest {
	m := &kernel.Manifest{Capabilities: map[string]*kernel.Capability{}, Tenants: map[string]*kernel.Tenant{},
		MaxProposalBytes: c.Runtime.MaxProposalBytes, Digest: c.Digest}
	for i := range c.Capabilities {
		cp := &c.Capabilities[i]
		m.Capabilities[cp.ID] = cp.Kernel()
	}
	for _, def := range c.Guarantees {
		m.Guarantees = append(m.Guarantees, kernel.Guarantee{Definition: def, Zone: c.Zone(def.TimeZone)})
	}
	for i := range c.Tenants {
		tc := &c.Tenants[i]
		t := &kernel.Tenant{ID: tc.ID, Agents: map[string]*kernel.Agent{}, AllowUnadmitted: tc.AllowsUnadmitted(), Pins: pins[tc.ID]}
		for _, a := range tc.Agents {
			t.Agents[a.ID] = &kernel.Agent{ID: a.ID, Capabilities: a.Capabilities, EvidenceSources: a.EvidenceSources}
		}
		m.Tenants[tc.ID] = t
	}
	return m
}

// Kernel is the capability as the kernel's steps read it.
func (cp *CapabilityConfig) Kernel() *kernel.Capability {
	k := &kernel.Capability{ID: cp.ID, Version: cp.Version, Risk: cp.Risk, Effectful: cp.Effectful, Approval: cp.Approval,
		RunAmount: cp.AmountPointer, Policy: cp.CompiledPolicy(), DecisionKey: cp.DecisionKey, Pack: cp.Pack(),
		Breaker:           kernel.BreakerRule{Threshold: cp.Breaker.Threshold, Window: cp.Breaker.Window.Duration},
		Grace:             cp.Grace(),
		NoSameActionFence: cp.SameActionFence != nil && !*cp.SameActionFence}
	if k.RunAmount == "" {
		k.RunAmount = cp.Policy.AmountPointer
	}
	return k
}

// Grace is how long an attempt of the capability is left to its executor
// before reconciliation may act on it: the provider call may still be in
// flight, and a query then could report an absence that is about to end.
func (cp *CapabilityConfig) Grace() time.Duration {
	switch {
	case cp == nil:
		return time.Second
	case cp.Adapter == "http":
		return 2*cp.HTTP.Timeout.Duration + time.Second
	case cp.Adapter == "mcp":
		// A tool call may run for its whole timeout on another replica.
		return 2*cp.MCP.Timeout.Duration + time.Second
	}
	return time.Second
}
