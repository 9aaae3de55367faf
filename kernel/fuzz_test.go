package kernel

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/contextos/ledger/wire"
)

// FuzzParseAmount: never panics; an accepted amount is in range and its
// decimal form is accepted again as the same value.
func FuzzParseAmount(f *testing.F) {
	for _, s := range []string{"80000", "8e4", "80000.0", "0", "-1", "1.5", "9007199254740991", "9007199254740992", "1e400", "-0", "1e-400", "00", "abc"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, r := ParseAmount(json.Number(s))
		if r != nil {
			if r.Code != wire.CodeAmountInvalid {
				t.Fatalf("refusal code %s", r.Code)
			}
			return
		}
		if n <= 0 || n > MaxAmount {
			t.Fatalf("accepted %q as out-of-range %d", s, n)
		}
		again, r := ParseAmount(json.Number(json.Number(formatInt(n))))
		if r != nil || again != n {
			t.Fatalf("round trip of %d failed", n)
		}
	})
}

func formatInt(n int64) string { b, _ := json.Marshal(n); return string(b) }

// FuzzPointer: parsing never panics, String round-trips, and evaluation on
// arbitrary arguments never panics.
func FuzzPointer(f *testing.F) {
	f.Add("/order_id", `{"order_id":"x"}`)
	f.Add("/a~1b/~0c/0", `{"a/b":{"~c":[1]}}`)
	f.Add("/~2", `{}`)
	f.Add("/arr/01", `{"arr":[1,2]}`)
	f.Add("", `[]`)
	f.Fuzz(func(t *testing.T, ptr, doc string) {
		p, err := ParsePointer(ptr)
		if err != nil {
			return
		}
		if p.String() != ptr {
			t.Fatalf("round trip %q -> %q", ptr, p.String())
		}
		if args, r := DecodeArguments([]byte(doc)); r == nil {
			p.Eval(args)
		}
	})
}

// FuzzParseDefinition: never panics; an accepted definition validates and
// re-encodes to a definition with the same digest.
func FuzzParseDefinition(f *testing.F) {
	f.Add(`{"id":"refunds-per-order","capability_ids":["adp_payments.issue_refund"],"resource_pointer":"/order_id","amount_pointer":"/amount_minor","limit":100000,"unit":"INR_minor"}`)
	f.Add(`{"id":"x","capability_ids":[],"resource_pointer":"","amount_pointer":"/a","limit":-1,"unit":""}`)
	f.Add(`{"id":"x","extra":1}`)
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDefinition([]byte(s))
		if err != nil {
			return
		}
		if r := d.Validate(); r != nil {
			t.Fatalf("parsed definition does not validate: %v", r)
		}
		b, _ := json.Marshal(d)
		d2, err := ParseDefinition(b)
		if err != nil || d2.Digest() != d.Digest() {
			t.Fatalf("definition does not round trip: %v", err)
		}
	})
}

// FuzzDecodeArguments: never panics; accepted arguments canonicalize.
func FuzzDecodeArguments(f *testing.F) {
	f.Add(`{"order_id":"ord_881","amount_minor":80000}`)
	f.Add(`{"a":[[[[[[1]]]]]]}`)
	f.Add(`{"n":9007199254740993}`)
	f.Add(`{"order_id":"s_\ud800","amount_minor":1}`)
	f.Add(`{"order_id":"s_\ud83d\ude00","amount_minor":1}`)
	f.Fuzz(func(t *testing.T, s string) {
		args, r := DecodeArguments([]byte(s))
		if r != nil {
			return
		}
		canon, err := Canonical(json.RawMessage(s))
		if err != nil {
			t.Fatalf("accepted arguments do not canonicalize as sent: %v", err)
		}
		if _, r := DecodeArguments(canon); r != nil {
			t.Fatalf("canonical form %s refused: %v", canon, r)
		}
		if twice, err := Canonical(json.RawMessage(canon)); err != nil || !bytes.Equal(twice, canon) {
			t.Fatalf("canonical form %s is not stable: %s %v", canon, twice, err)
		}
		b, err := json.Marshal(args)
		if err != nil {
			t.Fatalf("accepted arguments do not encode: %v", err)
		}
		if _, err := Canonical(json.RawMessage(b)); err != nil {
			t.Fatalf("accepted arguments do not canonicalize: %v", err)
		}
	})
}

// FuzzDecodeCanonicalEvent: on any body in canonical form (what every stored
// envelope carries), DecodeCanonicalEvent decodes exactly what DecodeEvent
// does, or refuses it with it; a body that is not canonical is DecodeEvent's
// only.
func FuzzDecodeCanonicalEvent(f *testing.F) {
	types := EventTypes()
	slices.Sort(types) // a corpus entry names the same type on every run
	f.Add(0, []byte(`{"guarantee_id":"g","resource":"r","attempt_id":"a","operation_id":"o","amount":5,"limit":10,"definition_digest":"d"}`))
	f.Add(1, []byte(`{"attempt_id":"a","outcome":"applied","source":"provider"}`))
	f.Add(2, []byte(`{"a":1}`))
	f.Fuzz(func(t *testing.T, k int, body []byte) {
		if k < 0 {
			k = -k
		}
		typ := types[k%len(types)]
		c, err := Canonical(json.RawMessage(body))
		if err != nil {
			return
		}
		strict, err1 := DecodeEvent(typ, EventVersion, c)
		fast, err2 := DecodeCanonicalEvent(typ, EventVersion, c)
		if (err1 == nil) != (err2 == nil) {
			t.Fatalf("%s %s: DecodeEvent %v, DecodeCanonicalEvent %v", typ, c, err1, err2)
		}
		if err1 == nil {
			a, _ := json.Marshal(strict)
			b, _ := json.Marshal(fast)
			if string(a) != string(b) {
				t.Fatalf("%s %s: %s != %s", typ, c, a, b)
			}
		}
	})
}

// FuzzCanonicalObject: an object put together by CanonicalObject from
// canonical values and plain names, strings and integers is byte for byte
// what Canonical makes of the same object.
func FuzzCanonicalObject(f *testing.F) {
	f.Add("body", `{"b":[1,2.5],"a":"\u00e9"}`, "event_id", "01JDQ8Z5X3N4R7T9V2W6Y8A0BC", "v", int64(1))
	f.Add("z", `"x"`, "a", "<&>", "m", int64(-7))
	f.Add("", `null`, "sig", "a\"b", "n", int64(1e15))
	f.Fuzz(func(t *testing.T, n1, raw, n2, str, n3 string, num int64) {
		v1, err := Canonical(json.RawMessage(raw))
		if err != nil || n1 == n2 || n1 == n3 || n2 == n3 {
			return
		}
		members := []Member{{Name: n1, Value: v1}}
		v2, ok2 := CanonicalString(str)
		v3, ok3 := CanonicalInt(num)
		if ok2 {
			members = append(members, Member{Name: n2, Value: v2})
		}
		if ok3 {
			members = append(members, Member{Name: n3, Value: v3})
		}
		got, ok := CanonicalObject(members)
		if !ok {
			return
		}
		obj := map[string]json.RawMessage{}
		for _, m := range members {
			obj[m.Name] = m.Value
		}
		want, err := Canonical(obj)
		if err != nil {
			t.Fatalf("Canonical refused what CanonicalObject took: %v", err)
		}
		if string(got) != string(want) {
			t.Fatalf("CanonicalObject %s\nCanonical       %s", got, want)
		}
	})
}

// TestCanonicalObject: what the composition takes and declines.
func TestCanonicalObject(t *testing.T) {
	cases := []struct {
		name    string
		members []Member
		want    string // "" when declined
	}{
		{"sorted", []Member{{"v", []byte("1")}, {"body", []byte(`{"a":1}`)}, {"key_id", []byte(`"k"`)}}, `{"body":{"a":1},"key_id":"k","v":1}`},
		{"empty object", nil, `{}`},
		{"non-plain name", []Member{{"é", []byte("1")}}, ""},
		{"quote in a name", []Member{{`a"b`, []byte("1")}}, ""},
		{"empty value", []Member{{"a", nil}}, ""},
	}
	for _, c := range cases {
		got, ok := CanonicalObject(c.members)
		if (c.want == "") == ok || (ok && string(got) != c.want) {
			t.Errorf("%s: %q %v, want %q", c.name, got, ok, c.want)
		}
	}
	for _, c := range []struct {
		s  string
		ok bool
	}{{"acme", true}, {"<&>/ ~", true}, {`a"b`, false}, {`a\b`, false}, {"a\x1fb", false}, {"a\x7fb", false}, {"é", false}} {
		if _, ok := CanonicalString(c.s); ok != c.ok {
			t.Errorf("CanonicalString(%q) ok %v, want %v", c.s, ok, c.ok)
		}
	}
	for _, c := range []struct {
		v  int64
		ok bool
	}{{0, true}, {-5, true}, {1e15 - 1, true}, {1e15, false}, {-1e15, false}} {
		if _, ok := CanonicalInt(c.v); ok != c.ok {
			t.Errorf("CanonicalInt(%d) ok %v, want %v", c.v, ok, c.ok)
		}
	}
}
