package verifier

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/kernel"
	"golang.org/x/mod/sumdb/tlog"
)

var update = flag.Bool("update", false, "rewrite testdata/verifier from the deterministic fixture")

const vectorDir = "../testdata/verifier"

// expectation is one line of testdata/verifier/expected.json.
type expectation struct {
	File       string `json:"file"`                 // the file verified
	Kind       string `json:"kind"`                 // "entries", "proof" or "consistency"
	Keys       string `json:"keys"`                 // the keys.json used
	Want       string `json:"want"`                 // "ok" or a Reason
	Index      int64  `json:"index"`                // first bad record index, -1 for none
	Checkpoint int    `json:"checkpoint,omitempty"` // bad checkpoint position + 1; 0 for none
}

// vectorFiles builds every vector from the fixture: file name -> bytes, and
// the expectations.
func vectorFiles(t *testing.T) (map[string][]byte, []expectation) {
	f := newFixture(t, 12, 5)
	other := events.NewSigner(fixedKey("contextos verifier vectors: a key nobody trusts"))
	files := map[string][]byte{}
	var exp []expectation
	entries := func(name string, recs [][]byte, cps [][]byte, keys, want string, index int64, cp int) {
		b, err := MarshalEntries(Entries{Tenant: f.tenant, Records: recs, Checkpoints: cps})
		if err != nil {
			t.Fatal(err)
		}
		files[name] = b
		exp = append(exp, expectation{File: name, Kind: "entries", Keys: keys, Want: want, Index: index, Checkpoint: cp})
	}
	clone := func() [][]byte {
		out := make([][]byte, len(f.records))
		copy(out, f.records)
		return out
	}
	files["keys.json"] = f.keysJSON(t)
	otherKeys, err := KeysFor(f.tenant, other.Key.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	if files["other-keys.json"], err = MarshalKeys(otherKeys); err != nil {
		t.Fatal(err)
	}

	entries("ok.entries.json", f.records, f.checkpoints, "keys.json", "ok", -1, 0)

	r := clone()
	r2, _ := ParseRecord(r[2])
	r3, _ := ParseRecord(r[3])
	r[2] = bytes.Replace(r[2], []byte(r2.Sig), []byte(r3.Sig), 1)
	entries("bad-signature.entries.json", r, f.checkpoints, "keys.json", string(ReasonBadSignature), 2, 0)

	r = clone()
	r[4] = reseal(t, r[4], f.signer, func(rec *Record) {
		rec.Event = bytes.Replace(rec.Event, []byte(`"amount":`), []byte(`"amount":9`), 1)
		if !bytes.Contains(rec.Event, []byte(`"amount":9`)) {
			t.Fatal("fixture record 4 is not a reservation")
		}
		rec.EventHash = EventHash(rec.Event)
	})
	entries("bad-signature-event.entries.json", r, f.checkpoints, "keys.json", string(ReasonBadSignature), 4, 0)

	r = clone()
	r[3] = reseal(t, r[3], f.signer, func(rec *Record) { rec.PrevHash = HexHash(RecordHash(f.records[1])) })
	entries("hash-break.entries.json", r, f.checkpoints, "keys.json", string(ReasonHashBreak), 3, 0)

	r = clone()
	r[4] = reseal(t, r[4], f.signer, func(rec *Record) { rec.EventHash = EventHash(f.records[4]) })
	entries("hash-break-event.entries.json", r, f.checkpoints, "keys.json", string(ReasonHashBreak), 4, 0)

	cps := append([][]byte{}, f.checkpoints...)
	root, _ := f.tree.Root(4)
	forged, err := SignCheckpoint(Checkpoint{Origin: Origin(f.tenant), Size: 5, Root: root}, f.noteSigner)
	if err != nil {
		t.Fatal(err)
	}
	cps[0] = forged
	entries("hash-break-checkpoint.entries.json", f.records, cps, "keys.json", string(ReasonHashBreak), -1, 1)

	r = clone()
	r = append(r[:2:2], r[3:]...)
	entries("gap.entries.json", r, f.checkpoints, "keys.json", string(ReasonGap), 2, 0)

	r = clone()
	entries("gap-truncated.entries.json", r[:len(r)-1], f.checkpoints, "keys.json", string(ReasonGap), int64(len(r)-1), len(f.checkpoints))

	r = clone()
	r[2], r[3] = r[3], r[2]
	entries("reorder.entries.json", r, f.checkpoints, "keys.json", string(ReasonReorder), 2, 0)

	r = clone()
	r = append(r[:3:3], r[2:]...)
	entries("reorder-duplicate.entries.json", r, nil, "keys.json", string(ReasonReorder), 3, 0)

	r = clone()
	r[1] = append([]byte("{ "), r[1][1:]...)
	entries("non-canonical.entries.json", r, f.checkpoints, "keys.json", string(ReasonNonCanonical), 1, 0)

	r = clone()
	r[1] = bytes.Replace(r[1], []byte(`"index":1,`), []byte(`"index":1.0,`), 1)
	entries("non-canonical-number.entries.json", r, f.checkpoints, "keys.json", string(ReasonNonCanonical), 1, 0)

	r = clone()
	r[4] = reseal(t, r[4], other, func(*Record) {})
	entries("unknown-key.entries.json", r, f.checkpoints, "keys.json", string(ReasonUnknownKey), 4, 0)

	entries("unknown-key-keys.entries.json", f.records, f.checkpoints, "other-keys.json", string(ReasonUnknownKey), 0, 0)

	cps = append([][]byte{}, f.checkpoints...)
	i := bytes.LastIndex(cps[1], []byte(" ")) + 10
	cps[1] = append([]byte{}, cps[1]...)
	cps[1][i] ^= 'A' ^ 'B'
	if cps[1][i] == '\n' {
		t.Fatal("fixture checkpoint signature too short")
	}
	entries("bad-signature-checkpoint.entries.json", f.records, cps, "keys.json", string(ReasonBadSignature), -1, 2)

	e := Entries{Tenant: f.tenant, Records: f.records, Checkpoints: f.checkpoints}
	p, err := ProveEntries(e, mustEventID(t, f.records[6]))
	if err != nil {
		t.Fatal(err)
	}
	if files["proof.json"], err = MarshalProof(p); err != nil {
		t.Fatal(err)
	}
	exp = append(exp, expectation{File: "proof.json", Kind: "proof", Keys: "keys.json", Want: "ok", Index: -1})
	p.Hashes = append(tlog.RecordProof{}, p.Hashes...)
	p.Hashes[0][0] ^= 1
	if files["proof-hash-break.json"], err = MarshalProof(p); err != nil {
		t.Fatal(err)
	}
	exp = append(exp, expectation{File: "proof-hash-break.json", Kind: "proof", Keys: "keys.json", Want: string(ReasonHashBreak), Index: 6})

	// The log of 5 records (the first checkpoint) is a prefix of the whole
	// log (the last); a tampered proof, and a checkpoint of 5 records of
	// another log signed by the same key (a fork), are caught.
	c, err := ProveConsistency(e, 5)
	if err != nil {
		t.Fatal(err)
	}
	if files["consistency.json"], err = MarshalConsistency(c); err != nil {
		t.Fatal(err)
	}
	exp = append(exp, expectation{File: "consistency.json", Kind: "consistency", Keys: "keys.json", Want: "ok", Index: -1})
	bad := c
	bad.Hashes = append(tlog.TreeProof{}, c.Hashes...)
	bad.Hashes[0][0] ^= 1
	if files["consistency-hash-break.json"], err = MarshalConsistency(bad); err != nil {
		t.Fatal(err)
	}
	exp = append(exp, expectation{File: "consistency-hash-break.json", Kind: "consistency", Keys: "keys.json", Want: string(ReasonHashBreak), Index: -1})
	var ft Tree
	for i, raw := range f.records[:5] {
		if i == 3 {
			raw = f.records[4] // another record where the fourth was: another tree
		}
		if err := ft.Append(RecordHash(raw)); err != nil {
			t.Fatal(err)
		}
	}
	froot, err := ft.Root(5)
	if err != nil {
		t.Fatal(err)
	}
	fork := c
	if fork.Old, err = SignCheckpoint(Checkpoint{Origin: Origin(f.tenant), Size: 5, Root: froot}, f.noteSigner); err != nil {
		t.Fatal(err)
	}
	if files["consistency-fork.json"], err = MarshalConsistency(fork); err != nil {
		t.Fatal(err)
	}
	exp = append(exp, expectation{File: "consistency-fork.json", Kind: "consistency", Keys: "keys.json", Want: string(ReasonHashBreak), Index: -1})

	files["events.jsonl"] = f.eventsJSONL(t)
	if files["view.json"], err = MarshalView(f.view); err != nil {
		t.Fatal(err)
	}
	b, err := json.MarshalIndent(exp, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	files["expected.json"] = append(b, '\n')
	return files, exp
}

func mustEventID(t *testing.T, rec []byte) string {
	t.Helper()
	r, err := ParseRecord(rec)
	if err != nil {
		t.Fatal(err)
	}
	env, err := events.Decode(r.Event)
	if err != nil {
		t.Fatal(err)
	}
	return env.EventID
}

// TestVectors checks every vector in testdata/verifier against its expected
// outcome, and that the deterministic fixture still produces those exact
// bytes (so the formats cannot drift unnoticed). Run with -update to rewrite
// them.
func TestVectors(t *testing.T) {
	files, _ := vectorFiles(t)
	if *update {
		if err := os.MkdirAll(vectorDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range files {
			if err := os.WriteFile(filepath.Join(vectorDir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(vectorDir, name))
		if err != nil {
			t.Fatalf("%v (run go test ./verifier -run TestVectors -update)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what the fixture generates (run with -update and review the diff)", name)
		}
	}
	var exp []expectation
	if err := kernel.StrictJSON(mustRead(t, "expected.json"), &exp); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range exp {
		seen[e.Want] = true
		t.Run(strings.TrimSuffix(e.File, ".json"), func(t *testing.T) {
			keys, err := ParseKeys(mustRead(t, e.Keys))
			if err != nil {
				t.Fatal(err)
			}
			var f *Failure
			switch e.Kind {
			case "entries":
				res, err := VerifyEntries(mustRead(t, e.File), keys)
				if err != nil {
					t.Fatal(err)
				}
				f = res.Failure
				if res.OK() && res.Records == 0 {
					t.Fatal("empty export")
				}
			case "proof":
				_, _, err := VerifyProof(mustRead(t, e.File), keys)
				if err != nil {
					f = failureOf(err)
				}
			case "consistency":
				_, _, _, err := VerifyConsistency(mustRead(t, e.File), keys)
				if err != nil {
					f = failureOf(err)
				}
			default:
				t.Fatalf("unknown kind %q", e.Kind)
			}
			if f == nil {
				if e.Want != "ok" {
					t.Fatalf("verified; want %s at %d", e.Want, e.Index)
				}
				return
			}
			if string(f.Reason) != e.Want || f.Index != e.Index || f.Checkpoint+1 != e.Checkpoint {
				t.Fatalf("got %s at index %d checkpoint %d (%s); want %s at index %d checkpoint %d",
					f.Reason, f.Index, f.Checkpoint+1, f.Detail, e.Want, e.Index, e.Checkpoint)
			}
		})
	}
	for _, r := range append([]Reason{"ok"}, Reasons...) {
		if !seen[string(r)] {
			t.Errorf("no vector expects %s", r)
		}
	}
	// The replay of the exported events equals the exported view.
	keys, err := ParseKeys(mustRead(t, "keys.json"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Replay(bytes.NewReader(mustRead(t, "events.jsonl")), keys.Keyring)
	if err != nil {
		t.Fatal(err)
	}
	view, err := ParseView(mustRead(t, "view.json"))
	if err != nil {
		t.Fatal(err)
	}
	if d := Compare(got, view); len(d) != 0 {
		t.Fatalf("replay differs from view.json: %v", d)
	}
	e, err := ParseEntries(mustRead(t, "ok.entries.json"))
	if err != nil {
		t.Fatal(err)
	}
	fromRecords, err := ReplayEntries(e)
	if err != nil {
		t.Fatal(err)
	}
	if d := Compare(fromRecords, view); len(d) != 0 {
		t.Fatalf("replay of the audit records differs from view.json: %v", d)
	}
	if len(view.Resources) != 2 || len(view.Resources[0].OpenAttempts)+len(view.Resources[1].OpenAttempts) == 0 {
		t.Fatalf("fixture view should hold two resources with open attempts: %+v", view)
	}
}

func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(vectorDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
