package daemon_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/daemon"
	"github.com/contextos/ledger/internal/testing/daemontest"
	"github.com/contextos/ledger/internal/testing/testenv"
	"github.com/contextos/ledger/wire"
	"github.com/nats-io/nats.go"
	"golang.org/x/crypto/bcrypt"
)

// TestAuthBcryptPasswords: a principal whose configured password is a
// bcrypt hash (as `contextosd hash-password` makes) logs in to the
// embedded server with the password behind it, and not with the hash.
func TestAuthBcryptPasswords(t *testing.T) {
	const agentPW, opPW = "a-long-agent-passphrase", "a-long-operator-passphrase"
	agentHash, err := config.HashPassword([]byte(agentPW), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	opHash, err := bcrypt.GenerateFromPassword([]byte(opPW), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	e := startEnvWith(t, daemontest.Options{Of: &daemontest.Daemon{Dir: t.TempDir(), ProviderURL: deadURL(t)}, Config: func(cfg *config.Config) {
		acme, _ := cfg.Tenant("acme")
		agent, _ := acme.Agent("agent_email")
		agent.Password = agentHash
		acme.Operators[0].Password = string(opHash)
	}})
	rt := e.rt
	acme, _ := rt.Config.Tenant("acme")
	for _, c := range []struct {
		user, pw string
		ok       bool
	}{
		{wire.UserName("acme", "agent_email"), agentPW, true},
		{wire.UserName("acme", acme.Operators[0].ID), opPW, true},
		{wire.UserName("acme", "agent_email"), agentHash, false},
		{wire.UserName("acme", acme.Operators[0].ID), string(opHash), false},
		{wire.UserName("acme", "agent_email"), opPW, false},
	} {
		nc, err := nats.Connect(rt.URL, nats.UserInfo(c.user, c.pw), nats.NoReconnect())
		if err == nil {
			nc.Close()
		}
		if (err == nil) != c.ok {
			t.Errorf("%s with %q: err = %v, want ok=%v", c.user, c.pw, err, c.ok)
		}
	}
}

// TestAuthFailuresCounted: every connection the embedded server refuses at
// authentication (a wrong password, an unknown user, none at all) raises
// contextos_auth_failures_total{door="nats"}, as the server reports them; a good login does not. The guessed user name is no label.
func TestAuthFailuresCounted(t *testing.T) {
	e, _ := bootObserved(t, deadURL(t), daemon.BootOptions{}, nil)
	failures := func() float64 {
		v, ok := sample(scrape(t, e.rt), "contextos_auth_failures_total", map[string]string{"door": "nats"})
		if !ok {
			t.Fatal("no contextos_auth_failures_total{door=\"nats\"} series")
		}
		return v
	}
	for _, door := range []string{"mcp", "console"} {
		if _, ok := sample(scrape(t, e.rt), "contextos_auth_failures_total", map[string]string{"door": door}); !ok {
			t.Fatalf("no contextos_auth_failures_total{door=%q} series", door)
		}
	}
	if v := failures(); v != 0 {
		t.Fatalf("failures before any guess: %v", v)
	}
	good := e.client("acme", "agent_email")
	good.Close()
	guesses := []nats.Option{
		nats.UserInfo(wire.UserName("acme", "agent_email"), "wrong-password-guess"),
		nats.UserInfo(wire.UserName("acme", "agent_email"), passwords["acme.agent_chat"]),
		nats.UserInfo("acme.nobody", "wrong-password-guess"),
		nats.UserInfo("contextosd", "wrong-password-guess"),
		nats.Name("no credentials"),
	}
	for i, o := range guesses {
		nc, err := nats.Connect(e.rt.URL, o, nats.NoReconnect())
		if err == nil {
			nc.Close()
			t.Fatalf("the server accepted guess %d", i)
		}
	}
	want := float64(len(guesses))
	testenv.Eventually(t, func() bool { return failures() == want }, 5*time.Second, "auth failures counted")
	fams := scrape(t, e.rt)
	if n := len(fams["contextos_auth_failures_total"].Metric); n != 3 {
		t.Fatalf("contextos_auth_failures_total has %d series, want the 3 doors", n)
	}
}

// TestAuthFailuresCountedMCPAndConsole: a request with a bearer token that
// names no agent raises contextos_auth_failures_total{door="mcp"}, and a
// console login with a wrong password raises {door="console"} (and, since
// the console logs in through the server, {door="nats"} too).
func TestAuthFailuresCountedMCPAndConsole(t *testing.T) {
	e, _ := bootObserved(t, deadURL(t), daemon.BootOptions{}, func(c *config.Config) {
		c.MCP.Listen, c.Console.Listen = "127.0.0.1:0", "127.0.0.1:0"
		c.Console.MaxSessions, c.Console.SessionIdle.Duration = 4, time.Minute
	})
	count := func(door string) float64 {
		v, _ := sample(scrape(t, e.rt), "contextos_auth_failures_total", map[string]string{"door": door})
		return v
	}
	for i := 0; i < 3; i++ {
		req, err := http.NewRequest(http.MethodPost, e.rt.MCPURL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer a-guessed-token-0123456789abcdef")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("a guessed token: %s", resp.Status)
		}
	}
	if got := count("mcp"); got != 3 {
		t.Fatalf("mcp failures = %v, want 3", got)
	}

	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Get(e.rt.ConsoleURL + "/login")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token in the login page:\n%s", page)
	}
	resp, err = hc.PostForm(e.rt.ConsoleURL+"/login", url.Values{"csrf": {string(m[1])}, "tenant": {"acme"}, "operator": {"ops_alice"},
		"password": {"a-wrong-password-guess"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a wrong console password: %s", resp.Status)
	}
	if got := count("console"); got != 1 {
		t.Fatalf("console failures = %v, want 1", got)
	}
	testenv.Eventually(t, func() bool { return count("nats") == 1 }, 5*time.Second, "the console's refused login counted by the server")
}
