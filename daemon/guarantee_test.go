package daemon_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/contextos/ledger/aggregates"
	"github.com/contextos/ledger/daemon"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/internal/testing/daemontest"
	"github.com/contextos/ledger/internal/testing/provider"
	"github.com/contextos/ledger/internal/testing/testenv"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
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
	viaReplica := func(key, order string, amount int64) wire.Reply {
		t.Helper()
		b, err := json.Marshal(refund("run_g", key, order, amount))
		if err != nil {
			t.Fatal(err)
		}
		return replica.Propose(context.Background(), "acme", "agent_email", b)
	}

	if r := e.opAny("guarantee-set-limit", wire.SetLimitRequest{GuaranteeID: "refunds-per-order", Limit: 150000}); r.Code != wire.CodeRequestMalformed {
		t.Fatalf("a change without a reason: %+v", r)
	}
	if r := viaReplica("g2", "ord_g", 50000); r.Code != wire.CodeExceeded {
		t.Fatalf("before the change: %+v", r)
	}
	e.mustOp("guarantee-set-limit", wire.SetLimitRequest{GuaranteeID: "refunds-per-order", Limit: 150000, Reason: "festival season"})
	r := viaReplica("g3", "ord_g", 50000)
	if r.Status != wire.StatusApplied || *r.Limit != 150000 {
		t.Fatalf("after raising the limit, through a replica started before: %+v", r)
	}
	wantBalance(t, r, 140000, 0, 10000)

	e.mustOp("guarantee-set-limit", wire.SetLimitRequest{GuaranteeID: "refunds-per-order", Resource: "ord_vip", Limit: 500000, Reason: "enterprise customer"})
	if r := e.propose(nc, "acme", "agent_email", refund("run_g", "g4", "ord_vip", 400000)); r.Status != wire.StatusApplied || *r.Limit != 500000 {
		t.Fatalf("under the resource's override: %+v", r)
	}

	e.mustOp("guarantee-set-limit", wire.SetLimitRequest{GuaranteeID: "refunds-per-order", Limit: 100000, Reason: "fraud review"})
	calls := e.prov.Stats().Calls
	r = e.propose(nc, "acme", "agent_email", refund("run_g", "g5", "ord_g", 1))
	if r.Code != wire.CodeExceeded || *r.Limit != 100000 {
		t.Fatalf("under a limit lowered below what is committed: %+v", r)
	}
	wantBalance(t, r, 140000, 0, -40000)
	if e.prov.Stats().Calls != calls {
		t.Fatal("a refused proposal reached the provider")
	}

	e.mustOp("guarantee-set-limit", wire.SetLimitRequest{GuaranteeID: "refunds-per-order", Mode: kernel.ModeObserve, Reason: "measure the new rule"})
	r = e.propose(nc, "acme", "agent_email", refund("run_g", "g6", "ord_g", 1))
	if r.Status != wire.StatusApplied {
		t.Fatalf("observe mode: %+v", r)
	}
	over := 0
	subject, err := codec.ExposureSubject("acme", "refunds-per-order", "ord_g")
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

	h := e.mustOp("guarantee-history", wire.GuaranteeHistoryRequest{GuaranteeID: "refunds-per-order"}).Versions
	want := []wire.VersionRow{
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

// TestWindowedGuarantee: a refund is covered by the order's ceiling and by a
// per-customer-per-day ceiling in Asia/Kolkata. Both reserve atomically or
// neither does, the refusal names the day's ceiling, and at local midnight
// the customer's capacity returns while the order's does not.
func TestWindowedGuarantee(t *testing.T) {
	e := startEnvWith(t, daemontest.Options{Edit: func(s string) string {
		return s + `
[[guarantees]]
id = "refunds-per-customer-day"
capability_ids = ["adp_payments.issue_refund"]
resource_pointer = "/customer_id"
amount_pointer = "/amount_minor"
limit = 150000
unit = "INR_minor"
window = "day"
time_zone = "Asia/Kolkata"
`
	}})
	prov := e.prov
	clock := &fakeClock{t: time.Date(2026, 12, 1, 17, 0, 0, 0, time.UTC)} // 22:30 in Kolkata
	g := e.replica(clock, "replica-w")
	t.Cleanup(g.Stop)
	propose := func(key, order string, amount int64) wire.Reply {
		t.Helper()
		p := refund("run_w", key, order, amount)
		p["arguments"].(map[string]any)["customer_id"] = "cust_7"
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		return g.Propose(context.Background(), "acme", "agent_email", b)
	}
	balance := func(r wire.Reply, guarantee string) wire.Balance {
		t.Helper()
		for _, row := range r.Guarantees {
			if row.GuaranteeID == guarantee {
				return row.Balance
			}
		}
		t.Fatalf("no %s in %+v", guarantee, r)
		return wire.Balance{}
	}

	if r := propose("w1", "ord_w1", 80000); r.Status != wire.StatusApplied {
		t.Fatalf("first refund: %+v", r)
	}
	calls := prov.Stats().Calls
	r := propose("w2", "ord_w2", 80000)
	if r.Code != wire.CodeExceeded || !strings.HasPrefix(r.Reason, "refunds-per-customer-day:") {
		t.Fatalf("second refund the same day: %+v", r)
	}
	if b := balance(r, "refunds-per-order"); b.Held != 0 || b.Committed != 0 {
		t.Fatalf("the order's ledger moved on a refusal by the day's ceiling: %+v", b)
	}
	if prov.Stats().Calls != calls {
		t.Fatal("a refused refund reached the provider")
	}
	clock.Advance(100 * time.Minute) // 00:10 on 2 December in Kolkata
	r = propose("w3", "ord_w2", 80000)
	if r.Status != wire.StatusApplied {
		t.Fatalf("after local midnight: %+v", r)
	}
	if b := balance(r, "refunds-per-customer-day"); b.Committed != 80000 || b.Available != 70000 {
		t.Fatalf("the new day's ledger: %+v", b)
	}
	if r := propose("w4", "ord_w1", 30000); r.Code != wire.CodeExceeded || !strings.HasPrefix(r.Reason, "refunds-per-order:") {
		t.Fatalf("the order's ceiling has no window: %+v", r)
	}
	// The operator's view lists each window's ledger with its balance.
	var rows []wire.ExposureRow
	testenv.Eventually(t, func() bool {
		rows = e.op("exposure", wire.OpRequest{GuaranteeID: "refunds-per-customer-day"}).Exposure
		return len(rows) == 2
	}, 10*time.Second, "two window ledgers in the exposure view")
	byWindow := map[string]wire.ExposureRow{}
	for _, r := range rows {
		byWindow[r.Window] = r
	}
	if d1, d2 := byWindow["2026-12-01"], byWindow["2026-12-02"]; d1.Committed != 80000 || d2.Committed != 80000 || d1.Resource != "cust_7" {
		t.Fatalf("window rows: %+v", rows)
	}
	if inc := e.op("incidents", wire.OpRequest{}); len(inc.Incidents) != 0 {
		t.Fatalf("the windows' events were refused by the read model: %+v", inc.Incidents)
	}
	for _, window := range []string{"2026-12-01", "2026-12-02"} {
		subject, err := codec.ExposureWindowSubject("acme", "refunds-per-customer-day", "cust_7", window)
		if err != nil {
			t.Fatal(err)
		}
		if evs := e.signed(subject); len(evs) == 0 {
			t.Fatalf("no ledger for the window %s", window)
		}
	}
}

// TestObserveModeMetric: what a guarantee in observe mode would have
// refused is counted in the metrics.
func TestObserveModeMetric(t *testing.T) {
	prov := provider.New()
	hs := httptest.NewServer(prov.Handler())
	t.Cleanup(hs.Close)
	e, _ := bootObserved(t, hs.URL, daemon.BootOptions{}, nil)
	e.prov = prov
	nc := e.client("acme", "agent_email")
	if r := e.propose(nc, "acme", "agent_email", refund("run_o", "o1", "ord_o", 90000)); r.Status != wire.StatusApplied {
		t.Fatalf("first: %+v", r)
	}
	e.mustOp("guarantee-set-limit", wire.SetLimitRequest{GuaranteeID: "refunds-per-order", Mode: kernel.ModeObserve, Reason: "measure"})
	if r := e.propose(nc, "acme", "agent_email", refund("run_o", "o2", "ord_o", 20000)); r.Status != wire.StatusApplied {
		t.Fatalf("over the limit in observe mode: %+v", r)
	}
	testenv.Eventually(t, func() bool {
		v, ok := sample(scrape(t, e.rt), "contextos_guarantee_over_limit", map[string]string{"tenant": "acme", "guarantee": "refunds-per-order"})
		return ok && v == 1
	}, 10*time.Second, "contextos_guarantee_over_limit 1")
}
