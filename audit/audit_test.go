package audit

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
)

// vectorRecords returns the records of the verifier's golden export: one
// per line between the header and the checkpoints.
func vectorRecords(tb testing.TB) [][]byte {
	tb.Helper()
	b, err := os.ReadFile("../testdata/verifier/ok.entries.json")
	if err != nil {
		tb.Fatal(err)
	}
	lines := bytes.Split(b, []byte("\n"))
	var out [][]byte
	for _, l := range lines[1:] {
		if bytes.HasPrefix(l, []byte("]")) {
			break
		}
		out = append(out, bytes.TrimSuffix(l, []byte(",")))
	}
	if len(out) == 0 {
		tb.Fatal("no records in the vector export")
	}
	return out
}

func vectorCheckpoints(tb testing.TB) [][]byte {
	tb.Helper()
	b, err := os.ReadFile("../testdata/verifier/ok.entries.json")
	if err != nil {
		tb.Fatal(err)
	}
	_, rest, _ := bytes.Cut(b, []byte("\"checkpoints\":[\n"))
	var out [][]byte
	for _, l := range bytes.Split(rest, []byte("\n")) {
		var s string
		if json.Unmarshal(bytes.TrimSuffix(l, []byte(",")), &s) == nil {
			out = append(out, []byte(s))
		}
	}
	return out
}

func fixedKey(label string) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte(label))
	return ed25519.NewKeyFromSeed(seed[:])
}

// TestEncodeIsCanonical: the record put together around its event is
// kernel.Canonical's encoding and the bytes stored; Seal of the same event
// returns them.
func TestEncodeIsCanonical(t *testing.T) {
	var c Chain
	c.Tenant = "acme"
	for i, raw := range vectorRecords(t) {
		r, env, err := Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		fast, err1 := Encode(r)
		slow, err2 := kernel.Canonical(r)
		if err1 != nil || err2 != nil || !bytes.Equal(fast, slow) || !bytes.Equal(fast, raw) {
			t.Fatalf("record %d: fast %q (%v), canonical %q (%v), stored %q", i, fast, err1, slow, err2, raw)
		}
		rec, sealed, err := Seal(r.Tenant, c.Size(), c.PrevHash(), r.EventSeq, r.Subject, r.Event, env)
		if err != nil || !bytes.Equal(sealed, raw) || rec.Index != r.Index {
			t.Fatalf("record %d: Seal gives %q (%v), stored %q", i, sealed, err, raw)
		}
		if err := c.Append(r, raw); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEventSigningBytes: the signed bytes cut from an event's canonical
// bytes are codec.SigningBytes.
func TestEventSigningBytes(t *testing.T) {
	for i, raw := range vectorRecords(t) {
		r, env, err := Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		fast, ok := eventSigningBytes(r.Event, env)
		slow, err := codec.SigningBytes(env)
		if !ok || err != nil || !bytes.Equal(fast, slow) {
			t.Fatalf("record %d: %q (%v) != %q (%v)", i, fast, ok, slow, err)
		}
	}
}

// TestChainRefuses: each break of the chain is refused with its reason and
// the position of the record, and nothing is folded.
func TestChainRefuses(t *testing.T) {
	recs := vectorRecords(t)
	parse := func(raw []byte) Record {
		r, _, err := Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	base := func() *Chain {
		c := NewChain("acme")
		for _, raw := range recs[:3] {
			if err := c.Append(parse(raw), raw); err != nil {
				t.Fatal(err)
			}
		}
		return c
	}
	edit := func(raw []byte, f func(*Record)) []byte {
		r := parse(raw)
		f(&r)
		b, err := Encode(r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cases := []struct {
		name string
		raw  []byte
		want Reason
	}{
		{"deleted", recs[4], ReasonGap},
		{"repeated", recs[2], ReasonReorder},
		{"seq back", edit(recs[3], func(r *Record) { r.EventSeq = 1 }), ReasonReorder},
		{"prev hash", edit(recs[3], func(r *Record) { r.PrevHash = HexHash(RecordHash(recs[0])) }), ReasonHashBreak},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ch := base()
			err := ch.Append(parse(c.raw), c.raw)
			f := FailureOf(err)
			if err == nil || f.Reason != c.want || f.Index != 3 || ch.Size() != 3 {
				t.Fatalf("got %v (size %d), want %s at 3", err, ch.Size(), c.want)
			}
		})
	}
	ch := NewChain("beta")
	if err := ch.Append(parse(recs[0]), recs[0]); FailureOf(err).Reason != ReasonHashBreak {
		t.Fatalf("a record of acme in beta's log: %v", err)
	}
}

// TestOpenCheckpoint: the vector checkpoints open with the log key and the
// witness; without the witness's key the cosignature is an unknown key; a
// second log signature or a changed byte is refused.
func TestOpenCheckpoint(t *testing.T) {
	key := fixedKey("contextos verifier vectors: runtime key")
	vkey, err := NoteVerifierKey(Origin("acme"), key.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	logKeys := newVerifierList(t, []string{vkey})
	w, err := NewCosigner("witness.test/w1", fixedKey("contextos verifier vectors: witness w1"), func() uint64 { return 1767225600 })
	if err != nil {
		t.Fatal(err)
	}
	again, err := ParseCosignerKey(w.VerifierKey())
	if err != nil || again.VerifierKey() != w.VerifierKey() {
		t.Fatalf("cosigner key does not round-trip: %v", err)
	}
	for i, msg := range vectorCheckpoints(t) {
		o, err := OpenCheckpoint(msg, logKeys, []*Cosigner{w.Verifier()})
		if err != nil || len(o.Cosigned) != 1 || o.Cosigned[0].Name != "witness.test/w1" || o.Cosigned[0].Time != 1767225600 {
			t.Fatalf("checkpoint %d: %+v %v", i, o, err)
		}
		if _, err := OpenCheckpoint(msg, logKeys, nil); FailureOf(err).Reason != ReasonUnknownKey {
			t.Fatalf("checkpoint %d without the witness key: %v", i, err)
		}
		for j := range msg {
			b := bytes.Clone(msg)
			b[j] ^= 1
			if _, err := OpenCheckpoint(b, logKeys, []*Cosigner{w}); err == nil {
				t.Fatalf("checkpoint %d byte %d xor 1 accepted", i, j)
			}
		}
	}
}

// TestParseLayout: the records the projector writes are read by their
// layout (the strict path is for the others), as the strict path reads
// them; a record off the layout still parses when it is canonical.
func TestParseLayout(t *testing.T) {
	for i, raw := range vectorRecords(t) {
		r, env, ok := parseLayout(raw)
		if !ok {
			t.Fatalf("record %d is not read by its layout", i)
		}
		sr, senv, err := parseStrict(raw)
		if err != nil || !reflect.DeepEqual(r, sr) || !reflect.DeepEqual(env, senv) {
			t.Fatalf("record %d: layout %+v, strict %+v, %v", i, r, sr, err)
		}
	}
	for _, c := range []struct {
		name string
		edit func([]byte) []byte
	}{
		{"a space", func(b []byte) []byte { return bytes.Replace(b, []byte(`"index":`), []byte(`"index": `), 1) }},
		{"a leading zero", func(b []byte) []byte { return bytes.Replace(b, []byte(`"v":2`), []byte(`"v":02`), 1) }},
		{"an escaped tenant", func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"tenant":"acme","v"`), []byte(`"tenant":"\u0061cme","v"`), 1)
		}},
		{"a member after v", func(b []byte) []byte { return append(bytes.Clone(b[:len(b)-1]), []byte(`,"x":1}`)...) }},
	} {
		b := c.edit(vectorRecords(t)[1])
		if _, _, ok := parseLayout(b); ok {
			t.Errorf("%s: read by the layout", c.name)
		}
		if _, _, err := Parse(b); err == nil {
			t.Errorf("%s: Parse accepted %q", c.name, b)
		}
	}
}

// FuzzParse: a record never panics Parse, and whatever parses is its own
// encoding, which kernel.Canonical agrees with.
func FuzzParse(f *testing.F) {
	for _, r := range vectorRecords(f) {
		f.Add(r)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, env, err := Parse(b)
		if lr, lenv, ok := parseLayout(b); ok {
			// The layout's reading is the strict path's verdict.
			sr, senv, err := parseStrict(b)
			if err != nil || !reflect.DeepEqual(lr, sr) || !reflect.DeepEqual(lenv, senv) {
				t.Fatalf("parseLayout read %q as %+v, the strict path says %+v, %v", b, lr, sr, err)
			}
		}
		if err != nil {
			return
		}
		fast, err1 := Encode(r)
		slow, err2 := kernel.Canonical(r)
		if err1 != nil || err2 != nil || !bytes.Equal(fast, b) || !bytes.Equal(slow, b) {
			t.Fatalf("parsed record is not its own encoding: %q %q (%v %v)", fast, slow, err1, err2)
		}
		if cut, ok := eventSigningBytes(r.Event, env); ok {
			if want, err := codec.SigningBytes(env); err != nil || !bytes.Equal(cut, want) {
				t.Fatalf("signing bytes %q, codec says %q (%v)", cut, want, err)
			}
		}
	})
}

// FuzzOpenCheckpoint: a checkpoint note never panics, and an opened one's
// text round-trips.
func FuzzOpenCheckpoint(f *testing.F) {
	for _, c := range vectorCheckpoints(f) {
		f.Add(c)
	}
	key := fixedKey("contextos verifier vectors: runtime key")
	vkey, err := NoteVerifierKey(Origin("acme"), key.Public().(ed25519.PublicKey))
	if err != nil {
		f.Fatal(err)
	}
	logKeys := newVerifierList(f, []string{vkey})
	w, err := NewCosigner("witness.test/w1", fixedKey("contextos verifier vectors: witness w1"), func() uint64 { return 1 })
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := OpenCheckpoint(b, logKeys, []*Cosigner{w.Verifier()})
		if err != nil {
			_, _ = ReadCheckpoint(b)
			return
		}
		if got, err := ParseCheckpointText(o.Checkpoint.Text()); err != nil || got != o.Checkpoint {
			t.Fatalf("checkpoint text does not round-trip: %v", err)
		}
	})
}

// FuzzParseCosignerKey: a witness key never panics the parser and a parsed
// one is its own spelling.
func FuzzParseCosignerKey(f *testing.F) {
	w, err := NewCosigner("witness.test/w1", fixedKey("w1"), func() uint64 { return 1 })
	if err != nil {
		f.Fatal(err)
	}
	f.Add(w.VerifierKey())
	f.Add(strings.Replace(w.VerifierKey(), "+", "+0", 1))
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseCosignerKey(s)
		if err == nil && c.VerifierKey() != s {
			t.Fatalf("%q parses to %q", s, c.VerifierKey())
		}
	})
}

// TestReasonsDistinct: the fixed reason set has no duplicate or reserved
// name.
func TestReasonsDistinct(t *testing.T) {
	seen := map[Reason]bool{}
	for _, r := range Reasons {
		if seen[r] || r == "" || r == "ok" {
			t.Fatalf("reason %q repeated or reserved", r)
		}
		seen[r] = true
	}
	if len(seen) != 9 {
		t.Fatalf("%d reasons, want the fixed 9", len(seen))
	}
}

// FuzzParseKeyRotation: a key rotation body never panics the parser, and a
// parsed one names keys that decode.
func FuzzParseKeyRotation(f *testing.F) {
	old, next := fixedKey("old"), fixedKey("new")
	b64 := func(k ed25519.PrivateKey) string {
		return base64.StdEncoding.EncodeToString(k.Public().(ed25519.PublicKey))
	}
	body, _ := json.Marshal(KeyRotation{From: b64(old), To: b64(next), Retired: []string{b64(old)}})
	f.Add(body, false)
	f.Add(body, true)
	f.Fuzz(func(t *testing.T, body []byte, byNew bool) {
		k := old
		if byNew {
			k = next
		}
		env, err := codec.NewSigner(k).Seal(TypeKeyRotated, KeyRotationVersion, "01KBG2T8Q4QG0Q5BZJ0R7Z7Z7Z", "acme", "2026-12-01T00:00:00.000000000Z", json.RawMessage(body))
		if err != nil {
			return
		}
		r, err := ParseKeyRotation(env)
		if err != nil {
			return
		}
		if _, _, _, err := r.PublicKeys(); err != nil {
			t.Fatalf("parsed rotation with keys that do not decode: %v", err)
		}
	})
}

// TestParseKeyRotation: a rotation is signed by the key it retires, or by
// the new key with an operator's assertion; nothing else.
func TestParseKeyRotation(t *testing.T) {
	old, next := fixedKey("old"), fixedKey("new")
	b64 := func(k ed25519.PrivateKey) string {
		return base64.StdEncoding.EncodeToString(k.Public().(ed25519.PublicKey))
	}
	seal := func(k ed25519.PrivateKey, r KeyRotation) codec.Envelope {
		env, err := codec.NewSigner(k).Seal(TypeKeyRotated, KeyRotationVersion, "01KBG2T8Q4QG0Q5BZJ0R7Z7Z7Z", "acme", "2026-12-01T00:00:00.000000000Z", r)
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
	plain := KeyRotation{From: b64(old), To: b64(next), Retired: []string{b64(old)}}
	asserted := plain
	asserted.AssertedBy, asserted.ArtifactRef = "ops_alice", "INC-42"
	backwards := KeyRotation{From: b64(old), To: b64(old), Retired: []string{b64(old)}}
	for _, c := range []struct {
		name string
		env  codec.Envelope
		ok   bool
	}{
		{"by the old key", seal(old, plain), true},
		{"by the new key, asserted", seal(next, asserted), true},
		{"by the new key, not asserted", seal(next, plain), false},
		{"by the old key, asserted", seal(old, asserted), false},
		{"to a retired key", seal(old, backwards), false},
		{"by a third key", seal(fixedKey("third"), plain), false},
	} {
		if _, err := ParseKeyRotation(c.env); (err == nil) != c.ok {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}
