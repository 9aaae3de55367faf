package verifier

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"flag"
	"fmt"
	"github.com/contextos/ledger/audit"
	"github.com/contextos/ledger/exposure"
	"github.com/contextos/ledger/kernel"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextos/ledger/events/codec"
	"golang.org/x/mod/sumdb/tlog"
)

var update = flag.Bool("update", false, "rewrite testdata/verifier from the deterministic fixture")

const vectorDir = "../testdata/verifier"

// expectation is one line of testdata/verifier/expected.json.
type expectation struct {
	File       string `json:"file"`                 // the file verified
	Kind       string `json:"kind"`                 // "entries", "proof" or "consistency"
	Keys       string `json:"keys"`                 // the keys.json used
	MinSize    int64  `json:"min_size,omitempty"`   // entries: Policy.MinSize
	Quorum     int    `json:"quorum,omitempty"`     // entries: Policy.Quorum of keys.json's witnesses
	Want       string `json:"want"`                 // "ok" or a Reason
	Index      int64  `json:"index"`                // first bad record index, -1 for none
	Checkpoint int    `json:"checkpoint,omitempty"` // bad checkpoint position + 1; 0 for none
}

// vectorFiles builds every vector from the fixture: file name -> bytes, and
// the expectations.
func vectorFiles(t *testing.T) (map[string][]byte, []expectation) {
	f := newFixture(t, 12, 5) // checkpoints of 5, 10 and 12 records
	other := codec.NewSigner(fixedKey("contextos verifier vectors: a key nobody trusts"))
	files := map[string][]byte{}
	var exp []expectation
	entriesPolicy := func(name string, recs [][]byte, cps [][]byte, keys string, minSize int64, quorum int, want string, index int64, cp int) {
		b, err := audit.MarshalEntries(audit.Entries{Tenant: f.tenant, Records: recs, Checkpoints: cps})
		if err != nil {
			t.Fatal(err)
		}
		files[name] = b
		exp = append(exp, expectation{File: name, Kind: "entries", Keys: keys, MinSize: minSize, Quorum: quorum, Want: want, Index: index, Checkpoint: cp})
	}
	entries := func(name string, recs [][]byte, cps [][]byte, keys, want string, index int64, cp int) {
		entriesPolicy(name, recs, cps, keys, 0, 0, want, index, cp)
	}
	clone := func() [][]byte { return append([][]byte{}, f.records...) }
	cpsClone := func() [][]byte { return append([][]byte{}, f.checkpoints...) }
	files["keys.json"] = f.keysJSON(t)
	otherKeys, err := audit.KeysFor(f.tenant, other.Key.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	if files["other-keys.json"], err = audit.MarshalKeys(otherKeys); err != nil {
		t.Fatal(err)
	}

	entries("ok.entries.json", f.records, f.checkpoints, "keys.json", "ok", -1, 0)
	entriesPolicy("ok.entries.json", f.records, f.checkpoints, "keys.json", 12, 1, "ok", -1, 0)

	// An event carrying the signature of another batch (events 1-3 share
	// one, 4-5 another).
	r := clone()
	sig4 := mustEnvelope(t, r[4]).Sig
	r[2] = reencode(t, r[2], func(rec *audit.Record) {
		env := mustEnvelope(t, f.records[2])
		env.Sig = sig4
		var err error
		if rec.Event, err = codec.Encode(env); err != nil {
			t.Fatal(err)
		}
	})
	entries("bad-signature.entries.json", r, f.checkpoints, "keys.json", string(audit.ReasonBadSignature), 2, 0)

	// An amount changed inside an event (the record re-encoded around it).
	r = clone()
	r[4] = reencode(t, r[4], func(rec *audit.Record) {
		rec.Event = bytes.Replace(rec.Event, []byte(`"amount":`), []byte(`"amount":9`), 1)
		if !bytes.Contains(rec.Event, []byte(`"amount":9`)) {
			t.Fatal("fixture record 4 is not a reservation")
		}
	})
	entries("bad-signature-event.entries.json", r, f.checkpoints, "keys.json", string(audit.ReasonBadSignature), 4, 0)

	r = clone()
	r[3] = reencode(t, r[3], func(rec *audit.Record) { rec.PrevHash = audit.HexHash(audit.RecordHash(f.records[1])) })
	entries("hash-break.entries.json", r, f.checkpoints, "keys.json", string(audit.ReasonHashBreak), 3, 0)

	// A record of another tenant's log, signed by the same runtime key, in
	// place of record 4.
	r = clone()
	r[4] = reencode(t, r[4], func(rec *audit.Record) {
		env := mustEnvelope(t, f.records[4])
		env, err := f.signer.Seal(env.Type, env.V, env.EventID, "beta", env.Time, env.Body)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Event, err = codec.Encode(env); err != nil {
			t.Fatal(err)
		}
		rec.Tenant, rec.Subject = "beta", "ctx.ev.beta"+strings.TrimPrefix(rec.Subject, "ctx.ev.acme")
	})
	entries("hash-break-tenant.entries.json", r, f.checkpoints, "keys.json", string(audit.ReasonHashBreak), 4, 0)

	cps := cpsClone()
	root4, _ := f.tree.Root(4)
	forged, err := audit.SignCheckpoint(audit.Checkpoint{Origin: audit.Origin(f.tenant), Size: 5, Root: root4}, f.noteSigner)
	if err != nil {
		t.Fatal(err)
	}
	cps[0] = forged
	entries("hash-break-checkpoint.entries.json", f.records, cps, "keys.json", string(audit.ReasonHashBreak), -1, 1)

	// A checkpoint of another tenant's log (origin), signed by the same key.
	cps = cpsClone()
	root5, _ := f.tree.Root(5)
	betaSigner, err := audit.NewNoteSigner(audit.Origin("beta"), f.key)
	if err != nil {
		t.Fatal(err)
	}
	if cps[0], err = audit.SignCheckpoint(audit.Checkpoint{Origin: audit.Origin("beta"), Size: 5, Root: root5}, betaSigner); err != nil {
		t.Fatal(err)
	}
	entries("other-origin.entries.json", f.records, cps, "keys.json", string(audit.ReasonUnknownKey), -1, 1)

	// A deleted record.
	r = clone()
	r = append(r[:2:2], r[3:]...)
	entries("gap.entries.json", r, f.checkpoints, "keys.json", string(audit.ReasonGap), 2, 0)

	// An export shorter than a checkpoint it holds.
	r = clone()
	entries("truncated.entries.json", r[:len(r)-1], f.checkpoints, "keys.json", string(audit.ReasonTruncated), int64(len(r)-1), len(f.checkpoints))

	// The first five records and their checkpoint: a valid prefix, refused
	// only against a size the auditor trusts.
	entriesPolicy("truncated-prefix.entries.json", f.records[:5], f.checkpoints[:1], "keys.json", 12, 0, string(audit.ReasonTruncated), 5, 0)

	// Records past the newest checkpoint (its last checkpoint dropped).
	entries("uncovered.entries.json", f.records, f.checkpoints[:2], "keys.json", string(audit.ReasonUncovered), 10, 0)

	// A reordered pair.
	r = clone()
	r[2], r[3] = r[3], r[2]
	entries("reorder.entries.json", r, f.checkpoints, "keys.json", string(audit.ReasonReorder), 2, 0)

	r = clone()
	r = append(r[:3:3], r[2:]...)
	entries("reorder-duplicate.entries.json", r, nil, "keys.json", string(audit.ReasonReorder), 3, 0)

	r = clone()
	r[1] = append([]byte("{ "), r[1][1:]...)
	entries("non-canonical.entries.json", r, f.checkpoints, "keys.json", string(audit.ReasonNonCanonical), 1, 0)

	r = clone()
	r[1] = bytes.Replace(r[1], []byte(`"index":1,`), []byte(`"index":1.0,`), 1)
	entries("non-canonical-number.entries.json", r, f.checkpoints, "keys.json", string(audit.ReasonNonCanonical), 1, 0)

	// One byte that breaks the record's JSON still names the record.
	r = clone()
	r[6] = bytes.Replace(r[6], []byte(`"prev_hash":"`), []byte(`"prev_hash:"`), 1)
	entries("non-canonical-json.entries.json", r, f.checkpoints, "keys.json", string(audit.ReasonNonCanonical), 6, 0)

	r = clone()
	r[4] = resign(t, r[4], other, func(*codec.Envelope) {})
	entries("unknown-key.entries.json", r, f.checkpoints, "keys.json", string(audit.ReasonUnknownKey), 4, 0)

	entries("unknown-key-keys.entries.json", f.records, f.checkpoints, "other-keys.json", string(audit.ReasonUnknownKey), 0, 0)

	cps = cpsClone()
	line := bytes.Index(cps[1], []byte("\n— ")) + len("\n— ") // the log's signature line
	i := line + bytes.IndexByte(cps[1][line:], ' ') + 10
	cps[1] = append([]byte{}, cps[1]...)
	cps[1][i] ^= 'A' ^ 'B'
	entries("bad-signature-checkpoint.entries.json", f.records, cps, "keys.json", string(audit.ReasonBadSignature), -1, 2)

	// A cosignature by a witness nobody trusts.
	stranger, err := audit.NewCosigner("witness.test/stranger", fixedKey("contextos verifier vectors: an unknown witness"), fixedClock)
	if err != nil {
		t.Fatal(err)
	}
	cps = cpsClone()
	cps[1] = f.cosign(t, cps[1], stranger)
	entries("unknown-witness.entries.json", f.records, cps, "keys.json", string(audit.ReasonUnknownKey), -1, 2)

	// The newest checkpoint without the witness's cosignature, under a
	// policy of one witness.
	cps = cpsClone()
	cps[2] = f.sign(t, 12, &f.tree)
	entriesPolicy("witness-missing.entries.json", f.records, cps, "keys.json", 0, 1, string(audit.ReasonWitness), -1, 3)

	e := audit.Entries{Tenant: f.tenant, Records: f.records, Checkpoints: f.checkpoints}
	p, err := ProveEntries(e, mustEventID(t, f.records[6]))
	if err != nil {
		t.Fatal(err)
	}
	if files["proof.json"], err = audit.MarshalProof(p); err != nil {
		t.Fatal(err)
	}
	exp = append(exp, expectation{File: "proof.json", Kind: "proof", Keys: "keys.json", Want: "ok", Index: -1})
	p.Hashes = append(tlog.RecordProof{}, p.Hashes...)
	p.Hashes[0][0] ^= 1
	if files["proof-hash-break.json"], err = audit.MarshalProof(p); err != nil {
		t.Fatal(err)
	}
	exp = append(exp, expectation{File: "proof-hash-break.json", Kind: "proof", Keys: "keys.json", Want: string(audit.ReasonHashBreak), Index: 6})

	// The log of 5 records (the first checkpoint) is a prefix of the whole
	// log (the last); a tampered proof, and a checkpoint of 5 records of
	// another log signed by the same key (a fork), are caught.
	c, err := ProveConsistency(e, 5)
	if err != nil {
		t.Fatal(err)
	}
	if files["consistency.json"], err = audit.MarshalConsistency(c); err != nil {
		t.Fatal(err)
	}
	exp = append(exp, expectation{File: "consistency.json", Kind: "consistency", Keys: "keys.json", Want: "ok", Index: -1})
	bad := c
	bad.Hashes = append(tlog.TreeProof{}, c.Hashes...)
	bad.Hashes[0][0] ^= 1
	if files["consistency-hash-break.json"], err = audit.MarshalConsistency(bad); err != nil {
		t.Fatal(err)
	}
	exp = append(exp, expectation{File: "consistency-hash-break.json", Kind: "consistency", Keys: "keys.json", Want: string(audit.ReasonHashBreak), Index: -1})
	var ft audit.Tree
	for i, raw := range f.records[:5] {
		if i == 3 {
			raw = f.records[4] // another record where the fourth was: another tree
		}
		if err := ft.Append(audit.RecordHash(raw)); err != nil {
			t.Fatal(err)
		}
	}
	froot, err := ft.Root(5)
	if err != nil {
		t.Fatal(err)
	}
	fork := c
	if fork.Old, err = audit.SignCheckpoint(audit.Checkpoint{Origin: audit.Origin(f.tenant), Size: 5, Root: froot}, f.noteSigner); err != nil {
		t.Fatal(err)
	}
	if files["consistency-fork.json"], err = audit.MarshalConsistency(fork); err != nil {
		t.Fatal(err)
	}
	exp = append(exp, expectation{File: "consistency-fork.json", Kind: "consistency", Keys: "keys.json", Want: string(audit.ReasonHashBreak), Index: -1})

	files["events.jsonl"] = f.eventsJSONL(t)
	if files["view.json"], err = exposure.MarshalView(f.view); err != nil {
		t.Fatal(err)
	}
	b, err := json.MarshalIndent(exp, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	files["expected.json"] = append(b, '\n')
	return files, exp
}

func mustEventID(t *testing.T, rec []byte) string { return mustEnvelope(t, rec).EventID }

func mustEnvelope(tb testing.TB, rec []byte) codec.Envelope {
	tb.Helper()
	_, env, err := audit.Parse(rec)
	if err != nil {
		tb.Fatal(err)
	}
	return env
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
		t.Run(fmt.Sprintf("%s/min%d/q%d", strings.TrimSuffix(e.File, ".json"), e.MinSize, e.Quorum), func(t *testing.T) {
			keys, err := audit.ParseKeys(mustRead(t, e.Keys))
			if err != nil {
				t.Fatal(err)
			}
			var f *audit.Failure
			switch e.Kind {
			case "entries":
				ws, err := keys.Cosigners()
				if err != nil {
					t.Fatal(err)
				}
				res, err := VerifyEntriesPolicy(mustRead(t, e.File), keys, Policy{MinSize: e.MinSize, Witnesses: ws, Quorum: e.Quorum})
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
					f = audit.FailureOf(err)
				}
			case "consistency":
				_, _, _, err := VerifyConsistency(mustRead(t, e.File), keys)
				if err != nil {
					f = audit.FailureOf(err)
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
	for _, r := range append([]audit.Reason{"ok"}, audit.Reasons...) {
		if !seen[string(r)] {
			t.Errorf("no vector expects %s", r)
		}
	}
	// The replay of the exported events equals the exported view.
	keys, err := audit.ParseKeys(mustRead(t, "keys.json"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Replay(bytes.NewReader(mustRead(t, "events.jsonl")), keys.Keyring)
	if err != nil {
		t.Fatal(err)
	}
	view, err := exposure.ParseView(mustRead(t, "view.json"))
	if err != nil {
		t.Fatal(err)
	}
	if d := Compare(got, view); len(d) != 0 {
		t.Fatalf("replay differs from view.json: %v", d)
	}
	e, err := audit.ParseEntries(mustRead(t, "ok.entries.json"))
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
