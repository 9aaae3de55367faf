package gateway

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/contextos/ledger/aggregates"
	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/kernel"
)

// TestGuaranteeSetLimit changes a ceiling at runtime: every version is a
// signed event with who and why; a replica started before the change
// decides against it at once (it reads the version in the reservation's
// transaction, not its configuration); a per-resource override; a limit
// lowered below what is committed refuses and moves no balance; observe
// mode records what enforcement would refuse.
func TestGuaranteeSetLimit(t *testing.T) {
	e := startEnv(t)
	nc := e.client("acme", "agent_email")
	wantBalance(t, e.propose(nc, "acme", "agent_email", refund("run_g", "g1", "ord_g", 90000)), 90000, 0, 10000)
	replica := e.replica(aggregates.SystemClock{}, "replica-2")
	t.Cleanup(replica.Stop)
	viaReplica := func(key, order string, amount int64) Reply {
		t.Helper()
		b, err := json.Marshal(refund("run_g", key, order, amount))
		if err != nil {
			t.Fatal(err)
		}
		return replica.Propose(context.Background(), "acme", "agent_email", b)
	}

	if r := e.opAny("guarantee-set-limit", SetLimitRequest{GuaranteeID: "refunds-per-order", Limit: 150000}); r.Code != kernel.CodeRequestMalformed {
		t.Fatalf("a change without a reason: %+v", r)
	}
	if r := viaReplica("g2", "ord_g", 50000); r.Code != kernel.CodeExceeded {
		t.Fatalf("before the change: %+v", r)
	}
	e.mustOp("guarantee-set-limit", SetLimitRequest{GuaranteeID: "refunds-per-order", Limit: 150000, Reason: "festival season"})
	r := viaReplica("g3", "ord_g", 50000)
	if r.Status != kernel.StatusApplied || *r.Limit != 150000 {
		t.Fatalf("after raising the limit, through a replica started before: %+v", r)
	}
	wantBalance(t, r, 140000, 0, 10000)

	e.mustOp("guarantee-set-limit", SetLimitRequest{GuaranteeID: "refunds-per-order", Resource: "ord_vip", Limit: 500000, Reason: "enterprise customer"})
	if r := e.propose(nc, "acme", "agent_email", refund("run_g", "g4", "ord_vip", 400000)); r.Status != kernel.StatusApplied || *r.Limit != 500000 {
		t.Fatalf("under the resource's override: %+v", r)
	}

	e.mustOp("guarantee-set-limit", SetLimitRequest{GuaranteeID: "refunds-per-order", Limit: 100000, Reason: "fraud review"})
	calls := e.prov.Stats().Calls
	r = e.propose(nc, "acme", "agent_email", refund("run_g", "g5", "ord_g", 1))
	if r.Code != kernel.CodeExceeded || *r.Limit != 100000 {
		t.Fatalf("under a limit lowered below what is committed: %+v", r)
	}
	wantBalance(t, r, 140000, 0, -40000)
	if e.prov.Stats().Calls != calls {
		t.Fatal("a refused proposal reached the provider")
	}

	e.mustOp("guarantee-set-limit", SetLimitRequest{GuaranteeID: "refunds-per-order", Mode: kernel.ModeObserve, Reason: "measure the new rule"})
	r = e.propose(nc, "acme", "agent_email", refund("run_g", "g6", "ord_g", 1))
	if r.Status != kernel.StatusApplied {
		t.Fatalf("observe mode: %+v", r)
	}
	over := 0
	subject, err := events.ExposureSubject("acme", "refunds-per-order", "ord_g")
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range e.signed(subject) {
		if res, ok := ev.(kernel.ExposureReserved); ok && res.OverLimit {
			over++
		}
	}
	if over != 1 {
		t.Fatalf("%d reservations marked over the limit, want 1", over)
	}

	h := e.mustOp("guarantee-history", GuaranteeHistoryRequest{GuaranteeID: "refunds-per-order"}).Versions
	want := []VersionRow{
		{Version: 1, Limit: 100000, Mode: kernel.ModeEnforce, Reason: "pinned at first use"},
		{Version: 2, Operator: "ops_alice", Reason: "festival season", Limit: 150000},
		{Version: 3, Operator: "ops_alice", Reason: "enterprise customer", Resource: "ord_vip", Limit: 500000},
		{Version: 4, Operator: "ops_alice", Reason: "fraud review", Limit: 100000},
		{Version: 5, Operator: "ops_alice", Reason: "measure the new rule", Mode: kernel.ModeObserve},
	}
	if len(h) != len(want) {
		t.Fatalf("history: %+v", h)
	}
	for i := range want {
		got := h[i]
		if i > 0 && got.At == "" {
			t.Fatalf("version %d has no time", got.Version)
		}
		got.At = ""
		if got != want[i] {
			t.Fatalf("version %d: got %+v, want %+v", i+1, got, want[i])
		}
	}
}
