package events

import (
	"bytes"
	"crypto/ed25519"
	"github.com/contextos/ledger/events/codec"
	"testing"

	"github.com/contextos/ledger/kernel"
)

func snapshotSigner() codec.Signer {
	return codec.NewSigner(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{3}, 32)))
}

func TestSnapshotRoundTripAndRefusals(t *testing.T) {
	s := snapshotSigner()
	pub := s.Key.Public().(ed25519.PublicKey)
	good, err := EncodeSnapshot(s, "ctx.ev.acme.exposure.g.r", 7, "01JAAAAAAAAAAAAAAAAAAAAAAA", []byte(`{"b":[1,2],"a":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	d, err := ParseSnapshot(pub, "ctx.ev.acme.exposure.g.r", good)
	if err != nil || d.Seq != 7 || string(d.State) != `{"a":"x","b":[1,2]}` {
		t.Fatalf("%+v %v", d, err)
	}
	other := codec.NewSigner(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{4}, 32)))
	for name, data := range map[string][]byte{
		"other subject": good,
		"trailing":      append(bytes.Clone(good), '\n'),
		"other key":     must(EncodeSnapshot(other, "ctx.ev.acme.exposure.g.r", 7, "01JAAAAAAAAAAAAAAAAAAAAAAA", []byte(`{}`))),
		"seq changed":   bytes.Replace(good, []byte(`"seq":7`), []byte(`"seq":8`), 1),
		"state changed": bytes.Replace(good, []byte(`"a":"x"`), []byte(`"a":"y"`), 1),
	} {
		subject := "ctx.ev.acme.exposure.g.r"
		if name == "other subject" {
			subject += "x"
		}
		if _, err := ParseSnapshot(pub, subject, data); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := EncodeSnapshot(s, "x", 0, "", []byte(`{}`)); err == nil {
		t.Error("a snapshot without an anchor was encoded")
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// FuzzParseSnapshot: never panics, and an accepted snapshot is exactly what
// EncodeSnapshot writes for its fields.
func FuzzParseSnapshot(f *testing.F) {
	s := snapshotSigner()
	pub := s.Key.Public().(ed25519.PublicKey)
	f.Add(must(EncodeSnapshot(s, "k", 1, "01JAAAAAAAAAAAAAAAAAAAAAAA", []byte(`{"a":1}`))))
	f.Add([]byte(`{"v":2}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := ParseSnapshot(pub, "k", b)
		if err != nil {
			return
		}
		again, err := EncodeSnapshot(s, d.Subject, d.Seq, d.EventID, d.State)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("accepted %q; EncodeSnapshot gives %q (%v)", b, again, err)
		}
		var v any
		if kernel.KnownJSON(d.State, &v) != nil {
			t.Fatalf("accepted a state that does not decode: %q", d.State)
		}
	})
}

// FuzzSnapshotJCS: the snapshot's encoder, which puts the document together
// around a state already canonical, writes exactly kernel.Canonical's bytes
// for every document, and fails exactly when kernel.Canonical does.
func FuzzSnapshotJCS(f *testing.F) {
	f.Add(2, uint64(7), "ctx.ev.acme.exposure.g.r", "01JAAAAAAAAAAAAAAAAAAAAAAA", "ed25519:0123", "", []byte(`{"a":"x","b":[1,2]}`))
	f.Add(2, uint64(1), "k", "e", "k", "c2ln", []byte(`{"b":1,"a":2}`))
	f.Add(-1, uint64(1)<<60, "é", "\"", "<&>", "x", []byte(`{"a":"\u00e9","n":1.5e3}`))
	f.Add(2, uint64(3), "k", "e", "k", "s", []byte(`null`))
	f.Add(2, uint64(3), "k", "e", "k", "s", []byte(` {"a" : 1} `))
	f.Fuzz(func(t *testing.T, v int, seq uint64, subject, eventID, keyID, sig string, state []byte) {
		d := SnapshotDoc{V: v, Subject: subject, Seq: seq, EventID: eventID, KeyID: keyID, Sig: sig, State: state}
		want, wantErr := kernel.Canonical(d)
		got, err := snapshotJCS(d)
		if (err != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("%+v: snapshotJCS %q (%v), kernel.Canonical %q (%v)", d, got, err, want, wantErr)
		}
	})
}

// TestSnapshotStateStoredCanonical: a state written in a struct's field
// order is stored canonical, so the document is put together around it,
// and the stored bytes are kernel.Canonical's.
func TestSnapshotStateStoredCanonical(t *testing.T) {
	s := snapshotSigner()
	data := must(EncodeSnapshot(s, "k", 3, "01JAAAAAAAAAAAAAAAAAAAAAAA", []byte(`{"z":{"y":1,"x":[true,null]},"a":"\u00e9"}`)))
	var d SnapshotDoc
	if err := kernel.KnownJSON(data, &d); err != nil {
		t.Fatal(err)
	}
	if string(d.State) != `{"a":"é","z":{"x":[true,null],"y":1}}` {
		t.Fatalf("state stored as %s", d.State)
	}
	if _, ok := spliceSnapshot(d); !ok {
		t.Fatal("the stored document is not put together around its canonical state")
	}
	if want := must(kernel.Canonical(d)); !bytes.Equal(data, want) {
		t.Fatalf("stored %s, kernel.Canonical %s", data, want)
	}
}
