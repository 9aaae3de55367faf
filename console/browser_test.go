package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/internal/testing/browsertest"
	"github.com/contextos/ledger/internal/testing/provider"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
)

// The browser tests drive Debian's chromium headless through chromedp
// (internal/testing/browsertest) against a real runtime and its console.

// newBrowser starts headless chromium with a fresh profile for one test.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	return browsertest.New(t)
}

func do(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// submit clicks a button that submits a form and waits for the page it
// leads to.
func submit(t *testing.T, ctx context.Context, what, id string) {
	t.Helper()
	if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.ID(id))); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// text waits for an element matching css, then reads its text in one
// script: the live part of a page is swapped whole (a hold's age changes
// every second), and a script runs between two swaps, never across one.
func text(t *testing.T, ctx context.Context, css string) string {
	t.Helper()
	js := fmt.Sprintf(`(function () { var n = document.querySelector(%q); return n ? n.innerText : null; })()`, css)
	if _, err := chromedp.Run(ctx, chromedp.WaitReady(chromedp.CSS(css))); err != nil {
		t.Fatalf("text of %s: %v", css, err)
	}
	s, err := chromedp.Run(ctx, chromedp.Evaluate[*string](js))
	if err != nil {
		t.Fatalf("text of %s: %v", css, err)
	}
	if s == nil {
		t.Fatalf("no element %s", css)
	}
	return strings.TrimSpace(*s)
}

// clickLive clicks an element of the page's live part, which the live
// stream swaps whole: found and clicked in one script, so that a swap cannot
// fall between finding the node and clicking it.
func clickLive(t *testing.T, ctx context.Context, what, css string) {
	t.Helper()
	waitJS(t, ctx, what, fmt.Sprintf(`(function () { var n = document.querySelector(%q); if (!n) return false; n.click(); return true; })()`, css))
}

// waitJS polls a JavaScript condition in the page until it is true.
func waitJS(t *testing.T, ctx context.Context, what, cond string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](cond, chromedp.WithPollingTimeout(15*time.Second), chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// shot saves a screenshot of the page as <name>.png in $CONSOLE_SCREENSHOTS,
// when set (docs/console.md shows them).
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("CONSOLE_SCREENSHOTS")
	if dir == "" {
		return
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join("..", dir) // relative to the repository root
	}
	b, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func browserLogin(t *testing.T, ctx context.Context, e *env, tenant, operator string) {
	t.Helper()
	do(t, ctx, "open the login page", chromedp.Navigate(e.con.URL+"/login"), chromedp.WaitVisible(chromedp.ID("login")))
	do(t, ctx, "fill the login form",
		chromedp.SendKeys(chromedp.ID("tenant"), tenant), chromedp.SendKeys(chromedp.ID("operator"), operator),
		chromedp.SendKeys(chromedp.ID("password"), passwords[tenant+"."+operator]))
	if tenant == "acme" {
		shot(t, ctx, "login")
	}
	do(t, ctx, "log in", chromedp.Click(chromedp.ID("login")), chromedp.WaitVisible(chromedp.ID("exposure")))
	if got := text(t, ctx, "#operator"); got != operator {
		t.Fatalf("logged in as %q", got)
	}
}

// cell reads a balance cell of the exposure row of resource.
func cellJS(resource, class string) string {
	return fmt.Sprintf(`(document.querySelector('tr[data-resource="%s"] td.%s') || {}).textContent`, resource, class)
}

// TestBrowserReconcile: the operator sees the demo's pending hold, reconciles
// it through its confirmation page and sees the balance change; another
// agent's refund then appears without a reload.
func TestBrowserReconcile(t *testing.T) {
	ctx := newBrowser(t)
	e := startEnv(t)
	e.propose(e.agent("acme", "agent_email"), "acme", "agent_email", refund(refundCap, "refund-ord_881", "ord_881", 80000))
	r := e.pendingHold(15000)
	browserLogin(t, ctx, e, "acme", "ops_alice")
	row := `tr[data-attempt="` + r.AttemptID + `"]`
	do(t, ctx, "see the pending hold", chromedp.WaitVisible(chromedp.CSS(row)))
	if got := text(t, ctx, `tr[data-resource="ord_881"] td.held`); got != "15,000" {
		t.Fatalf("held %q", got)
	}
	if got := text(t, ctx, row+" td:nth-child(10)"); got != kernel.NextStepHeld {
		t.Fatalf("next safe step %q", got)
	}
	if got := text(t, ctx, row+" td.age"); !strings.HasSuffix(got, "s") {
		t.Fatalf("the hold's age %q", got)
	}
	shot(t, ctx, "exposure")
	e.prov.Settle(r.AttemptID, "succeeded")
	clickLive(t, ctx, "the reconcile link", row+` a[data-action="reconcile"]`)
	do(t, ctx, "open the reconcile confirmation", chromedp.WaitVisible(chromedp.ID("confirm")))
	shot(t, ctx, "confirm-reconcile")
	do(t, ctx, "confirm", chromedp.Click(chromedp.ID("confirm")), chromedp.WaitVisible(chromedp.ID("flash")))
	if f := text(t, ctx, "#flash"); !strings.Contains(f, "applied") {
		t.Fatalf("flash %q", f)
	}
	waitJS(t, ctx, "the balance after reconciliation", cellJS("ord_881", "committed")+` === "95,000" && `+cellJS("ord_881", "held")+` === "0"`)
	shot(t, ctx, "exposure-reconciled")
	// A refund on another order, decided while the page is open, arrives by
	// the live stream.
	e.propose(e.agent("acme", "agent_email"), "acme", "agent_email", refund(refundCap, "refund-ord_882", "ord_882", 2500))
	waitJS(t, ctx, "the live update", cellJS("ord_882", "committed")+` === "2,500"`)
}

// TestBrowserApprove: the operator approves a high-risk proposal from the
// inbox; the agent's resend naming the approval is applied.
func TestBrowserApprove(t *testing.T) {
	ctx := newBrowser(t)
	e := startEnv(t)
	agent := e.agent("acme", "agent_email")
	p := refund(highCap, "big-refund", "ord_900", 50000)
	r := e.propose(agent, "acme", "agent_email", p)
	if r.Code != wire.CodeApprovalRequired {
		t.Fatalf("%+v", r)
	}
	browserLogin(t, ctx, e, "acme", "ops_alice")
	t.Run("inbox", func(t *testing.T) {
		(&env{t: t, rt: e.rt}).requireVerb("approvals", struct{}{})
		do(t, ctx, "open the inbox", chromedp.Navigate(e.con.URL+"/approvals"), chromedp.WaitVisible(chromedp.CSS(`tr[data-digest="`+r.ActionDigest+`"]`)))
		shot(t, ctx, "approvals")
	})
	// The inbox's Approve link (opened directly while the runtime does not
	// list approvals).
	do(t, ctx, "open the approval", chromedp.Navigate(e.con.URL+"/confirm/approve?action_digest="+r.ActionDigest+"&capability_id="+highCap),
		chromedp.WaitVisible(chromedp.ID("confirm")))
	shot(t, ctx, "confirm-approve")
	do(t, ctx, "approve", chromedp.Click(chromedp.ID("confirm")), chromedp.WaitVisible(chromedp.ID("flash")))
	m := approvalIDRE.FindStringSubmatch(text(t, ctx, "#flash"))
	if m == nil {
		t.Fatalf("no approval id in %q", text(t, ctx, "#flash"))
	}
	p["approval_id"], p["operation_key"] = m[1], "big-refund-approved"
	if r2 := e.propose(agent, "acme", "agent_email", p); r2.Status != wire.StatusApplied {
		t.Fatalf("resend: %+v", r2)
	}
	// The read model may not have folded the settlement yet when the page
	// loads; the live stream brings it.
	do(t, ctx, "see it committed", chromedp.Navigate(e.con.URL+"/exposure"), chromedp.WaitVisible(chromedp.CSS(`tr[data-resource="ord_900"]`)))
	waitJS(t, ctx, "the committed refund", cellJS("ord_900", "committed")+` === "50,000"`)
}

// TestBrowserKillSwitch: engaged from the console with a reason, the agent's
// next proposal is refused kill_switch_engaged.
func TestBrowserKillSwitch(t *testing.T) {
	ctx := newBrowser(t)
	e := startEnv(t)
	browserLogin(t, ctx, e, "acme", "ops_alice")
	do(t, ctx, "open the kill switch", chromedp.Navigate(e.con.URL+"/kill-switch"), chromedp.WaitVisible(chromedp.ID("kill-toggle")))
	shot(t, ctx, "kill-switch-released")
	do(t, ctx, "give a reason", chromedp.SendKeys(chromedp.ID("kill-reason"), "provider incident INC-42"),
		chromedp.Click(chromedp.ID("kill-toggle")), chromedp.WaitVisible(chromedp.ID("confirm")))
	do(t, ctx, "confirm", chromedp.Click(chromedp.ID("confirm")), chromedp.WaitVisible(chromedp.ID("flash")))
	if got := text(t, ctx, "#kill-state"); !strings.HasPrefix(got, "Engaged") {
		t.Fatalf("kill switch %q", got)
	}
	// Who, when and why, read from the verified audit chain (the audit
	// projector records the change shortly after it is made).
	deadline := time.Now().Add(15 * time.Second)
	for {
		submit(t, ctx, "read the history", "kill-history")
		do(t, ctx, "the history", chromedp.WaitVisible(chromedp.ID("kill-audit")))
		if got := text(t, ctx, "#kill-audit"); strings.Contains(got, "ops_alice") && strings.Contains(got, "INC-42") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the verified chain does not show the engagement: %q", text(t, ctx, "#kill-audit"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	shot(t, ctx, "kill-switch-engaged")
	if r := e.propose(e.agent("acme", "agent_email"), "acme", "agent_email", refund(refundCap, "k1", "ord_1", 100)); r.Code != wire.CodeKillSwitchEngaged {
		t.Fatalf("proposal under the kill switch: %+v", r)
	}
	do(t, ctx, "see the banner", chromedp.Navigate(e.con.URL+"/exposure"), chromedp.WaitVisible(chromedp.ID("kill-banner")))
}

// TestBrowserTenants: globex's operator sees none of acme's data.
func TestBrowserTenants(t *testing.T) {
	ctx := newBrowser(t)
	e := startEnv(t)
	r := e.pendingHold(15000)
	browserLogin(t, ctx, e, "globex", "ops_bob")
	for _, path := range []string{"/exposure", "/approvals", "/incidents", "/authority", "/kill-switch"} {
		do(t, ctx, "open "+path, chromedp.Navigate(e.con.URL+path), chromedp.WaitVisible(chromedp.CSS("main h1")))
		body := text(t, ctx, "body")
		for _, leak := range []string{"ord_881", r.AttemptID, "agent_phone", "acme"} {
			if strings.Contains(body, leak) {
				t.Fatalf("globex's %s shows %q:\n%s", path, leak, body)
			}
		}
	}
}

// TestBrowserForgery: a page on another origin that posts to the console
// with the operator's cookies, and a same-origin request without the
// session's token, are both refused; the kill switch stays released.
func TestBrowserForgery(t *testing.T) {
	ctx := newBrowser(t)
	e := startEnv(t)
	browserLogin(t, ctx, e, "acme", "ops_alice")
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `<!doctype html><form id="f" method="post" action="%s/act/kill-switch-engage">
<input name="reason" value="forged"><input name="csrf" value="guess"></form><script>document.getElementById("f").submit()</script>`, e.con.URL)
	}))
	defer evil.Close()
	do(t, ctx, "visit the forging page", chromedp.Navigate(evil.URL))
	waitJS(t, ctx, "the console's answer", `location.href.startsWith("`+e.con.URL+`") && document.readyState === "complete"`)
	if body := text(t, ctx, "body"); !strings.Contains(body, "refused") {
		t.Fatalf("the forged post was not refused: %q", body)
	}
	do(t, ctx, "back to the console", chromedp.Navigate(e.con.URL+"/exposure"), chromedp.WaitVisible(chromedp.ID("exposure")))
	status, err := chromedp.Run(ctx, chromedp.Evaluate[int](`fetch("/act/kill-switch-engage", {method: "POST",
		headers: {"Content-Type": "application/x-www-form-urlencoded"}, body: "reason=injected"}).then(r => r.status)`, chromedp.EvalAwaitPromise))
	if err != nil || status != http.StatusForbidden {
		t.Fatalf("a post without the token: %d %v", status, err)
	}
	var reply wire.OpReply
	if err := e.opCall("kill-switch", struct{}{}, &reply); err != nil || reply.KillSwitch == nil || *reply.KillSwitch {
		t.Fatalf("the kill switch after the forgeries: %+v %v", reply, err)
	}
}

// TestBrowserPages renders the incidents, authority and audit pages (and
// verifies the chain from the audit page).
func TestBrowserPages(t *testing.T) {
	ctx := newBrowser(t)
	e := startEnv(t)
	e.prov.Script(provider.Pending)
	r := e.pendingHold(15000)
	browserLogin(t, ctx, e, "acme", "ops_alice")
	do(t, ctx, "revoke", chromedp.Navigate(e.con.URL+"/confirm/revoke?principal=agent_email&capability_id="+highCap+"&reason=no+more+high-risk+refunds"),
		chromedp.WaitVisible(chromedp.ID("confirm")))
	do(t, ctx, "confirm the revocation", chromedp.Click(chromedp.ID("confirm")), chromedp.WaitVisible(chromedp.ID("authority")))
	deadline := time.Now().Add(15 * time.Second)
	for {
		submit(t, ctx, "read the grants from the chain", "authority-history")
		do(t, ctx, "the changes", chromedp.WaitVisible(chromedp.ID("authority")))
		if ok, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`!!document.querySelector('tr[data-agent="agent_email"] .lacks[data-capability="`+highCap+`"]')`)); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the revocation does not show from the verified chain")
		}
		time.Sleep(100 * time.Millisecond)
	}
	shot(t, ctx, "authority")
	do(t, ctx, "incidents", chromedp.Navigate(e.con.URL+"/incidents"), chromedp.WaitVisible(chromedp.ID("incidents")))
	do(t, ctx, "assert absence", chromedp.Navigate(e.con.URL+"/confirm/assert-absence?attempt_id="+r.AttemptID), chromedp.WaitVisible(chromedp.ID("f-artifact_ref")),
		chromedp.SendKeys(chromedp.ID("f-artifact_ref"), "ticket:SUP-881"))
	shot(t, ctx, "confirm-assert-absence")
	do(t, ctx, "confirm", chromedp.Click(chromedp.ID("confirm")), chromedp.WaitVisible(chromedp.ID("flash")))
	// The provider then reports the refund applied: the runtime refuses the
	// contradicting observation and records an incident.
	e.prov.Settle(r.AttemptID, "succeeded")
	var reply wire.OpReply
	if err := e.opCall("reconcile", wire.OpRequest{AttemptID: r.AttemptID}, &reply); err != nil {
		t.Fatal(err)
	}
	t.Run("incidents", func(t *testing.T) {
		(&env{t: t, rt: e.rt}).requireVerb("incidents", struct{}{})
		do(t, ctx, "incidents", chromedp.Navigate(e.con.URL+"/incidents"), chromedp.WaitVisible(chromedp.ID("incidents")))
		waitJS(t, ctx, "the incident", `document.getElementById("incidents").textContent.includes("`+r.AttemptID+`")`)
		shot(t, ctx, "incidents")
	})
	// The runtime checkpoints uncovered records every 10 seconds.
	deadline = time.Now().Add(30 * time.Second)
	for {
		do(t, ctx, "open the audit page", chromedp.Navigate(e.con.URL+"/audit"), chromedp.WaitVisible(chromedp.ID("verify")))
		submit(t, ctx, "verify the chain", "verify")
		do(t, ctx, "the result", chromedp.WaitVisible(chromedp.ID("audit-result")))
		if got := text(t, ctx, "#audit-result"); !strings.HasPrefix(got, "Verified") {
			t.Fatalf("audit: %q", got)
		}
		if ok, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`!!document.getElementById("checkpoint")`)); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no checkpoint")
		}
		time.Sleep(time.Second)
	}
	shot(t, ctx, "audit")
}

// TestBrowserApprovalsNotBlinded: one agent floods the inbox with 105
// approval requests whose order ids are 60 KB each; another agent's request
// is still reached: the inbox shows a page of 100 with the long ids
// shortened, its next link leads to the other agent's request, and its
// approval's confirmation page finds it.
func TestBrowserApprovalsNotBlinded(t *testing.T) {
	ctx := newBrowser(t)
	e := startEnvWith(t, func(c *config.Config) {
		for i := range c.Tenants[0].Agents {
			if a := &c.Tenants[0].Agents[i]; a.ID == "agent_phone" {
				a.Capabilities = append(a.Capabilities, highCap)
			}
		}
	})
	flood := e.agent("acme", "agent_email")
	long := strings.Repeat("o", 60<<10)
	for i := 0; i < 105; i++ {
		if r := e.propose(flood, "acme", "agent_email", refund(highCap, fmt.Sprint("flood-", i), fmt.Sprint(long, i), 100)); r.Code != wire.CodeApprovalRequired {
			t.Fatalf("flood %d: %+v", i, r)
		}
	}
	mine := e.propose(e.agent("acme", "agent_phone"), "acme", "agent_phone", refund(highCap, "phone-refund", "ord_77", 500))
	if mine.Code != wire.CodeApprovalRequired {
		t.Fatalf("agent_phone's request: %+v", mine)
	}
	browserLogin(t, ctx, e, "acme", "ops_alice")
	do(t, ctx, "open the inbox", chromedp.Navigate(e.con.URL+"/approvals"), chromedp.WaitVisible(chromedp.ID("approvals")))
	waitJS(t, ctx, "a first page of 100 requests", `document.querySelectorAll("#approvals tbody tr").length === 100`)
	if got := text(t, ctx, "#approvals tbody tr:first-child pre"); strings.Contains(got, long) || !strings.Contains(got, "sha256:") {
		t.Fatalf("a flooded request's arguments shown as %d bytes: %.200s", len(got), got)
	}
	waitJS(t, ctx, "agent_phone's request not on the first page", `document.querySelector('tr[data-digest="`+mine.ActionDigest+`"]') === null`)
	do(t, ctx, "the next page", chromedp.Click(chromedp.ID("next-page")), chromedp.WaitVisible(chromedp.CSS(`tr[data-digest="`+mine.ActionDigest+`"]`)))
	if n := text(t, ctx, `tr[data-digest="`+mine.ActionDigest+`"] td:nth-child(2)`); n != "agent_phone" {
		t.Fatalf("principal %q", n)
	}
	waitJS(t, ctx, "the last page has no next link", `document.getElementById("next-page") === null && document.getElementById("first-page") !== null`)
	do(t, ctx, "approve agent_phone's request", chromedp.Click(chromedp.CSS(`tr[data-digest="`+mine.ActionDigest+`"] a[data-action="approve"]`)),
		chromedp.WaitVisible(chromedp.ID("confirm")))
	if got := text(t, ctx, "main"); !strings.Contains(got, "ord_77") {
		t.Fatalf("the confirmation page does not show the request:\n%s", got)
	}
}

// TestBrowserOutcomes: after a known sequence (one refund applied, one
// refused over the ceiling, one left pending by the provider) the Outcomes
// page shows the report's figures for the guarantee.
func TestBrowserOutcomes(t *testing.T) {
	ctx := newBrowser(t)
	e := startEnv(t)
	agent := e.agent("acme", "agent_email")
	if r := e.propose(agent, "acme", "agent_email", refund(refundCap, "out-1", "ord_881", 80000)); r.Status != wire.StatusApplied {
		t.Fatalf("%+v", r)
	}
	if r := e.propose(agent, "acme", "agent_email", refund(refundCap, "out-2", "ord_881", 30000)); r.Code != wire.CodeExceeded {
		t.Fatalf("%+v", r)
	}
	e.pendingHold(15000)
	browserLogin(t, ctx, e, "acme", "ops_alice")
	row := `tr[data-guarantee="refunds-per-order"]`
	do(t, ctx, "open the outcomes", chromedp.Navigate(e.con.URL+"/outcomes"), chromedp.WaitVisible(chromedp.CSS(row)))
	for class, want := range map[string]string{"applied": "1", "applied-amount": "80000", "pending": "1", "unknown": "0",
		"stranded-lt_1m": "15000 (1)", "denials": "shared_guarantee_exceeded 1"} {
		if got := strings.Join(strings.Fields(text(t, ctx, row+" td."+class)), " "); got != want {
			t.Errorf("%s: %q, want %q", class, got, want)
		}
	}
	shot(t, ctx, "outcomes")
}
