package verifier

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/contextos/ledger/audit"
	"github.com/contextos/ledger/exposure"
)

// seedVectors adds every file of testdata/verifier whose name ends with
// suffix to the corpus.
func seedVectors(f *testing.F, suffix string) {
	f.Helper()
	names, err := filepath.Glob(filepath.Join(vectorDir, "*"+suffix))
	if err != nil {
		f.Fatal(err)
	}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// smallFixture is a 3-record log: small seeds keep each fuzz execution (and
// the minimization of new inputs) fast.
func smallFixture(f *testing.F) *fixture { return newFixture(f, 3, 2) }

// FuzzVerifyEntries: entries.json never panics the parser or the verifier,
// and whatever parses re-encodes to the same bytes.
func FuzzVerifyEntries(f *testing.F) {
	fx := smallFixture(f)
	f.Add(fx.entries(f))
	cut, _ := audit.MarshalEntries(audit.Entries{Tenant: fx.tenant, Records: fx.records[:1], Checkpoints: fx.checkpoints[:1]})
	f.Add(cut)
	keys := fx.keys
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := audit.ParseEntries(b)
		if err != nil {
			return
		}
		again, err := audit.MarshalEntries(e)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("entries do not round-trip: %v", err)
		}
		res, err := VerifyEntries(b, keys)
		if err != nil {
			t.Fatalf("parsed entries refused as a file: %v", err)
		}
		if res.OK() {
			if _, err := ReplayEntries(e); err != nil && len(e.Records) > 0 {
				t.Logf("verified export does not replay: %v", err)
			}
		}
	})
}

// FuzzVerifyProof: proof.json never panics, and parses round-trip.
func FuzzVerifyProof(f *testing.F) {
	fx := smallFixture(f)
	p, err := ProveEntries(audit.Entries{Tenant: fx.tenant, Records: fx.records, Checkpoints: fx.checkpoints}, mustEventIDF(f, fx.records[1]))
	if err != nil {
		f.Fatal(err)
	}
	b, err := audit.MarshalProof(p)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	keys := fx.keys
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := audit.ParseProof(b)
		if err != nil {
			return
		}
		again, err := audit.MarshalProof(p)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("proof does not round-trip: %v", err)
		}
		_, _, _ = VerifyProof(b, keys)
	})
}

// FuzzParseKeys: keys.json never panics, and what parses marshals to a file
// that parses to the same keys.
func FuzzParseKeys(f *testing.F) {
	seedVectors(f, "keys.json")
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := audit.ParseKeys(b)
		if err != nil {
			return
		}
		again, err := audit.MarshalKeys(k)
		if err != nil {
			t.Fatal(err)
		}
		k2, err := audit.ParseKeys(again)
		if err != nil || len(k2.Keyring) != len(k.Keyring) || len(k2.CheckpointKeys) != len(k.CheckpointKeys) {
			t.Fatalf("keys do not round-trip: %v", err)
		}
		_, _ = k.Verifiers()
	})
}

// FuzzReplay: events.jsonl never panics the reader or the fold, and every
// parsed line re-encodes to the same bytes.
func FuzzReplay(f *testing.F) {
	fx := smallFixture(f)
	f.Add(fx.eventsJSONL(f))
	keys := fx.keys
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = audit.ReadEvents(bytes.NewReader(b), func(l audit.EventLine) error {
			again, err := audit.MarshalEventLine(l.Seq, l.Subject, l.Raw)
			if err != nil {
				t.Fatalf("parsed line does not marshal: %v", err)
			}
			if !bytes.Contains(b, again) {
				t.Fatalf("line does not round-trip")
			}
			return nil
		})
		_, _ = Replay(bytes.NewReader(b), nil)
		_, _ = Replay(bytes.NewReader(b), keys.Keyring)
	})
}

// FuzzParseView: view.json never panics, and parses round-trip.
func FuzzParseView(f *testing.F) {
	seedVectors(f, "view.json")
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := exposure.ParseView(b)
		if err != nil {
			return
		}
		again, err := exposure.MarshalView(v)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("view does not round-trip: %v", err)
		}
		_ = Compare(v, v)
	})
}

func mustEventIDF(f *testing.F, rec []byte) string {
	f.Helper()
	return mustEnvelope(f, rec).EventID
}

// FuzzVerifyConsistency: consistency.json never panics, parses round-trip,
// and whatever verifies names an older checkpoint no larger than the newer.
func FuzzVerifyConsistency(f *testing.F) {
	fx := smallFixture(f)
	seedVectors(f, "consistency.json")
	for size := range int64(3) {
		if c, err := ProveConsistency(audit.Entries{Tenant: fx.tenant, Records: fx.records, Checkpoints: fx.checkpoints}, size+1); err == nil {
			if b, err := audit.MarshalConsistency(c); err == nil {
				f.Add(b)
			}
		}
	}
	keys := fx.keys
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := audit.ParseConsistency(b)
		if err != nil {
			return
		}
		again, err := audit.MarshalConsistency(c)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("consistency does not round-trip: %v", err)
		}
		if _, old, cur, err := VerifyConsistency(b, keys); err == nil && old.Size > cur.Size {
			t.Fatalf("verified an old checkpoint of %d against a new one of %d", old.Size, cur.Size)
		}
	})
}
