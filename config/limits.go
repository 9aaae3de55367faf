package config

import (
	"fmt"
	"time"
)

// LimitsConfig is [runtime.limits]: what bounds the memory of the read
// model. Zero values take the defaults; negative ones are refused.
type LimitsConfig struct {
	// PendingApprovals is how many pending approvals the read model keeps
	// per tenant (the newest; default 1000).
	PendingApprovals int `toml:"pending_approvals"`
	// Incidents is how many incidents it keeps per tenant (the newest;
	// default 1000).
	Incidents int `toml:"incidents"`
	// ResolvedOperations is how many resolved operations it keeps per
	// tenant for reconcile and close-attempt (default 10000; older ones
	// are read back from the store when named).
	ResolvedOperations int `toml:"resolved_operations"`

	// TenantWorkers is how many proposals of one tenant this replica
	// handles at once (default runtime.workers divided among the tenants,
	// at least 4). A tenant never uses another's workers.
	TenantWorkers int `toml:"tenant_workers"`
	// TenantQueue is how many proposals of one tenant may wait for a
	// worker (default 256); past it they are refused overloaded.
	TenantQueue int `toml:"tenant_queue"`
	// OperatorWorkers and OperatorQueue are the same for one tenant's
	// operator verbs, which never wait behind proposals (defaults 4, 64).
	OperatorWorkers int `toml:"operator_workers"`
	OperatorQueue   int `toml:"operator_queue"`

	// ProposalsPerSecond and ProposalBurst are each agent's proposal rate
	// limit on this replica (a token bucket; defaults 200 and 400),
	// applied before anything is stored: past it a proposal is refused
	// rate_limited.
	ProposalsPerSecond int `toml:"proposals_per_second"`
	ProposalBurst      int `toml:"proposal_burst"`
	// RefusalWindow is how long refusals are aggregated per agent, code
	// and capability (default 1m; kernel.RefusalTally): the first of a
	// window is recorded whole at once, the rest as one signed aggregate
	// at its end.
	RefusalWindow Duration `toml:"refusal_window"`
}

// Validate fills the defaults and refuses values that cannot work.
func (l *LimitsConfig) Validate() error {
	for _, f := range []struct {
		name string
		v    *int
		def  int
	}{
		// 0 leaves the read model's defaults (projections.ModelLimits).
		{"pending_approvals", &l.PendingApprovals, -1},
		{"incidents", &l.Incidents, -1},
		{"resolved_operations", &l.ResolvedOperations, -1},
		{"tenant_workers", &l.TenantWorkers, -1}, // derived from runtime.workers
		{"tenant_queue", &l.TenantQueue, 256},
		{"operator_workers", &l.OperatorWorkers, 4},
		{"operator_queue", &l.OperatorQueue, 64},
		{"proposals_per_second", &l.ProposalsPerSecond, 200},
		{"proposal_burst", &l.ProposalBurst, 400},
	} {
		switch {
		case *f.v < 0 || *f.v > 1<<24:
			return fmt.Errorf("runtime.limits.%s must be in 0..%d, not %d", f.name, 1<<24, *f.v)
		case *f.v == 0 && f.def > 0:
			*f.v = f.def
		}
	}
	switch w := l.RefusalWindow.Duration; {
	case w < 0 || w > time.Hour:
		return fmt.Errorf("runtime.limits.refusal_window must be in 0s..1h, not %s", w)
	case w == 0:
		l.RefusalWindow.Duration = time.Minute
	}
	return nil
}

// WorkersPerTenant is the proposal workers of each of tenants tenants.
func (l LimitsConfig) WorkersPerTenant(tenants, workers int) int {
	if l.TenantWorkers > 0 {
		return l.TenantWorkers
	}
	if tenants < 1 {
		tenants = 1
	}
	return max(4, workers/tenants)
}
