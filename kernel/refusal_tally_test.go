package kernel

import (
	"testing"

	"github.com/contextos/ledger/wire"
)

// TestRefusalTally: within a window the first refusal of each key is
// recorded whole and the rest counted; the window's aggregates stand for
// exactly the counted ones, per key; untallied codes are always whole; a
// closed window starts afresh.
func TestRefusalTally(t *testing.T) {
	var tally RefusalTally
	exceeded := RefusalKey{Principal: "agent_email", Code: wire.CodeExceeded, CapabilityID: "refund"}
	other := RefusalKey{Principal: "agent_email", Code: wire.CodeExceeded, CapabilityID: "lookup"}
	approval := RefusalKey{Principal: "agent_email", Code: wire.CodeApprovalRequired, CapabilityID: "refund"}
	add := func(k RefusalKey, digest string) bool {
		whole := tally.Whole(k)
		tally.Add(k, ProposalRefused{Principal: k.Principal, Code: k.Code, Reason: "r " + digest, BodyDigest: digest, BodyBytes: 3}, whole)
		return whole
	}
	steps := []struct {
		key   RefusalKey
		whole bool
	}{
		{exceeded, true}, {exceeded, false}, {exceeded, false}, {other, true}, {exceeded, false},
		{approval, true}, {approval, true}, {other, false},
	}
	for i, s := range steps {
		if got := add(s.key, string(rune('a'+i))); got != s.whole {
			t.Fatalf("step %d %+v: whole %v, want %v", i, s.key, got, s.whole)
		}
	}
	aggs := tally.Close("1m0s")
	if len(aggs) != 2 {
		t.Fatalf("aggregates %+v, want 2", aggs)
	}
	want := []struct {
		capability, digest string
		count              int
	}{{"lookup", "h", 1}, {"refund", "e", 3}}
	for i, w := range want {
		a := aggs[i]
		if a.CapabilityID != w.capability || a.Count != w.count || a.BodyDigest != w.digest || a.Code != wire.CodeExceeded || a.Principal != "agent_email" {
			t.Errorf("aggregate %d: %+v, want %+v", i, a, w)
		}
		var log RefusalLog
		if err := log.Apply(a); err != nil || log.Count != w.count {
			t.Errorf("aggregate %d folds to %d (%v), want %d", i, log.Count, err, w.count)
		}
	}
	if !add(exceeded, "x") || add(exceeded, "y") {
		t.Fatal("a closed window does not start afresh")
	}
	if aggs := tally.Close("1m0s"); len(aggs) != 1 || aggs[0].Count != 1 {
		t.Fatalf("second window: %+v", aggs)
	}
	if aggs := tally.Close("1m0s"); len(aggs) != 0 {
		t.Fatalf("empty window: %+v", aggs)
	}
}

// TestCountedDecision: a counted refusal appends nothing; a refusal recorded
// whole, an untallied one and an accepted proposal keep their events.
func TestCountedDecision(t *testing.T) {
	refused := func(code wire.Code) ProposalDecision {
		return ProposalDecision{Op: []Event{OperationRefused{Code: code}}, Ledgers: map[LedgerKey][]Event{{Resource: "a"}: {OperationRefused{}}, {Resource: "b"}: nil}, Refusal: &Refusal{Code: code}}
	}
	d := refused(wire.CodeExceeded)
	if !d.Counted(false) || len(d.Op) != 0 || len(d.Ledgers) != 2 || d.Ledgers[LedgerKey{Resource: "a"}] != nil {
		t.Fatalf("counted exceeded: %+v", d)
	}
	for _, c := range []struct {
		name  string
		d     ProposalDecision
		whole bool
	}{
		{"first of the window", refused(wire.CodeExceeded), true},
		{"approval required", refused(wire.CodeApprovalRequired), false},
		{"contention", refused(wire.CodeContention), false},
		{"accepted", ProposalDecision{Op: []Event{OperationReserved{}}}, false},
		{"existing", ProposalDecision{Existing: true, Refusal: &Refusal{Code: wire.CodeExceeded}}, false},
	} {
		n := len(c.d.Op)
		if c.d.Counted(c.whole) || len(c.d.Op) != n {
			t.Errorf("%s: counted", c.name)
		}
	}
}
