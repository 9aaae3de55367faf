package daemon_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/contextos/ledger/aggregates"
	"github.com/contextos/ledger/audit"
	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/daemon"
	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/internal/testing/daemontest"
	"github.com/contextos/ledger/internal/testing/testenv"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/projections"
	"github.com/contextos/ledger/verifier"
	"github.com/contextos/ledger/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// appendReservation stores one signed reservation, as a decision would.
func appendReservation(t *testing.T, rt *daemon.Runtime, n int) {
	t.Helper()
	var l kernel.Ledger
	dec := kernel.DecideExposure(&l, kernel.Reserve{GuaranteeID: "g", Resource: fmt.Sprintf("r%d", n), AttemptID: fmt.Sprintf("a%d", n),
		OperationID: "op", Amount: 1, Limit: 10, DefinitionDigest: "d"})
	if dec.Refusal != nil || len(dec.Events) == 0 {
		t.Fatalf("%+v", dec.Refusal)
	}
	env, err := rt.Signer.Seal(dec.Events[0].EventType(), kernel.EventVersion, aggregates.NewIDs(aggregates.SystemClock{}, nil).New(), "acme", codec.FormatTime(time.Now()), dec.Events[0])
	if err != nil {
		t.Fatal(err)
	}
	subject, err := codec.ExposureSubject("acme", "g", fmt.Sprintf("r%d", n))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Store.Append(context.Background(), subject, 0, env); err != nil {
		t.Fatal(err)
	}
}

// publishedKeys asks the running daemon's audit-keys verb.
func publishedKeys(t *testing.T, rt *daemon.Runtime) audit.Keys {
	t.Helper()
	r := rt.Service.Ops.Handle(context.Background(), "acme", wire.VerbAuditKeys, []byte("{}"))
	k, err := audit.ParseKeys(r.File)
	if err != nil {
		t.Fatalf("%+v: %v", r, err)
	}
	return k
}

func bootErr(t *testing.T, cfg *config.Config, want string) {
	t.Helper()
	rt, err := bootConfig(t, cfg, daemontest.Options{})
	if err == nil {
		rt.Close()
		t.Fatalf("boot succeeded; want a refusal naming %q", want)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("boot: %v; want %q", err, want)
	}
}

// TestKeyLifecycle: a lost key is not silently replaced once the stream
// holds events; a replica with another key is refused; "keys rotate"
// records the hand-over (signed by the old key, or asserted by an operator
// when it is lost) and boot then takes the new key, publishing the retired
// ones in audit-keys, so the whole log still verifies.
func TestKeyLifecycle(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir, "http://127.0.0.1:1")
	path, err := daemon.KeyPath(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := bootConfig(t, cfg, daemontest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	first := rt.Signer.KeyID
	appendReservation(t, rt, 0)
	rt.Close()
	saved, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	// A lost key is refused, not replaced.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	bootErr(t, cfg, "is missing")
	// A replica with a key of its own is refused.
	other, err := codec.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if err := codec.SavePrivateKey(path, other); err != nil {
		t.Fatal(err)
	}
	bootErr(t, cfg, "is not the stream's signing key")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, saved, 0o600); err != nil {
		t.Fatal(err)
	}

	// A rotation signed by the old key.
	second, err := daemon.RotateKey(cfg, daemon.RotateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + ".retired-" + strings.TrimPrefix(first, "ed25519:")); err != nil {
		t.Fatalf("the old key file was not kept: %v", err)
	}
	// The retired key may not boot again.
	retiredCfg := *cfg
	retiredCfg.Runtime.KeyFile = path + ".retired-" + strings.TrimPrefix(first, "ed25519:")
	bootErr(t, &retiredCfg, "is not the stream's signing key")
	rt, err = bootConfig(t, cfg, daemontest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rt.Signer.KeyID != second {
		t.Fatalf("booted with %s, want %s", rt.Signer.KeyID, second)
	}
	appendReservation(t, rt, 1)
	keys := publishedKeys(t, rt)
	if _, ok := keys.Keyring[first]; !ok || len(keys.Keyring) != 2 {
		t.Fatalf("audit-keys %v lacks the retired key %s", keys.Keyring, first)
	}
	// The log (events by both keys, and the rotation) verifies against them.
	waitLog(t, rt, 3)
	rt.Close()

	// The new key is lost: an operator asserts it, naming its public key.
	lostPub := keys.Keyring[second]
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, err := daemon.RotateKey(cfg, daemon.RotateOptions{LostKey: true}); err == nil {
		t.Fatal("a rotation without the old key and without an assertion was accepted")
	}
	third, err := daemon.RotateKey(cfg, daemon.RotateOptions{LostKey: true, Operator: "ops_alice", ArtifactRef: "INC-42", OldPublicKey: ed25519.PublicKey(lostPub)})
	if err != nil {
		t.Fatal(err)
	}
	rt, err = bootConfig(t, cfg, daemontest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if rt.Signer.KeyID != third {
		t.Fatalf("booted with %s, want %s", rt.Signer.KeyID, third)
	}
	keys = publishedKeys(t, rt)
	if len(keys.Keyring) != 3 {
		t.Fatalf("audit-keys holds %d keys, want the current one and two retired", len(keys.Keyring))
	}
	waitLog(t, rt, 4)
}

// waitLog waits until the audit log of acme records n events, and checks
// it against the published keys.
func waitLog(t *testing.T, rt *daemon.Runtime, n int64) {
	t.Helper()
	keys := publishedKeys(t, rt)
	deadline := time.Now().Add(20 * time.Second)
	for {
		x := audit.Entries{Tenant: "acme", Records: [][]byte{}, Checkpoints: [][]byte{}}
		err := rt.Service.Log.Records(context.Background(), "acme", 0, 0, func(r projections.StoredRecord) error {
			x.Records = append(x.Records, r.Raw)
			return nil
		})
		if err == nil && int64(len(x.Records)) >= n {
			b, err := audit.MarshalEntries(x)
			if err != nil {
				t.Fatal(err)
			}
			res, err := verifier.VerifyEntriesPolicy(b, keys, verifier.Policy{AllowPartial: true})
			if err != nil || !res.OK() {
				t.Fatalf("the log does not verify against the published keys: %v %+v", err, res.Failure)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the audit log holds %d records, want %d (%v)", len(x.Records), n, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRuntimeSubmitsCheckpointsToWitnesses: a runtime configured with a
// witness (HTTP on loopback) has its checkpoints cosigned, publishes the
// witness's key in audit-keys, and its log verifies under a policy of that
// witness.
func TestRuntimeSubmitsCheckpointsToWitnesses(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir, "http://127.0.0.1:1")
	// The runtime's key is made first, so that the witness knows the log.
	rt, err := bootConfig(t, cfg, daemontest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tw := testenv.Witness(t, "acme", rt.Signer.Key.Public().(ed25519.PublicKey))
	cos, w := tw.Cosigner, tw.Witness
	rt.Close()
	cfg.Runtime.Witnesses = []config.WitnessConfig{{URL: tw.URL, Key: tw.Key}}
	cfg.Runtime.AuditCheckpointEvery = 256
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	rt, err = bootConfig(t, cfg, daemontest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	for i := 0; i < 256; i++ { // a checkpoint is due every 256 records
		appendReservation(t, rt, i)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if last, ok := w.Last(audit.Origin("acme")); ok && last.Size >= 256 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the witness cosigned no checkpoint of 256 records")
		}
		time.Sleep(20 * time.Millisecond)
	}
	keys := publishedKeys(t, rt)
	if len(keys.WitnessKeys) != 1 || keys.WitnessKeys[0] != cos.VerifierKey() {
		t.Fatalf("audit-keys lists witnesses %v", keys.WitnessKeys)
	}
	// The boot check's checkpoint (the guarantee pin), then the one due 256
	// records later, once the log holds it too.
	ctx := context.Background()
	var x audit.Entries
	var size int64
	testenv.Eventually(t, func() bool {
		x, size = audit.Entries{Tenant: "acme", Records: [][]byte{}, Checkpoints: [][]byte{}}, 0
		if err := rt.Service.Log.Checkpoints(ctx, "acme", 0, 0, func(c projections.StoredCheckpoint) error {
			cp, err := audit.ReadCheckpoint(c.Note)
			if err != nil {
				return err
			}
			x.Checkpoints, size = append(x.Checkpoints, c.Note), cp.Size
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return size >= 256
	}, 20*time.Second, "a checkpoint of 256 records in the log")
	if err := rt.Service.Log.Records(ctx, "acme", 0, int(size), func(r projections.StoredRecord) error { x.Records = append(x.Records, r.Raw); return nil }); err != nil {
		t.Fatal(err)
	}
	b, err := audit.MarshalEntries(x)
	if err != nil {
		t.Fatal(err)
	}
	res, err := verifier.VerifyEntriesPolicy(b, keys, verifier.Policy{Witnesses: []*audit.Cosigner{cos.Verifier()}, Quorum: 1})
	if err != nil || !res.OK() || res.Covered != size {
		t.Fatalf("%v %+v", err, res)
	}
}

// TestDaemonDeletionAndRepublishRefusedByWitness is the insider's attack on
// a real daemon: it runs with a witness and its log of 256 events is
// cosigned; stopped, its data dir is copied, an unauthenticated nats-server
// over the copy deletes both streams and republishes half of the events;
// the daemon restarts over the copy (same key) and records a new log,
// whose checkpoint of 256 records the witness refuses as a fork. The new
// export verifies against the runtime keys alone, and is refused under the
// witness policy.
func TestDaemonDeletionAndRepublishRefusedByWitness(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir, "http://127.0.0.1:1")
	rt, err := bootConfig(t, cfg, daemontest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tw := testenv.Witness(t, "acme", rt.Signer.Key.Public().(ed25519.PublicKey))
	cos, w := tw.Cosigner, tw.Witness
	rt.Close()
	cfg.Runtime.Witnesses = []config.WitnessConfig{{URL: tw.URL, Key: tw.Key}}
	cfg.Runtime.AuditCheckpointEvery = 256
	waitWitness := func(size int64) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			if last, ok := w.Last(audit.Origin("acme")); ok && last.Size >= size {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the witness cosigned no checkpoint of %d records", size)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	rt, err = bootConfig(t, cfg, daemontest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 256; i++ {
		appendReservation(t, rt, i)
	}
	waitWitness(256) // acme's guarantee pin and 255 reservations
	seen, _ := w.Last(audit.Origin("acme"))
	keys := publishedKeys(t, rt)
	// The projector submits a checkpoint to the witness before it appends
	// it to the log: wait for the log to hold it too.
	var kept []byte // the cosigned checkpoint of 256 records an auditor kept
	testenv.Eventually(t, func() bool {
		if err := rt.Service.Log.Checkpoints(context.Background(), "acme", 0, 0, func(c projections.StoredCheckpoint) error { kept = c.Note; return nil }); err != nil {
			t.Fatal(err)
		}
		cp, err := audit.ReadCheckpoint(kept)
		return err == nil && cp.Size >= 256
	}, 20*time.Second, "the cosigned checkpoint in the audit log")
	var stored [][2]string // subject, raw
	if err := rt.Store.Replay(context.Background(), 1, func(st events.Stored) error {
		stored = append(stored, [2]string{st.Subject, string(st.Raw)})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	rt.Close()

	// The insider, over a copy of the data dir, with no users.
	forged := t.TempDir()
	if out, err := exec.Command("cp", "-a", dir+"/.", forged).CombinedOutput(); err != nil {
		t.Fatalf("copy the data dir: %v %s", err, out)
	}
	emb, err := events.StartEmbedded(events.EmbeddedConfig{DataDir: forged, DontListen: true})
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
	ctx := context.Background()
	for _, name := range []string{events.StreamName, projections.AuditStreamName} {
		if err := js.DeleteStream(ctx, name); err != nil {
			t.Fatalf("delete %s: %v", name, err)
		}
	}
	if _, err := events.EnsureStream(ctx, js, events.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, st := range stored[:128] {
		if _, err := js.Publish(ctx, st[0], []byte(st[1])); err != nil {
			t.Fatal(err)
		}
	}
	nc.Close()
	emb.Shutdown()

	// The daemon restarts over the forged data dir and carries on.
	fcfg := testConfig(t, forged, "http://127.0.0.1:1")
	fcfg.Runtime.Witnesses = cfg.Runtime.Witnesses
	rt, err = bootConfig(t, fcfg, daemontest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	// As many new events as the kept checkpoint covers: the new log's
	// checkpoint of that size has another root.
	republished := 0
	for _, st := range stored[:128] {
		if strings.HasPrefix(st[0], "ctx.ev.acme.") {
			republished++
		}
	}
	keptCP, err := audit.ReadCheckpoint(kept)
	if err != nil {
		t.Fatal(err)
	}
	size := int(keptCP.Size)
	for i := 0; i < size-republished; i++ {
		appendReservation(t, rt, 1000+i)
	}
	// The boot checkpoint reset the count of uncovered records: publish one
	// of the whole new log now.
	testenv.Eventually(t, func() bool { return rt.Service.Projectors["acme"].Status().Records >= int64(size+1) }, 20*time.Second, "the new log recorded")
	if err := rt.Service.Projectors["acme"].Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	var x audit.Entries
	deadline := time.Now().Add(20 * time.Second)
	for {
		x = audit.Entries{Tenant: "acme", Records: [][]byte{}, Checkpoints: [][]byte{}}
		_ = rt.Service.Log.Records(ctx, "acme", 0, 0, func(r projections.StoredRecord) error { x.Records = append(x.Records, r.Raw); return nil })
		_ = rt.Service.Log.Checkpoints(ctx, "acme", 0, 0, func(c projections.StoredCheckpoint) error { x.Checkpoints = append(x.Checkpoints, c.Note); return nil })
		if len(x.Records) >= size+1 && len(x.Checkpoints) > 1 && rt.Service.Projectors["acme"].Status().WitnessErrors > 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint of the new log was submitted (%d records, %d checkpoints)", len(x.Records), len(x.Checkpoints))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The boot check caught the shrink before any checkpoint fell due: the
	// incident is recorded in the new log (one more record) and stops
	// dispatch.
	if n := len(x.Records); n != size+1 {
		t.Fatalf("the new log holds %d records, want %d and the incident", n, size)
	}
	if st, err := rt.Gateway.Integrity(ctx, "acme"); err != nil || st.Open == nil || st.Open.Kind != kernel.IntegrityShrank {
		t.Fatalf("integrity %+v %v; want an open incident of a log that shrank", st, err)
	}
	b, err := audit.MarshalEntries(x)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := verifier.VerifyEntries(b, keys); err != nil || !res.OK() {
		t.Fatalf("the republished log should verify against the keys alone (that is the attack): %v %+v", err, res.Failure)
	}
	res, err := verifier.VerifyEntriesPolicy(b, keys, verifier.Policy{Witnesses: []*audit.Cosigner{cos.Verifier()}, Quorum: 1})
	if err != nil || res.OK() || res.Failure.Reason != audit.ReasonWitness {
		t.Fatalf("under the witness policy: %v %+v; want %s", err, res.Failure, audit.ReasonWitness)
	}
	res, err = verifier.VerifyEntriesPolicy(b, keys, verifier.Policy{Witnesses: []*audit.Cosigner{cos.Verifier()}, Kept: [][]byte{kept}})
	if err != nil || res.OK() || res.Failure.Reason != audit.ReasonHashBreak {
		t.Fatalf("against the kept cosigned checkpoint: %v %+v; want %s (the same size, another log)", err, res.Failure, audit.ReasonHashBreak)
	}
	if last, _ := w.Last(audit.Origin("acme")); last != seen {
		t.Fatalf("the witness now holds %+v, want the checkpoint it cosigned before, %+v", last, seen)
	}
}
