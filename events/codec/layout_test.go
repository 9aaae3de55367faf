package codec

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzDecodeLayout: whatever decodeLayout reads (with valid fields), the
// strict path of decode, re-encode and compare accepts too, as the same
// envelope; so Decode's verdict does not depend on the path it takes.
func FuzzDecodeLayout(f *testing.F) {
	Register("test.layout", 1)
	signer := NewSigner(ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)))
	for _, body := range []string{`{}`, `{"a":1,"b":[true,null,"é"]}`, `{"amount":120,"resource":"ord 992.*>/é"}`, `{"a":"\u0001"}`} {
		env, err := signer.Seal("test.layout", 1, "01JDQ8Z5X3N4R7T9V2W6Y8A0BC", "acme", "2026-01-01T00:00:00.000000000Z", json.RawMessage(body))
		if err != nil {
			f.Fatal(err)
		}
		b, err := Encode(env)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(bytes.Replace(b, []byte(`"v":1`), []byte(`"v":01`), 1))
		f.Add(append(bytes.Clone(b[:len(b)-1]), []byte(`,"x":1}`)...))
	}
	batch, err := signer.SealAll([]Draft{
		{Type: "test.layout", V: 1, EventID: "01JDQ8Z5X3N4R7T9V2W6Y8A0BC", Tenant: "acme", Time: "2026-01-01T00:00:00.000000000Z", Body: json.RawMessage(`{"a":1}`)},
		{Type: "test.layout", V: 1, EventID: "01JDQ8Z5X3N4R7T9V2W6Y8A0BD", Tenant: "acme", Time: "2026-01-01T00:00:00.000000000Z", Body: json.RawMessage(`{"a":2}`)},
	})
	if err != nil {
		f.Fatal(err)
	}
	for _, env := range batch {
		b, err := Encode(env)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(bytes.Replace(b, []byte(`"proof":"`), []byte(`"proof":"","x":"`), 1))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, ok := decodeLayout(b)
		if !ok || validate(e, false) != nil {
			return
		}
		want, err := decodeStrict(b)
		if err != nil || !reflect.DeepEqual(e, want) {
			t.Fatalf("decodeLayout read %q as %+v, the strict path says %+v, %v", b, e, want, err)
		}
	})
}
