package kernel

import (
	"encoding/json"
	"slices"
	"testing"
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
			if r.Code != CodeAmountInvalid {
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
	f.Fuzz(func(t *testing.T, s string) {
		args, r := DecodeArguments([]byte(s))
		if r != nil {
			return
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
