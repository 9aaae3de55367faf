package console_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/wire"
)

// TestBrowserScopeDenied: an operator whose scopes are read and approve
// engages the kill switch from the console; the runtime's kernel refuses
// it operator_scope_denied, the page shows that code, and the tenant's
// proposals still go through.
func TestBrowserScopeDenied(t *testing.T) {
	ctx := newBrowser(t)
	e := startEnvWith(t, func(c *config.Config) {
		for i := range c.Tenants {
			for j := range c.Tenants[i].Operators {
				if o := &c.Tenants[i].Operators[j]; c.Tenants[i].ID == "acme" && o.ID == "ops_alice" {
					o.Scopes = []string{"read", "approve"}
				}
			}
		}
	})
	browserLogin(t, ctx, e, "acme", "ops_alice")
	do(t, ctx, "open the kill switch", chromedp.Navigate(e.con.URL+"/kill-switch"), chromedp.WaitVisible(chromedp.ID("kill-toggle")))
	do(t, ctx, "give a reason", chromedp.SendKeys(chromedp.ID("kill-reason"), "drill"),
		chromedp.Click(chromedp.ID("kill-toggle")), chromedp.WaitVisible(chromedp.ID("confirm")))
	do(t, ctx, "confirm", chromedp.Click(chromedp.ID("confirm")), chromedp.WaitVisible(chromedp.ID("flash")))
	if got := text(t, ctx, "#flash code"); got != string(wire.CodeOperatorScopeDenied) {
		t.Fatalf("the refusal's code: %q (flash %q)", got, text(t, ctx, "#flash"))
	}
	if f := text(t, ctx, "#flash"); !strings.Contains(f, "kill_switch") {
		t.Fatalf("the refusal does not name the scope: %q", f)
	}
	shot(t, ctx, "scope-denied")
	if r := e.propose(e.agent("acme", "agent_email"), "acme", "agent_email", refund(refundCap, "k1", "ord_1", 100)); r.Status != wire.StatusApplied {
		t.Fatalf("a proposal after the refused engagement: %+v", r)
	}
}
