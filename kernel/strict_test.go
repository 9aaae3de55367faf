package kernel

import (
	"bytes"
	"testing"
)

type strictDoc struct {
	A string   `json:"a"`
	N int64    `json:"n"`
	L []string `json:"l,omitempty"`
}

func TestDecodeCanonical(t *testing.T) {
	for _, c := range []struct {
		in string
		ok bool
	}{
		{`{"a":"x","n":1}`, true},
		{`{"a":"x","l":["b"],"n":1}`, true},
		{`{"n":1,"a":"x"}`, false},          // member order
		{`{"a": "x","n":1}`, false},         // whitespace
		{`{"a":"x","a":"y","n":1}`, false},  // a member twice
		{`{"A":"x","n":1}`, false},          // a case variant
		{`{"a":"x","n":1.0}`, false},        // another spelling of a number
		{`{"a":"\u0078","n":1}`, false},     // another spelling of a string
		{`{"a":"x","n":1,"z":0}`, false},    // unknown member
		{`{"a":"x","n":1}{}`, false},        // trailing data
		{`{"a":"x","n":1}` + "\n", false},   // trailing newline
		{`{"a":"x","l":null,"n":1}`, false}, // omitted, not null
	} {
		var d strictDoc
		if err := DecodeCanonical([]byte(c.in), &d); (err == nil) != c.ok {
			t.Errorf("%s: err %v, want ok %v", c.in, err, c.ok)
		}
	}
}

func TestDecodeOptionalRequest(t *testing.T) {
	var d strictDoc
	for _, in := range []string{"", "  \n", "{}"} {
		if err := DecodeOptionalRequest([]byte(in), &d); err != nil {
			t.Errorf("%q: %v", in, err)
		}
	}
	for _, in := range []string{"null", "[]", `{"x":1}`} {
		if err := DecodeOptionalRequest([]byte(in), &d); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

// FuzzDecodeCanonical: never panics, and what it accepts is exactly the
// canonical encoding of what it decoded.
func FuzzDecodeCanonical(f *testing.F) {
	f.Add([]byte(`{"a":"x","n":1}`))
	f.Add([]byte(`{"a":"x","l":["b","c"],"n":-7}`))
	f.Add([]byte(`{"n":1,"a":"x"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var d strictDoc
		if DecodeCanonical(b, &d) != nil {
			return
		}
		again, err := Canonical(d)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("accepted %q, which re-encodes as %q (%v)", b, again, err)
		}
	})
}
