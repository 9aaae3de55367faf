package tower

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/contextos/ledger/console"
	"github.com/contextos/ledger/exposure"
	"github.com/contextos/ledger/internal/testing/browsertest"
	"github.com/contextos/ledger/internal/testing/gatewaytest"
	"github.com/contextos/ledger/wire"
	"github.com/nats-io/nats.go"
)

// reviewConfig gives acme a two-person rule for limit raises above the
// guarantee's 100,000 and an operator, ops_carol, who may read, approve
// and change limits but not set guardrails.
func reviewConfig(text string) string {
	text = strings.Replace(text, `id = "acme"
unadmitted_runs = "unlimited"`, `id = "acme"
unadmitted_runs = "unlimited"
two_person = ["limit_raise"]
limit_raise_above = 100000`, 1)
	return strings.Replace(text, `  # towerd's configured operator`, `  [[tenants.operators]]
  id = "ops_carol"
  password = "carol-secret-passphrase"
  scopes = ["read", "approve", "limits"]

  # towerd's configured operator`, 1)
}

// untilShown reads the logs again (the page's refresh button) until css
// matches: the audit projector records the runtime's events shortly after
// they are appended, and the queue and history are read from the log.
func untilShown(t *testing.T, ctx context.Context, css string) { t.Helper(); until(t, ctx, css, true) }

// until reads the logs again until css matches (shown) or matches
// nothing (!shown).
func until(t *testing.T, ctx context.Context, css string, shown bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector(`+jsString(css)+`) !== null`))
		if err != nil {
			t.Fatalf("look for %s: %v", css, err)
		}
		if ok == shown {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s shown: %v", css, ok)
		}
		reload(t, ctx, deadline)
	}
}

// reload presses "Read and verify again" and waits for the page it loads:
// the page it leaves is marked, so that its own #logs does not pass for the
// new one's.
func reload(t *testing.T, ctx context.Context, deadline time.Time) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__stale = true; true`)); err != nil {
		t.Fatalf("mark the page: %v", err)
	}
	do(t, ctx, "read again", chromedp.Click(chromedp.ID("refresh")))
	for {
		fresh, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__stale === undefined && document.readyState === "complete" && document.getElementById("logs") !== null`))
		if err == nil && fresh {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page did not load again: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // the polling interval of a condition the browser decides
	}
}

// act clicks and waits for the page that shows what's outcome.
func act(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	actions = append(actions, chromedp.WaitVisible(chromedp.CSS(`#outcome[data-what=`+jsString(what)+`]`)))
	do(t, ctx, what, actions...)
}

func jsString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// TestBrowserTowerReview: in Chromium, an operator approves a pending
// approval and confirms another operator's two-person limit raise from
// tower's review queue, both recorded in her name; her guardrail is
// refused operator_scope_denied, shown with its code. An operator with the
// scope publishes a cap per proposal that the runtime's kernel enforces
// (guardrail_refused), grants a waiver that lets one named run through,
// and revokes it.
func TestBrowserTowerReview(t *testing.T) {
	ctx := browsertest.New(t)
	b := bootWith(t, reviewConfig)
	high := gatewaytest.Propose(t, b.conn("acme", "agent_email"), "acme", "agent_email", map[string]any{"run_id": "run_h", "operation_key": "h1",
		"capability_id": "adp_payments.issue_refund_high", "arguments": map[string]any{"order_id": "ord_h", "amount_minor": 500, "currency": "INR"}})
	if high.Code != wire.CodeApprovalRequired {
		t.Fatalf("%+v", high)
	}
	// ops_alice asks to raise the limit; the two-person rule holds it.
	alice := &console.Login{Tenant: "acme", Operator: "ops_alice", Conns: map[string]*nats.Conn{"": b.conn("acme", "ops_alice")}}
	var held wire.OpReply
	if err := alice.Call(context.Background(), "", "guarantee-set-limit", wire.SetLimitRequest{GuaranteeID: "refunds-per-order", Limit: 200000, Reason: "peak"}, &held); err != nil {
		t.Fatal(err)
	}
	if held.Code != wire.CodeSecondOperatorRequired {
		t.Fatalf("the limit raise: %+v", held)
	}
	requestID, _ := held.Data["request_id"].(string)
	_, keys := b.export(t.TempDir(), "acme", "ops_alice", func(exposure.View) bool { return true })
	srv := serveTower(t, `listen = "127.0.0.1:0"
[[runtimes]]
name = "us-1"
nats_url = "`+b.rt.URL+`"
  [[runtimes.tenants]]
  id = "acme"
  keys = "`+keys+`"
`)

	login := func(operator string) {
		t.Helper()
		do(t, ctx, "log in as "+operator, chromedp.Navigate(srv.URL), chromedp.WaitVisible(chromedp.ID("login")),
			chromedp.SendKeys(chromedp.ID("tenant"), "acme"), chromedp.SendKeys(chromedp.ID("operator"), operator),
			chromedp.SendKeys(chromedp.ID("password"), passwords["acme."+operator]), chromedp.Click(chromedp.ID("login")), chromedp.WaitVisible(chromedp.ID("logs")))
	}
	login("ops_carol")
	approval := `tr[data-approval="us-1/acme/` + high.ActionDigest + `"]`
	request := `tr[data-request="us-1/acme/` + requestID + `"]`
	untilShown(t, ctx, request)
	shot(t, ctx, "tower-queue")
	if got := cellText(t, ctx, request+" td:nth-child(5)"); got != "guarantee-set-limit" {
		t.Fatalf("the request's verb: %q", got)
	}
	act(t, ctx, "approve "+short(high.ActionDigest), chromedp.Click(chromedp.CSS(approval+" button.approve")))
	if got := cellText(t, ctx, `tr[data-outcome="us-1/acme"] td.ack`); got != "yes" {
		t.Fatalf("the approval: %q", got)
	}
	until(t, ctx, approval, false) // no longer waiting
	act(t, ctx, "confirm "+requestID, chromedp.Click(chromedp.CSS(request+" button.confirm")))
	if got := cellText(t, ctx, `tr[data-outcome="us-1/acme"] td.ack`); got != "yes" {
		t.Fatalf("the confirmation: %q", got)
	}
	// The raised limit is in force: 150,000 on one order passes the old
	// 100,000.
	if r := b.propose("acme", "agent_email", "big", "ord_big", 150000); r.Status != wire.StatusApplied {
		t.Fatalf("after the confirmed raise: %+v", r)
	}
	untilShown(t, ctx, `#history td.what`)
	for _, what := range []string{"approved", "confirmed"} {
		untilShown(t, ctx, `#history tr[data-decision="ops_carol `+what+`"]`)
	}

	// Carol holds no guardrails scope: the runtime refuses, with its code.
	act(t, ctx, "set guardrail refund_cap", chromedp.SendKeys(chromedp.ID("guardrail-id"), "refund_cap"),
		chromedp.SendKeys(chromedp.ID("guardrail-capability"), "adp_payments.issue_refund"), chromedp.SendKeys(chromedp.ID("guardrail-max"), "20000"),
		chromedp.Click(chromedp.ID("guardrail-set")))
	if got := cellText(t, ctx, `tr[data-outcome="us-1/acme"] td.code`); got != string(wire.CodeOperatorScopeDenied) {
		t.Fatalf("carol's guardrail: %q", got)
	}
	shot(t, ctx, "tower-scope-denied")
	if r := b.propose("acme", "agent_email", "k1", "ord_1", 30000); r.Status != wire.StatusApplied {
		t.Fatalf("a refund after the refused guardrail: %+v", r)
	}

	do(t, ctx, "log out", chromedp.Click(chromedp.ID("logout")), chromedp.WaitVisible(chromedp.ID("login")))
	login("ops_alice")
	act(t, ctx, "set guardrail refund_cap", chromedp.SendKeys(chromedp.ID("guardrail-id"), "refund_cap"),
		chromedp.SendKeys(chromedp.ID("guardrail-capability"), "adp_payments.issue_refund"), chromedp.SendKeys(chromedp.ID("guardrail-max"), "20000"),
		chromedp.SendKeys(chromedp.ID("guardrail-reason"), "fleet cap"), chromedp.Click(chromedp.ID("guardrail-set")))
	if got := cellText(t, ctx, `tr[data-outcome="us-1/acme"] td.ack`); got != "yes" {
		t.Fatalf("alice's guardrail: %q", got)
	}
	if r := b.propose("acme", "agent_email", "k2", "ord_2", 30000); r.Code != wire.CodeGuardrailRefused {
		t.Fatalf("a refund over the cap: %+v", r)
	}
	act(t, ctx, "grant waiver w1", chromedp.SendKeys(chromedp.ID("waiver-id"), "w1"), chromedp.SendKeys(chromedp.ID("waiver-guardrail"), "refund_cap"),
		chromedp.SendKeys(chromedp.ID("waiver-target"), "run_k3"), chromedp.SendKeys(chromedp.ID("waiver-reason"), "INC-9"),
		chromedp.Click(chromedp.ID("waiver-grant")))
	if got := cellText(t, ctx, `tr[data-outcome="us-1/acme"] td.ack`); got != "yes" {
		t.Fatalf("the waiver: %q", got)
	}
	if r := b.propose("acme", "agent_email", "k3", "ord_3", 30000); r.Status != wire.StatusApplied {
		t.Fatalf("the waived run: %+v", r)
	}
	if r := b.propose("acme", "agent_email", "k4", "ord_4", 30000); r.Code != wire.CodeGuardrailRefused {
		t.Fatalf("another run under the waiver: %+v", r)
	}
	untilShown(t, ctx, `tr[data-waiver="us-1/acme/w1"]`)
	untilShown(t, ctx, `tr[data-guardrail="us-1/acme/refund_cap"]`)
	if got := cellText(t, ctx, `tr[data-guardrail="us-1/acme/refund_cap"] td.rule`); got != "at most 20000 per proposal" {
		t.Fatalf("the guardrail's rule: %q", got)
	}
	shot(t, ctx, "tower-guardrails")
	act(t, ctx, "revoke waiver w1", chromedp.Click(chromedp.CSS(`tr[data-waiver="us-1/acme/w1"] button`)))
	if got := cellText(t, ctx, `tr[data-outcome="us-1/acme"] td.ack`); got != "yes" {
		t.Fatalf("the revocation: %q", got)
	}
	again := gatewaytest.Propose(t, b.conn("acme", "agent_email"), "acme", "agent_email", map[string]any{"run_id": "run_k3", "operation_key": "k3b",
		"capability_id": "adp_payments.issue_refund", "arguments": map[string]any{"order_id": "ord_3b", "amount_minor": 30000, "currency": "INR"}})
	if r := again; r.Code != wire.CodeGuardrailRefused {
		t.Fatalf("the run after its waiver was revoked: %+v", r)
	}
}
