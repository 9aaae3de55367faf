package projections

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"math/bits"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/contextos/ledger/audit"
	"github.com/contextos/ledger/audit/witness"
	"github.com/contextos/ledger/internal/testing/testenv"
	"github.com/contextos/ledger/verifier"
	"github.com/contextos/ledger/wire"
)

// TestProofsKeepNothingPerRecord writes a few hundred records on a real
// JetStream log, with checkpoints at sizes that are not powers of two and
// a witness cosigning each, then serves inclusion and consistency proofs.
// Every proof is byte for byte the one made from the full tree of the
// export (verifier.ProveEntries, ProveConsistency), and afterwards neither
// the projector nor the ops verbs hold anything per record: the chain is a
// compact range of one hash per bit of its size, the projector keeps at
// most one snapshot per witness plus one, and Ops has no state at all.
func TestProofsKeepNothingPerRecord(t *testing.T) {
	tw := testenv.Witness(t, "acme", testKey().Public().(ed25519.PublicKey))
	cos := tw.Cosigner

	e := newEnv(t)
	ctx := context.Background()
	d := newDriver(e, "acme", 11, []string{"r1", "r2", "r3"})
	var witnessErrs []string
	p := e.projector(t, "acme", e.log, func(c *AuditConfig) {
		c.CheckpointEvery = 37
		c.Witnesses = []*witness.Client{{URL: tw.URL, Key: cos.Verifier()}}
		c.Logf = func(format string, args ...any) { witnessErrs = append(witnessErrs, format) }
	})
	for p.Status().Records < 300 {
		d.appendN(t, 50)
		if err := p.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	st := p.Status()
	if st.WitnessErrors != 0 || st.Cosigned < 8 {
		t.Fatalf("witness: %d cosigned, %d errors %v", st.Cosigned, st.WitnessErrors, witnessErrs)
	}

	ops := NewOps(OpsConfig{Log: e.log, Events: e.store, PublicKeys: []ed25519.PublicKey{e.signer.Key.Public().(ed25519.PublicKey)}})
	x := exportAudit(t, e, "acme")
	if int64(len(x.Records)) != st.Records {
		t.Fatalf("export of %d records, projector at %d", len(x.Records), st.Records)
	}
	evs := tenantEvents(t, e.store, "acme")
	began := time.Now()
	for _, i := range []int{0, 1, 36, 37, 63, 64, 127, 128, 200, len(x.Records) - 2, len(x.Records) - 1} {
		reply := ops.Handle(ctx, "acme", wire.VerbAuditProve, []byte(`{"event_id":"`+evs[i].Envelope.EventID+`"}`))
		if !reply.OK {
			t.Fatalf("proof of record %d: %s %s", i, reply.Code, reply.Reason)
		}
		ref, err := verifier.ProveEntries(x, evs[i].Envelope.EventID)
		if err != nil {
			t.Fatal(err)
		}
		want, err := audit.MarshalProof(ref)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(reply.File, want) {
			t.Fatalf("proof of record %d differs from the full tree's:\n%s\n%s", i, reply.File, want)
		}
	}
	t.Logf("11 inclusion proofs over %d records in %v", len(x.Records), time.Since(began))
	began = time.Now()
	for _, note := range x.Checkpoints {
		cp, err := audit.ReadCheckpoint(note)
		if err != nil {
			t.Fatal(err)
		}
		reply := ops.Handle(ctx, "acme", wire.VerbAuditProveConsistency, []byte(`{"old_size":`+itoa(cp.Size)+`}`))
		if !reply.OK {
			t.Fatalf("consistency of %d: %s %s", cp.Size, reply.Code, reply.Reason)
		}
		ref, err := verifier.ProveConsistency(x, cp.Size)
		if err != nil {
			t.Fatal(err)
		}
		want, err := audit.MarshalConsistency(ref)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(reply.File, want) {
			t.Fatalf("consistency of %d differs from the full tree's:\n%s\n%s", cp.Size, reply.File, want)
		}
	}

	t.Logf("%d consistency proofs in %v", len(x.Checkpoints), time.Since(began))
	if n := reflect.TypeOf(Ops{}).NumField(); n != 1 {
		t.Fatalf("Ops has %d fields: a proof must not leave state behind", n)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	size := p.chain.Size()
	if got := p.chain.FrontierLen(); got != bits.OnesCount64(uint64(size)) || got > 64 {
		t.Fatalf("chain of %d records holds %d hashes", size, got)
	}
	if len(p.snaps) > 1+len(p.cfg.Witnesses) {
		t.Fatalf("%d snapshots kept for %d witnesses", len(p.snaps), len(p.cfg.Witnesses))
	}
	for _, s := range p.snaps {
		if s.FrontierLen() > 64 || (s.Size() != p.ckSize && s.Size() != p.cfg.Witnesses[0].Known()) {
			t.Fatalf("snapshot of %d records kept (checkpoint %d, witness %d)", s.Size(), p.ckSize, p.cfg.Witnesses[0].Known())
		}
	}
}

// TestAuditChecksAnOlderCheckpoint: a projector ahead of the log's last
// checkpoint (another replica published one of fewer records) checks it by
// reading the records from its snapshot, and refuses one whose root is not
// the records'.
func TestAuditChecksAnOlderCheckpoint(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	newDriver(e, "acme", 5, []string{"r1"}).appendN(t, 40)
	p := e.projector(t, "acme", e.log, func(c *AuditConfig) { c.CheckpointEvery = 1000 })
	if err := p.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	x := exportAudit(t, e, "acme")
	var tree audit.Tree
	for _, raw := range x.Records {
		if err := tree.Append(audit.RecordHash(raw)); err != nil {
			t.Fatal(err)
		}
	}
	for _, size := range []int64{1, 16, 17, 31, int64(len(x.Records)) - 1} {
		root, err := tree.Root(size)
		if err != nil {
			t.Fatal(err)
		}
		cp := audit.Checkpoint{Origin: audit.Origin("acme"), Size: size, Root: root}
		if err := p.checkAt(ctx, cp); err != nil {
			t.Fatalf("checkpoint of %d: %v", size, err)
		}
		cp.Root[3] ^= 1
		if err := p.checkAt(ctx, cp); err == nil {
			t.Fatalf("a changed root at %d was accepted", size)
		}
		known := p.witnessSizes()
		p.mu.Lock()
		p.prune(known)
		p.mu.Unlock()
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
