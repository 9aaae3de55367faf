package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextos/ledger/client"
	"github.com/contextos/ledger/daemon"
	"github.com/contextos/ledger/internal/testing/daemontest"
	"github.com/contextos/ledger/internal/testing/provider"
)

// bootFile boots the client tests' daemon from a configuration file (its
// digest is the file's, as ctx decisions packet --config reads it), with
// metrics served on loopback; it returns the file's path.
func bootFile(t *testing.T) (*testDaemon, string) {
	t.Helper()
	d := daemontest.Boot(t, daemontest.Options{File: true, Edit: func(s string) string {
		return strings.Replace(s, `executor = "test-1"`, "executor = \"test-1\"\nmetrics_listen = \"127.0.0.1:0\"", 1)
	}})
	return &testDaemon{rt: d.RT, prov: d.Provider}, d.ConfigPath
}

// refunds proposes refunds as an agent and returns the proposer.
func refunds(t *testing.T, d *testDaemon, principal, password string) func(key, order string, amount int) (client.Decision, error) {
	t.Helper()
	agent, err := client.Connect(client.Options{URL: d.rt.URL, Tenant: "acme", Principal: principal, Password: password})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(agent.Close)
	return func(key, order string, amount int) (client.Decision, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		b, _ := json.Marshal(map[string]any{"order_id": order, "amount_minor": amount, "currency": "INR"})
		return agent.Propose(ctx, client.Proposal{RunID: "run_p", OperationKey: key, CapabilityID: "adp_payments.issue_refund", Arguments: b})
	}
}

// TestOutcomeMetricsScraped: after a known sequence of proposals on a real
// daemon (two applied, one left pending, two refused over the ceiling by
// two agents, so neither refusal is tallied into the other's window), its
// /metrics carries the outcome gauges with those figures.
func TestOutcomeMetricsScraped(t *testing.T) {
	d, _ := bootFile(t)
	if d.rt.MetricsURL == "" {
		t.Fatal("the daemon serves no metrics")
	}
	email := refunds(t, d, "agent_email", "email-secret-passphrase")
	chat := refunds(t, d, "agent_chat", "chat-secret-passphrase")
	for _, c := range []struct {
		key, order string
		amount     int
		pending    bool
		other      bool
		want       client.Status
		code       client.Code
	}{
		{"m1", "ord_m1", 40000, false, false, client.StatusApplied, ""},
		{"m2", "ord_m1", 30000, false, false, client.StatusApplied, ""},
		{"m3", "ord_m1", 50000, false, false, "", client.CodeExceeded},
		{"m4", "ord_m2", 70000, true, false, client.StatusPending, ""},
		{"m5", "ord_m2", 40000, false, true, "", client.CodeExceeded},
	} {
		if c.pending {
			d.prov.Script(provider.Pending)
		}
		refund := email
		if c.other {
			refund = chat
		}
		dec, err := refund(c.key, c.order, c.amount)
		if c.code != "" {
			if !errors.Is(err, client.Refused{Code: c.code}) {
				t.Fatalf("%s: %+v %v, want refused %s", c.key, dec, err, c.code)
			}
			continue
		}
		if err != nil || dec.Status != c.want {
			t.Fatalf("%s: %+v %v, want %s", c.key, dec, err, c.want)
		}
	}
	want := map[string]string{
		`contextos_outcome_applied{guarantee="refunds-per-order",tenant="acme"}`:                                  "2",
		`contextos_outcome_applied_amount{guarantee="refunds-per-order",tenant="acme"}`:                           "70000",
		`contextos_outcome_pending{guarantee="refunds-per-order",tenant="acme"}`:                                  "1",
		`contextos_outcome_unknown{guarantee="refunds-per-order",tenant="acme"}`:                                  "0",
		`contextos_outcome_denials{code="shared_guarantee_exceeded",guarantee="refunds-per-order",tenant="acme"}`: "2",
		`contextos_outcome_stranded_amount{age="lt_1m",guarantee="refunds-per-order",tenant="acme"}`:              "70000",
	}
	// The gauges are read from the read model, which follows the stream:
	// scrape until it has caught up, bounded.
	deadline := time.Now().Add(20 * time.Second)
	var got map[string]string
	for {
		got = scrape(t, d.rt.MetricsURL)
		missing := ""
		for k, v := range want {
			if got[k] != v {
				missing = k + " = " + got[k] + ", want " + v
				break
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s\noutcome series scraped:\n%s", missing, outcomeLines(got))
		}
		time.Sleep(50 * time.Millisecond) // polling a condition, bounded by the deadline
	}
}

// scrape reads a Prometheus text exposition into series -> value.
func scrape(t *testing.T, url string) map[string]string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	out := map[string]string{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			out[line[:i]] = line[i+1:]
		}
	}
	return out
}

func outcomeLines(m map[string]string) string {
	var b strings.Builder
	for k, v := range m {
		if strings.HasPrefix(k, "contextos_outcome_") {
			b.WriteString(k + " " + v + "\n")
		}
	}
	return b.String()
}

// TestDecisionPacketsOfADaemon: on a real daemon, the packet of each
// decision kind (applied, pending, refused over the ceiling, refused by the
// same-action fence, refused for an approval, applied under it) written by ctx decisions packet replays equal with
// ctx replay --packet, and ctx decisions --replay replays them all; a
// configuration other than the one decided under is refused.
func TestDecisionPacketsOfADaemon(t *testing.T) {
	d, cfgPath := bootFile(t)
	t.Setenv("CTX_NATS", d.rt.URL)
	t.Setenv("CTX_TENANT", "acme")
	t.Setenv("CTX_USER", "ops_alice")
	t.Setenv("CTX_PASSWORD", "alice-secret-passphrase")
	refund := refunds(t, d, "agent_email", "email-secret-passphrase")
	if dec, err := refund("p1", "ord_p1", 40000); err != nil || dec.Status != client.StatusApplied {
		t.Fatalf("p1: %+v %v", dec, err)
	}
	d.prov.Script(provider.Pending)
	if dec, err := refund("p2", "ord_p1", 30000); err != nil || dec.Status != client.StatusPending {
		t.Fatalf("p2: %+v %v", dec, err)
	}
	if _, err := refund("p3", "ord_p1", 30000); !errors.Is(err, client.Refused{Code: client.CodeUnresolvedAttempt}) {
		t.Fatalf("p3, the same action as p2: %v", err)
	}
	if _, err := refund("p4", "ord_p1", 40000); !errors.Is(err, client.Refused{Code: client.CodeExceeded}) {
		t.Fatalf("p4: %v", err)
	}
	// A high-risk wire: refused until an operator approves the exact
	// action, then applied under the approval (the approval's subject is
	// one the step reads).
	agent, err := client.Connect(client.Options{URL: d.rt.URL, Tenant: "acme", Principal: "agent_email", Password: "email-secret-passphrase"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(agent.Close)
	wire := func(key, approval string) (client.Decision, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return agent.Propose(ctx, client.Proposal{RunID: "run_p", OperationKey: key, CapabilityID: "bank.wire",
			Arguments: json.RawMessage(`{"to":"acct_9","amount_minor":500}`), ApprovalID: approval})
	}
	_, err = wire("w1", "")
	var r client.Refused
	if !errors.As(err, &r) || r.Code != client.CodeApprovalRequired || r.Decision == nil {
		t.Fatalf("w1: %v", err)
	}
	code, out, errOut := ctxRun("approve", "--digest", r.Decision.ActionDigest, "--risk", "high", "-o", "json")
	if code != 0 {
		t.Fatalf("approve: exit %d %s%s", code, out, errOut)
	}
	var ap map[string]any
	if err := json.Unmarshal([]byte(out), &ap); err != nil {
		t.Fatal(err)
	}
	if dec, err := wire("w2", fmt.Sprint(ap["approval_id"])); err != nil || dec.Status != client.StatusApplied {
		t.Fatalf("w2 under the approval: %+v %v", dec, err)
	}
	const n = 6
	var rows []map[string]any
	// The audit log is a projection of the stream: wait until it holds
	// every record the model lists.
	deadline := time.Now().Add(20 * time.Second)
	dir := t.TempDir()
	for {
		code, out, errOut := ctxRun("decisions", "-o", "json")
		if code != 0 {
			t.Fatalf("decisions: %d %s", code, errOut)
		}
		if err := json.Unmarshal([]byte(out), &rows); err != nil {
			t.Fatal(err)
		}
		if len(rows) == n {
			last := path(dir, "last.json")
			if code, _, _ := ctxRun("decisions", "packet", "--decision", seqOf(rows[n-1]), "--config", cfgPath, "--out", last); code == 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the decisions and their audit records: %d rows", len(rows))
		}
		time.Sleep(50 * time.Millisecond) // polling a condition, bounded by the deadline
	}
	for i, r := range rows {
		f := path(dir, seqOf(r)+".json")
		if code, out, errOut := ctxRun("decisions", "packet", "--decision", seqOf(r), "--config", cfgPath, "--out", f); code != 0 {
			t.Fatalf("packet of %d (%v): exit %d %s%s", i, r["status"], code, out, errOut)
		}
		code, out, errOut := ctxRun("replay", "--packet", f)
		if code != 0 || !strings.HasPrefix(out, "equal: ") {
			t.Fatalf("replay of %d (%v %v): exit %d %s%s", i, r["status"], r["code"], code, out, errOut)
		}
	}
	code, out, errOut = ctxRun("decisions", "--replay", "--config", cfgPath)
	if code != 0 || !strings.Contains(out, "6 decisions replayed, 0 differ") || !strings.Contains(out, "equal: refused approval_required") {
		t.Fatalf("decisions --replay: exit %d %s%s", code, out, errOut)
	}
	// Offline: from an audit export and its keys, replayed under those keys;
	// under keys that did not sign it the packet is refused.
	entries := path(dir, "entries.json")
	if code, out, errOut := ctxRun("audit", "export", "--out", entries, "--allow-partial"); code != 0 {
		t.Fatalf("audit export: exit %d %s%s", code, out, errOut)
	}
	keys := path(dir, "keys.json")
	offline := path(dir, "offline.json")
	if code, out, errOut := ctxRun("decisions", "packet", "--decision", seqOf(rows[3]), "--config", cfgPath, "--entries", entries, "--keys", keys, "--out", offline); code != 0 {
		t.Fatalf("packet from the export: exit %d %s%s", code, out, errOut)
	}
	if code, out, errOut := ctxRun("replay", "--packet", offline, "--keys", keys); code != 0 || !strings.Contains(out, "equal: refused shared_guarantee_exceeded") {
		t.Fatalf("replay under the export's keys: exit %d %s%s", code, out, errOut)
	}
	if code, _, _ := ctxRun("replay", "--packet", offline, "--keys", "../../testdata/verifier/other-keys.json"); code != 1 {
		t.Fatalf("replay under keys that did not sign it: exit %d, want 1", code)
	}
	// Another configuration file (one byte more) is not the one decided under.
	raw, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	other := path(dir, "other.toml")
	if err := os.WriteFile(other, append(raw, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := ctxRun("decisions", "packet", "--decision", seqOf(rows[0]), "--config", other, "--out", path(dir, "x.json")); code != 1 {
		t.Fatalf("a packet under another configuration: exit %d, want 1", code)
	}
}

func path(dir, name string) string { return filepath.Join(dir, name) }

func seqOf(r map[string]any) string {
	if f, ok := r["seq"].(float64); ok {
		return strconv.FormatUint(uint64(f), 10)
	}
	return fmt.Sprint(r["seq"])
}

// fixedClock is a daemon's clock that moves only when the test moves it.
type fixedClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fixedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fixedClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestReplayDecisionsOfAResolution: an evidence-gated refund refused on an
// unresolved conflict, then applied once an operator resolved it; ctx
// decisions --resolution REF --replay replays exactly the decision derived
// from the resolution, equal, and --replay alone both.
func TestReplayDecisionsOfAResolution(t *testing.T) {
	pack, err := filepath.Abs("../../testdata/context/conflict_unresolved/pack.json")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	clock := &fixedClock{t: time.Date(2026, 10, 26, 12, 0, 0, 0, time.UTC)} // the context vectors' time
	// The refund gated by the pack's support.refund.execute decision, on
	// agent_email's evidence from every source the vectors name.
	d := daemontest.Boot(t, daemontest.Options{File: true, Boot: daemon.BootOptions{Clock: clock}, Edit: func(s string) string {
		s = strings.Replace(s, `  capabilities = ["adp_payments.issue_refund", "crm.lookup", "bank.wire"]`+"\n",
			`  capabilities = ["adp_payments.issue_refund", "crm.lookup", "bank.wire"]`+"\n"+
				`  evidence_sources = ["kg", "crm", "ledger", "policy_store", "idp", "memory"]`+"\n", 1)
		return strings.Replace(s, `adapter = "http"`+"\n", `adapter = "http"`+"\n"+
			`decision_key = "support.refund.execute"`+"\n"+`context_pack = "`+pack+`"`+"\n", 1)
	}})
	rt, cfgPath := d.RT, d.ConfigPath
	t.Setenv("CTX_NATS", rt.URL)
	t.Setenv("CTX_TENANT", "acme")
	t.Setenv("CTX_USER", "ops_alice")
	t.Setenv("CTX_PASSWORD", "alice-secret-passphrase")
	publish := func(flag string, doc json.RawMessage) map[string]any {
		t.Helper()
		f := path(dir, "doc.json")
		if err := os.WriteFile(f, doc, 0o600); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := ctxRun("evidence", flag, f, "-o", "json")
		if code != 0 {
			t.Fatalf("evidence %s: exit %d %s%s", flag, code, out, errOut)
		}
		var d map[string]any
		_ = json.Unmarshal([]byte(out), &d)
		return d
	}
	read := func(vec, name string) []json.RawMessage {
		var v []json.RawMessage
		if err := json.Unmarshal(mustReadFile(t, filepath.Join("../../testdata/context", vec, name)), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	var refs []string
	for _, c := range read("conflict_unresolved", "evidence.json") {
		refs = append(refs, fmt.Sprint(publish("--candidate", c)["ref"]))
	}
	publish("--marker", read("conflict_unresolved", "markers.json")[0])

	agent, err := client.Connect(client.Options{URL: rt.URL, Tenant: "acme", Principal: "agent_email", Password: "email-secret-passphrase"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(agent.Close)
	propose := func(key string) (client.Decision, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return agent.Propose(ctx, client.Proposal{RunID: "run_01", OperationKey: key, CapabilityID: "adp_payments.issue_refund",
			Arguments: json.RawMessage(`{"order_id":"ord_881","amount_minor":800,"currency":"INR"}`), EvidenceRefs: refs})
	}
	if _, err := propose("r1"); !errors.Is(err, client.Refused{Code: client.CodeEvidenceInsufficient}) {
		t.Fatalf("on the unresolved conflict: %v", err)
	}
	var resolved map[string]any
	if err := json.Unmarshal(read("conflict_resolved_review", "markers.json")[0], &resolved); err != nil {
		t.Fatal(err)
	}
	res := resolved["resolution"].(map[string]any)
	res["resolved_by"] = "ops_alice"
	resolution := res["resolution_ref"].(string)
	b, _ := json.Marshal(resolved)
	publish("--marker", b)
	clock.advance(time.Minute)
	if dec, err := propose("r2"); err != nil || dec.Status != client.StatusApplied {
		t.Fatalf("after the review: %+v %v", dec, err)
	}
	// The audit log follows the stream: poll until it holds both records.
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, out, errOut := ctxRun("decisions", "--resolution", resolution, "--replay", "--config", cfgPath)
		if code == 0 && strings.Contains(out, "1 decisions replayed, 0 differ") && strings.Contains(out, "equal: applied") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("decisions --resolution --replay: exit %d %s%s", code, out, errOut)
		}
		time.Sleep(50 * time.Millisecond) // polling a condition, bounded by the deadline
	}
	code, out, errOut := ctxRun("decisions", "--replay", "--config", cfgPath)
	if code != 0 || !strings.Contains(out, "2 decisions replayed, 0 differ") || !strings.Contains(out, "equal: refused evidence_insufficient") {
		t.Fatalf("decisions --replay: exit %d %s%s", code, out, errOut)
	}
}
