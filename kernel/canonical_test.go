package kernel

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/gowebpki/jcs"
)

// TestCanonicalPrefix: the values CanonicalPrefix vouches for are their own
// canonical encoding, and it stops where the value ends; those it does not
// recognize (non-canonical, or canonical outside its subset) are left to
// Canonical.
func TestCanonicalPrefix(t *testing.T) {
	for _, c := range []struct {
		in string
		n  int // -1: not recognized
	}{
		{`{}`, 2},
		{`{"a":1,"b":[true,false,null,"x"],"c":{"d":-5}}`, 46},
		{`{"amount":123456789012345,"res":"ord 992.*>/é"}`, 48},
		{`{"a":1},"next":2`, 7},
		{`[]]`, 2},
		{`"plain"x`, 7},
		{`0`, 1},
		{`-12`, 3},
		{`{"b":1,"a":2}`, -1},           // members out of order
		{`{"a":1,"a":2}`, -1},           // a repeated member
		{`{"a": 1}`, -1},                // whitespace
		{`{"a":1.5}`, -1},               // a fraction: canonical, but outside the subset
		{`{"a":1e3}`, -1},               // an exponent
		{`{"a":1234567890123456}`, -1},  // 16 digits
		{`{"a":01}`, -1},                // a leading zero
		{`{"a":-0}`, -1},                // -0 is written 0
		{`{"a":"\u00e9"}`, -1},          // an escape
		{`{"a":"x` + "\x01" + `"}`, -1}, // a raw control byte
		{`{"a":"` + "\xff" + `"}`, -1},  // not UTF-8
		{`{"é":1}`, -1},                 // a name outside printable ASCII
		{`{"a":1`, -1},                  // unterminated
		{`{"a":tru}`, -1},               // not a literal
		{`[1,]`, -1},                    // a trailing comma
		{``, -1},
	} {
		n, ok := CanonicalPrefix([]byte(c.in))
		if !ok {
			n = -1
		}
		if n != c.n {
			t.Errorf("CanonicalPrefix(%q) = %d, want %d", c.in, n, c.n)
			continue
		}
		if ok {
			want, err := Canonical(json.RawMessage(c.in[:n]))
			if err != nil || !bytes.Equal(want, []byte(c.in[:n])) {
				t.Errorf("CanonicalPrefix vouched for %q, Canonical makes %q (%v)", c.in[:n], want, err)
			}
		}
	}
	deep := bytes.Repeat([]byte("["), maxCanonicalDepth+1)
	deep = append(deep, bytes.Repeat([]byte("]"), maxCanonicalDepth+1)...)
	if _, ok := CanonicalPrefix(deep); ok {
		t.Error("a value nested deeper than the bound was recognized")
	}
}

// FuzzCanonicalPrefix: whatever CanonicalPrefix vouches for, the JCS
// transform encodes to the same bytes.
func FuzzCanonicalPrefix(f *testing.F) {
	f.Add([]byte(`{"a":1,"b":[true,false,null,"x"],"c":{"d":-5}}`))
	f.Add([]byte(`{"amount":100,"attempt_id":"att_1","resource":"ord 992.*>/é"},"x"`))
	f.Add([]byte(`[{"":0},{"a":-999999999999999}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, ok := CanonicalPrefix(b)
		if !ok {
			return
		}
		if n <= 0 || n > len(b) {
			t.Fatalf("length %d of %d bytes", n, len(b))
		}
		want, err := jcs.Transform(b[:n])
		if err != nil || !bytes.Equal(want, b[:n]) {
			t.Fatalf("CanonicalPrefix vouched for %q, JCS makes %q (%v)", b[:n], want, err)
		}
	})
}

// FuzzCanonicalSorted: Canonical, which sorts the members of a plain value
// in one pass and leaves anything else to the JCS transform, gives exactly
// the transform's bytes, and fails exactly when it fails.
func FuzzCanonicalSorted(f *testing.F) {
	for _, s := range []string{
		`{"b":1,"a":[true,false,null,"x"],"c":{"e":-5,"d":"é"}}`,
		`{"resource":"ord_881","amount":100,"attempt_id":"att_1","nested":[{"z":0,"y":1},[]]}`,
		`{"a":1,"a":2}`, `{"b":{"a":1,"a":1}}`, `{"a":1.5,"b":1}`, `{"b":"\u0061","a":1}`, `{"é":1,"a":2}`,
		`{"a" :1}`, `{"a":1} `, `[1,2,{"b":1,"a":0}]`, `"x"`, `123456789012345`, `1234567890123456`, `-0`, `{}`, `[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := Canonical(json.RawMessage(b))
		want, werr := jcs.Transform(b)
		if (err == nil) != (werr == nil) || err == nil && !bytes.Equal(got, want) {
			t.Fatalf("Canonical(%q) = %q, %v; JCS makes %q, %v", b, got, err, want, werr)
		}
	})
}
