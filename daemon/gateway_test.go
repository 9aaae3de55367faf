package daemon_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/gateway"
	"github.com/contextos/ledger/internal/testing/daemontest"
	"github.com/contextos/ledger/internal/testing/gatewaytest"
	"github.com/contextos/ledger/internal/testing/provider"
	"github.com/contextos/ledger/internal/testing/testenv"
	"github.com/contextos/ledger/wire"
	"github.com/nats-io/nats.go"
)

// TestSeedRace: two agents propose 80000 on ord_881 (limit 100000) at the
// same time: exactly one provider call, one applied, one refused exceeded.
func TestSeedRace(t *testing.T) {
	e := startEnv(t)
	email, chat := e.client("acme", "agent_email"), e.client("acme", "agent_chat")
	var wg sync.WaitGroup
	replies := make([]wire.Reply, 2)
	for i, c := range []struct {
		nc        *nats.Conn
		principal string
	}{{email, "agent_email"}, {chat, "agent_chat"}} {
		wg.Add(1)
		go func(i int, nc *nats.Conn, p string) {
			defer wg.Done()
			replies[i] = e.propose(nc, "acme", p, refund("run_"+p, "refund-881", "ord_881", 80000))
		}(i, c.nc, c.principal)
	}
	wg.Wait()
	statuses := map[wire.Status]int{}
	for _, r := range replies {
		statuses[r.Status]++
		if r.Status == wire.StatusRefused && r.Code != wire.CodeExceeded {
			t.Fatalf("refused with %s: %s", r.Code, r.Reason)
		}
	}
	if statuses[wire.StatusApplied] != 1 || statuses[wire.StatusRefused] != 1 {
		t.Fatalf("statuses %v, want one applied and one refused", statuses)
	}
	if st := e.prov.Stats(); st.Calls != 1 || st.Applied != 1 {
		t.Fatalf("provider saw %+v, want exactly one call", st)
	}
	for _, r := range replies {
		if r.Status == wire.StatusApplied {
			wantBalance(t, r, 80000, 0, 20000)
			continue
		}
		// The refusal was decided either while the winner's 80000 was held
		// (the usual race) or after it committed (the loser arrived late);
		// both are the truth at the moment of refusal.
		if r.Committed != nil && *r.Committed == 80000 {
			wantBalance(t, r, 80000, 0, 20000)
		} else {
			wantBalance(t, r, 0, 80000, 20000)
		}
	}
}

// TestProviderContract: pending, timeout, listed 409 and a 2xx with an
// unlisted state give the holds and statuses of the recovery contract, and
// reconciliation later settles the pending and the unknown ones.
func TestProviderContract(t *testing.T) {
	e := startEnv(t)
	e.prov.Delay = 2 * time.Second
	nc := e.client("acme", "agent_email")
	cases := []struct {
		mode      provider.Mode
		order     string
		status    wire.Status
		held      int64
		committed int64
	}{
		{provider.Pending, "ord_p", wire.StatusPending, 1000, 0},
		{provider.Timeout, "ord_t", wire.StatusUnknown, 1000, 0},
		{provider.Conflict, "ord_c", wire.StatusNotApplied, 0, 0},
		{provider.Weird, "ord_w", wire.StatusUnknown, 1000, 0},
	}
	attempts := map[string]string{}
	for _, c := range cases {
		e.prov.Script(c.mode)
		r := e.propose(nc, "acme", "agent_email", refund("run_1", "k_"+c.order, c.order, 1000))
		if r.Status != c.status {
			t.Fatalf("%s: status %s (%s %s), want %s", c.mode, r.Status, r.Code, r.Reason, c.status)
		}
		wantBalance(t, r, c.committed, c.held, 100000-c.held-c.committed)
		attempts[c.order] = r.AttemptID
	}
	open := e.op("attempts", wire.OpRequest{})
	if len(open.Attempts) != 3 {
		t.Fatalf("open attempts %+v, want 3", open.Attempts)
	}
	for _, a := range open.Attempts {
		if a.NextStep == "" || a.State != "held" {
			t.Fatalf("attempt row %+v", a)
		}
	}
	// The provider finishes the pending refund and decides the weird one.
	e.prov.Settle(attempts["ord_p"], "succeeded")
	e.prov.Settle(attempts["ord_w"], "failed")
	rec := e.op("reconcile", wire.OpRequest{All: true})
	got := map[string]wire.Outcome{}
	for _, s := range rec.Settled {
		got[s.AttemptID] = s.Outcome
		if s.Code != "" {
			t.Fatalf("reconcile %s: %s %s", s.AttemptID, s.Code, s.Reason)
		}
	}
	want := map[string]wire.Outcome{attempts["ord_p"]: wire.OutcomeApplied, attempts["ord_t"]: wire.OutcomeApplied, attempts["ord_w"]: wire.OutcomeNotApplied}
	for id, o := range want {
		if got[id] != o {
			t.Fatalf("reconcile outcomes %v, want %v", got, want)
		}
	}
	rows := e.op("exposure", wire.OpRequest{})
	bal := map[string]wire.Balance{}
	for _, r := range rows.Exposure {
		bal[r.Resource] = r.Balance
	}
	for order, b := range map[string]wire.Balance{"ord_p": {Limit: 100000, Committed: 1000, Available: 99000}, "ord_t": {Limit: 100000, Committed: 1000, Available: 99000},
		"ord_c": {Limit: 100000, Available: 100000}, "ord_w": {Limit: 100000, Available: 100000}} {
		if bal[order] != b {
			t.Fatalf("%s: %+v, want %+v", order, bal[order], b)
		}
	}
	if n := len(e.op("attempts", wire.OpRequest{}).Attempts); n != 0 {
		t.Fatalf("%d attempts still open after reconciliation", n)
	}
	// Resending a proposal returns the settled status without a second call.
	calls := e.prov.Stats().Calls
	r := e.propose(nc, "acme", "agent_email", refund("run_1", "k_ord_p", "ord_p", 1000))
	if r.Status != wire.StatusApplied || e.prov.Stats().Calls != calls {
		t.Fatalf("resend: %s, calls %d -> %d", r.Status, calls, e.prov.Stats().Calls)
	}
}

// TestIdentityFromSubject: an agent cannot publish on another agent's or
// tenant's subject (the server denies it), and a body that claims another
// tenant is refused and changes nothing.
func TestIdentityFromSubject(t *testing.T) {
	e := startEnv(t)
	errs := make(chan error, 4)
	nc := gatewaytest.Connect(t, e.rt.URL, passwords[wire.UserName("acme", "agent_chat")], "acme", "agent_chat",
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
	b, _ := json.Marshal(refund("r", "k", "ord_881", 80000))
	for _, subj := range []string{wire.ProposeSubject("acme", "agent_email"), wire.ProposeSubject("globex", "agent_email"), "ctx.ev.acme.exposure.x.y", "$JS.API.STREAM.LIST"} {
		if _, err := nc.Request(subj, b, 300*time.Millisecond); err == nil {
			t.Fatalf("publish on %s was answered", subj)
		}
		select {
		case err := <-errs:
			if !strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
				t.Fatalf("publish on %s: %v", subj, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no permissions violation for %s", subj)
		}
	}
	// Another principal's inbox cannot be subscribed to.
	if _, err := nc.SubscribeSync(wire.InboxPrefix("acme", "agent_email") + ".>"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errs:
		if !strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
			t.Fatalf("subscribe: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("subscribing to another inbox was not denied")
	}
	claim := refund("r", "k2", "ord_881", 80000)
	claim["tenant"] = "globex"
	r := e.propose(e.client("acme", "agent_chat"), "acme", "agent_chat", claim)
	if r.Status != wire.StatusRefused || r.Code != wire.CodeRequestMalformed {
		t.Fatalf("tenant claim: %+v", r)
	}
	if rows := e.op("exposure", wire.OpRequest{}).Exposure; len(rows) != 0 || e.prov.Stats().Calls != 0 {
		t.Fatalf("a refused claim changed something: %+v, %d calls", rows, e.prov.Stats().Calls)
	}
}

// TestResendAfterLostReply: the same operation key again returns the same
// operation and makes no second provider call; the same key with other
// arguments is refused.
func TestResendAfterLostReply(t *testing.T) {
	e := startEnv(t)
	nc := e.client("acme", "agent_email")
	p := refund("run_9", "op-1", "ord_5", 30000)
	first := e.propose(nc, "acme", "agent_email", p)
	// A lost reply: publish without waiting, then resend.
	b, _ := json.Marshal(p)
	if err := nc.Publish(wire.ProposeSubject("acme", "agent_email"), b); err != nil {
		t.Fatal(err)
	}
	second := e.propose(nc, "acme", "agent_email", p)
	if first.Status != wire.StatusApplied || second.Status != wire.StatusApplied || first.OperationID != second.OperationID || first.AttemptID != second.AttemptID {
		t.Fatalf("first %+v second %+v", first, second)
	}
	if st := e.prov.Stats(); st.Calls != 1 {
		t.Fatalf("provider calls %d, want 1", st.Calls)
	}
	wantBalance(t, second, 30000, 0, 70000)
	changed := refund("run_9", "op-1", "ord_5", 30001)
	r := e.propose(nc, "acme", "agent_email", changed)
	if r.Code != wire.CodeOperationConflict {
		t.Fatalf("same key, other amount: %+v", r)
	}
}

// TestRefusalsChangeNothing walks the refusals that need no ledger and checks
// each one leaves every balance as it was.
func TestRefusalsChangeNothing(t *testing.T) {
	e := startEnv(t)
	email := e.client("acme", "agent_email")
	base := e.propose(email, "acme", "agent_email", refund("run_b", "base", "ord_1", 10000))
	wantBalance(t, base, 10000, 0, 90000)
	cases := []struct {
		name      string
		principal string
		body      any
		code      wire.Code
	}{
		{"not surfaced", "agent_email", map[string]any{"run_id": "r", "operation_key": "a", "capability_id": "adp_payments.wire_money", "arguments": map[string]any{}}, wire.CodeCapabilityNotSurfaced},
		{"no authority", "agent_readonly", refund("r", "b", "ord_1", 100), wire.CodeAuthorityDenied},
		{"amount string", "agent_email", map[string]any{"run_id": "r", "operation_key": "c", "capability_id": "adp_payments.issue_refund", "arguments": map[string]any{"order_id": "ord_1", "amount_minor": "100"}}, wire.CodeAmountInvalid},
		{"amount zero", "agent_email", refund("r", "d", "ord_1", 0), wire.CodeAmountInvalid},
		{"no resource", "agent_email", map[string]any{"run_id": "r", "operation_key": "e", "capability_id": "adp_payments.issue_refund", "arguments": map[string]any{"amount_minor": 5}}, wire.CodeResourceInvalid},
		{"exceeded", "agent_email", refund("r", "f", "ord_1", 90001), wire.CodeExceeded},
		{"unknown field", "agent_email", map[string]any{"run_id": "r", "operation_key": "g", "capability_id": "adp_payments.issue_refund", "arguments": map[string]any{}, "limit": 1e9}, wire.CodeRequestMalformed},
		{"deep", "agent_email", map[string]any{"run_id": "r", "operation_key": "h", "capability_id": "adp_payments.issue_refund", "arguments": deep(40)}, wire.CodeRequestMalformed},
		{"oversize", "agent_email", map[string]any{"run_id": "r", "operation_key": "i", "capability_id": "adp_payments.issue_refund", "arguments": map[string]any{"pad": strings.Repeat("x", 70000)}}, wire.CodeRequestMalformed},
	}
	for _, c := range cases {
		r := e.propose(e.client("acme", c.principal), "acme", c.principal, c.body)
		if r.Status != wire.StatusRefused || r.Code != c.code || r.Reason == "" {
			t.Fatalf("%s: %+v, want refused %s with a reason", c.name, r, c.code)
		}
	}
	rows := e.op("exposure", wire.OpRequest{}).Exposure
	if len(rows) != 1 || rows[0].Balance != (wire.Balance{Limit: 100000, Committed: 10000, Available: 90000}) {
		t.Fatalf("refusals changed balances: %+v", rows)
	}
	if st := e.prov.Stats(); st.Calls != 1 {
		t.Fatalf("refusals reached the provider: %+v", st)
	}
}

func deep(n int) map[string]any {
	m := map[string]any{"order_id": "ord_1", "amount_minor": 1}
	for i := 0; i < n; i++ {
		m = map[string]any{"x": m}
	}
	m["order_id"], m["amount_minor"] = "ord_1", 1
	return m
}

// TestKillSwitch: engaged, new proposals are refused; settlement of an
// existing attempt goes on.
func TestKillSwitch(t *testing.T) {
	e := startEnv(t)
	nc := e.client("acme", "agent_email")
	e.prov.Script(provider.Pending)
	pending := e.propose(nc, "acme", "agent_email", refund("run_k", "p", "ord_k", 500))
	on, off := true, false
	if r := e.op("kill-switch", wire.OpRequest{Engaged: &on, Reason: "incident 42"}); !r.OK {
		t.Fatalf("engage: %+v", r)
	}
	r := e.propose(nc, "acme", "agent_email", refund("run_k", "q", "ord_k", 500))
	if r.Code != wire.CodeKillSwitchEngaged {
		t.Fatalf("while engaged: %+v", r)
	}
	e.prov.Settle(pending.AttemptID, "succeeded")
	rec := e.op("reconcile", wire.OpRequest{AttemptID: pending.AttemptID})
	if len(rec.Settled) != 1 || rec.Settled[0].Status != wire.StatusApplied {
		t.Fatalf("reconcile under kill switch: %+v", rec)
	}
	e.op("kill-switch", wire.OpRequest{Engaged: &off})
	if r := e.propose(nc, "acme", "agent_email", refund("run_k", "s", "ord_k", 500)); r.Status != wire.StatusApplied {
		t.Fatalf("after release: %+v", r)
	}
}

// TestBackgroundReconciler: with reconcile_interval set, a pending hold
// settles without any operator once the provider decides it.
func TestBackgroundReconciler(t *testing.T) {
	e := startEnvWith(t, daemontest.Options{Config: func(cfg *config.Config) {
		cfg.Runtime.ReconcileInterval.Duration = 50 * time.Millisecond
	}})
	prov := e.prov
	prov.Script(provider.Pending, provider.Pending)
	nc := e.client("acme", "agent_email")
	applied := e.propose(nc, "acme", "agent_email", refund("run_bg", "bg-1", "ord_bg", 40000))
	failed := e.propose(nc, "acme", "agent_email", refund("run_bg", "bg-2", "ord_bg", 30000))
	if applied.Status != wire.StatusPending || failed.Status != wire.StatusPending {
		t.Fatalf("want two pending, got %s and %s", applied.Status, failed.Status)
	}
	prov.Settle(applied.AttemptID, "succeeded")
	prov.Settle(failed.AttemptID, "failed")
	want := wire.Balance{Limit: 100000, Committed: 40000, Available: 60000}
	deadline := time.Now().Add(15 * time.Second)
	for {
		rows := e.op("exposure", wire.OpRequest{Resource: "ord_bg"}).Exposure
		if len(rows) == 1 && rows[0].Balance == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reconciler did not settle the holds: %+v", rows)
		}
		time.Sleep(50 * time.Millisecond) // polling the operator view
	}
	if st := prov.Stats(); st.Calls != 2 || st.Queries < 2 {
		t.Fatalf("provider %+v", st)
	}
}

// TestModelSkipsNonEvents: a stored message that is not a valid event (only
// the runtime's own user can write one) is counted and skipped by the read
// model instead of blinding the operator verbs and the reconciler for good.
func TestModelSkipsNonEvents(t *testing.T) {
	e := startEnvWith(t, daemontest.Options{Config: func(cfg *config.Config) { cfg.Runtime.MetricsListen = "127.0.0.1:0" }})
	nc := e.client("acme", "agent_email")
	wantBalance(t, e.propose(nc, "acme", "agent_email", refund("run_x", "x1", "ord_x", 100)), 100, 0, 99900)
	if _, err := e.rt.NC.Request("ctx.ev.acme.noise", []byte(`{"not":"an event"}`), 5*time.Second); err != nil {
		t.Fatalf("store a non-event: %v", err)
	}
	wantBalance(t, e.propose(nc, "acme", "agent_email", refund("run_x", "x2", "ord_x", 200)), 300, 0, 99700)
	r := e.op("exposure", wire.OpRequest{Resource: "ord_x"})
	if !r.OK || len(r.Exposure) != 1 || r.Exposure[0].Committed != 300 {
		t.Fatalf("exposure after a non-event: %+v", r)
	}
	if n := e.rt.Gateway.Model().RefusedEvents("acme"); n != 1 {
		t.Fatalf("refused %d stored messages, want 1", n)
	}
	// Operators see it on /metrics, per tenant and in all.
	fams := scrape(t, e.rt)
	if v, ok := sample(fams, "contextos_readmodel_refused_events", map[string]string{"tenant": "acme"}); !ok || v != 1 {
		t.Fatalf("contextos_readmodel_refused_events{tenant=acme} %v (served: %v), want 1", v, ok)
	}
	if v, ok := sample(fams, "contextos_readmodel_refused_events", map[string]string{"tenant": "globex"}); !ok || v != 0 {
		t.Fatalf("contextos_readmodel_refused_events{tenant=globex} %v (served: %v), want 0", v, ok)
	}
	if v, ok := sample(fams, "contextos_exposure_view_skipped", nil); !ok || v != 1 {
		t.Fatalf("contextos_exposure_view_skipped %v (served: %v), want 1", v, ok)
	}
}

// TestMetricsEndpoint: the daemon serves held and committed per guarantee and,
// when runtime.metrics_resource_series asks, per resource in the Prometheus
// text format.
func TestMetricsEndpoint(t *testing.T) {
	e := startEnvWith(t, daemontest.Options{Config: func(cfg *config.Config) {
		cfg.Runtime.MetricsListen = "127.0.0.1:0"
		cfg.Runtime.MetricsResourceSeries = 10
	}})
	prov, rt := e.prov, e.rt
	prov.Script(provider.Pending)
	nc := e.client("acme", "agent_email")
	e.propose(nc, "acme", "agent_email", refund("run_m", "m1", "ord_m", 1500))
	e.propose(nc, "acme", "agent_email", refund("run_m", "m2", "ord_m", 2500))
	want := []string{`contextos_exposure_held{guarantee="refunds-per-order",resource="ord_m",resource_digest="",tenant="acme"} 1500`,
		`contextos_exposure_committed{guarantee="refunds-per-order",resource="ord_m",resource_digest="",tenant="acme"} 2500`,
		`contextos_guarantee_held{guarantee="refunds-per-order",tenant="acme"} 1500`}
	testenv.Eventually(t, func() bool { // the read model follows the stream
		resp, err := http.Get(rt.MetricsURL)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, w := range want {
			if !strings.Contains(string(body), w) {
				return false
			}
		}
		return true
	}, 15*time.Second, "the metrics to show ", want)
}

// TestProviderReceivesDigestedBytes: arguments sent in any JSON spelling
// reach the provider as the canonical bytes the action digest was made
// over; a lone surrogate escape is refused before anything is reserved.
func TestProviderReceivesDigestedBytes(t *testing.T) {
	e := startEnv(t)
	nc := e.client("acme", "agent_email")
	send := func(key, args string) wire.Reply {
		t.Helper()
		body := `{"run_id":"run_d","operation_key":"` + key + `","capability_id":"adp_payments.issue_refund","arguments":` + args + `}`
		msg, err := nc.Request(wire.ProposeSubject("acme", "agent_email"), []byte(body), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var r wire.Reply
		if err := json.Unmarshal(msg.Data, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	r := send("d1", `{ "currency":"INR", "amount_minor": 1.0E2, "order_id":"ord_\u0064" }`)
	if r.Status != wire.StatusApplied {
		t.Fatalf("proposal: %+v", r)
	}
	want := `{"amount_minor":100,"currency":"INR","order_id":"ord_d"}`
	var got string
	for _, rf := range e.prov.Refunds() {
		if rf.Key == r.AttemptID {
			got = string(rf.Args)
		}
	}
	if got != want {
		t.Fatalf("provider received %s, want the canonical %s", got, want)
	}
	cp, _ := e.rt.Config.Capability("adp_payments.issue_refund")
	digest, refusal := gateway.ActionDigest("acme", "agent_email", wire.Proposal{RunID: "run_d", CapabilityID: cp.ID, Arguments: []byte(want)}, cp)
	if refusal != nil || digest != r.ActionDigest {
		t.Fatalf("digest of the provider's body %s (%v), reply's %s", digest, refusal, r.ActionDigest)
	}
	for i, args := range []string{`{"order_id":"s_\ud800","amount_minor":1}`, `{"order_id":"s_\udc00","amount_minor":1}`} {
		before := e.prov.Stats().Calls
		r := send(fmt.Sprint("s", i), args)
		if r.Status != wire.StatusRefused || r.Code != wire.CodeRequestMalformed || e.prov.Stats().Calls != before {
			t.Fatalf("%s: %+v", args, r)
		}
	}
}
