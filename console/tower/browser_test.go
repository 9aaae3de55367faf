package tower

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/contextos/ledger/console"
	"github.com/contextos/ledger/exposure"
	"github.com/contextos/ledger/internal/testing/browsertest"
	"github.com/contextos/ledger/wire"
)

// shot saves a screenshot of the page as <name>.png in $CONSOLE_SCREENSHOTS,
// when set (docs/console.md shows them).
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("CONSOLE_SCREENSHOTS")
	if dir == "" {
		return
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join("..", "..", dir) // relative to the repository root
	}
	b, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func do(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// cellText reads the text of the element matching css, once it is there.
func cellText(t *testing.T, ctx context.Context, css string) string {
	t.Helper()
	do(t, ctx, "wait for "+css, chromedp.WaitVisible(chromedp.CSS(css)))
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%q).innerText`, css)))
	if err != nil {
		t.Fatalf("text of %s: %v", css, err)
	}
	return strings.TrimSpace(s)
}

// TestBrowserTower: in Chromium, an operator logs into towerd's page (which
// shows only the login form before), adds a second tenant to the session,
// and engages the fleet kill switch; both runtimes' tenants acknowledge,
// the agents are refused, and the runtime's signed event names the
// operator logged in.
func TestBrowserTower(t *testing.T) {
	ctx := browsertest.New(t)
	b := boot(t)
	if r := b.propose("acme", "agent_email", "k1", "ord_1", 80000); r.Status != wire.StatusApplied {
		t.Fatalf("%+v", r)
	}
	for i := range 5 {
		b.propose("globex", "agent_email", fmt.Sprintf("g%d", i), fmt.Sprintf("ord_g%d", i), 100)
	}
	dir := t.TempDir()
	entries, keys := b.export(dir, "acme", "ops_alice", func(v exposure.View) bool { return len(v.Resources) == 1 })
	_, gKeys := b.export(t.TempDir(), "globex", "ops_bob", func(v exposure.View) bool { return len(v.Resources) == 5 })
	srv := serveTower(t, `listen = "127.0.0.1:0"
max_rows_per_tenant = 3
[[runtimes]]
name = "eu-1-copy"
  [[runtimes.tenants]]
  id = "acme"
  entries = "`+tamper(t, entries)+`"
  keys = "`+keys+`"
[[runtimes]]
name = "us-1"
nats_url = "`+b.rt.URL+`"
  [[runtimes.tenants]]
  id = "acme"
  keys = "`+keys+`"
  [[runtimes.tenants]]
  id = "globex"
  keys = "`+gKeys+`"
`)

	do(t, ctx, "open towerd", chromedp.Navigate(srv.URL), chromedp.WaitVisible(chromedp.ID("login")))
	if ok, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`!document.getElementById("logs") && !document.getElementById("fleet-kill")`)); !ok {
		t.Fatal("the page shows the fleet before a login")
	}
	do(t, ctx, "fill the login form", chromedp.SendKeys(chromedp.ID("tenant"), "acme"), chromedp.SendKeys(chromedp.ID("operator"), "ops_alice"),
		chromedp.SendKeys(chromedp.ID("password"), passwords["acme.ops_alice"]))
	shot(t, ctx, "tower-login")
	do(t, ctx, "log in", chromedp.Click(chromedp.ID("login")), chromedp.WaitVisible(chromedp.ID("logs")))
	if got := cellText(t, ctx, `tr[data-login="acme"] td.operator`); got != "ops_alice" {
		t.Fatalf("logged in as %q", got)
	}
	do(t, ctx, "log into globex too", chromedp.SendKeys(chromedp.ID("tenant"), "globex"), chromedp.SendKeys(chromedp.ID("operator"), "ops_bob"),
		chromedp.SendKeys(chromedp.ID("password"), passwords["globex.ops_bob"]), chromedp.Click(chromedp.ID("add-login")),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-login="globex"]`)))
	do(t, ctx, "engage the fleet kill switch", chromedp.SendKeys(chromedp.ID("reason"), "provider incident INC-7"),
		chromedp.Click(chromedp.ID("confirm")), chromedp.Click(chromedp.ID("engage")), chromedp.WaitVisible(chromedp.ID("acks")))
	for _, log := range []string{"us-1/acme", "us-1/globex"} {
		if got := cellText(t, ctx, `tr[data-ack="`+log+`"] td.ack`); got != "yes" {
			t.Fatalf("%s acknowledged %q", log, got)
		}
	}
	if got := cellText(t, ctx, `tr[data-ack="eu-1-copy/acme"] td.ack`); got != "no" {
		t.Fatalf("a file's runtime acknowledged %q", got)
	}
	shot(t, ctx, "tower")
	for _, tenant := range []string{"acme", "globex"} {
		if r := b.propose(tenant, "agent_email", "after", "ord_x", 100); r.Code != wire.CodeKillSwitchEngaged {
			t.Fatalf("%s after the fleet kill switch: %+v", tenant, r)
		}
	}
	if k := b.lastKill("acme", func(k *console.KillChange) bool { return k.Engaged }); k.Operator != "ops_alice" || k.Reason != "provider incident INC-7" {
		t.Fatalf("acme's engagement is recorded as %+v", k)
	}
	if k := b.lastKill("globex", func(k *console.KillChange) bool { return k.Engaged }); k.Operator != "ops_bob" {
		t.Fatalf("globex's engagement is recorded as %+v", k)
	}
}
