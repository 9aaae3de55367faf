package projections

import (
	"context"
	"crypto/ed25519"
	"os/exec"
	"testing"

	"github.com/contextos/ledger/audit"
	"github.com/contextos/ledger/audit/witness"
	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/internal/testing/testenv"
	"github.com/contextos/ledger/verifier"
	"github.com/nats-io/nats.go/jetstream"
)

// envAt is an env whose server keeps its files in dir; stop shuts it down
// cleanly (the daemon stopped), so another server can open a copy.
func envAt(t *testing.T, dir string) (e *env, stop func()) {
	t.Helper()
	emb, err := events.StartEmbedded(events.EmbeddedConfig{DataDir: dir, Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	e = &env{emb: emb, url: emb.ClientURL(), signer: codec.NewSigner(testKey())}
	e.nc, e.js = e.connect(t)
	ctx := context.Background()
	if _, err := events.EnsureStream(ctx, e.js, events.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureAuditStream(ctx, e.js, AuditStreamOptions{}); err != nil {
		t.Fatal(err)
	}
	e.store = events.NewJetStore(e.js, events.StreamName)
	e.log = NewAuditLog(e.js, AuditStreamName)
	return e, func() { e.nc.Close(); emb.Shutdown() }
}

// exportOf reads tenant's whole audit log as an export.
func exportOf(t *testing.T, e *env, tenant string) []byte {
	t.Helper()
	ctx := context.Background()
	x := audit.Entries{Tenant: tenant, Records: [][]byte{}, Checkpoints: [][]byte{}}
	if err := e.log.Records(ctx, tenant, 0, 0, func(r StoredRecord) error { x.Records = append(x.Records, r.Raw); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := e.log.Checkpoints(ctx, tenant, 0, 0, func(c StoredCheckpoint) error { x.Checkpoints = append(x.Checkpoints, c.Note); return nil }); err != nil {
		t.Fatal(err)
	}
	b, err := audit.MarshalEntries(x)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAuditWitnessCatchesDeletionAndRepublish is the insider's attack: with
// the daemon stopped, whoever can open its data dir starts an
// unauthenticated nats-server over a copy, deletes both streams (single
// messages are refused, whole streams are not), republishes 12 of the 23
// events and restarts the daemon, which records and signs a fresh audit log
// with the same key. The new export verifies against the runtime keys
// alone; it does not verify under a witness policy, because the witness
// that cosigned the 23-record checkpoint refuses to cosign one of 12 and
// says why; nor against the size an auditor kept (--min-size).
func TestAuditWitnessCatchesDeletionAndRepublish(t *testing.T) {
	tw := testenv.Witness(t, "acme", testKey().Public().(ed25519.PublicKey))
	cos, w := tw.Cosigner, tw.Witness
	var refusals []string
	projector := func(e *env) *AuditProjector {
		// A fresh client each boot: a restarted daemon knows nothing of the
		// witness but its URL and key.
		return e.projector(t, "acme", e.log, func(c *AuditConfig) {
			c.CheckpointEvery = 1000
			c.Witnesses = []*witness.Client{{URL: tw.URL, Key: cos.Verifier()}}
			c.Logf = func(format string, args ...any) { refusals = append(refusals, format) }
		})
	}
	keys, err := KeysFor("acme", codec.NewSigner(testKey()))
	if err != nil {
		t.Fatal(err)
	}
	keys.WitnessKeys = []string{cos.VerifierKey()}
	policy := verifier.Policy{Witnesses: []*audit.Cosigner{cos.Verifier()}, Quorum: 1}
	ctx := context.Background()

	// The daemon runs: 23 events, recorded and checkpointed, the
	// checkpoint cosigned.
	dir := t.TempDir()
	e, stop := envAt(t, dir)
	d := newDriver(e, "acme", 7, []string{"ord_1", "ord_2"})
	d.appendN(t, 23)
	stored := tenantEvents(t, e.store, "acme")[:23]
	p := projector(e)
	if err := p.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	before := exportOf(t, e, "acme")
	res, err := verifier.VerifyEntriesPolicy(before, keys, policy)
	if err != nil || !res.OK() || len(res.Cosigned) != 1 {
		t.Fatalf("the honest export under the witness policy: %v %+v", err, res.Failure)
	}
	total := res.Records
	var kept []byte // the newest checkpoint the auditor saw
	if err := e.log.Checkpoints(ctx, "acme", 0, 0, func(c StoredCheckpoint) error { kept = c.Note; return nil }); err != nil {
		t.Fatal(err)
	}
	stop()

	// The insider, over a copy of the data dir, on a server with no users.
	forged := t.TempDir()
	if out, err := exec.Command("cp", "-a", dir+"/.", forged).CombinedOutput(); err != nil {
		t.Fatalf("copy the data dir: %v %s", err, out)
	}
	x, stopX := envAt(t, forged)
	for _, name := range []string{events.StreamName, AuditStreamName} {
		if err := x.js.DeleteStream(ctx, name); err != nil {
			t.Fatalf("delete %s: %v", name, err)
		}
	}
	if _, err := events.EnsureStream(ctx, x.js, events.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, st := range stored[:12] {
		if _, err := x.js.Publish(ctx, st.Subject, st.Raw, jetstream.WithMsgID(st.Envelope.EventID)); err != nil {
			t.Fatal(err)
		}
	}
	stopX()

	// The daemon restarts over the forged data dir.
	y, stopY := envAt(t, forged)
	defer stopY()
	p = projector(y)
	if err := p.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	after := exportOf(t, y, "acme")
	if res, err := verifier.VerifyEntriesPolicy(after, keys, verifier.Policy{}); err != nil || !res.OK() || res.Records != 12 {
		t.Fatalf("the republished log should verify against the keys alone (that is the attack): %v %+v", err, res)
	}
	res, err = verifier.VerifyEntriesPolicy(after, keys, policy)
	if err != nil || res.OK() || res.Failure.Reason != audit.ReasonWitness {
		t.Fatalf("under the witness policy: %v %+v; want %s", err, res.Failure, audit.ReasonWitness)
	}
	if st := p.Status(); st.WitnessErrors == 0 || st.Cosigned != 0 || len(refusals) == 0 {
		t.Fatalf("the witness's refusal was not seen: %+v %v", st, refusals)
	}
	if last, ok := w.Last(audit.Origin("acme")); !ok || last.Size != total {
		t.Fatalf("the witness holds %+v, want its checkpoint of %d records", last, total)
	}
	res, err = verifier.VerifyEntriesPolicy(after, keys, verifier.Policy{MinSize: total})
	if err != nil || res.OK() || res.Failure.Reason != audit.ReasonTruncated {
		t.Fatalf("against the kept size %d: %v %+v", total, err, res.Failure)
	}
	res, err = verifier.VerifyEntriesPolicy(after, keys, verifier.Policy{Kept: [][]byte{kept}})
	if err != nil || res.OK() || res.Failure.Reason != audit.ReasonTruncated {
		t.Fatalf("against the kept checkpoint: %v %+v", err, res.Failure)
	}
}
