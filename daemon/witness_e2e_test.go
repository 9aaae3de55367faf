package daemon_test

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/contextos/ledger/audit"
	"github.com/contextos/ledger/audit/witness"
	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/daemon"
	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/internal/testing/daemontest"
	"github.com/contextos/ledger/internal/testing/provider"
	"github.com/contextos/ledger/internal/testing/testenv"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/projections"
	"github.com/contextos/ledger/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// buildTools builds ctx and contextosd into a directory of the test's.
func buildTools(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs ctx and contextosd as processes")
	}
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", dir+string(os.PathSeparator), "./cmd/ctx", "./cmd/contextosd")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return dir
}

// witnessProc is a witness run as a process: ctx witness serve.
type witnessProc struct {
	key, state, name string
	URL, VKey        string
	cmd              *exec.Cmd
}

// startWitness makes a witness key (once) and serves it for the log keys
// given, on a free loopback port.
func startWitness(t *testing.T, bin string, w *witnessProc, logKeys ...string) {
	t.Helper()
	if w.key == "" {
		dir := t.TempDir()
		w.key, w.state, w.name = filepath.Join(dir, "witness.key"), filepath.Join(dir, "witness-state.json"), "witness.test/e2e"
		out, err := exec.Command(filepath.Join(bin, "ctx"), "witness", "init", "--key", w.key, "--name", w.name).CombinedOutput()
		if err != nil {
			t.Fatalf("ctx witness init: %v %s", err, out)
		}
		w.VKey = strings.TrimSpace(string(out))
	}
	args := []string{"witness", "serve", "--key", w.key, "--name", w.name, "--state", w.state, "--listen", "127.0.0.1:0"}
	for _, k := range logKeys {
		args = append(args, "--log-key", k)
	}
	w.cmd = exec.Command(filepath.Join(bin, "ctx"), args...)
	stdout, err := w.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	w.cmd.Stderr = os.Stderr
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cmd := w.cmd
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	first, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("ctx witness serve: %v", err)
	}
	_, url, ok := strings.Cut(strings.TrimSpace(first), "listening on ")
	if !ok {
		t.Fatalf("ctx witness serve said %q", first)
	}
	w.URL = url
}

// stop ends the witness process the way an operator does (SIGTERM).
func (w *witnessProc) stop(t *testing.T) {
	t.Helper()
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	_ = w.cmd.Wait()
}

// logKeys are the note verifier keys of every tenant's log under pub.
func logKeys(t *testing.T, cfg *config.Config, pub ed25519.PublicKey) []string {
	t.Helper()
	var out []string
	for _, tn := range cfg.TenantIDs() {
		k, err := audit.NoteVerifierKey(audit.Origin(tn), pub)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, k)
	}
	return out
}

// waitWitnessed waits until the witnesses cosigned acme's latest
// checkpoint.
func waitWitnessed(t *testing.T, rt *daemon.Runtime) {
	t.Helper()
	testenv.Eventually(t, func() bool { st, _ := rt.Service.Witnessing("acme"); return st == kernel.WitnessCosigned }, 20*time.Second, "acme's log witnessed")
}

// checkpointAll waits until acme's audit log records every event of acme
// in the stream, then publishes a checkpoint of it.
func checkpointAll(t *testing.T, rt *daemon.Runtime) {
	t.Helper()
	ctx := context.Background()
	var n int64
	if err := rt.Store.ReplayTenant(ctx, "acme", 1, func(events.Stored) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	p := rt.Service.Projectors["acme"]
	testenv.Eventually(t, func() bool { return p.Status().Records >= n }, 20*time.Second, "acme's audit log records its ", n, " events")
	if err := p.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
}

// exportAcme writes acme's audit log (every record and checkpoint) and
// keys.json as the daemon publishes them, and returns the newest
// checkpoint note.
func exportAcme(t *testing.T, rt *daemon.Runtime, dir string) (entries, keys string, newest []byte) {
	t.Helper()
	ctx := context.Background()
	x := audit.Entries{Tenant: "acme", Records: [][]byte{}, Checkpoints: [][]byte{}}
	if err := rt.Service.Log.Checkpoints(ctx, "acme", 0, 0, func(c projections.StoredCheckpoint) error {
		x.Checkpoints, newest = append(x.Checkpoints, c.Note), c.Note
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	cp, err := audit.ReadCheckpoint(newest)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Service.Log.Records(ctx, "acme", 0, int(cp.Size), func(r projections.StoredRecord) error { x.Records = append(x.Records, r.Raw); return nil }); err != nil {
		t.Fatal(err)
	}
	b, err := audit.MarshalEntries(x)
	if err != nil {
		t.Fatal(err)
	}
	entries, keys = filepath.Join(dir, "entries.json"), filepath.Join(dir, "keys.json")
	r := rt.Service.Ops.Handle(ctx, "acme", wire.VerbAuditKeys, []byte("{}"))
	if err := os.WriteFile(entries, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keys, r.File, 0o600); err != nil {
		t.Fatal(err)
	}
	return entries, keys, newest
}

// auditVerify runs the offline verifier, ctx audit-verify, and returns its
// exit code and output.
func auditVerify(t *testing.T, bin string, args ...string) (int, string) {
	t.Helper()
	out, err := exec.Command(filepath.Join(bin, "ctx"), append([]string{"audit-verify"}, args...)...).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

// TestInsiderRewriteFailsClosed is the insider's attack with a witness
// that runs as its own process: two refunds on ord_881 (40,000 and
// 50,000, ceiling 100,000) are applied and witnessed; with the daemon
// stopped, the streams are deleted and republished without the second
// one; the daemon restarts with the witness configured. Its boot check is
// refused (the log shrank), the incident is recorded, and the next 50,000
// refund, which the rewritten history would let through, is refused
// log_integrity_failed: the provider is never called past the ceiling.
// Restoring the streams from a copy holding the witnessed history is the
// documented way back: the witness cosigns again and the ceiling holds.
func TestInsiderRewriteFailsClosed(t *testing.T) {
	bin := buildTools(t)
	prov := provider.New()
	hs := httptest.NewServer(prov.Handler())
	t.Cleanup(hs.Close)
	dir := t.TempDir()
	cfg := testConfig(t, dir, hs.URL)
	rt, err := bootConfig(t, cfg, daemontest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pub := rt.Signer.Key.Public().(ed25519.PublicKey)
	rt.Close()
	var w witnessProc
	startWitness(t, bin, &w, logKeys(t, cfg, pub)...)
	cfg.Runtime.Witnesses = []config.WitnessConfig{{URL: w.URL, Key: w.VKey}}
	e := &env{t: t, prov: prov}
	boot := func() {
		t.Helper()
		rt, err := bootConfig(t, cfg, daemontest.Options{})
		if err != nil {
			t.Fatal(err)
		}
		e.rt = rt
	}
	boot()
	waitWitnessed(t, e.rt)
	agent := e.client("acme", "agent_email")
	if r := e.propose(agent, "acme", "agent_email", refund("run_1", "refund-1", "ord_881", 40000)); r.Status != wire.StatusApplied {
		t.Fatalf("first refund: %+v", r)
	}
	ctx := context.Background()
	before, err := e.rt.Store.LastStreamSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r := e.propose(agent, "acme", "agent_email", refund("run_1", "refund-2", "ord_881", 50000))
	if r.Status != wire.StatusApplied {
		t.Fatalf("second refund: %+v", r)
	}
	wantBalance(t, r, 90000, 0, 10000)
	checkpointAll(t, e.rt)
	waitWitnessed(t, e.rt)
	e.rt.Close()
	agent.Close()
	backup := t.TempDir()
	if out, err := exec.Command("cp", "-a", dir+"/.", backup).CombinedOutput(); err != nil {
		t.Fatalf("back up the data dir: %v %s", err, out)
	}

	// The insider: both streams deleted, the events republished up to the
	// second refund, with no users on the server.
	republishUpTo(t, dir, before)

	// The restarted daemon refuses from its first proposal on.
	boot()
	agent = e.client("acme", "agent_email")
	r = e.propose(agent, "acme", "agent_email", refund("run_2", "refund-3", "ord_881", 50000))
	if r.Status != wire.StatusRefused || (r.Code != wire.CodeLogUnwitnessed && r.Code != wire.CodeLogIntegrityFailed) {
		t.Fatalf("a refund right after the restart: %+v; want it refused until the witness answers", r)
	}
	testenv.Eventually(t, func() bool {
		st, err := e.rt.Gateway.Integrity(ctx, "acme")
		return err == nil && st.Open != nil
	}, 20*time.Second, "the integrity incident")
	st, _ := e.rt.Gateway.Integrity(ctx, "acme")
	if st.Open.Kind != kernel.IntegrityShrank || st.Open.Witness != w.name {
		t.Fatalf("incident %+v; want the witness's answer that the log shrank", st.Open)
	}
	r = e.propose(agent, "acme", "agent_email", refund("run_2", "refund-4", "ord_881", 50000))
	if r.Status != wire.StatusRefused || r.Code != wire.CodeLogIntegrityFailed {
		t.Fatalf("a refund on the rewritten history: %+v; want log_integrity_failed", r)
	}
	if s := prov.Stats(); s.Calls != 2 || s.Applied != 2 {
		t.Fatalf("provider saw %+v; want the two refunds before the rewrite and nothing after", s)
	}
	var ir wire.OpReply
	b, _ := json.Marshal(map[string]any{})
	msg, err := e.client("acme", "ops_alice").Request(wire.OpSubject("acme", "integrity", "ops_alice"), b, 10*time.Second)
	if err != nil || json.Unmarshal(msg.Data, &ir) != nil || !ir.OK || !strings.Contains(fmt.Sprint(ir.Data), "shrank") {
		t.Fatalf("ctx integrity: %v %s", err, msg.Data)
	}
	e.rt.Close()

	// Restored from the copy that holds the witnessed history: the witness
	// cosigns again, and the ceiling holds.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", backup+"/.", dir).CombinedOutput(); err != nil {
		t.Fatalf("restore the data dir: %v %s", err, out)
	}
	boot()
	defer e.rt.Close()
	waitWitnessed(t, e.rt)
	agent = e.client("acme", "agent_email")
	r = e.propose(agent, "acme", "agent_email", refund("run_3", "refund-5", "ord_881", 50000))
	if r.Status != wire.StatusRefused || r.Code != wire.CodeExceeded {
		t.Fatalf("a refund after the restore: %+v; want shared_guarantee_exceeded", r)
	}
	wantBalance(t, r, 90000, 0, 10000)
	resolve := e.op("integrity-resolve", wire.OpRequest{})
	if resolve.OK || resolve.Code != wire.CodeRequestMalformed {
		t.Fatalf("a resolution without its statement: %+v", resolve)
	}
	msg, err = e.client("acme", "ops_alice").Request(wire.OpSubject("acme", "integrity-resolve", "ops_alice"),
		[]byte(`{"resolution":"restored","artifact_ref":"INC-7","statement":"streams rewritten while stopped; restored from the backup"}`), 10*time.Second)
	if err != nil || json.Unmarshal(msg.Data, &ir) != nil || !ir.OK {
		t.Fatalf("integrity-resolve: %v %s", err, msg.Data)
	}
	if s := prov.Stats(); s.Calls != 2 {
		t.Fatalf("provider saw %+v; want two calls in all", s)
	}
}

// republishUpTo is the insider with the data directory and the daemon
// stopped: an unauthenticated nats-server over dir deletes the event and
// audit streams and republishes the events up to stream sequence before.
func republishUpTo(t *testing.T, dir string, before uint64) {
	t.Helper()
	ctx := context.Background()
	emb, err := events.StartEmbedded(events.EmbeddedConfig{DataDir: dir, DontListen: true})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := emb.InProcessConn()
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	store := events.NewJetStore(js, events.StreamName)
	var kept [][2]string
	if err := store.Replay(ctx, 1, func(st events.Stored) error {
		if st.Seq <= before {
			kept = append(kept, [2]string{st.Subject, string(st.Raw)})
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{events.StreamName, projections.AuditStreamName} {
		if err := js.DeleteStream(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := events.EnsureStream(ctx, js, events.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, st := range kept {
		if _, err := js.Publish(ctx, st[0], []byte(st[1])); err != nil {
			t.Fatal(err)
		}
	}
	nc.Close()
	emb.Shutdown()
}

// writeTestConfig writes testConfig's file, for the contextosd process.
func writeTestConfig(t *testing.T, dir, providerURL string, extra string) string {
	t.Helper()
	s := gatewayText(dir, providerURL)
	p := filepath.Join(t.TempDir(), "contextos.toml")
	if err := os.WriteFile(p, []byte(s+extra), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// cosignedAgain appends events, checkpoints acme's log and waits until the
// witnesses cosigned that checkpoint.
func cosignedAgain(t *testing.T, rt *daemon.Runtime, from, n int) {
	t.Helper()
	p := rt.Service.Projectors["acme"]
	before := p.Status().Cosigned
	for i := from; i < from+n; i++ {
		appendReservation(t, rt, i)
	}
	checkpointAll(t, rt)
	testenv.Eventually(t, func() bool {
		st, _ := rt.Service.Witnessing("acme")
		return p.Status().Cosigned > before && st == kernel.WitnessCosigned
	}, 20*time.Second, "the new checkpoint cosigned")
}

// TestRotationKeepsWitnessContinuity runs the documented rotation with a
// witness: a witness process cosigns the log under the first key; every
// replica is stopped, "contextosd keys rotate" (the process) records the
// hand-over, the witness restarts with its old configuration and state,
// and the runtime restarts with the new key. The witness is shown the
// rotation record (signed by the key it trusts, included in the new
// checkpoint) and cosigns the new key's checkpoints without losing its
// state; it then restarts with the new keys.json (both keys) and goes on.
// The offline verifier accepts the export under a witness policy and
// against a checkpoint the auditor kept from before the rotation.
func TestRotationKeepsWitnessContinuity(t *testing.T) {
	bin := buildTools(t)
	dir := t.TempDir()
	cfg := testConfig(t, dir, "http://127.0.0.1:1")
	rt, err := bootConfig(t, cfg, daemontest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	oldPub := rt.Signer.Key.Public().(ed25519.PublicKey)
	rt.Close()
	var w witnessProc
	startWitness(t, bin, &w, logKeys(t, cfg, oldPub)...)
	cfg.Runtime.Witnesses = []config.WitnessConfig{{URL: w.URL, Key: w.VKey}}
	file := writeTestConfig(t, dir, "http://127.0.0.1:1", fmt.Sprintf("\n[[runtime.witnesses]]\nurl = %q\nkey = %q\n", w.URL, w.VKey))

	rt, err = bootConfig(t, cfg, daemontest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	waitWitnessed(t, rt)
	cosignedAgain(t, rt, 0, 3)
	out := t.TempDir()
	_, _, kept := exportAcme(t, rt, out)
	keptFile := filepath.Join(out, "kept.note")
	if err := os.WriteFile(keptFile, kept, 0o600); err != nil {
		t.Fatal(err)
	}
	rt.Close()

	// The documented procedure: every replica stopped, then the rotation.
	w.stop(t)
	if b, err := exec.Command(filepath.Join(bin, "contextosd"), "keys", "rotate", "--config", file).CombinedOutput(); err != nil {
		t.Fatalf("contextosd keys rotate: %v %s", err, b)
	}
	startWitness(t, bin, &w, logKeys(t, cfg, oldPub)...) // the old configuration and its state
	cfg.Runtime.Witnesses[0].URL = w.URL
	rt, err = bootConfig(t, cfg, daemontest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	newPub := rt.Signer.Key.Public().(ed25519.PublicKey)
	if newPub.Equal(oldPub) {
		t.Fatal("the runtime did not take the new key")
	}
	waitWitnessed(t, rt) // the boot check: the witness follows the rotation
	cosignedAgain(t, rt, 3, 3)
	var st struct {
		V    int `json:"v"`
		Logs []struct {
			Origin, Key string
		} `json:"logs"`
	}
	b, err := os.ReadFile(w.state)
	if err != nil || json.Unmarshal(b, &st) != nil {
		t.Fatalf("witness state: %v %s", err, b)
	}
	newKey := logKeys(t, cfg, newPub)[0]
	found := false
	for _, l := range st.Logs {
		found = found || (l.Origin == audit.Origin("acme") && l.Key == newKey)
	}
	if st.V != 2 || !found {
		t.Fatalf("the witness's state %s does not hold acme's new key", b)
	}

	// The witness restarts with the new keys.json: both keys of each log.
	rt.Close()
	w.stop(t)
	startWitness(t, bin, &w, append(logKeys(t, cfg, oldPub), logKeys(t, cfg, newPub)...)...)
	cfg.Runtime.Witnesses[0].URL = w.URL
	rt, err = bootConfig(t, cfg, daemontest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	waitWitnessed(t, rt)
	cosignedAgain(t, rt, 6, 3)

	entries, keys, _ := exportAcme(t, rt, out)
	if code, o := auditVerify(t, bin, "--entries", entries, "--keys", keys, "--witness-key", w.VKey, "--witnesses", "1", "--kept", keptFile); code != 0 {
		t.Fatalf("ctx audit-verify across the rotation: exit %d\n%s", code, o)
	}
}

// readyCheck returns the named check of a readiness answer.
func readyCheck(rep daemon.Readiness, name string) (daemon.ReadyCheck, bool) {
	for _, c := range rep.Checks {
		if c.Name == name {
			return c, true
		}
	}
	return daemon.ReadyCheck{}, false
}

// TestWitnessRefusalsAreLoud: a witness process that knows acme's log but
// not globex's refuses globex's checkpoints. The refusal is counted by
// witness and reason, logged at error level, shown by /readyz and by
// contextos_audit_unwitnessed; under the default policy (require) globex's
// proposals are refused log_unwitnessed while acme's go on, and under warn
// globex keeps serving, /readyz ready with a warning.
func TestWitnessRefusalsAreLoud(t *testing.T) {
	bin := buildTools(t)
	prov := provider.New()
	hs := httptest.NewServer(prov.Handler())
	t.Cleanup(hs.Close)
	dir := t.TempDir()
	cfg := testConfig(t, dir, hs.URL)
	path, err := daemon.KeyPath(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := daemon.CreateKey(path); err != nil {
		t.Fatal(err)
	}
	key, err := codec.LoadPrivateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	acmeKey, err := audit.NoteVerifierKey(audit.Origin("acme"), key.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	var w witnessProc
	startWitness(t, bin, &w, acmeKey)
	cfg.Runtime.Witnesses = []config.WitnessConfig{{URL: w.URL, Key: w.VKey}}
	cfg.Runtime.LogFormat, cfg.Runtime.MetricsListen = "json", "127.0.0.1:0"
	boot := func() (*env, *logBuf) {
		t.Helper()
		logs := &logBuf{}
		rt, err := bootConfig(t, cfg, daemontest.Options{Log: logs})
		if err != nil {
			t.Fatal(err)
		}
		return &env{t: t, rt: rt, prov: prov}, logs
	}
	e, logs := boot()
	waitWitnessed(t, e.rt)
	testenv.Eventually(t, func() bool { st, _ := e.rt.Service.Witnessing("globex"); return st == kernel.WitnessMissing }, 20*time.Second, "globex unwitnessed")
	logs.waitLine(t, "audit witness did not cosign the checkpoint", map[string]any{"level": "ERROR", "tenant": "globex", "witness": w.name, "reason": witness.RefusalUnknown})
	fams := scrape(t, e.rt)
	if v, ok := sample(fams, "contextos_audit_witness_refusals_total", map[string]string{"tenant": "globex", "witness": w.name, "reason": "unknown"}); !ok || v < 1 {
		t.Fatalf("refusals of globex's checkpoints: %v %v", v, ok)
	}
	if v, ok := sample(fams, "contextos_audit_unwitnessed", map[string]string{"tenant": "globex"}); !ok || v != 1 {
		t.Fatalf("contextos_audit_unwitnessed{globex} = %v %v", v, ok)
	}
	if v, ok := sample(fams, "contextos_audit_unwitnessed", map[string]string{"tenant": "acme"}); !ok || v != 0 {
		t.Fatalf("contextos_audit_unwitnessed{acme} = %v %v", v, ok)
	}
	code, rep := readyz(t, e.rt)
	c, ok := readyCheck(rep, "audit_witnesses")
	if code != http.StatusServiceUnavailable || !ok || c.OK || !strings.Contains(c.Error, "globex") {
		t.Fatalf("/readyz %d %+v; want unready, naming globex", code, rep)
	}
	g := e.client("globex", "agent_email")
	if r := e.propose(g, "globex", "agent_email", refund("run_g", "g-1", "ord_1", 100)); r.Status != wire.StatusRefused || r.Code != wire.CodeLogUnwitnessed {
		t.Fatalf("globex under require: %+v", r)
	}
	a := e.client("acme", "agent_email")
	if r := e.propose(a, "acme", "agent_email", refund("run_a", "a-1", "ord_1", 100)); r.Status != wire.StatusApplied {
		t.Fatalf("acme: %+v\n%s", r, logs.String())
	}
	g.Close()
	a.Close()
	e.rt.Close()

	cfg.Runtime.WitnessPolicy = "warn"
	e, _ = boot()
	defer e.rt.Close()
	testenv.Eventually(t, func() bool { st, _ := e.rt.Service.Witnessing("globex"); return st == kernel.WitnessMissing }, 20*time.Second, "globex unwitnessed")
	g = e.client("globex", "agent_email")
	if r := e.propose(g, "globex", "agent_email", refund("run_g", "g-2", "ord_1", 100)); r.Status != wire.StatusApplied {
		t.Fatalf("globex under warn: %+v", r)
	}
	code, rep = readyz(t, e.rt)
	c, ok = readyCheck(rep, "audit_witnesses")
	if code != http.StatusOK || !ok || !c.OK || !strings.Contains(c.Warning, "globex") {
		t.Fatalf("/readyz under warn %d %+v; want ready with a warning naming globex", code, rep)
	}
}
