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
