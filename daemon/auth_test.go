package daemon

import (
	"testing"
	"time"

	"github.com/contextos/ledger/config"
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
	cfg := testConfig(t, t.TempDir(), deadURL(t))
	acme, _ := cfg.Tenant("acme")
	agent, _ := acme.Agent("agent_email")
	agent.Password = agentHash
	acme.Operators[0].Password = string(opHash)
	rt, err := Boot(cfg, BootOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
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
	e, _ := bootObserved(t, deadURL(t), BootOptions{}, nil)
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
