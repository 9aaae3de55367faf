package aggregates

import (
	"crypto/ed25519"
	"testing"

	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
)

// TestSealBySubject: a decision's events, held by subject, come back in the
// same shape under one signature, each verifying on its own; a decision of
// one event is signed alone.
func TestSealBySubject(t *testing.T) {
	s := testSealer()
	kr := codec.Keyring{}
	kr.Add(s.Signer.Key.Public().(ed25519.PublicKey))
	ev := func(a string) kernel.Event { return kernel.ExposureTombstoned{AttemptID: a, Reason: "test"} }
	got, err := s.SealBySubject("acme", [][]kernel.Event{{ev("a"), ev("b")}, nil, {ev("c")}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || len(got[0]) != 2 || got[1] != nil || len(got[2]) != 1 {
		t.Fatalf("shape %v", got)
	}
	all := append(append([]codec.Envelope{}, got[0]...), got[2]...)
	ids := map[string]bool{}
	for i, e := range all {
		if err := kr.Verify(e); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if e.Sig != all[0].Sig || e.Proof == "" || ids[e.EventID] {
			t.Fatalf("event %d: sig shared %v, proof %q, id %s seen before %v", i, e.Sig == all[0].Sig, e.Proof, e.EventID, ids[e.EventID])
		}
		ids[e.EventID] = true
		var body kernel.ExposureTombstoned
		if err := codec.DecodeBody(e, &body); err != nil || body.AttemptID != string(rune('a'+i)) {
			t.Fatalf("event %d holds %+v, %v", i, body, err)
		}
	}
	one, err := s.SealBySubject("acme", [][]kernel.Event{nil, {ev("d")}})
	if err != nil {
		t.Fatal(err)
	}
	if one[1][0].Proof != "" || kr.Verify(one[1][0]) != nil {
		t.Fatalf("a decision of one event: proof %q, verify %v", one[1][0].Proof, kr.Verify(one[1][0]))
	}
}
