package aggregates

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
)

// randomCommand returns a command on a small pool of attempts, so that
// reservations, starts, observations, closes, tombstones, assertions and
// refusals all happen.
func randomCommand(r *rand.Rand, resource string) kernel.Command {
	att := fmt.Sprintf("a%02d", r.IntN(24))
	switch r.IntN(6) {
	case 0, 1:
		return kernel.Reserve{GuaranteeID: testDef.ID, Resource: resource, AttemptID: att, OperationID: "op_" + att,
			Amount: int64(1 + r.IntN(30000)), Limit: testDef.Limit, DefinitionDigest: testDef.Digest()}
	case 2:
		return kernel.StartDispatch{AttemptID: att}
	case 3:
		outs := []kernel.Outcome{kernel.OutcomeApplied, kernel.OutcomeNotApplied, kernel.OutcomePending, kernel.OutcomeUnknown, kernel.OutcomePartial}
		return kernel.Observe{AttemptID: att, Outcome: outs[r.IntN(len(outs))], Source: "provider"}
	case 4:
		return kernel.Close{AttemptID: att, Reason: "test"}
	default:
		return kernel.AssertAbsence{AttemptID: att, Operator: "ops", ArtifactRef: "ticket"}
	}
}

// fullFold is the naive path: every event of the subject through a fresh
// ledger.
func fullFold(t testing.TB, store events.Store, resource string) (*kernel.Ledger, uint64) {
	t.Helper()
	subject, _ := codec.ExposureSubject("acme", testDef.ID, resource)
	all, err := store.Read(context.Background(), subject, 1)
	if err != nil {
		t.Fatal(err)
	}
	l := &kernel.Ledger{}
	var seq uint64
	for _, st := range all {
		ev, err := kernel.DecodeEvent(st.Envelope.Type, st.Envelope.V, st.Envelope.Body)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Apply(ev); err != nil {
			t.Fatal(err)
		}
		seq = st.Seq
	}
	return l, seq
}

// coldLedger loads resource through a fresh engine (cold) and returns its
// ledger as the engine sees it.
func coldLedger(t testing.TB, store events.Store, snaps SnapshotStore, resource string) (*kernel.Ledger, uint64, EngineStats) {
	t.Helper()
	eng := NewEngine(store, testSealer())
	eng.Snapshots = snaps
	ref, err := ExposureRef("acme", testDef.ID, resource)
	if err != nil {
		t.Fatal(err)
	}
	eff, err := eng.Run(context.Background(), "acme", kernel.ReadStep(ledgerKey(resource), func(l *kernel.Ledger) any { return l.Clone() }))
	if err != nil {
		t.Fatal(err)
	}
	got := eff.Reply.Data.(*kernel.Ledger)
	seq, err := store.LastSeq(context.Background(), ref.Subject)
	if err != nil {
		t.Fatal(err)
	}
	eng.FlushSnapshots() // a fallback writes a fresh snapshot: let it land before the caller changes the store
	return got, seq, eng.Stats()
}

func sameLedger(t testing.TB, what string, got, want *kernel.Ledger) {
	t.Helper()
	a, _ := json.Marshal(got)
	b, _ := json.Marshal(want)
	if string(a) != string(b) {
		t.Fatalf("%s:\n got %s\nwant %s", what, a, b)
	}
	// The private indexes must agree too: every decision is the same.
	for i := 0; i < 24; i++ {
		att := fmt.Sprintf("a%02d", i)
		for _, c := range []kernel.Command{kernel.StartDispatch{AttemptID: att}, kernel.Close{AttemptID: att},
			kernel.Reserve{GuaranteeID: testDef.ID, Resource: want.Resource, AttemptID: att, OperationID: "op_" + att, Amount: 1, Limit: testDef.Limit, DefinitionDigest: testDef.Digest()}} {
			da, db := kernel.DecideExposure(got, c), kernel.DecideExposure(want, c)
			if fmt.Sprint(da) != fmt.Sprint(db) {
				t.Fatalf("%s: %T %s decides %v on the loaded ledger, %v on the full fold", what, c, att, da, db)
			}
		}
	}
}

// TestSnapshotPlusTailEqualsFullFold: over random command sequences, a cold
// load from the latest snapshot plus the tail after it gives the very ledger
// a full fold gives, at every point; so does a cold load after the snapshot
// was damaged in any of the ways a snapshot can be wrong.
func TestSnapshotPlusTailEqualsFullFold(t *testing.T) {
	for seed := uint64(1); seed <= 12; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 7))
			store := events.NewMemStore()
			snaps := &MemSnapshots{}
			eng := NewEngine(store, testSealer())
			eng.Snapshots = snaps
			eng.SnapshotEvery = 1 + r.IntN(6)
			ctx := context.Background()
			resource := fmt.Sprintf("ord_%d", seed)
			subject, _ := codec.ExposureSubject("acme", testDef.ID, resource)
			var older []byte
			for step := 0; step < 150; step++ {
				if _, _, err := eng.Exposure(ctx, "acme", testDef.ID, resource, randomCommand(r, resource)); err != nil {
					t.Fatal(err)
				}
				if step%10 != 9 {
					continue
				}
				eng.FlushSnapshots()
				if older == nil {
					older, _, _ = snaps.Get(ctx, subject)
				}
				want, wantSeq := fullFold(t, store, resource)
				got, seq, st := coldLedger(t, store, snaps, resource)
				if seq != wantSeq {
					t.Fatalf("step %d: cold load at seq %d, full fold at %d", step, seq, wantSeq)
				}
				sameLedger(t, fmt.Sprintf("step %d (snapshot loads %d)", step, st.SnapshotLoads), got, want)
			}
			if eng.Stats().SnapshotsPut == 0 {
				t.Fatal("no snapshot was ever written")
			}
			want, _ := fullFold(t, store, resource)
			good, _, _ := snaps.Get(ctx, subject)
			if older == nil || string(older) == string(good) {
				t.Fatal("want two different snapshots")
			}
			for _, m := range snapshotManglings(t, good, older, subject) {
				if err := snaps.Put(ctx, []Snapshot{{Subject: subject, Data: m.data}}); err != nil {
					t.Fatal(err)
				}
				got, _, st := coldLedger(t, store, snaps, resource)
				sameLedger(t, "mangled snapshot: "+m.name, got, want)
				if m.usable != (st.SnapshotLoads == 1) {
					t.Fatalf("mangled snapshot %s: snapshot loads %d", m.name, st.SnapshotLoads)
				}
			}
		})
	}
}

type mangled struct {
	name   string
	data   []byte
	usable bool // still a valid (if older) snapshot
}

// snapshotManglings returns damaged variants of a good snapshot.
func snapshotManglings(t testing.TB, good, older []byte, subject string) []mangled {
	t.Helper()
	var doc events.SnapshotDoc
	if err := json.Unmarshal(good, &doc); err != nil {
		t.Fatal(err)
	}
	re := func(f func(d *events.SnapshotDoc, st map[string]any)) []byte {
		d := doc
		var st map[string]any
		if err := json.Unmarshal(doc.State, &st); err != nil {
			t.Fatal(err)
		}
		f(&d, st)
		if st != nil {
			d.State, _ = json.Marshal(st)
		}
		// Re-encoded canonically with the signature it had: a forgery, or
		// corruption that kept the encoding valid.
		b, _ := kernel.Canonical(d)
		return b
	}
	out := []mangled{
		{name: "good", data: good, usable: true},
		{name: "older, genuine", data: older, usable: true},
		{name: "resigned by another key", data: resign(t, good)},
		{name: "not json", data: []byte("{\"v\":1,")},
		{name: "flipped byte", data: flip(good)},
		{name: "future seq", data: re(func(d *events.SnapshotDoc, _ map[string]any) { d.Seq += 1000 })},
		{name: "older seq, same state", data: re(func(d *events.SnapshotDoc, _ map[string]any) { d.Seq-- })},
		{name: "other event id", data: re(func(d *events.SnapshotDoc, _ map[string]any) { d.EventID = "01JZZZZZZZZZZZZZZZZZZZZZZZ" })},
		{name: "other subject", data: re(func(d *events.SnapshotDoc, _ map[string]any) { d.Subject = subject + "x" })},
		{name: "held changed", data: re(func(_ *events.SnapshotDoc, st map[string]any) { st["held"] = st["held"].(float64) + 1 })},
		{name: "other resource", data: re(func(_ *events.SnapshotDoc, st map[string]any) { st["resource"] = "ord_other" })},
		{name: "unknown field", data: re(func(_ *events.SnapshotDoc, st map[string]any) { st["extra"] = 1 })},
		{name: "receipts dropped", data: re(func(_ *events.SnapshotDoc, st map[string]any) {
			st["receipts"], st["held"], st["committed"] = []any{}, 0, 0
		})},
	}
	// The same document, signature intact, in another encoding (Go's
	// struct field order instead of JCS): refused, one format one encoding.
	b, _ := json.Marshal(doc)
	out = append(out, mangled{name: "non-canonical encoding", data: b})
	return out
}

// resign signs a copy of a good snapshot with another key.
func resign(t testing.TB, good []byte) []byte {
	var d events.SnapshotDoc
	if err := json.Unmarshal(good, &d); err != nil {
		t.Fatal(err)
	}
	other := codec.NewSigner(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32)))
	b, err := EncodeSnapshot(other, d.Subject, d.Seq, d.EventID, d.State)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func flip(b []byte) []byte {
	c := append([]byte(nil), b...)
	c[len(c)/2] ^= 0x01
	return c
}
