package kernel

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/contextos/ledger/wire"
)

// TestFenceSurvivesSnapshot: a ledger rebuilt from its snapshot, and a
// clone, fence the same action as the ledger folded from its events, and
// free it once the attempt seals.
func TestFenceSurvivesSnapshot(t *testing.T) {
	action, err := SameActionKey("refund", json.RawMessage(`{"amount_minor":30000,"order_id":"ord_881"}`))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 10, 26, 9, 0, 0, 0, time.UTC)
	reserve := func(att, op string) Command {
		return ReserveStarted{Reserve{GuaranteeID: "g", Resource: "ord_881", AttemptID: att, OperationID: op, Amount: 30000, Limit: 100000,
			DefinitionDigest: "d", Now: now, Action: action}}
	}
	l := &Ledger{}
	fold := func(l *Ledger, d Decision) {
		t.Helper()
		if d.Refusal != nil {
			t.Fatalf("refused: %v", d.Refusal)
		}
		for _, ev := range d.Events {
			if err := l.Apply(ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	fold(l, DecideExposure(l, reserve("att_1", "op_1")))
	fold(l, DecideExposure(l, Observe{AttemptID: "att_1", Outcome: OutcomeUnknown, Source: "provider", Now: now}))

	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	snap := &Ledger{}
	if err := json.Unmarshal(b, snap); err != nil {
		t.Fatal(err)
	}
	if err := snap.Rebuild(); err != nil {
		t.Fatal(err)
	}
	for name, st := range map[string]*Ledger{"folded": l, "snapshot": snap, "clone": l.Clone()} {
		if d := DecideExposure(st, reserve("att_2", "op_2")); d.Refusal == nil || d.Refusal.Code != wire.CodeUnresolvedAttempt {
			t.Errorf("%s: a new operation of the same action while unknown: %+v, want %s", name, d, wire.CodeUnresolvedAttempt)
		}
		other := ReserveStarted{Reserve{GuaranteeID: "g", Resource: "ord_881", AttemptID: "att_2", OperationID: "op_2", Amount: 30000, Limit: 100000,
			DefinitionDigest: "d", Now: now}}
		if d := DecideExposure(st, other); d.Refusal != nil {
			t.Errorf("%s: an unfenced reservation is refused: %v", name, d.Refusal)
		}
	}
	fold(snap, DecideExposure(snap, Observe{AttemptID: "att_1", Outcome: OutcomeApplied, Source: "reconcile", Now: now}))
	fold(snap, DecideExposure(snap, reserve("att_2", "op_2")))
	if got := snap.Balance(); got.Committed != 30000 || got.Held != 30000 {
		t.Fatalf("balance after reconcile and a new operation: %+v", got)
	}
}

// TestSameActionKey: the key binds the capability and the arguments, and
// nothing else.
func TestSameActionKey(t *testing.T) {
	a, _ := SameActionKey("refund", json.RawMessage(`{"amount_minor":30000,"order_id":"ord_881"}`))
	for _, c := range []struct {
		capability, args string
		same             bool
	}{
		{"refund", `{"amount_minor":30000,"order_id":"ord_881"}`, true},
		{"refund", `{"amount_minor":30001,"order_id":"ord_881"}`, false},
		{"refund", `{"amount_minor":30000,"order_id":"ord_882"}`, false},
		{"credit", `{"amount_minor":30000,"order_id":"ord_881"}`, false},
	} {
		b, err := SameActionKey(c.capability, json.RawMessage(c.args))
		if err != nil {
			t.Fatal(err)
		}
		if (a == b) != c.same {
			t.Errorf("%s %s: same=%v, want %v", c.capability, c.args, a == b, c.same)
		}
	}
	if SameActionFenced(false, false) || !SameActionFenced(true, false) || SameActionFenced(true, true) {
		t.Error("the fence is on exactly for an effectful capability that does not turn it off")
	}
}
