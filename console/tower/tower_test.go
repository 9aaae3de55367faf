package tower

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/contextos/ledger/audit"
	"github.com/contextos/ledger/client"
	"github.com/contextos/ledger/console"
	"github.com/contextos/ledger/daemon"
	"github.com/contextos/ledger/exposure"
	"github.com/contextos/ledger/internal/testing/daemontest"
	"github.com/contextos/ledger/internal/testing/gatewaytest"
	"github.com/contextos/ledger/internal/testing/provider"
	"github.com/contextos/ledger/verifier"
	"github.com/contextos/ledger/wire"
	"github.com/nats-io/nats.go"
)

var passwords = map[string]string{"acme.agent_email": "email-secret-passphrase", "acme.agent_phone": "phone-secret-passphrase", "acme.ops_alice": "alice-secret-passphrase",
	"acme.ops_tower": "tower-secret-passphrase", "acme.ops_carol": "carol-secret-passphrase", "globex.agent_email": "globex-secret-passphrase", "globex.ops_bob": "bob-secret-passphrase"}

type runtime struct {
	t    *testing.T
	rt   *daemon.Runtime
	prov *provider.Server
	opts []nats.Option // of every connection to the runtime (TLS)
}

// boot starts a real runtime (embedded NATS with JetStream, the loopback
// provider) on the console tests' configuration.
func boot(t *testing.T) *runtime { t.Helper(); return bootWith(t, nil) }

// bootWith boots a runtime on the console tests' configuration as edit
// changes its text (nil: unchanged).
func bootWith(t *testing.T, edit func(string) string) *runtime {
	t.Helper()
	d := daemontest.Boot(t, daemontest.Options{Console: true, Edit: edit})
	return &runtime{t: t, rt: d.RT, prov: d.Provider}
}

func (r *runtime) conn(tenant, principal string) *nats.Conn {
	r.t.Helper()
	return gatewaytest.Connect(r.t, r.rt.URL, passwords[wire.UserName(tenant, principal)], tenant, principal, r.opts...)
}

func (r *runtime) propose(tenant, principal, key, order string, amount int64) wire.Reply {
	r.t.Helper()
	return gatewaytest.Propose(r.t, r.conn(tenant, principal), tenant, principal, map[string]any{"run_id": "run_" + key, "operation_key": key,
		"capability_id": "adp_payments.issue_refund", "arguments": map[string]any{"order_id": order, "amount_minor": amount, "currency": "INR"}})
}

// export writes tenant's audit log (entries.json) and keys.json into dir once
// the log's replay is ready (the audit projector records events shortly
// after they are appended).
func (r *runtime) export(dir, tenant, operator string, ready func(exposure.View) bool) (entries, keys string) {
	r.t.Helper()
	oc := &client.AuditClient{NC: r.conn(tenant, operator), Tenant: tenant, Operator: operator}
	deadline := time.Now().Add(15 * time.Second)
	var e audit.Entries
	for {
		var err error
		if e, err = exportEntries(context.Background(), oc); err != nil {
			r.t.Fatal(err)
		}
		if v, err := verifier.ReplayEntries(e); err == nil && ready(v) {
			break
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("the audit log of %s (%d records) is not ready", tenant, len(e.Records))
		}
		time.Sleep(50 * time.Millisecond)
	}
	b, err := audit.MarshalEntries(e)
	if err != nil {
		r.t.Fatal(err)
	}
	kb, err := oc.File(context.Background(), wire.VerbAuditKeys, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	entries, keys = filepath.Join(dir, tenant+".entries.json"), filepath.Join(dir, tenant+".keys.json")
	if err := os.WriteFile(entries, b, 0o644); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(keys, kb, 0o644); err != nil {
		r.t.Fatal(err)
	}
	return entries, keys
}

// tamper copies an export and changes one amount inside one record.
func tamper(t *testing.T, src string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	e, err := audit.ParseEntries(b)
	if err != nil {
		t.Fatal(err)
	}
	changed := false
	for i, rec := range e.Records {
		if c := bytes.Replace(rec, []byte("80000"), []byte("8000"), 1); !changed && !bytes.Equal(c, rec) {
			e.Records[i], changed = c, true
		}
	}
	if !changed {
		t.Fatal("no record carries the amount to tamper with")
	}
	out, err := audit.MarshalEntries(e)
	if err != nil {
		t.Fatal(err)
	}
	path := src + ".tampered"
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func logOf(t *testing.T, f *Fleet, runtime, tenant string) LogView {
	t.Helper()
	for _, l := range f.Logs {
		if l.Runtime == runtime && l.Tenant == tenant {
			return l
		}
	}
	t.Fatalf("no log %s/%s", runtime, tenant)
	return LogView{}
}

// TestTowerFleet: two runtimes' chains verify (one from an exported file,
// one live), a tampered copy is reported with its first bad record and
// none of its figures, a tenant with many resources is cut at the row bound
// without crowding out the others, and the fleet kill switch engages every
// runtime with an operator and says which acknowledged.
func TestTowerFleet(t *testing.T) {
	a, b := boot(t), boot(t)
	if r := a.propose("acme", "agent_email", "k1", "ord_1", 80000); r.Status != wire.StatusApplied {
		t.Fatalf("%+v", r)
	}
	b.prov.Script(provider.Pending)
	if r := b.propose("acme", "agent_phone", "k2", "ord_2", 15000); r.Status != wire.StatusPending {
		t.Fatalf("%+v", r)
	}
	for i := range 5 {
		b.propose("globex", "agent_email", "g"+string(rune('a'+i)), "ord_g"+string(rune('a'+i)), 100)
	}
	// More approval requests than the row bound: tower reads the first
	// page and says there are more.
	for i := range 4 {
		r := gatewaytest.Propose(t, b.conn("acme", "agent_email"), "acme", "agent_email", map[string]any{"run_id": "run_w", "operation_key": "w" + string(rune('a'+i)),
			"capability_id": "adp_payments.issue_refund_high", "arguments": map[string]any{"order_id": "ord_w" + string(rune('a'+i)), "amount_minor": 100, "currency": "INR"}})
		if r.Code != wire.CodeApprovalRequired {
			t.Fatalf("%+v", r)
		}
	}
	dir := t.TempDir()
	entries, keys := a.export(dir, "acme", "ops_alice", func(v exposure.View) bool {
		return len(v.Resources) == 1 && v.Resources[0].Committed == 80000
	})
	bad := tamper(t, entries)
	t.Setenv("TOWER_TEST_TOWER", passwords["acme.ops_tower"])
	t.Setenv("TOWER_TEST_BOB", passwords["globex.ops_bob"])
	// b's keys: exported from b itself for the test; an auditor gets them
	// out of band.
	_, bKeys := b.export(t.TempDir(), "acme", "ops_alice", func(v exposure.View) bool { return len(v.Resources) == 1 && v.Resources[0].Held == 15000 })
	_, gKeys := b.export(t.TempDir(), "globex", "ops_bob", func(v exposure.View) bool { return len(v.Resources) == 5 })
	cfgText := `
max_rows_per_tenant = 3
[[runtimes]]
name = "eu-1"
  [[runtimes.tenants]]
  id = "acme"
  entries = "` + entries + `"
  keys = "` + keys + `"
[[runtimes]]
name = "eu-1-copy"
  [[runtimes.tenants]]
  id = "acme"
  entries = "` + bad + `"
  keys = "` + keys + `"
[[runtimes]]
name = "us-1"
nats_url = "` + b.rt.URL + `"
  [[runtimes.tenants]]
  id = "acme"
  keys = "` + bKeys + `"
  operator = "ops_tower"
  password_env = "TOWER_TEST_TOWER"
  [[runtimes.tenants]]
  id = "globex"
  keys = "` + gKeys + `"
  operator = "ops_bob"
  password_env = "TOWER_TEST_BOB"
`
	cfg, err := ParseConfig([]byte(cfgText), "")
	if err != nil {
		t.Fatal(err)
	}
	tw := New(cfg)
	f := tw.Refresh(context.Background())
	if f.OK() {
		t.Fatal("the fleet with a tampered chain is OK")
	}
	good := logOf(t, f, "eu-1", "acme")
	if !good.Verified || len(good.Resources) != 1 || good.Resources[0].Resource != "ord_1" || good.Resources[0].Committed != 80000 {
		t.Fatalf("eu-1/acme: %+v", good)
	}
	tampered := logOf(t, f, "eu-1-copy", "acme")
	if tampered.Verified || !strings.Contains(tampered.Failure, "record") || len(tampered.Resources) != 0 {
		t.Fatalf("the tampered chain: %+v", tampered)
	}
	t.Logf("the tampered copy: %s", tampered.Failure)
	live := logOf(t, f, "us-1", "acme")
	if !live.Verified || live.OpenAttempts != 1 || live.Resources[0].Held != 15000 {
		t.Fatalf("us-1/acme: %+v", live)
	}
	if len(live.Pending) != 3 || !live.MorePending || !strings.Contains(live.PendingNote, "more pending approvals") || live.Pending[0].OperationKey != "wa" {
		t.Fatalf("us-1/acme pending: %d shown, more %v, note %q", len(live.Pending), live.MorePending, live.PendingNote)
	}
	crowded := logOf(t, f, "us-1", "globex")
	if !crowded.Verified || len(crowded.Resources) != 3 || crowded.MoreResources != 2 {
		t.Fatalf("us-1/globex is not cut at 3 rows: %d shown, %d more", len(crowded.Resources), crowded.MoreResources)
	}

	acks := tw.KillSwitch(context.Background(), true, "fleet drill")
	want := map[string]bool{"eu-1/acme": false, "eu-1-copy/acme": false, "us-1/acme": true, "us-1/globex": true}
	for _, ack := range acks {
		if got := ack.Acknowledged; got != want[ack.Runtime+"/"+ack.Tenant] {
			t.Fatalf("ack %+v", ack)
		}
	}
	if r := b.propose("globex", "agent_email", "after", "ord_x", 100); r.Code != wire.CodeKillSwitchEngaged {
		t.Fatalf("globex on us-1 after the fleet kill switch: %+v", r)
	}
	if r := b.propose("acme", "agent_email", "after", "ord_x", 100); r.Code != wire.CodeKillSwitchEngaged {
		t.Fatalf("acme on us-1 after the fleet kill switch: %+v", r)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		l := logOf(t, tw.Refresh(context.Background()), "us-1", "globex")
		if l.Kill != nil && l.Kill.Engaged && l.Kill.Operator == "ops_bob" && l.Kill.Reason == "fleet drill" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the verified chain does not show the kill switch: %+v", l.Kill)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The web page, as acme's ops_alice and then also globex's ops_bob:
	// each sees its tenants' logs, and the release is sent as each.
	cfg.Listen = "127.0.0.1:0"
	srv, err := tw.Serve(0)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c := newClient(t, srv.URL)
	page := c.login("acme", "ops_alice")
	for _, want := range []string{`data-log="eu-1-copy/acme"`, "<b>not verified</b>", `data-resource="eu-1/acme/ord_1"`, `data-log="us-1/acme"`} {
		if !strings.Contains(page, want) {
			t.Fatalf("the page lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, "globex") {
		t.Fatalf("acme's operator sees globex:\n%s", page)
	}
	page = c.addLogin(page, "globex", "ops_bob")
	if !strings.Contains(page, `data-more="us-1/globex"`) {
		t.Fatalf("after the globex login the page lacks globex's rows:\n%s", page)
	}
	status, page := c.post("/kill-switch", url.Values{"csrf": {csrfOf(t, page)}, "reason": {"drill over"}, "engaged": {"false"}, "confirm": {"yes"}})
	if status != http.StatusOK {
		t.Fatalf("release: %d\n%s", status, page)
	}
	for _, want := range []string{`<tr data-ack="us-1/globex"><td>us-1</td><td>globex</td><td class="ack">yes</td><td>released</td><td>ops_bob</td>`,
		`<tr data-ack="us-1/acme"><td>us-1</td><td>acme</td><td class="ack">yes</td><td>released</td><td>ops_alice</td>`,
		`<tr data-ack="eu-1/acme"><td>eu-1</td><td>acme</td><td class="ack">no</td>`} {
		if !strings.Contains(page, want) {
			t.Fatalf("the page lacks %q:\n%s", want, page)
		}
	}
	if r := b.propose("globex", "agent_email", "released", "ord_y", 100); r.Status != wire.StatusApplied {
		t.Fatalf("globex on us-1 after the fleet release: %+v", r)
	}
	if k := b.lastKill("acme", func(k *console.KillChange) bool { return !k.Engaged }); k.Operator != "ops_alice" || k.Reason != "drill over" {
		t.Fatalf("acme's release is recorded as %+v", k)
	}
}

func TestTowerConfig(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"no runtimes", ``, "at least one [[runtimes]]"},
		{"unknown key", "colour = 1\n[[runtimes]]\nname = \"a\"", "unknown keys: colour"},
		{"no keys", "[[runtimes]]\nname = \"a\"\n[[runtimes.tenants]]\nid = \"acme\"\nentries = \"e.json\"", "keys (the trusted keys.json) is required"},
		{"no source", "[[runtimes]]\nname = \"a\"\n[[runtimes.tenants]]\nid = \"acme\"\nkeys = \"k.json\"", "name entries"},
		{"operator without url", "[[runtimes]]\nname = \"a\"\n[[runtimes.tenants]]\nid = \"acme\"\nkeys = \"k\"\noperator = \"o\"", "nats_url is required"},
		{"remote listen", "listen = \"0.0.0.0:1\"\n[[runtimes]]\nname = \"a\"\n[[runtimes.tenants]]\nid = \"acme\"\nkeys = \"k\"\nentries = \"e\"", "loopback only"},
		{"tls without url", "[[runtimes]]\nname = \"a\"\ntls_ca_file = \"ca.pem\"\n[[runtimes.tenants]]\nid = \"acme\"\nkeys = \"k\"\nentries = \"e\"", "need a nats_url"},
		{"missing ca", "[[runtimes]]\nname = \"a\"\nnats_url = \"nats://127.0.0.1:4222\"\ntls_ca_file = \"/nonexistent/ca.pem\"\n[[runtimes.tenants]]\nid = \"acme\"\nkeys = \"k\"", "runtime a: tls_ca_file"},
		{"cert without key", "[[runtimes]]\nname = \"a\"\nnats_url = \"nats://127.0.0.1:4222\"\ntls_cert_file = \"c.pem\"\n[[runtimes.tenants]]\nid = \"acme\"\nkeys = \"k\"", "go together"},
		{"too many sessions", "max_sessions = 5000\n[[runtimes]]\nname = \"a\"\n[[runtimes.tenants]]\nid = \"acme\"\nkeys = \"k\"\nentries = \"e\"", "max_sessions must be 1..4096"},
		{"twice", "[[runtimes]]\nname = \"a\"\n[[runtimes.tenants]]\nid = \"x\"\nkeys = \"k\"\nentries = \"e\"\n[[runtimes]]\nname = \"a\"\n[[runtimes.tenants]]\nid = \"x\"\nkeys = \"k\"\nentries = \"e\"", "declared twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.text), "")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
	c, err := ParseConfig([]byte("[[runtimes]]\nname = \"a\"\n[[runtimes.tenants]]\nid = \"x\"\nkeys = \"k.json\"\nentries = \"e.json\""), "/etc/tower")
	if err != nil || c.Runtimes[0].Tenants[0].Keys != "/etc/tower/k.json" || c.MaxRowsPerTenant != 50 || c.MaxSessions != 64 || c.SessionIdle.Duration != 30*time.Minute {
		t.Fatalf("%+v %v", c, err)
	}
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte("[[runtimes]]\nname = \"a\"\n[[runtimes.tenants]]\nid = \"x\"\nkeys = \"k\"\nentries = \"e\""))
	f.Add([]byte("listen = \"127.0.0.1:0\"\nmax_rows_per_tenant = 3"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConfig(b, "")
		if err == nil && (len(c.Runtimes) == 0 || c.MaxRowsPerTenant <= 0 || c.MaxSessions <= 0 || c.SessionIdle.Duration <= 0) {
			t.Fatalf("accepted an invalid configuration: %+v", c)
		}
	})
}

// checkpointed exports acme's log once it records every refund of amounts
// (ready) and a checkpoint covers it: the audit projector checkpoints on
// request.
func (r *runtime) checkpointed(dir string, ready func(exposure.View) bool) (entries, keys string) {
	r.t.Helper()
	r.export(dir, "acme", "ops_alice", ready)
	if err := r.rt.Service.Projectors["acme"].Checkpoint(context.Background()); err != nil {
		r.t.Fatal(err)
	}
	return r.export(dir, "acme", "ops_alice", ready)
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestTowerWitnessPolicyAndKeptCheckpoint: tower keeps the newest
// checkpoint it verified on disk, and a later reading of the log rolled
// back to an earlier history, signed by the right keys and verifying on
// its own, shows as forked or rewritten, also to a tower started afresh
// over the same state dir; a log whose checkpoints lack the cosignatures
// the runtime's witness policy requires shows as not verified.
func TestTowerWitnessPolicyAndKeptCheckpoint(t *testing.T) {
	a := boot(t)
	if r := a.propose("acme", "agent_email", "k1", "ord_1", 30000); r.Status != wire.StatusApplied {
		t.Fatalf("%+v", r)
	}
	older, keys := a.checkpointed(t.TempDir(), func(v exposure.View) bool { return len(v.Resources) == 1 })
	if r := a.propose("acme", "agent_email", "k2", "ord_2", 20000); r.Status != wire.StatusApplied {
		t.Fatalf("%+v", r)
	}
	newer, _ := a.checkpointed(t.TempDir(), func(v exposure.View) bool { return len(v.Resources) == 2 })

	w, err := audit.NewCosigner("witness.example/w1", ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32)), func() uint64 { return 1 })
	if err != nil {
		t.Fatal(err)
	}
	dir, state := t.TempDir(), t.TempDir()
	log := filepath.Join(dir, "acme.entries.json")
	copyFile(t, newer, log)
	cfg, err := ParseConfig([]byte(`
state_dir = "`+state+`"
[[runtimes]]
name = "eu-1"
  [[runtimes.tenants]]
  id = "acme"
  entries = "`+log+`"
  keys = "`+keys+`"
[[runtimes]]
name = "eu-2"
witness_keys = ["`+w.VerifierKey()+`"]
witnesses = 1
  [[runtimes.tenants]]
  id = "acme"
  entries = "`+newer+`"
  keys = "`+keys+`"
`), "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	f := New(cfg).Refresh(ctx)
	first := logOf(t, f, "eu-1", "acme")
	if !first.Verified || first.Forked || first.CheckpointSize == 0 {
		t.Fatalf("the first reading: %+v", first)
	}
	if _, err := os.Stat(filepath.Join(state, "eu-1", "acme.checkpoint")); err != nil {
		t.Fatalf("no kept checkpoint: %v", err)
	}
	unwitnessed := logOf(t, f, "eu-2", "acme")
	if unwitnessed.Verified || unwitnessed.Forked || !strings.Contains(unwitnessed.Failure, "witness-policy") || len(unwitnessed.Resources) != 0 {
		t.Fatalf("a log without the policy's cosignatures: %+v", unwitnessed)
	}
	if _, err := os.Stat(filepath.Join(state, "eu-2", "acme.checkpoint")); err == nil {
		t.Fatal("tower kept a checkpoint that did not verify under the witness policy")
	}

	// The older history on its own verifies (the right keys signed it).
	kb, _ := os.ReadFile(keys)
	k, _ := audit.ParseKeys(kb)
	ob, _ := os.ReadFile(older)
	if res, err := verifier.VerifyEntriesPolicy(ob, k, verifier.Policy{AllowPartial: true}); err != nil || !res.OK() {
		t.Fatalf("the older export alone: %+v %v", res, err)
	}
	copyFile(t, older, log)
	for _, tw := range []*Tower{New(cfg), New(cfg)} {
		got := logOf(t, tw.Refresh(ctx), "eu-1", "acme")
		if got.Verified || !got.Forked || !strings.Contains(got.Failure, "forked or rewritten") || len(got.Resources) != 0 {
			t.Fatalf("the rolled-back log: %+v", got)
		}
	}
	// Put back, the log extends the kept checkpoint again.
	copyFile(t, newer, log)
	if got := logOf(t, New(cfg).Refresh(ctx), "eu-1", "acme"); !got.Verified || got.Kept != first.CheckpointSize {
		t.Fatalf("the log restored: %+v", got)
	}
}

// TestTowerPublishesGuardrail: tower publishes a guardrail to a live
// runtime as its configured operator; the runtime's kernel refuses a
// refund over the cap; a waiver tower grants for the run lets it through;
// the verified log then shows both, who decided them, and the revocation.
func TestTowerPublishesGuardrail(t *testing.T) {
	a := boot(t)
	_, keys := a.export(t.TempDir(), "acme", "ops_alice", func(exposure.View) bool { return true })
	t.Setenv("TOWER_TEST_TOWER", passwords["acme.ops_tower"])
	cfg, err := ParseConfig([]byte(`
[[runtimes]]
name = "eu-1"
nats_url = "`+a.rt.URL+`"
  [[runtimes.tenants]]
  id = "acme"
  keys = "`+keys+`"
  operator = "ops_tower"
  password_env = "TOWER_TEST_TOWER"
`), "")
	if err != nil {
		t.Fatal(err)
	}
	tw, ctx := New(cfg), context.Background()
	acks := tw.Guardrail(ctx, wire.GuardrailRequest{GuardrailID: "refund_cap", CapabilityID: "adp_payments.issue_refund", MaxAmount: 20000, Reason: "fleet cap"})
	if len(acks) != 1 || !acks[0].Acknowledged || acks[0].Operator != "ops_tower" {
		t.Fatalf("guardrail acks: %+v", acks)
	}
	if r := a.propose("acme", "agent_email", "k1", "ord_1", 30000); r.Code != wire.CodeGuardrailRefused {
		t.Fatalf("a refund over tower's cap: %+v", r)
	}
	until := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	if acks := tw.Waiver(ctx, wire.WaiverRequest{WaiverID: "w1", GuardrailID: "refund_cap", RunID: "run_k2", Until: until, Reason: "INC-9"}); !acks[0].Acknowledged {
		t.Fatalf("waiver acks: %+v", acks)
	}
	if r := a.propose("acme", "agent_email", "k2", "ord_2", 30000); r.Status != wire.StatusApplied {
		t.Fatalf("the waived run: %+v", r)
	}
	// The verified log shows the guardrail, the waiver in force and who
	// decided them (the audit projector records them shortly after).
	deadline := time.Now().Add(15 * time.Second)
	for {
		l := logOf(t, tw.Refresh(ctx), "eu-1", "acme")
		if l.Verified && len(l.Guardrails) == 1 && len(l.Waivers) == 1 {
			g, w := l.Guardrails[0], l.Waivers[0]
			if g.GuardrailID != "refund_cap" || g.Rule() != "at most 20000 per proposal" || g.Operator != "ops_tower" || g.At == "" {
				t.Fatalf("the guardrail as tower shows it: %+v", g)
			}
			if w.WaiverID != "w1" || w.For() != "run run_k2" || w.Operator != "ops_tower" || w.Reason != "INC-9" {
				t.Fatalf("the waiver as tower shows it: %+v", w)
			}
			if len(l.History) != 2 || l.History[0].What != "granted waiver w1" || l.History[1].What != "set guardrail refund_cap" {
				t.Fatalf("the history: %+v", l.History)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the log does not show the guardrail and the waiver: %+v", l)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if acks := tw.Waiver(ctx, wire.WaiverRequest{WaiverID: "w1", Revoke: true}); !acks[0].Acknowledged {
		t.Fatalf("revoke acks: %+v", acks)
	}
	for {
		l := logOf(t, tw.Refresh(ctx), "eu-1", "acme")
		if len(l.History) == 3 {
			if len(l.Waivers) != 0 || l.History[0].What != "revoked waiver w1" {
				t.Fatalf("after the revocation: %+v", l)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the log does not show the revocation: %+v", l.History)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
