package gateway

import (
	"fmt"

	"github.com/contextos/ledger/projections"
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
}

// validate fills the defaults and refuses values that cannot work.
func (l *LimitsConfig) validate() error {
	for _, f := range []struct {
		name string
		v    *int
		def  int
	}{
		{"pending_approvals", &l.PendingApprovals, projections.DefaultMaxApprovals},
		{"incidents", &l.Incidents, projections.DefaultMaxIncidents},
		{"resolved_operations", &l.ResolvedOperations, projections.DefaultMaxResolvedOperations},
	} {
		switch {
		case *f.v < 0 || *f.v > 1<<24:
			return fmt.Errorf("runtime.limits.%s must be in 0..%d, not %d", f.name, 1<<24, *f.v)
		case *f.v == 0:
			*f.v = f.def
		}
	}
	return nil
}

func (l LimitsConfig) model() projections.ModelLimits {
	return projections.ModelLimits{Incidents: l.Incidents, Approvals: l.PendingApprovals, ResolvedOperations: l.ResolvedOperations}
}
