package daemon_test

import (
	"testing"

	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/internal/testing/provider"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
)

// TestContradictionIsAnIncident: after an operator asserted the absence of
// a pending refund, the provider reports it applied after all. Reconciling
// the attempt answers observation_contradicts_seal (not "already
// resolved"), the seal and the balance stand, and the signed stream holds
// the incident on the operation and on the ledger.
func TestContradictionIsAnIncident(t *testing.T) {
	e := startEnv(t)
	nc := e.client("acme", "agent_email")
	e.prov.Script(provider.Pending)
	r := e.propose(nc, "acme", "agent_email", refund("run_i", "i1", "ord_i", 500))
	if r.Status != wire.StatusPending {
		t.Fatalf("proposal: %+v", r)
	}
	if a := e.op("assert-absence", wire.OpRequest{AttemptID: r.AttemptID, ArtifactRef: "psp-export.csv"}); !a.OK {
		t.Fatalf("assert-absence: %+v", a)
	}
	if !e.prov.Settle(r.AttemptID, "succeeded") {
		t.Fatal("provider does not know the attempt")
	}
	rec := e.op("reconcile", wire.OpRequest{AttemptID: r.AttemptID})
	if !rec.OK || len(rec.Settled) != 1 || rec.Settled[0].Code != wire.CodeObservationContradictsSeal {
		t.Fatalf("reconcile: %+v", rec)
	}
	ops := e.op("exposure", wire.OpRequest{Resource: "ord_i"})
	if len(ops.Exposure) != 1 || ops.Exposure[0].Committed != 0 || ops.Exposure[0].Held != 0 {
		t.Fatalf("the seal moved: %+v", ops.Exposure)
	}
	subject, _ := codec.Subject("acme", "operation", "run_i", "i1")
	var inc *kernel.OperationIncident
	for _, ev := range e.signed(subject) {
		if i, ok := ev.(kernel.OperationIncident); ok {
			inc = &i
		}
	}
	if inc == nil || inc.Sealed != kernel.OutcomeNotApplied || inc.Observed != kernel.OutcomeApplied || inc.AttemptID != r.AttemptID {
		t.Fatalf("operation incident: %+v", inc)
	}
	ledger, _ := codec.ExposureSubject("acme", "refunds-per-order", "ord_i")
	found := false
	for _, ev := range e.signed(ledger) {
		_, found = ev.(kernel.ExposureIncident)
	}
	if !found {
		t.Fatal("no exposure.incident on the ledger")
	}
	// Each contradicting report is recorded: asking again is a second one.
	again := e.op("reconcile", wire.OpRequest{AttemptID: r.AttemptID})
	n := 0
	for _, ev := range e.signed(subject) {
		if _, ok := ev.(kernel.OperationIncident); ok {
			n++
		}
	}
	if len(again.Settled) != 1 || again.Settled[0].Code != wire.CodeObservationContradictsSeal || n != 2 {
		t.Fatalf("second reconcile: %+v, %d incidents", again, n)
	}
}
