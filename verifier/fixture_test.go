package verifier

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/contextos/ledger/audit"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/exposure"
	"github.com/contextos/ledger/kernel"
	"github.com/oklog/ulid/v2"
	"golang.org/x/mod/sumdb/note"
)

// fixedKey returns the Ed25519 key made from SHA-256(label): vectors are
// deterministic.
func fixedKey(label string) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte(label))
	return ed25519.NewKeyFromSeed(seed[:])
}

// storedEvent is an event as the stream holds it.
type storedEvent struct {
	seq     uint64
	subject string
	raw     []byte
}

// fixture is a deterministic tenant log: events decided by the kernel and
// signed, their audit records and checkpoints.
type fixture struct {
	tenant      string
	key         ed25519.PrivateKey
	signer      codec.Signer
	noteSigner  note.Signer
	stored      []storedEvent
	records     [][]byte
	tree        audit.Tree
	checkpoints [][]byte // each cosigned by witness
	witness     *audit.Cosigner
	keys        audit.Keys
	view        exposure.View
}

// fixedID returns a canonical ULID made from i alone.
func fixedID(i int) string {
	var ent [10]byte
	binary.BigEndian.PutUint64(ent[2:], uint64(i)*0x9E3779B97F4A7C15)
	return ulid.MustNew(uint64(1767225600000+i), bytes.NewReader(ent[:])).String()
}

func fixedTime(i int) string {
	return codec.FormatTime(time.Unix(1767225600+int64(i), 0).UTC())
}

// newFixture decides a scripted exposure history over two resources, seals
// its events (n at most), records them and checkpoints every cpEvery records
// and at the end.
func newFixture(tb testing.TB, n, cpEvery int, runs ...int) *fixture {
	tb.Helper()
	f := &fixture{tenant: "acme", key: fixedKey("contextos verifier vectors: runtime key")}
	f.signer = codec.NewSigner(f.key)
	keys, err := audit.KeysFor(f.tenant, f.key.Public().(ed25519.PublicKey))
	if err != nil {
		tb.Fatal(err)
	}
	if f.witness, err = audit.NewCosigner("witness.test/w1", fixedKey("contextos verifier vectors: witness w1"), fixedClock); err != nil {
		tb.Fatal(err)
	}
	keys.WitnessKeys = []string{f.witness.VerifierKey()}
	f.keys = keys
	type res struct {
		name    string
		subject string
		ledger  kernel.Ledger
	}
	rs := []*res{{name: "ord_881"}, {name: "ord 992.*>/é"}}
	for _, r := range rs {
		if r.subject, err = codec.ExposureSubject(f.tenant, "refunds-per-order", r.name); err != nil {
			tb.Fatal(err)
		}
	}
	outcomes := []kernel.Outcome{kernel.OutcomePending, kernel.OutcomeApplied, kernel.OutcomeUnknown, kernel.OutcomeNotApplied}
	seq := uint64(0)
	var drafts []codec.Draft
	var subjects []string
	for i := 0; len(drafts) < n; i++ {
		k := i / 4
		r := rs[k%len(rs)]
		a := fmt.Sprintf("att_%d", k)
		var cmd kernel.Command
		switch i % 4 {
		case 0:
			cmd = kernel.Reserve{GuaranteeID: "refunds-per-order", Resource: r.name, AttemptID: a, OperationID: "op_" + a,
				Amount: int64(100 + 10*(k%20)), Limit: 100000000, DefinitionDigest: "d1"}
		case 1:
			cmd = kernel.StartDispatch{AttemptID: a}
		case 2:
			cmd = kernel.Observe{AttemptID: a, Outcome: outcomes[k%len(outcomes)], Source: "provider"}
		case 3:
			cmd = kernel.Observe{AttemptID: a, Outcome: outcomes[(k+1)%len(outcomes)], Source: "reconcile"}
		}
		if i > 8*n+8 {
			tb.Fatalf("fixture script stalled at %d events", len(drafts))
		}
		dec := kernel.DecideExposure(&r.ledger, cmd)
		for _, ev := range dec.Events {
			if len(drafts) == n {
				break
			}
			if err := r.ledger.Apply(ev); err != nil {
				tb.Fatal(err)
			}
			k := len(drafts)
			drafts = append(drafts, codec.Draft{Type: ev.EventType(), V: kernel.EventVersion, EventID: fixedID(k), Tenant: f.tenant, Time: fixedTime(k), Body: ev})
			subjects = append(subjects, r.subject)
		}
	}
	// The events are sealed in runs of 1, 3 and 2 under one signature each
	// (or of the lengths runs gives), as the runtime seals a decision's
	// events: both forms are in the vectors.
	if len(runs) == 0 {
		runs = []int{1, 3, 2}
	}
	for k, run := 0, 0; k < len(drafts); run++ {
		to := min(k+runs[run%len(runs)], len(drafts))
		envs, err := f.signer.SealAll(drafts[k:to])
		if err != nil {
			tb.Fatal(err)
		}
		for _, env := range envs {
			raw, err := codec.Encode(env)
			if err != nil {
				tb.Fatal(err)
			}
			seq += 1 + uint64(k%3) // other tenants' events interleave
			f.stored = append(f.stored, storedEvent{seq: seq, subject: subjects[k], raw: raw})
			k++
		}
	}
	ns, err := audit.NewNoteSigner(audit.Origin(f.tenant), f.key)
	if err != nil {
		tb.Fatal(err)
	}
	f.noteSigner = ns
	chain := audit.NewChain(f.tenant)
	for i, st := range f.stored {
		env, err := codec.Decode(st.raw)
		if err != nil {
			tb.Fatal(err)
		}
		rec, raw, err := audit.Seal(f.tenant, int64(i), chain.PrevHash(), st.seq, st.subject, st.raw, env)
		if err != nil {
			tb.Fatal(err)
		}
		if err := chain.Append(rec, raw); err != nil {
			tb.Fatal(err)
		}
		f.records = append(f.records, raw)
		if err := f.tree.Append(audit.RecordHash(raw)); err != nil {
			tb.Fatal(err)
		}
		if size := int64(i + 1); size%int64(cpEvery) == 0 || i == len(f.stored)-1 {
			f.checkpoints = append(f.checkpoints, f.cosign(tb, f.sign(tb, size, &f.tree), f.witness))
		}
	}
	fold := NewFold(f.tenant)
	for _, st := range f.stored {
		env, err := codec.Decode(st.raw)
		if err != nil {
			tb.Fatal(err)
		}
		if err := fold.Apply(st.seq, st.subject, env); err != nil {
			tb.Fatal(err)
		}
	}
	f.view = fold.View()
	return f
}

func (f *fixture) entries(tb testing.TB) []byte {
	tb.Helper()
	b, err := audit.MarshalEntries(audit.Entries{Tenant: f.tenant, Records: f.records, Checkpoints: f.checkpoints})
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func (f *fixture) eventsJSONL(tb testing.TB) []byte {
	tb.Helper()
	var b bytes.Buffer
	for _, st := range f.stored {
		line, err := audit.MarshalEventLine(st.seq, st.subject, st.raw)
		if err != nil {
			tb.Fatal(err)
		}
		b.Write(line)
	}
	return b.Bytes()
}

func (f *fixture) keysJSON(tb testing.TB) []byte {
	tb.Helper()
	b, err := audit.MarshalKeys(f.keys)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// sign returns the log's signed checkpoint of the first size records of t.
func (f *fixture) sign(tb testing.TB, size int64, t *audit.Tree) []byte {
	tb.Helper()
	root, err := t.Root(size)
	if err != nil {
		tb.Fatal(err)
	}
	cp, err := audit.SignCheckpoint(audit.Checkpoint{Origin: audit.Origin(f.tenant), Size: size, Root: root}, f.noteSigner)
	if err != nil {
		tb.Fatal(err)
	}
	return cp
}

// cosign adds w's cosignature to a signed checkpoint.
func (f *fixture) cosign(tb testing.TB, signed []byte, w *audit.Cosigner) []byte {
	tb.Helper()
	c, err := audit.ReadCheckpoint(signed)
	if err != nil {
		tb.Fatal(err)
	}
	line, err := w.Cosign(c.Text())
	if err != nil {
		tb.Fatal(err)
	}
	return audit.AddCosignatures(signed, line)
}

// fixedClock is the witnesses' clock in the vectors.
func fixedClock() uint64 { return 1767225600 }

// reencode encodes a record again after edit changed it.
func reencode(tb testing.TB, raw []byte, edit func(*audit.Record)) []byte {
	tb.Helper()
	r, _, err := audit.Parse(raw)
	if err != nil {
		tb.Fatal(err)
	}
	edit(&r)
	out, err := kernel.Canonical(r)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// resign signs a record's event again with signer, after edit changed its
// envelope.
func resign(tb testing.TB, raw []byte, signer codec.Signer, edit func(*codec.Envelope)) []byte {
	tb.Helper()
	return reencode(tb, raw, func(r *audit.Record) {
		env, err := codec.Decode(r.Event)
		if err != nil {
			tb.Fatal(err)
		}
		edit(&env)
		env, err = signer.Seal(env.Type, env.V, env.EventID, env.Tenant, env.Time, env.Body)
		if err != nil {
			tb.Fatal(err)
		}
		if r.Event, err = codec.Encode(env); err != nil {
			tb.Fatal(err)
		}
	})
}
