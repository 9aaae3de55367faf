package tower

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextos/ledger/console"
	"github.com/contextos/ledger/exposure"
	"github.com/contextos/ledger/wire"
)

// readAt is the time the page says a log was read.
func readAt(t *testing.T, page, log string) string {
	t.Helper()
	m := regexp.MustCompile(`data-log="` + regexp.QuoteMeta(log) + `">[\s\S]*?data-at="([^"]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no reading of %s on the page:\n%s", log, page)
	}
	return m[1]
}

// TestTowerLogin: towerd's page serves nothing of any tenant before a
// login, and no token it hands out acts; the command-line kill switch acts
// as the configured operator, the page's as the operator logged in, whom
// the runtime's signed event names. A session sees only the tenants it is
// logged into, its token is its own, readings are cached until asked for,
// and logins and sessions are bounded per tenant.
func TestTowerLogin(t *testing.T) {
	b := boot(t)
	if r := b.propose("acme", "agent_email", "k1", "ord_acme", 80000); r.Status != wire.StatusApplied {
		t.Fatalf("%+v", r)
	}
	if r := b.propose("globex", "agent_email", "g1", "ord_globex", 100); r.Status != wire.StatusApplied {
		t.Fatalf("%+v", r)
	}
	dir := t.TempDir()
	_, aKeys := b.export(dir, "acme", "ops_alice", func(v exposure.View) bool { return len(v.Resources) == 1 })
	_, gKeys := b.export(dir, "globex", "ops_bob", func(v exposure.View) bool { return len(v.Resources) == 1 })
	t.Setenv("TOWER_TEST_TOWER", passwords["acme.ops_tower"])
	cfg, err := ParseConfig([]byte(`listen = "127.0.0.1:0"
max_sessions = 2
[[runtimes]]
name = "us-1"
nats_url = "`+b.rt.URL+`"
  [[runtimes.tenants]]
  id = "acme"
  keys = "`+aKeys+`"
  operator = "ops_tower"
  password_env = "TOWER_TEST_TOWER"
  [[runtimes.tenants]]
  id = "globex"
  keys = "`+gKeys+`"
`), "")
	if err != nil {
		t.Fatal(err)
	}
	tw := New(cfg)
	// The clock moves only when the test says: readings' times, sessions
	// and login buckets (which never refill here) all read it.
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	tw.Now = func() time.Time { return time.Unix(0, clock.Load()) }
	srv, err := tw.Serve(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()

	anon := newClient(t, srv.URL)
	status, page := anon.get("/")
	if status != http.StatusOK || !strings.Contains(page, `id="login"`) {
		t.Fatalf("the page before a login: %d\n%s", status, page)
	}
	for _, leak := range []string{"acme", "globex", "ord_", "80,000", "80000", "data-log", "fleet-kill", "us-1"} {
		if strings.Contains(page, leak) {
			t.Fatalf("the page before a login shows %q:\n%s", leak, page)
		}
	}
	if status, _ := anon.get("/static/console.css"); status != http.StatusOK {
		t.Fatalf("static files: %d", status)
	}
	loginToken := csrfOf(t, page)
	for _, path := range []string{"/kill-switch", "/refresh", "/logout"} {
		if status, body := anon.post(path, url.Values{"csrf": {loginToken}, "reason": {"x"}, "engaged": {"false"}, "confirm": {"yes"}}); status != http.StatusForbidden {
			t.Fatalf("%s without a session, with the login form's token: %d\n%s", path, status, body)
		}
	}

	// The command line acts as the configured operator.
	for _, a := range tw.KillSwitch(context.Background(), true, "cli drill") {
		switch a.Runtime + "/" + a.Tenant {
		case "us-1/acme":
			if !a.Acknowledged || a.Operator != "ops_tower" {
				t.Fatalf("the CLI's engagement of acme: %+v", a)
			}
		case "us-1/globex":
			if a.Acknowledged || !strings.Contains(a.Error, "no operator configured") {
				t.Fatalf("the CLI reached globex without a configured operator: %+v", a)
			}
		}
	}
	if k := b.lastKill("acme", func(k *console.KillChange) bool { return k.Engaged }); k.Operator != "ops_tower" {
		t.Fatalf("the CLI's engagement is recorded as %+v", k)
	}

	for _, tc := range []struct{ operator, password, want string }{
		{"ops_alice", "wrong", "refused these credentials"},
		{"agent_email", passwords["acme.agent_email"], "not an operator"},
	} {
		if status, page := anon.tryLogin("acme", tc.operator, tc.password); status != http.StatusUnauthorized || !strings.Contains(page, tc.want) {
			t.Fatalf("login as %s: %d, want %q\n%s", tc.operator, status, tc.want, page)
		}
	}

	alice := newClient(t, srv.URL)
	page = alice.login("acme", "ops_alice")
	for _, want := range []string{`data-log="us-1/acme"`, `data-resource="us-1/acme/ord_acme"`, "live (read as ops_alice)"} {
		if !strings.Contains(page, want) {
			t.Fatalf("alice's page lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, "globex") {
		t.Fatalf("acme's operator sees globex:\n%s", page)
	}
	bob := newClient(t, srv.URL)
	bobPage := bob.login("globex", "ops_bob")
	if status, _ := alice.post("/kill-switch", url.Values{"csrf": {csrfOf(t, bobPage)}, "reason": {"x"}, "engaged": {"false"}, "confirm": {"yes"}}); status != http.StatusForbidden {
		t.Fatalf("alice's session with bob's token: %d", status)
	}
	if r := b.propose("acme", "agent_email", "k2", "ord_acme", 100); r.Code != wire.CodeKillSwitchEngaged {
		t.Fatalf("after the refused post: %+v", r)
	}
	status, page = alice.post("/kill-switch", url.Values{"csrf": {csrfOf(t, page)}, "reason": {"incident over"}, "engaged": {"false"}, "confirm": {"yes"}})
	want := `<tr data-ack="us-1/acme"><td>us-1</td><td>acme</td><td class="ack">yes</td><td>released</td><td>ops_alice</td>`
	if status != http.StatusOK || !strings.Contains(page, want) || strings.Contains(page, `data-ack="us-1/globex"`) {
		t.Fatalf("alice's release: %d\n%s", status, page)
	}
	if r := b.propose("acme", "agent_email", "k3", "ord_acme", 100); r.Status != wire.StatusApplied {
		t.Fatalf("after alice's release: %+v", r)
	}
	if k := b.lastKill("acme", func(k *console.KillChange) bool { return !k.Engaged }); k.Operator != "ops_alice" || k.Reason != "incident over" {
		t.Fatalf("the release is recorded as %+v, not as ops_alice's", k)
	}

	// The last verified reading is kept until the interval passes or an
	// operator asks to read again.
	at := readAt(t, page, "us-1/acme")
	clock.Add(int64(5 * time.Second))
	if _, page = alice.get("/"); readAt(t, page, "us-1/acme") != at {
		t.Fatal("a page view read the log again within the interval")
	}
	if status, page = alice.post("/refresh", url.Values{"csrf": {csrfOf(t, page)}}); status != http.StatusOK || readAt(t, page, "us-1/acme") == at {
		t.Fatalf("the refresh did not read the log again: %d", status)
	}

	// At most two logins of acme: a third ends acme's least recently used
	// login only. Bob's fleet session, logged into acme too, loses its acme
	// login and keeps globex.
	bob.addLogin(bobPage, "acme", "ops_alice")
	newClient(t, srv.URL).login("acme", "ops_alice")
	if _, page = alice.get("/"); !strings.Contains(page, `id="login"`) {
		t.Fatalf("acme's least recently used session survived:\n%s", page)
	}
	newClient(t, srv.URL).login("acme", "ops_alice")
	if _, page = bob.get("/"); !strings.Contains(page, `<tr data-login="globex">`) || strings.Contains(page, `<tr data-login="acme">`) {
		t.Fatalf("bob's session after two more acme logins:\n%s", page)
	}
	// Wrong passwords empty acme's login bucket, and only acme's.
	for i := 0; ; i++ {
		status, page := anon.tryLogin("acme", "ops_alice", "wrong")
		if status == http.StatusTooManyRequests {
			break
		}
		if status != http.StatusUnauthorized || i > 10 {
			t.Fatalf("wrong password %d: %d\n%s", i, status, page)
		}
	}
	if status, _ := anon.tryLogin("acme", "ops_alice", passwords["acme.ops_alice"]); status != http.StatusTooManyRequests {
		t.Fatalf("acme's bucket is not dry: %d", status)
	}
	newClient(t, srv.URL).login("globex", "ops_bob")
}
