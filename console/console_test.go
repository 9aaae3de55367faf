package console_test

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/console"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/internal/testing/testenv"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
	"github.com/nats-io/nats.go"
)

// row returns the exposure table's row of a resource.
func row(t testing.TB, page, resource string) string {
	t.Helper()
	i := strings.Index(page, `<tr data-resource="`+resource+`">`)
	if i < 0 {
		t.Fatalf("no exposure row for %s in\n%s", resource, page)
	}
	j := strings.Index(page[i:], "</tr>")
	return page[i : i+j]
}

func wantCells(t testing.TB, r string, limit, committed, held, available string) {
	t.Helper()
	for _, c := range []string{`<td class="num">` + limit + `<`, `committed">` + committed + `<`, `held">` + held + `<`, `available">` + available + `<`} {
		if !strings.Contains(r, c) {
			t.Fatalf("row %s lacks %s", r, c)
		}
	}
}

func TestConsoleLogin(t *testing.T) {
	e := startEnv(t)
	c := e.client()
	if status, page := c.get("/exposure"); status != http.StatusOK || !strings.Contains(page, `action="/login"`) {
		t.Fatalf("without a session the console shows the login form: %d", status)
	}
	for _, tc := range []struct {
		name, tenant, operator, password, want string
	}{
		{"wrong password", "acme", "ops_alice", "nope", "refused these credentials"},
		{"an agent", "acme", "agent_phone", passwords["acme.agent_phone"], "not an operator"},
		{"another tenant's operator", "globex", "ops_alice", passwords["acme.ops_alice"], "refused these credentials"},
		{"bad tenant", "ac me", "ops_alice", "x", "name a tenant"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, page := c.get("/login")
			status, page := c.post("/login", url.Values{"csrf": {csrfOf(t, page)}, "tenant": {tc.tenant}, "operator": {tc.operator},
				"password": {tc.password}}, nil)
			if status == http.StatusOK || !strings.Contains(page, tc.want) {
				t.Fatalf("%d, want a refusal naming %q:\n%s", status, tc.want, page)
			}
		})
	}
	// A login without the login form's token is refused.
	if status, _ := e.client().post("/login", url.Values{"tenant": {"acme"}, "operator": {"ops_alice"}, "password": {passwords["acme.ops_alice"]}}, nil); status != http.StatusForbidden {
		t.Fatalf("login without the form's token: %d", status)
	}
	page, csrf := c.login("acme", "ops_alice")
	if !strings.Contains(page, "No exposure recorded yet") {
		t.Fatalf("a fresh tenant shows no exposure:\n%s", page)
	}
	if status, _ := c.post("/logout", url.Values{"csrf": {csrf}}, nil); status != http.StatusOK {
		t.Fatalf("logout: %d", status)
	}
	if _, page := c.get("/exposure"); !strings.Contains(page, `action="/login"`) {
		t.Fatal("after logout the session is gone")
	}
}

// TestConsoleReconcile: the demo's pending hold appears with its next safe
// step and actions; reconciling it through the console settles it and the
// balance changes.
func TestConsoleReconcile(t *testing.T) {
	e := startEnv(t)
	r := e.pendingHold(15000)
	c := e.client()
	page, _ := c.login("acme", "ops_alice")
	wantCells(t, row(t, page, "ord_881"), "100,000", "0", "15,000", "85,000")
	for _, want := range []string{`data-attempt="` + r.AttemptID + `"`, "held", kernel.NextStepHeld, `href="/confirm/reconcile?attempt_id=` + r.AttemptID,
		`href="/confirm/assert-absence?attempt_id=` + r.AttemptID} {
		if !strings.Contains(page, want) {
			t.Fatalf("the holds table lacks %q:\n%s", want, page)
		}
	}
	if !regexp.MustCompile(`data-attempt="` + r.AttemptID + `"[\s\S]*?<td class="age">[0-9]+s</td>`).MatchString(page) {
		t.Fatalf("the hold shows no age in seconds:\n%s", page)
	}
	if strings.Contains(page, "/confirm/close-attempt?attempt_id="+r.AttemptID) {
		t.Fatal("a held attempt is offered close-attempt, which the kernel refuses for a started attempt")
	}
	// Not settled at the provider yet: reconciling reports no change.
	status, page := c.act("reconcile", url.Values{"attempt_id": {r.AttemptID}}, nil)
	if status != http.StatusOK || !strings.Contains(page, "provider reports no change") {
		t.Fatalf("reconcile of a still pending refund: %d\n%s", status, page)
	}
	e.prov.Settle(r.AttemptID, "succeeded")
	status, page = c.act("reconcile", url.Values{"attempt_id": {r.AttemptID}}, nil)
	if status != http.StatusOK || !strings.Contains(page, `class="flash ok"`) || !strings.Contains(page, "applied") {
		t.Fatalf("reconcile: %d\n%s", status, page)
	}
	wantCells(t, row(t, page, "ord_881"), "100,000", "15,000", "0", "85,000")
	if strings.Contains(page, `data-attempt="`+r.AttemptID+`"`) {
		t.Fatal("the settled hold is still listed")
	}
}

// TestConsoleAssertAbsence: the artifact reference is required; with it the
// hold is released under the operator's name.
func TestConsoleAssertAbsence(t *testing.T) {
	e := startEnv(t)
	r := e.pendingHold(15000)
	c := e.client()
	c.login("acme", "ops_alice")
	status, page := c.act("assert-absence", url.Values{"attempt_id": {r.AttemptID}}, nil)
	if status != http.StatusBadRequest || !strings.Contains(page, "Artifact reference is required") {
		t.Fatalf("assert-absence without an artifact: %d\n%s", status, page)
	}
	status, page = c.act("assert-absence", url.Values{"attempt_id": {r.AttemptID}}, url.Values{"artifact_ref": {"ticket:SUP-881"}})
	if status != http.StatusOK || !strings.Contains(page, "absence asserted by ops_alice with ticket:SUP-881") {
		t.Fatalf("assert-absence: %d\n%s", status, page)
	}
	wantCells(t, row(t, page, "ord_881"), "100,000", "0", "0", "100,000")
}

// TestConsoleCSRF: a state-changing request without the session's token,
// with another session's token, or from another origin is refused, and
// changes nothing.
func TestConsoleCSRF(t *testing.T) {
	e := startEnv(t)
	r := e.pendingHold(15000)
	e.prov.Settle(r.AttemptID, "succeeded")
	c := e.client()
	c.login("acme", "ops_alice")
	other := e.client()
	_, otherCSRF := other.login("acme", "ops_alice")
	_, page := c.get("/confirm/reconcile?attempt_id=" + r.AttemptID)
	csrf := csrfOf(t, page)
	form := func(token string) url.Values {
		return url.Values{"attempt_id": {r.AttemptID}, "csrf": {token}}
	}
	for _, tc := range []struct {
		name   string
		form   url.Values
		header http.Header
	}{
		{"no token", form(""), nil},
		{"another session's token", form(otherCSRF), nil},
		{"cross-site", form(csrf), http.Header{"Sec-Fetch-Site": {"cross-site"}}},
		{"another origin", form(csrf), http.Header{"Origin": {"http://evil.example"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if status, body := c.post("/act/reconcile", tc.form, tc.header); status != http.StatusForbidden {
				t.Fatalf("%d\n%s", status, body)
			}
		})
	}
	_, page = c.get("/exposure")
	wantCells(t, row(t, page, "ord_881"), "100,000", "0", "15,000", "85,000")
	if status, _ := c.post("/act/reconcile", form(csrf), nil); status != http.StatusOK {
		t.Fatalf("the same request with the token: %d", status)
	}
	_, page = c.get("/exposure")
	wantCells(t, row(t, page, "ord_881"), "100,000", "15,000", "0", "85,000")
}

// TestConsoleTenantIsolation: globex's operator sees none of acme's data,
// and naming acme's attempt (or acme itself) from globex's session reaches
// only globex: the tenant is the session's, never the request's.
func TestConsoleTenantIsolation(t *testing.T) {
	e := startEnv(t)
	r := e.pendingHold(15000)
	bob := e.client()
	_, csrf := bob.login("globex", "ops_bob")
	for _, path := range []string{"/exposure", "/kill-switch", "/authority", "/incidents", "/approvals"} {
		_, page := bob.get(path)
		for _, leak := range []string{"ord_881", r.AttemptID, "agent_phone", "acme"} {
			if strings.Contains(page, leak) {
				t.Fatalf("globex's %s shows %q:\n%s", path, leak, page)
			}
		}
	}
	status, page := bob.post("/act/close-attempt?tenant=acme", url.Values{"csrf": {csrf}, "attempt_id": {r.AttemptID}, "tenant": {"acme"}}, nil)
	if status != http.StatusOK || !strings.Contains(page, string(wire.CodeAttemptUnknown)) {
		t.Fatalf("globex closing acme's attempt: %d\n%s", status, page)
	}
	alice := e.client()
	page, _ = alice.login("acme", "ops_alice")
	wantCells(t, row(t, page, "ord_881"), "100,000", "0", "15,000", "85,000")
	// The console cannot be made to publish on another tenant's subject
	// either: the operator's own connection may not (the NATS server refuses).
	forged := &console.Login{Tenant: "acme", Operator: "ops_bob", Conns: map[string]*nats.Conn{"": sessionConn(t, e, bob)}}
	var reply wire.OpReply
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := forged.Call(ctx, "", "exposure", struct{}{}, &reply); err == nil {
		t.Fatalf("bob's connection reached acme's ops subject: %+v", reply)
	}
}

// sessionConn is the NATS connection of a client's session.
func sessionConn(t testing.TB, e *env, c *client) *nats.Conn {
	t.Helper()
	u, _ := url.Parse(e.con.URL)
	for _, ck := range c.hc.Jar.Cookies(u) {
		if ck.Name == console.CookieName {
			if l, ok := e.con.SessionLogin(ck.Value); ok {
				return l.Conns[""]
			}
		}
	}
	t.Fatal("no session")
	return nil
}

// TestConsoleKillSwitch: a reason is required; engaged, the agent's next
// proposal is refused; released, it proceeds.
func TestConsoleKillSwitch(t *testing.T) {
	e := startEnv(t)
	c := e.client()
	c.login("acme", "ops_alice")
	status, page := c.act("kill-switch-engage", url.Values{}, nil)
	if status != http.StatusBadRequest || !strings.Contains(page, "Reason is required") {
		t.Fatalf("engage without a reason: %d\n%s", status, page)
	}
	status, page = c.act("kill-switch-engage", url.Values{"reason": {"provider incident INC-42"}}, nil)
	if status != http.StatusOK || !strings.Contains(page, `id="kill-state"`) || !strings.Contains(page, "<b>Engaged</b>") {
		t.Fatalf("engage: %d\n%s", status, page)
	}
	// Who, when and why, from the verified audit chain.
	_, csrf := c.get("/kill-switch")
	waitFor(t, "the engagement in the verified chain", func() bool {
		_, page = c.post("/audit/verify", url.Values{"csrf": {csrfOf(t, csrf)}, "return": {"/kill-switch"}}, nil)
		return strings.Contains(page, `engaged</b> by <b>ops_alice</b>`) && strings.Contains(page, "provider incident INC-42")
	})
	agent := e.agent("acme", "agent_email")
	if r := e.propose(agent, "acme", "agent_email", refund(refundCap, "k1", "ord_1", 100)); r.Code != wire.CodeKillSwitchEngaged {
		t.Fatalf("proposal under the kill switch: %+v", r)
	}
	if _, page := c.get("/exposure"); !strings.Contains(page, `id="kill-banner"`) {
		t.Fatal("the exposure page does not say the kill switch is engaged")
	}
	status, page = c.act("kill-switch-release", url.Values{"reason": {"incident over"}}, nil)
	if status != http.StatusOK || !strings.Contains(page, "<b>Released</b>") {
		t.Fatalf("release: %d\n%s", status, page)
	}
	if r := e.propose(agent, "acme", "agent_email", refund(refundCap, "k2", "ord_1", 100)); r.Status != wire.StatusApplied {
		t.Fatalf("proposal after release: %+v", r)
	}
}

// TestConsoleLive: the live stream sends the re-rendered tables when the
// runtime's read model changes.
func TestConsoleLive(t *testing.T) {
	e := startEnv(t)
	c := e.client()
	c.login("acme", "ops_alice")
	resp, err := c.hc.Get(c.base + "/exposure/live")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	events := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var data strings.Builder
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "data: "):
				data.WriteString(line[len("data: "):] + "\n")
			case line == "":
				if data.Len() > 0 {
					events <- data.String()
					data.Reset()
				}
			}
		}
		close(events)
	}()
	next := func() string {
		select {
		case ev := <-events:
			return ev
		case <-time.After(10 * time.Second):
			t.Fatal("no live event")
		}
		return ""
	}
	if ev := next(); !strings.Contains(ev, "No exposure recorded yet") {
		t.Fatalf("first event:\n%s", ev)
	}
	e.pendingHold(15000)
	ev := next()
	wantCells(t, row(t, ev, "ord_881"), "100,000", "0", "15,000", "85,000")
}

// TestConsoleEscapes: what an agent controls (here a resource id) is shown
// escaped.
func TestConsoleEscapes(t *testing.T) {
	e := startEnv(t)
	evil := `<script>alert("x")</script>`
	r := e.propose(e.agent("acme", "agent_email"), "acme", "agent_email", refund(refundCap, "evil", evil, 100))
	if r.Status != wire.StatusApplied {
		t.Fatalf("%+v", r)
	}
	c := e.client()
	page, _ := c.login("acme", "ops_alice")
	if strings.Contains(page, evil) || !strings.Contains(page, "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;") {
		t.Fatalf("the resource is not escaped:\n%s", page)
	}
}

// TestConsoleAudit: the chain exported through the operator's connection
// verifies server-side, and the latest checkpoint is shown.
func TestConsoleAudit(t *testing.T) {
	e := startEnv(t)
	e.propose(e.agent("acme", "agent_email"), "acme", "agent_email", refund(refundCap, "a1", "ord_7", 100))
	c := e.client()
	_, csrf := c.login("acme", "ops_alice")
	// The runtime checkpoints uncovered records every 10 seconds.
	var page string
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, page = c.post("/audit/verify", url.Values{"csrf": {csrf}}, nil)
		if strings.Contains(page, `id="checkpoint"`) {
			break
		}
		if !strings.Contains(page, "<b>Verified</b>") || time.Now().After(deadline) {
			t.Fatalf("no verified chain with a checkpoint:\n%s", page)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if !strings.Contains(page, "<b>Verified</b>") {
		t.Fatalf("the chain with its checkpoint does not verify:\n%s", page)
	}
	if !strings.Contains(page, "contextos/audit/acme") {
		t.Fatalf("the checkpoint's origin is not acme's:\n%s", page)
	}
}

// TestConsoleSessionBound: beyond max_sessions of one tenant a login of
// that tenant ends the tenant's least recently used session, and its NATS
// connection; another tenant's session stays.
func TestConsoleSessionBound(t *testing.T) {
	e := startEnvWith(t, func(c *config.Config) { c.Console.MaxSessions = 2 })
	bob := e.client()
	bob.login("globex", "ops_bob")
	first, second, third := e.client(), e.client(), e.client()
	first.login("acme", "ops_alice")
	nc := sessionConn(t, e, first)
	second.login("acme", "ops_alice")
	third.login("acme", "ops_alice")
	if n, each := e.con.SessionCounts("acme", "globex"); n != 3 || each[0] != 2 || each[1] != 1 {
		t.Fatalf("%d sessions: %d of acme, %d of globex", n, each[0], each[1])
	}
	if _, page := first.get("/exposure"); !strings.Contains(page, `action="/login"`) {
		t.Fatal("acme's least recently used session survived")
	}
	if !nc.IsClosed() {
		t.Fatal("the ended session's NATS connection is open")
	}
	if _, page := second.get("/exposure"); !strings.Contains(page, `id="exposure"`) {
		t.Fatal("a recent session was ended")
	}
	// Many more logins of acme's operator never end globex's session.
	for range 4 {
		e.client().login("acme", "ops_alice")
	}
	if _, page := bob.get("/exposure"); !strings.Contains(page, `id="operator">ops_bob`) {
		t.Fatalf("acme's logins ended globex's session:\n%s", page)
	}
}

// TestConsoleLoginLimit: each tenant has its own login bucket. Wrong
// passwords for acme empty acme's bucket (even acme's right password is then
// refused) and leave globex's operator free to log in; a flood of logins
// naming unknown tenants drains only their shared bucket. The clock stands
// still, so no bucket refills during the test.
func TestConsoleLoginLimit(t *testing.T) {
	now := time.Now()
	e := startEnvOpts(t, nil, func(o *console.Options) { o.Now = func() time.Time { return now } })
	c := e.client()
	try := func(tenant, operator, password string) (int, string) {
		t.Helper()
		_, page := c.get("/login")
		return c.post("/login", url.Values{"csrf": {csrfOf(t, page)}, "tenant": {tenant}, "operator": {operator}, "password": {password}}, nil)
	}
	for i := range 10 {
		if status, page := try("acme", "ops_alice", "wrong"); status != http.StatusUnauthorized || !strings.Contains(page, "refused these credentials") {
			t.Fatalf("wrong password %d: %d\n%s", i, status, page)
		}
	}
	if status, page := try("acme", "ops_alice", passwords["acme.ops_alice"]); status != http.StatusTooManyRequests || !strings.Contains(page, "too many logins") {
		t.Fatalf("acme's bucket is not dry after 10 wrong passwords: %d\n%s", status, page)
	}
	for i := range 30 {
		if status, _ := try("nosuch"+string(rune('a'+i%26)), "ops_alice", "x"); status == http.StatusOK {
			t.Fatal("a login into an unknown tenant")
		}
	}
	if status, page := try("unknown", "ops_alice", "x"); status != http.StatusTooManyRequests {
		t.Fatalf("the unknown tenants' shared bucket is not dry: %d\n%s", status, page)
	}
	bob := e.client()
	if page, _ := bob.login("globex", "ops_bob"); !strings.Contains(page, `id="operator">ops_bob`) {
		t.Fatal("globex's operator cannot log in")
	}
}

// TestConsoleAuditWitness: with a witness configured, the audit page names
// it and shows that its cosignature of the newest checkpoint verified.
func TestConsoleAuditWitness(t *testing.T) {
	runtimeKey, err := codec.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "runtime.key")
	if err := codec.SavePrivateKey(keyFile, runtimeKey); err != nil {
		t.Fatal(err)
	}
	tw := testenv.Witness(t, "acme", codec.NewSigner(runtimeKey).Key.Public().(ed25519.PublicKey))
	e := startEnvWith(t, func(c *config.Config) {
		c.Runtime.KeyFile = keyFile
		c.Runtime.Witnesses = []config.WitnessConfig{{URL: tw.URL, Key: tw.Key}}
	})
	e.propose(e.agent("acme", "agent_email"), "acme", "agent_email", refund(refundCap, "w1", "ord_7", 100))
	c := e.client()
	_, csrf := c.login("acme", "ops_alice")
	var page string
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, page = c.post("/audit/verify", url.Values{"csrf": {csrf}}, nil)
		if strings.Contains(page, "cosigned the newest checkpoint") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint cosigned by the witness:\n%s", page)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if !strings.Contains(page, "<code>witness.test/w1</code>") || !strings.Contains(page, "<b>Verified</b>") {
		t.Fatalf("the witness is not named on a verified chain:\n%s", page)
	}
}
