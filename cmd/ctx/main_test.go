package main

import (
	"net"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/contextos/ledger/gateway"
	"github.com/contextos/ledger/provider"
)

// TestHelpEveryCommand runs --help on the root and on every command,
// including nested ones: each must exit 0.
func TestHelpEveryCommand(t *testing.T) {
	root := newRoot()
	paths := [][]string{{}}
	for _, c := range root.Commands() {
		paths = append(paths, []string{c.Name()})
		for _, sub := range c.Commands() {
			paths = append(paths, []string{c.Name(), sub.Name()})
		}
	}
	if len(paths) < 8 {
		t.Fatalf("only %d commands registered", len(paths))
	}
	for _, p := range paths {
		if code := run(append(p, "--help")); code != 0 {
			t.Errorf("ctx %s --help exited %d", strings.Join(p, " "), code)
		}
	}
}

// TestUsageAndErrors checks the exit codes of usage errors (2) and of
// commands that cannot reach contextosd or are refused (1).
func TestUsageAndErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "nats://" + ln.Addr().String()
	ln.Close()
	cases := []struct {
		args []string
		code int
	}{
		{[]string{"no-such-command"}, 2},
		{[]string{"exposure", "--no-such-flag"}, 2},
		{[]string{"exposure", "extra-arg"}, 2},
		{[]string{"reconcile", "--tenant", "acme", "--user", "ops"}, 2},
		{[]string{"reconcile", "--attempt", "a", "--all", "--tenant", "acme", "--user", "ops"}, 2},
		{[]string{"assert-absence", "--attempt", "a", "--tenant", "acme", "--user", "ops"}, 2},
		{[]string{"kill-switch", "maybe", "--tenant", "acme", "--user", "ops"}, 2},
		{[]string{"exposure", "--nats", dead}, 2},
		{[]string{"exposure", "--nats", dead, "--tenant", "acme", "--user", "ops"}, 1},
	}
	for _, c := range cases {
		if got := run(c.args); got != c.code {
			t.Errorf("ctx %s: exit %d, want %d", strings.Join(c.args, " "), got, c.code)
		}
	}
}

// TestAgainstRuntime drives the operator commands against a real runtime.
func TestAgainstRuntime(t *testing.T) {
	prov := provider.New()
	hs := httptest.NewServer(prov.Handler())
	defer hs.Close()
	raw, err := os.ReadFile("../../gateway/testdata/gateway.toml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := gateway.ParseConfig([]byte(strings.NewReplacer("{{DATA}}", t.TempDir(), "{{PROVIDER}}", hs.URL).Replace(string(raw))))
	if err != nil {
		t.Fatal(err)
	}
	rt, err := gateway.Boot(cfg, gateway.BootOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	as := func(user, pw string, args ...string) int {
		return run(append(args, "--nats", rt.URL, "--tenant", "acme", "--user", user, "--password", pw, "--timeout", "2s"))
	}
	if c := as("ops_alice", "alice-secret", "exposure", "--json"); c != 0 {
		t.Fatalf("exposure exited %d", c)
	}
	if c := as("ops_alice", "alice-secret", "attempts"); c != 0 {
		t.Fatalf("attempts exited %d", c)
	}
	if c := as("ops_alice", "alice-secret", "close-attempt", "--attempt", "nope"); c != 1 {
		t.Fatalf("close-attempt of an unknown attempt exited %d, want 1 (refused)", c)
	}
	if c := as("ops_alice", "alice-secret", "admit-run", "--run", "run_cli", "--principal", "agent_email", "--calls", "3", "--amount", "5000"); c != 0 {
		t.Fatalf("admit-run exited %d", c)
	}
	if c := as("ops_alice", "alice-secret", "admit-run", "--run", "run_cli", "--principal", "agent_email", "--calls", "9", "--amount", "9000"); c != 1 {
		t.Fatalf("a second admission exited %d, want 1 (refused)", c)
	}
	if c := as("ops_alice", "alice-secret", "kill-switch", "on"); c != 0 {
		t.Fatalf("kill-switch on exited %d", c)
	}
	if c := as("ops_alice", "wrong", "exposure"); c != 1 {
		t.Fatalf("a wrong password exited %d, want 1", c)
	}
	if c := as("agent_email", "email-secret", "exposure"); c != 1 {
		t.Fatalf("an agent calling an operator verb exited %d, want 1", c)
	}
}
