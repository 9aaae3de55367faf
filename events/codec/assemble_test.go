package codec

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/contextos/ledger/kernel"
)

// checkAssemble fails when assemble, given a canonical body, says it can
// encode e and writes anything but kernel.Canonical's bytes. It reports
// whether assemble took the envelope.
func checkAssemble(t *testing.T, e Envelope) bool {
	t.Helper()
	took := false
	for _, withSig := range []bool{false, true} {
		got, ok := assemble(e, withSig)
		if !ok {
			continue
		}
		took = true
		var v any = unsigned{e.Type, e.V, e.EventID, e.Tenant, e.Time, e.Body, e.KeyID}
		if withSig {
			v = e
		}
		want, err := kernel.Canonical(v)
		if err != nil {
			t.Fatalf("kernel.Canonical refused what assemble took: %v (%+v)", err, e)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("withSig %v:\nassemble  %s\nCanonical %s", withSig, got, want)
		}
	}
	return took
}

// TestAssembleIsCanonical: the envelope fast path writes kernel.Canonical's
// bytes exactly, for valid envelopes and for strings at the edge of what JCS
// writes verbatim; it declines strings JCS would escape or re-encode.
func TestAssembleIsCanonical(t *testing.T) {
	body, _ := kernel.Canonical(json.RawMessage(`{"z":[1,2.5,"\u00e9\n"],"a":{"y":null,"b":true},"amount":80000}`))
	base := Envelope{Type: "exposure.reserved", V: 1, EventID: "01JDQ8Z5X3N4R7T9V2W6Y8A0BC", Tenant: "acme",
		Time: "2026-11-30T06:00:00.000000000Z", Body: body, KeyID: "ed25519:abc_DEF-1.2", Sig: "AbC-_09" + "x"}
	cases := []struct {
		name string
		edit func(*Envelope)
		took bool
	}{
		{"valid", func(*Envelope) {}, true},
		{"html characters", func(e *Envelope) { e.Tenant = "<a&b>/'" }, true},
		{"space and tilde", func(e *Envelope) { e.KeyID = " ~ " }, true},
		{"large v", func(e *Envelope) { e.V = 1e15 - 1 }, true},
		{"empty body object", func(e *Envelope) { e.Body = json.RawMessage(`{}`) }, true},
		{"quote", func(e *Envelope) { e.Tenant = `a"b` }, false},
		{"backslash", func(e *Envelope) { e.Type = `a\b` }, false},
		{"control", func(e *Envelope) { e.Time = "a\x1fb" }, false},
		{"delete", func(e *Envelope) { e.Tenant = "a\x7fb" }, false},
		{"non-ASCII", func(e *Envelope) { e.EventID = "é" }, false},
		{"v beyond plain decimal", func(e *Envelope) { e.V = 1e15 }, false},
		{"negative v", func(e *Envelope) { e.V = -1 }, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := base
			c.edit(&e)
			if took := checkAssemble(t, e); took != c.took {
				t.Fatalf("assemble took it: %v, want %v", took, c.took)
			}
		})
	}
}

// FuzzAssembleIsCanonical: for any fields and any body made canonical,
// whatever assemble writes is kernel.Canonical's encoding.
func FuzzAssembleIsCanonical(f *testing.F) {
	f.Add("exposure.reserved", 1, "01JDQ8Z5X3N4R7T9V2W6Y8A0BC", "acme", "2026-11-30T06:00:00.000000000Z", `{"b":1,"a":"x"}`, "ed25519:k", "c2ln")
	f.Add("t", 7, "<&>", "a b", "~", `{"\u00e9":[1e3,-0,0.1]}`, "k", "")
	f.Fuzz(func(t *testing.T, typ string, v int, id, tenant, tm, body, kid, sig string) {
		cb, err := kernel.Canonical(json.RawMessage(body))
		if err != nil || len(cb) == 0 || cb[0] != '{' {
			return
		}
		checkAssemble(t, Envelope{Type: typ, V: v, EventID: id, Tenant: tenant, Time: tm, Body: cb, KeyID: kid, Sig: sig})
	})
}
