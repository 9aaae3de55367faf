package daemon_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/daemon"
	"github.com/contextos/ledger/gateway"
	"github.com/contextos/ledger/internal/testing/daemontest"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
)

// stuckAdapter never returns from a dispatch until released: an executor
// stranded mid-call, as far as every other replica can tell.
type stuckAdapter struct{ release chan struct{} }

func (a stuckAdapter) Dispatch(ctx context.Context, _ string, _ json.RawMessage) gateway.Observation {
	select {
	case <-a.release:
	case <-ctx.Done():
	}
	return gateway.Observation{Outcome: kernel.OutcomeUnknown, Ref: "released"}
}

func (a stuckAdapter) Query(context.Context, string) gateway.Observation {
	return gateway.Observation{Outcome: kernel.OutcomeUnknown, Ref: "stuck"}
}

// TestReconcileGraceOnLocalClock: replica A, whose clock is an hour behind,
// starts a dispatch and is stuck in the provider call. Replica B measures
// the grace period from when it first saw the attempt on its own clock,
// not from A's timestamps (which would make the attempt an hour old): it
// waits, then queries. The provider never saw the key and answers 404,
// which the capability lists as a not-applied status of the dispatch call;
// for a query it proves nothing, so the hold stays and the attempt is
// unknown.
func TestReconcileGraceOnLocalClock(t *testing.T) {
	stuck := stuckAdapter{release: make(chan struct{})}
	const capID = "adp_payments.issue_refund"
	e := startEnvWith(t, daemontest.Options{
		Config: func(cfg *config.Config) {
			cp, _ := cfg.Capability(capID)
			cp.Recovery.NotAppliedStatuses = []int{404, 409}
		},
		Boot: daemon.BootOptions{Clock: &fakeClock{t: seedTime.Add(-time.Hour)}, Adapters: map[string]gateway.Adapter{capID: stuck}},
	})
	cp, _ := e.rt.Config.Capability(capID)
	t.Cleanup(func() { close(stuck.release) })
	nc := e.client("acme", "agent_email")
	body, _ := json.Marshal(refund("run_g", "g1", "ord_g", 700))
	if err := nc.PublishRequest(wire.ProposeSubject("acme", "agent_email"), nc.NewRespInbox(), body); err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{t: seedTime}
	b := e.replica(clock, "replica-b")
	ctx := context.Background()
	var attempt string
	deadline := time.Now().Add(10 * time.Second)
	for attempt == "" {
		if time.Now().After(deadline) {
			t.Fatal("replica B never saw the attempt")
		}
		if r := b.Op(ctx, "acme", "attempts", "ops_alice", nil); len(r.Attempts) == 1 && r.Attempts[0].State == kernel.StateStarted.String() {
			attempt = r.Attempts[0].AttemptID
		} else {
			time.Sleep(20 * time.Millisecond)
		}
	}
	reconcile := func() wire.SettleRow {
		t.Helper()
		r := b.Op(ctx, "acme", "reconcile", "ops_alice", []byte(`{"attempt_id":"`+attempt+`"}`))
		if len(r.Settled) != 1 {
			t.Fatalf("reconcile: %+v", r)
		}
		return r.Settled[0]
	}
	grace := b.ReconcileGrace(cp)
	if row := reconcile(); row.Code != wire.CodeDispatchActive {
		t.Fatalf("first sighting: %+v, want %s", row, wire.CodeDispatchActive)
	}
	clock.Advance(grace - time.Millisecond)
	if row := reconcile(); row.Code != wire.CodeDispatchActive {
		t.Fatalf("just inside the grace: %+v", row)
	}
	clock.Advance(time.Millisecond)
	row := reconcile()
	if row.Code != "" || row.Outcome != wire.OutcomeUnknown || row.Status != wire.StatusUnknown {
		t.Fatalf("after the grace, a 404 to the query: %+v, want unknown", row)
	}
	if x := b.Op(ctx, "acme", "exposure", "ops_alice", []byte(`{"resource":"ord_g"}`)); len(x.Exposure) != 1 || x.Exposure[0].Held != 700 {
		t.Fatalf("the hold was released: %+v", x.Exposure)
	}
}
