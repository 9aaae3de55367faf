package console_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/console"
	"github.com/contextos/ledger/daemon"
	"github.com/contextos/ledger/internal/testing/daemontest"
	"github.com/contextos/ledger/internal/testing/gatewaytest"
	"github.com/contextos/ledger/internal/testing/provider"
	"github.com/contextos/ledger/wire"
	"github.com/nats-io/nats.go"
)

var passwords = map[string]string{"acme.agent_email": "email-secret-passphrase", "acme.agent_phone": "phone-secret-passphrase", "acme.ops_alice": "alice-secret-passphrase",
	"globex.agent_email": "globex-secret-passphrase", "globex.ops_bob": "bob-secret-passphrase"}

// env is a real runtime (embedded NATS with JetStream, the loopback
// provider) with its console.
type env struct {
	t    testing.TB
	rt   *daemon.Runtime
	prov *provider.Server
	con  *console.Server
}

func startEnv(t testing.TB) *env {
	t.Helper()
	return startEnvWith(t, nil)
}

// startEnvWith is startEnv with the configuration edited before boot.
func startEnvWith(t testing.TB, edit func(*config.Config)) *env {
	t.Helper()
	return startEnvOpts(t, edit, nil)
}

// startEnvOpts is startEnvWith with the console's options edited before
// it starts.
func startEnvOpts(t testing.TB, edit func(*config.Config), opts func(*console.Options)) *env {
	t.Helper()
	// The test starts the console itself, as the runtime does, with a
	// faster live poll; the runtime serves none of its own.
	var section config.ConsoleConfig
	d := daemontest.Boot(t, daemontest.Options{Console: true, Config: func(cfg *config.Config) {
		cfg.Console.Listen = "127.0.0.1:0"
		if edit != nil {
			edit(cfg)
		}
		section = cfg.Console
		cfg.Console.Listen = ""
	}})
	rt := d.RT
	if rt.ConsoleURL != "" {
		t.Fatalf("the runtime serves a console at %s without console.listen", rt.ConsoleURL)
	}
	o := console.Options{Config: section, NATSURL: rt.URL, Manifest: rt.Config, Poll: 100 * time.Millisecond}
	if opts != nil {
		opts(&o)
	}
	con, err := console.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(con.Close)
	return &env{t: t, rt: rt, prov: d.Provider, con: con}
}

// agent connects as an agent with its own inbox prefix.
func (e *env) agent(tenant, principal string) *nats.Conn {
	e.t.Helper()
	return gatewaytest.Connect(e.t, e.rt.URL, passwords[wire.UserName(tenant, principal)], tenant, principal)
}

func (e *env) propose(nc *nats.Conn, tenant, principal string, body any) wire.Reply {
	e.t.Helper()
	return gatewaytest.Propose(e.t, nc, tenant, principal, body)
}

func refund(capability, key, order string, amount int64) map[string]any {
	return map[string]any{"run_id": "run_" + key, "operation_key": key, "capability_id": capability,
		"arguments": map[string]any{"order_id": order, "amount_minor": amount, "currency": "INR"}}
}

const refundCap = "adp_payments.issue_refund"

// pendingHold proposes a refund the provider answers pending: an open hold
// on ord_881.
func (e *env) pendingHold(amount int64) wire.Reply {
	e.t.Helper()
	e.prov.Script(provider.Pending)
	r := e.propose(e.agent("acme", "agent_phone"), "acme", "agent_phone", refund(refundCap, "refund-ord_881-partial", "ord_881", amount))
	if r.Status != "pending" {
		e.t.Fatalf("want a pending reply, got %+v", r)
	}
	return r
}

// client is an operator's browser without the browser: a cookie jar.
type client struct {
	t    testing.TB
	base string
	hc   *http.Client
}

func (e *env) client() *client {
	jar, _ := cookiejar.New(nil)
	return &client{t: e.t, base: e.con.URL, hc: &http.Client{Jar: jar, Timeout: 30 * time.Second}}
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([0-9a-f]{64})"`)

func csrfOf(t testing.TB, page string) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token in the page:\n%s", page)
	}
	return m[1]
}

func (c *client) get(path string) (int, string) {
	c.t.Helper()
	resp, err := c.hc.Get(c.base + path)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (c *client) post(path string, form url.Values, header http.Header) (int, string) {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, c.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// login logs in and returns the first page and its CSRF token.
func (c *client) login(tenant, operator string) (string, string) {
	c.t.Helper()
	_, page := c.get("/login")
	status, page := c.post("/login", url.Values{"csrf": {csrfOf(c.t, page)}, "tenant": {tenant}, "operator": {operator},
		"password": {passwords[tenant+"."+operator]}}, nil)
	if status != http.StatusOK || !strings.Contains(page, `id="operator">`+operator) {
		c.t.Fatalf("login %s/%s: %d\n%s", tenant, operator, status, page)
	}
	return page, csrfOf(c.t, page)
}

// act confirms an action: the confirmation page, then its form.
func (c *client) act(name string, query, form url.Values) (int, string) {
	c.t.Helper()
	status, page := c.get("/confirm/" + name + "?" + query.Encode())
	if status != http.StatusOK {
		c.t.Fatalf("confirm %s: %d\n%s", name, status, page)
	}
	if form == nil {
		form = url.Values{}
	}
	for k, v := range query {
		if form.Get(k) == "" {
			form[k] = v
		}
	}
	form.Set("csrf", csrfOf(c.t, page))
	return c.post("/act/"+name, form, nil)
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// opCall sends an operator verb as acme's ops_alice, outside the console.
func (e *env) opCall(verb string, req, out any) error {
	user := wire.UserName("acme", "ops_alice")
	nc, err := nats.Connect(e.rt.URL, nats.UserInfo(user, passwords[user]), nats.CustomInboxPrefix(wire.InboxPrefix("acme", "ops_alice")))
	if err != nil {
		return err
	}
	defer nc.Close()
	l := &console.Login{Tenant: "acme", Operator: "ops_alice", Conns: map[string]*nats.Conn{"": nc}}
	return l.Call(context.Background(), "", verb, req, out)
}
