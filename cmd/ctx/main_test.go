package main

import (
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextos/ledger/gateway"
	"github.com/contextos/ledger/internal/provider"
	"github.com/contextos/ledger/verifier"
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
		{[]string{"breaker", "open", "x", "--tenant", "acme", "--user", "ops"}, 2},
		{[]string{"breaker", "--reason", "x", "--tenant", "acme", "--user", "ops"}, 2},
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
	// The live proof path reaches the runtime's verb: no checkpoint covers a
	// million records, which is a refusal (exit 1), not a usage error.
	if c := as("ops_alice", "alice-secret", "audit", "prove-consistency", "--old-size", "1000000", "--out", filepath.Join(t.TempDir(), "c.json")); c != 1 {
		t.Fatalf("prove-consistency beyond the log exited %d, want 1 (refused)", c)
	}
	if c := as("ops_alice", "alice-secret", "breaker"); c != 0 {
		t.Fatalf("breaker exited %d", c)
	}
	if c := as("ops_alice", "alice-secret", "breaker", "reset", "no.such_capability"); c != 1 {
		t.Fatalf("breaker reset of an unknown capability exited %d, want 1 (refused)", c)
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

// TestAuditConsistencyOffline: from the verifier's vector export, the proof
// that its checkpoint of 5 records is a prefix of its latest verifies (also
// against the kept note); a fork's checkpoint, a note one did not keep and a
// size the export has no checkpoint of are refused (exit 1); a missing flag
// is a usage error (exit 2).
func TestAuditConsistencyOffline(t *testing.T) {
	dir := t.TempDir()
	vec := func(name string) string { return filepath.Join("../../testdata/verifier", name) }
	out := filepath.Join(dir, "consistency.json")
	if c := run([]string{"audit", "prove-consistency", "--entries", vec("ok.entries.json"), "--old-size", "5", "--out", out}); c != 0 {
		t.Fatalf("prove-consistency exited %d", c)
	}
	if c := run([]string{"audit", "verify-consistency", out, "--keys", vec("keys.json")}); c != 0 {
		t.Fatalf("verify-consistency exited %d", c)
	}
	e, err := verifier.ParseEntries(mustReadFile(t, vec("ok.entries.json")))
	if err != nil {
		t.Fatal(err)
	}
	kept := filepath.Join(dir, "kept.note")
	other := filepath.Join(dir, "other.note")
	if err := os.WriteFile(kept, e.Checkpoints[0], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, e.Checkpoints[1], 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		code int
	}{
		{[]string{"audit", "verify-consistency", out, "--keys", vec("keys.json"), "--old", kept}, 0},
		{[]string{"audit", "verify-consistency", out, "--keys", vec("keys.json"), "--old", other}, 1},
		{[]string{"audit", "verify-consistency", vec("consistency-fork.json"), "--keys", vec("keys.json")}, 1},
		{[]string{"audit", "verify-consistency", out, "--keys", vec("other-keys.json")}, 1},
		{[]string{"audit", "prove-consistency", "--entries", vec("ok.entries.json"), "--old-size", "7", "--out", out}, 1},
		{[]string{"audit", "prove-consistency", "--entries", vec("ok.entries.json"), "--out", out}, 2},
		{[]string{"audit", "verify-consistency", out}, 2},
	}
	for _, c := range cases {
		if got := run(c.args); got != c.code {
			t.Errorf("ctx %s: exit %d, want %d", strings.Join(c.args, " "), got, c.code)
		}
	}
}

func mustReadFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
