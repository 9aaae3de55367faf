package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/contextos/ledger/client"
	"github.com/contextos/ledger/daemon"
	"github.com/contextos/ledger/internal/testing/daemontest"
	"github.com/contextos/ledger/internal/testing/provider"
	"github.com/contextos/ledger/wire"
	"github.com/spf13/cobra"
)

// ctxRun runs ctx in-process and returns its exit code, stdout and stderr.
func ctxRun(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := runIO(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func deadURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return "nats://" + ln.Addr().String()
}

type testDaemon struct {
	rt   *daemon.Runtime
	prov *provider.Server
}

func boot(t *testing.T) *testDaemon {
	t.Helper()
	d := daemontest.Boot(t, daemontest.Options{})
	return &testDaemon{rt: d.RT, prov: d.Provider}
}

// ctxRunner runs ctx in-process and fails the test unless it exits with
// the code the caller wants.
type ctxRunner struct{ t *testing.T }

// asOperator points ctx at d as tenant acme's operator ops_alice, through
// the CTX_* profile as an operator would, for the rest of the test.
func asOperator(t *testing.T, d *testDaemon) ctxRunner {
	t.Setenv("CTX_NATS", d.rt.URL)
	t.Setenv("CTX_TENANT", "acme")
	t.Setenv("CTX_USER", "ops_alice")
	t.Setenv("CTX_PASSWORD", daemontest.Passwords["ops_alice"])
	return ctxRunner{t}
}

// out runs ctx with args and returns its standard output.
func (r ctxRunner) out(want int, args ...string) string {
	r.t.Helper()
	out, _ := r.run(want, args...)
	return out
}

// all runs ctx with args and returns its standard output and error
// together.
func (r ctxRunner) all(want int, args ...string) string {
	r.t.Helper()
	out, errOut := r.run(want, args...)
	return out + errOut
}

func (r ctxRunner) run(want int, args ...string) (string, string) {
	r.t.Helper()
	code, out, errOut := ctxRun(args...)
	if code != want {
		r.t.Fatalf("ctx %s: exit %d, want %d: %s%s", strings.Join(args, " "), code, want, out, errOut)
	}
	return out, errOut
}

// TestExitCodes: one rule whatever the output format: 0 ok, 1 refused or
// invalid, 2 usage, 3 unreachable.
func TestExitCodes(t *testing.T) {
	d := boot(t)
	dead := deadURL(t)
	vec := "../../testdata/context/sufficient/"
	conn := []string{"--nats", d.rt.URL, "--tenant", "acme", "--user", "ops_alice", "--password", "alice-secret-passphrase", "--timeout", "3s"}
	with := func(args ...string) []string { return append(args, conn...) }
	cases := []struct {
		args []string
		code int
	}{
		{[]string{"no-such-command"}, 2},
		{[]string{"exposure", "--no-such-flag"}, 2},
		{[]string{"exposure", "extra-arg"}, 2},
		{[]string{"exposure", "-o", "yaml", "--tenant", "acme", "--user", "ops"}, 2},
		{[]string{"exposure", "--nats", dead}, 2}, // no tenant and user
		{[]string{"reconcile", "--tenant", "acme", "--user", "ops"}, 2},
		{[]string{"reconcile", "--attempt", "a", "--all", "--tenant", "acme", "--user", "ops"}, 2},
		{[]string{"assert-absence", "--attempt", "a", "--tenant", "acme", "--user", "ops"}, 2},
		{[]string{"kill-switch", "maybe", "--tenant", "acme", "--user", "ops"}, 2},
		{[]string{"breaker", "open", "x", "--tenant", "acme", "--user", "ops"}, 2},
		{[]string{"breaker", "--reason", "x", "--tenant", "acme", "--user", "ops"}, 2},
		{with("breaker"), 0},
		{[]string{"confirm", "--tenant", "acme", "--user", "ops"}, 2},
		{with("confirm", "01J00000000000000000000000"), 1}, // no such request: refused request_malformed
		{with("breaker", "reset", "no.such_capability"), 1},
		{[]string{"approve", "--digest", "abc", "--tenant", "acme", "--user", "ops"}, 2},
		{[]string{"approve", "--digest", strings.Repeat("a", 64), "--expires", "48h", "--tenant", "acme", "--user", "ops"}, 2},
		{[]string{"deny", "--digest", strings.Repeat("a", 64), "--tenant", "acme", "--user", "ops"}, 2},
		{[]string{"grant", "--principal", "agent_chat", "--tenant", "acme", "--user", "ops"}, 2},
		{[]string{"run", "--tenant", "acme", "--user", "ops"}, 2},
		{[]string{"evidence", "--tenant", "acme", "--user", "ops"}, 2},
		{[]string{"completion", "powershell"}, 2},
		{[]string{"completion"}, 2},
		{[]string{"context", "compile", "--pack", vec + "pack.json", "--run", vec + "run.json"}, 2},
		{[]string{"context", "compile", "--pack", vec + "missing.json", "--run", vec + "run.json", "--evidence", vec + "evidence.json"}, 1},
		{[]string{"context", "compile", "--pack", vec + "run.json", "--run", vec + "run.json", "--evidence", vec + "evidence.json"}, 1},
		{[]string{"context", "compile", "--pack", vec + "pack.json", "--run", vec + "run.json", "--evidence", vec + "evidence.json", "--markers", vec + "markers.json"}, 0},
		{[]string{"exposure", "--nats", dead, "--tenant", "acme", "--user", "ops"}, 3},
		{[]string{"exposure", "-o", "json", "--nats", dead, "--tenant", "acme", "--user", "ops"}, 3},
		{with("exposure"), 0},
		{with("exposure", "-o", "json"), 0},
		{with("exposure", "-o", "wide"), 0},
		{with("close-attempt", "--attempt", "nope"), 1},
		{with("close-attempt", "--attempt", "nope", "-o", "json"), 1},
		{[]string{"run", "--run", "x", "--nats", d.rt.URL, "--tenant", "acme", "--user", "ops_alice", "--password", "wrong"}, 1},
		{with("evidence", "--candidate", filepath.Join(t.TempDir(), "missing.json")), 1},
		{[]string{"exposure", "--nats", d.rt.URL, "--tenant", "acme", "--user", "agent_email", "--password", "email-secret-passphrase", "--timeout", "3s"}, 1},
	}
	for _, c := range cases {
		if got, _, errOut := ctxRun(c.args...); got != c.code {
			t.Errorf("ctx %s: exit %d, want %d (%s)", strings.Join(c.args, " "), got, c.code, errOut)
		}
	}
}

// TestNoSecretInOutput: no password, from $CTX_PASSWORD, --password or a
// URL, appears in any help, usage error or error output.
func TestNoSecretInOutput(t *testing.T) {
	const envSecret, flagSecret, urlSecret = "env-s3cret-value", "flag-s3cret-value", "url-s3cret-value"
	t.Setenv("CTX_PASSWORD", envSecret)
	t.Setenv("CTX_TENANT", "acme")
	t.Setenv("CTX_USER", "ops_alice")
	dead := deadURL(t)
	t.Setenv("CTX_NATS", dead)
	var runs [][]string
	root := newRoot()
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		runs = append(runs, append(append([]string{}, path...), "--help"), append(append([]string{}, path...), "--no-such-flag"))
		for _, sub := range c.Commands() {
			walk(sub, append(append([]string{}, path...), sub.Name()))
		}
	}
	walk(root, nil)
	runs = append(runs,
		[]string{"exposure"},
		[]string{"exposure", "--password", flagSecret},
		[]string{"exposure", "--password=" + flagSecret, "-o", "json"},
		[]string{"exposure", "--nats", strings.Replace(dead, "nats://", "nats://acme.ops_alice:"+urlSecret+"@", 1)},
		[]string{"kill-switch", "maybe", "--password", flagSecret},
		[]string{"approve", "--digest", "bad", "--password", flagSecret},
		[]string{"exposure", "--context", filepath.Join(t.TempDir(), "none.json"), "--password", flagSecret},
	)
	for _, args := range runs {
		_, out, errOut := ctxRun(args...)
		for _, s := range []string{envSecret, flagSecret, urlSecret} {
			if strings.Contains(out, s) || strings.Contains(errOut, s) {
				t.Errorf("ctx %s printed a secret:\n%s%s", strings.Join(args, " "), out, errOut)
			}
		}
	}
	if len(runs) < 40 {
		t.Fatalf("only %d runs", len(runs))
	}
}

// TestEveryVerb drives each verb against a real runtime as an operator
// would, through the CTX_* profile, and checks what it prints.
func TestEveryVerb(t *testing.T) {
	d := boot(t)
	asOperator(t, d)
	ok := func(args ...string) string {
		t.Helper()
		code, out, errOut := ctxRun(args...)
		if code != 0 {
			t.Fatalf("ctx %s: exit %d: %s%s", strings.Join(args, " "), code, out, errOut)
		}
		return out
	}
	refusedWith := func(code string, args ...string) {
		t.Helper()
		c, out, errOut := ctxRun(args...)
		if c != 1 || !strings.Contains(out+errOut, code) {
			t.Fatalf("ctx %s: exit %d, want 1 with %s: %s%s", strings.Join(args, " "), c, code, out, errOut)
		}
	}
	jsonOf := func(out string, v any) {
		t.Helper()
		if err := json.Unmarshal([]byte(out), v); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}

	if out := ok("admit-run", "--run", "run_v", "--principal", "agent_email", "--calls", "4", "--amount", "90000"); !strings.Contains(out, "admitted run run_v") {
		t.Fatalf("admit-run: %s", out)
	}
	refusedWith("run_already_admitted", "admit-run", "--run", "run_v", "--principal", "agent_email", "--calls", "9", "--amount", "1")
	agent, err := client.Connect(client.Options{URL: d.rt.URL, Tenant: "acme", Principal: "agent_email", Password: "email-secret-passphrase"})
	if err != nil {
		t.Fatal(err)
	}
	defer agent.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := agent.Propose(ctx, client.Proposal{RunID: "run_v", OperationKey: "r1", CapabilityID: "adp_payments.issue_refund",
		Arguments: json.RawMessage(`{"order_id":"ord_v","amount_minor":30000,"currency":"INR"}`)}); err != nil {
		t.Fatal(err)
	}

	var run client.Run
	jsonOf(ok("run", "--run", "run_v", "-o", "json"), &run)
	if run.UsedCalls != 1 || run.Calls != 4 {
		t.Fatalf("run: %+v", run)
	}
	if out := ok("run", "--run", "run_v"); !strings.Contains(out, "run_v") || !strings.Contains(out, "AVAILABLE") {
		t.Fatalf("run table: %s", out)
	}
	if out := ok("run", "--run", "run_v", "-o", "wide"); !strings.Contains(out, "DELEGATED CALLS") {
		t.Fatalf("run wide: %s", out)
	}
	if out := ok("run", "--run", "never"); !strings.Contains(out, "not admitted") {
		t.Fatalf("run of an unadmitted run: %s", out)
	}

	var rows []client.ExposureRow
	jsonOf(ok("exposure", "--resource", "ord_v", "-o", "json"), &rows)
	if len(rows) != 1 || rows[0].Committed != 30000 {
		t.Fatalf("exposure: %+v", rows)
	}
	jsonOf(ok("exposure", "--resource", "ord_v", "--json"), &rows)
	if out := ok("exposure", "-o", "wide"); !strings.Contains(out, "TENANT") || !strings.Contains(out, "ord_v") {
		t.Fatalf("exposure wide: %s", out)
	}
	ok("attempts")
	ok("attempts", "-o", "wide")
	ok("reconcile", "--all")
	if out := ok("reconcile", "--all", "-o", "json"); !strings.HasPrefix(strings.TrimSpace(out), "[") {
		t.Fatalf("reconcile json: %s", out)
	}
	refusedWith("shared_guarantee_attempt_unknown", "reconcile", "--attempt", "nope")
	refusedWith("shared_guarantee_attempt_unknown", "assert-absence", "--attempt", "nope", "--artifact", "ticket-9")

	if out := ok("revoke", "--principal", "agent_email", "--capability", "crm.lookup", "--reason", "test"); !strings.Contains(out, "revoked from agent_email") {
		t.Fatalf("revoke: %s", out)
	}
	var ch client.AuthorityChange
	jsonOf(ok("grant", "--principal", "agent_email", "--capability", "crm.lookup", "-o", "json"), &ch)
	if !ch.Granted || !ch.Recorded {
		t.Fatalf("grant: %+v", ch)
	}
	refusedWith("capability_not_surfaced", "grant", "--principal", "agent_email", "--capability", "no.such")

	// approve: the digest of an approval_required decision, then the
	// agent's proposal under a new key with the approval goes through.
	wire := client.Proposal{RunID: "run_v", OperationKey: "w1", CapabilityID: "bank.wire", Arguments: json.RawMessage(`{"to":"x"}`)}
	_, err = agent.Propose(ctx, wire)
	ref, isRefused := err.(client.Refused)
	if !isRefused || ref.Code != client.CodeApprovalRequired {
		t.Fatalf("high risk: %v", err)
	}
	var ap client.Approval
	jsonOf(ok("approve", "--digest", ref.Decision.ActionDigest, "--expires", "10m", "--reason", "checked", "-o", "json"), &ap)
	wire.OperationKey, wire.ApprovalID = "w2", ap.ApprovalID
	if dec, err := agent.Propose(ctx, wire); err != nil || dec.Status != client.StatusApplied {
		t.Fatalf("approved proposal: %+v %v", dec, err)
	}
	if out := ok("approve", "--digest", ref.Decision.ActionDigest); !strings.Contains(out, "approval id: ") {
		t.Fatalf("approve: %s", out)
	}
	jsonOf(ok("approve", "--digest", ref.Decision.ActionDigest, "--risk", "low", "-o", "json"), &ap)
	wire.OperationKey, wire.ApprovalID = "w3", ap.ApprovalID
	if _, err := agent.Propose(ctx, wire); !errors.Is(err, client.Refused{Code: client.CodeApprovalMismatch}) {
		t.Fatalf("an approval of another risk: %v", err)
	}

	// deny, approvals and incidents are served by parts of the daemon that
	// may not be in this build: either they answer, or ctx reports the
	// daemon's refusal of an unknown verb with exit 1.
	for _, args := range [][]string{
		{"deny", "--digest", ref.Decision.ActionDigest, "--reason", "not this one"},
		{"approvals"}, {"approvals", "-o", "json"}, {"incidents"}, {"incidents", "-o", "wide"},
	} {
		code, out, errOut := ctxRun(args...)
		switch {
		case code == 0:
		case code == 1 && (strings.Contains(errOut, "unknown verb") || strings.Contains(errOut, "unknown field")):
			t.Logf("ctx %s: the daemon does not serve it yet: %s", args[0], strings.TrimSpace(errOut))
		default:
			t.Errorf("ctx %s: exit %d: %s%s", strings.Join(args, " "), code, out, errOut)
		}
	}

	// evidence: a candidate of the kernel's vectors, then a file that is
	// not one.
	var cands []json.RawMessage
	jsonOf(string(mustReadFile(t, "../../testdata/context/conflict_unresolved/evidence.json")), &cands)
	cand := filepath.Join(t.TempDir(), "cand.json")
	if err := os.WriteFile(cand, cands[0], 0o600); err != nil {
		t.Fatal(err)
	}
	if out := ok("evidence", "--candidate", cand); !strings.Contains(out, "published evidence") {
		t.Fatalf("evidence: %s", out)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"ref":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	refusedWith("context_invalid", "evidence", "--candidate", bad)

	// close-attempt of an unknown attempt names the flags, not the wire.
	_, _, errOut := ctxRun("close-attempt", "--attempt", "nope")
	if !strings.Contains(errOut, "--guarantee") || strings.Contains(errOut, "guarantee_id") {
		t.Fatalf("close-attempt refusal: %s", errOut)
	}
	if out := ok("kill-switch", "on", "--reason", "test"); !strings.Contains(out, "engaged") {
		t.Fatalf("kill-switch: %s", out)
	}
	var ks map[string]any
	jsonOf(ok("kill-switch", "-o", "json"), &ks)
	if ks["kill_switch"] != true {
		t.Fatalf("kill-switch state: %v", ks)
	}
	ok("kill-switch", "off")
}

// TestContextProfile: a NATS context file alone (its user names tenant
// and principal) is enough, and flags win over the environment.
func TestContextProfile(t *testing.T) {
	d := boot(t)
	path := filepath.Join(t.TempDir(), "acme.json")
	b, _ := json.Marshal(map[string]string{"url": d.rt.URL, "user": "acme.ops_alice", "password": "alice-secret-passphrase"})
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := ctxRun("exposure", "--context", path); code != 0 {
		t.Fatalf("--context: exit %d %s%s", code, out, errOut)
	}
	t.Setenv("CTX_CONTEXT", path)
	if code, _, errOut := ctxRun("kill-switch"); code != 0 {
		t.Fatalf("$CTX_CONTEXT: exit %d %s", code, errOut)
	}
	t.Setenv("CTX_NATS", deadURL(t))
	if code, _, _ := ctxRun("kill-switch"); code != 3 {
		t.Fatalf("$CTX_NATS over the context: exit %d, want 3", code)
	}
	if code, _, errOut := ctxRun("kill-switch", "--nats", d.rt.URL); code != 0 {
		t.Fatalf("--nats over $CTX_NATS: exit %d %s", code, errOut)
	}
}

// TestCompletionAndVersion: each shell gets its script; --version names
// the build.
func TestCompletionAndVersion(t *testing.T) {
	for shell, marker := range map[string]string{"bash": "complete -o default -F __start_ctx ctx", "zsh": "#compdef ctx", "fish": "complete -c ctx"} {
		code, out, _ := ctxRun("completion", shell)
		if code != 0 || !strings.Contains(out, marker) {
			t.Errorf("completion %s: exit %d, %d bytes, no %q", shell, code, len(out), marker)
		}
	}
	code, out, _ := ctxRun("--version")
	if code != 0 || !strings.HasPrefix(out, "ctx ") || !strings.Contains(out, "go1.") {
		t.Fatalf("--version: exit %d %q", code, out)
	}
}

// TestOpReadsItsReply: a command that decodes its own reply gets it whether
// it says ok or refused, and refused maps the refusal to exit 1.
func TestOpReadsItsReply(t *testing.T) {
	d := boot(t)
	cmd := &cobra.Command{}
	c := addConnFlags(cmd)
	c.url, c.tenant, c.user, c.password, c.timeout = d.rt.URL, "acme", "ops_alice", "alice-secret-passphrase", 5*time.Second
	var r wire.OpReply
	if err := c.op("kill-switch", wire.OpRequest{}, &r); err != nil || refused(r) != nil || r.KillSwitch == nil {
		t.Fatalf("kill-switch: %+v %v", r, err)
	}
	r = wire.OpReply{}
	if err := c.op("close-attempt", wire.OpRequest{AttemptID: "nope"}, &r); err != nil || r.OK || r.Code != client.CodeAttemptUnknown {
		t.Fatalf("close-attempt: %+v %v", r, err)
	}
	if err := refused(r); exitCode(err) != 1 || strings.Contains(err.Error(), "guarantee_id") {
		t.Fatalf("refused: %v", err)
	}
}
