package daemon_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/daemon"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/internal/testing/daemontest"
	"github.com/contextos/ledger/internal/testing/provider"
	"github.com/contextos/ledger/internal/testing/testenv"
	"github.com/contextos/ledger/wire"
)

// TestDiskGuard: a runtime whose store has less than runtime.min_free_bytes
// free refuses new proposals overloaded and stores nothing for them, fails
// /readyz and exports the free bytes, while an attempt started before goes
// on to settle; with the threshold below the free space it takes proposals
// again.
func TestDiskGuard(t *testing.T) {
	// Every boot after the first is over the first's data and provider.
	var first *daemontest.Daemon
	boot := func(minFree int64) *env {
		t.Helper()
		e := startEnvWith(t, daemontest.Options{Of: first, Config: func(cfg *config.Config) {
			cfg.Runtime.MinFreeBytes = minFree
			cfg.Runtime.ReconcileInterval.Duration = 50 * time.Millisecond
			cfg.Runtime.StoreSpaceInterval = config.Duration{Duration: 100 * time.Millisecond}
			cfg.Runtime.MetricsListen = "127.0.0.1:0"
		}})
		if first == nil {
			first = e.d
		}
		return e
	}

	// An attempt in flight: the provider reports it pending.
	e := boot(0)
	prov := e.prov
	prov.Script(provider.Pending)
	held := e.propose(e.client("acme", "agent_email"), "acme", "agent_email", refund("run_d", "held", "ord_d", 40000))
	if held.Status != wire.StatusPending {
		t.Fatalf("first proposal: %+v", held)
	}
	if code, rep := settledReadiness(t, e.rt); code != http.StatusOK || !rep.Ready {
		t.Fatalf("/readyz with the default threshold: %d %+v", code, rep)
	}
	e.rt.Close()

	// A threshold above any volume's free space.
	e = boot(1 << 50)
	r := e.propose(e.client("acme", "agent_email"), "acme", "agent_email", refund("run_d", "new", "ord_d2", 100))
	if r.Status != wire.StatusRefused || r.Code != wire.CodeOverloaded || !strings.Contains(r.Reason, "min_free_bytes") {
		t.Fatalf("proposal under the guard: %+v", r)
	}
	subject, _ := codec.Subject("acme", "operation", "run_d", "new")
	if got, err := e.rt.Store.Read(context.Background(), subject, 1); err != nil || len(got) != 0 {
		t.Fatalf("a refused overloaded proposal stored %d events (%v)", len(got), err)
	}
	if code, rep := settledReadiness(t, e.rt); code != http.StatusServiceUnavailable || rep.Ready || spaceCheck(rep).OK || !strings.Contains(spaceCheck(rep).Error, "min_free_bytes") {
		t.Fatalf("/readyz under the guard: %d %+v", code, rep)
	}
	fams := scrape(t, e.rt)
	if v, ok := sample(fams, "contextos_store_free_bytes", nil); !ok || v <= 0 || v >= 1<<50 {
		t.Errorf("contextos_store_free_bytes %v (%v), want the volume's free bytes", v, ok)
	}
	if v, ok := sample(fams, "contextos_store_min_free_bytes", nil); !ok || v != 1<<50 {
		t.Errorf("contextos_store_min_free_bytes %v (%v), want %d", v, ok, int64(1)<<50)
	}
	// The attempt started before still settles: the reconciler records
	// the provider's answer.
	prov.Settle(held.AttemptID, "succeeded")
	testenv.Eventually(t, func() bool {
		rows := e.op("exposure", wire.OpRequest{Resource: "ord_d"}).Exposure
		return len(rows) == 1 && rows[0].Balance == wire.Balance{Limit: 100000, Committed: 40000, Available: 60000}
	}, 15*time.Second, "the in-flight attempt settled under the guard")
	e.rt.Close()

	// A threshold below the free space: proposals are taken again.
	e = boot(1 << 10)
	if r := e.propose(e.client("acme", "agent_email"), "acme", "agent_email", refund("run_d", "new", "ord_d2", 100)); r.Status != wire.StatusApplied {
		t.Fatalf("proposal with space: %+v", r)
	}
	if code, rep := settledReadiness(t, e.rt); code != http.StatusOK || !rep.Ready || !spaceCheck(rep).OK {
		t.Fatalf("/readyz with space: %d %+v", code, rep)
	}
}

// settledReadiness polls /readyz until every check but the store's space
// passes (the read model and the audit catch up after a boot) and returns
// its status and answer.
func settledReadiness(t *testing.T, rt *daemon.Runtime) (int, daemon.Readiness) {
	t.Helper()
	var code int
	var rep daemon.Readiness
	testenv.Eventually(t, func() bool {
		code, rep = readyz(t, rt)
		for _, c := range rep.Checks {
			if !c.OK && c.Name != "store_space" {
				return false
			}
		}
		return len(rep.Checks) > 0
	}, 30*time.Second, "/readyz's other checks")
	return code, rep
}

// spaceCheck is /readyz's store_space check.
func spaceCheck(rep daemon.Readiness) daemon.ReadyCheck {
	for _, c := range rep.Checks {
		if c.Name == "store_space" {
			return c
		}
	}
	return daemon.ReadyCheck{Name: "missing"}
}
