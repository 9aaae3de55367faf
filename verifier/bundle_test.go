package verifier

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"testing"

	"github.com/contextos/ledger/audit"
)

// bundleOf makes the bundle of the fixture's first attempt.
func bundleOf(t *testing.T, f *fixture) ([]byte, string) {
	t.Helper()
	e, err := audit.ParseEntries(f.entries(t))
	if err != nil {
		t.Fatal(err)
	}
	var attempt string
	for _, raw := range e.Records {
		_, env, err := audit.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			AttemptID string `json:"attempt_id"`
		}
		if json.Unmarshal(env.Body, &body) == nil && body.AttemptID != "" {
			attempt = body.AttemptID
			break
		}
	}
	keys, err := audit.MarshalKeys(f.keys)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewBundle(e, keys, attempt)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := MarshalBundle(b)
	if err != nil {
		t.Fatal(err)
	}
	return raw, attempt
}

// TestBundle: an attempt's bundle verifies offline under the witness
// policy, with its own keys or the auditor's; it is refused under a
// witness the checkpoint lacks, with another log's keys, and after any
// one-byte change (the parser, a signature, the chain of proofs or the
// policy names it).
func TestBundle(t *testing.T) {
	f := newFixture(t, 40, 16)
	raw, attempt := bundleOf(t, f)
	w := []*audit.Cosigner{f.witness.Verifier()}
	res, err := VerifyBundle(raw, nil, w, 1)
	if err != nil || res.Bundle.AttemptID != attempt || len(res.Events) == 0 || len(res.Cosigned) != 1 {
		t.Fatalf("%+v %v", res, err)
	}
	if _, err := VerifyBundle(raw, &f.keys, w, 1); err != nil {
		t.Fatalf("with the auditor's keys: %v", err)
	}
	otherKeys, err := audit.KeysFor(f.tenant, fixedKey("another runtime").Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyBundle(raw, &otherKeys, w, 1); err == nil {
		t.Fatal("a bundle verified under another runtime's keys")
	}
	stranger, err := audit.NewCosigner("witness.test/stranger", fixedKey("stranger"), fixedClock)
	if err != nil {
		t.Fatal(err)
	}
	_, err = VerifyBundle(raw, nil, []*audit.Cosigner{stranger.Verifier()}, 1)
	if f := audit.FailureOf(err); err == nil || f.Reason != audit.ReasonWitness {
		t.Fatalf("a witness that did not cosign: %v", err)
	}
	if _, err := NewBundle(audit.Entries{Tenant: f.tenant, Records: [][]byte{}}, nil, attempt); !errors.Is(err, ErrNotFound) {
		t.Fatalf("an attempt with no record: %v", err)
	}
	for i := range raw {
		m := bytes.Clone(raw)
		m[i] ^= 0x01
		if _, err := VerifyBundle(m, nil, w, 1); err == nil {
			t.Fatalf("byte %d changed (%q): the bundle still verifies", i, raw[max(0, i-20):min(len(raw), i+20)])
		}
	}
}

// FuzzParseBundle: a bundle never panics the parser, and a parsed one
// re-encodes to itself.
func FuzzParseBundle(f *testing.F) {
	f.Add([]byte(`{"attempt_id":"a","checkpoint":"c","keys":"k","records":[{"index":0,"proof":[],"record":{}}],"tenant":"acme","v":1}` + "\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		bd, err := ParseBundle(b)
		if err != nil {
			return
		}
		again, err := MarshalBundle(bd)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("%q re-encodes to %q (%v)", b, again, err)
		}
	})
}
