package verifier

import (
	"testing"

	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/exposure"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
)

// TestFoldIncidents: exposure incidents and refusals of the incident codes
// are listed; other refusals are not.
func TestFoldIncidents(t *testing.T) {
	f := newFixture(t, 1, 1)
	fold := NewFold(f.tenant)
	sub, err := codec.Subject(f.tenant, "operation", "op 1")
	if err != nil {
		t.Fatal(err)
	}
	for i, code := range []wire.Code{wire.CodeContention, wire.CodeExceeded, wire.CodeExecutorFenced} {
		env, err := f.signer.Seal(kernel.TypeOperationRefused, kernel.EventVersion, fixedID(100+i), f.tenant, fixedTime(i),
			kernel.OperationRefused{Code: code, Reason: "test"})
		if err != nil {
			t.Fatal(err)
		}
		if err := fold.Apply(uint64(10+i), sub, env); err != nil {
			t.Fatal(err)
		}
	}
	v := fold.View()
	if len(v.Incidents) != 2 || v.Incidents[0].Kind != string(wire.CodeContention) || v.Incidents[1].Kind != string(wire.CodeExecutorFenced) {
		t.Fatalf("incidents %+v", v.Incidents)
	}
	if len(v.Resources) != 0 || v.Seq != 12 {
		t.Fatalf("view %+v", v)
	}
}

// TestFoldRefusesForeignEvents: the fold fails closed on events that do not
// belong to the tenant, to the subject or to the ledger, and on sequences
// that do not increase.
func TestFoldRefusesForeignEvents(t *testing.T) {
	f := newFixture(t, 4, 4)
	env := func(i int) codec.Envelope {
		e, err := codec.Decode(f.stored[i].raw)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	other, err := codec.ExposureSubject(f.tenant, "refunds-per-order", "another")
	if err != nil {
		t.Fatal(err)
	}
	fold := NewFold(f.tenant)
	if err := fold.Apply(f.stored[0].seq, other, env(0)); err == nil {
		t.Fatal("a reservation on another resource's subject was folded")
	}
	if err := fold.Apply(f.stored[1].seq, f.stored[1].subject, env(1)); err == nil {
		t.Fatal("a dispatch-start of an unknown attempt was folded")
	}
	if err := NewFold("globex").Apply(f.stored[0].seq, f.stored[0].subject, env(0)); err == nil {
		t.Fatal("another tenant's event was folded")
	}
	if err := fold.Apply(f.stored[0].seq, f.stored[0].subject, env(0)); err != nil {
		t.Fatal(err)
	}
	if err := fold.Apply(f.stored[0].seq, f.stored[1].subject, env(1)); err == nil {
		t.Fatal("a repeated sequence was folded")
	}
	if v := fold.View(); v.Resources[0].Held == 0 || len(v.Resources[0].OpenAttempts) != 1 || v.Resources[0].OpenAttempts[0].NextStep != exposure.NextStepReserved {
		t.Fatalf("view %+v", v)
	}
}
