package client_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/contextos/ledger/client"
)

// TestDecisionGate decodes the gate of a decision reply into its type, and
// reports no gate for an ungated decision.
func TestDecisionGate(t *testing.T) {
	b, err := os.ReadFile("../testdata/context/conflict_resolved_review/want.json")
	if err != nil {
		t.Fatal(err)
	}
	var cc struct {
		Gate json.RawMessage `json:"gate"`
	}
	if err := json.Unmarshal(b, &cc); err != nil {
		t.Fatal(err)
	}
	var d client.Decision
	if err := json.Unmarshal([]byte(`{"status":"applied","evidence_gate":`+string(cc.Gate)+`}`), &d); err != nil {
		t.Fatal(err)
	}
	g, err := client.DecisionGate(d)
	if err != nil || g == nil {
		t.Fatalf("gate %v %v", g, err)
	}
	if !g.CommitAllowed || g.Sufficiency != "sufficient" || len(g.Conflicts) != 1 {
		t.Fatalf("gate %+v", g)
	}
	var r *client.ConflictResolution = g.Conflicts[0].Resolution
	if r == nil || r.Kind != "accountable_review" || r.ResolvedBy == "" || len(r.SelectedEvidenceRefs) != 1 {
		t.Fatalf("resolution %+v", r)
	}
	if g, err := client.DecisionGate(client.Decision{Status: client.StatusApplied}); g != nil || err != nil {
		t.Fatalf("ungated decision: %v %v", g, err)
	}
	if _, err := client.DecisionGate(client.Decision{Gate: json.RawMessage(`[1]`)}); err == nil {
		t.Fatal("an array decoded as a gate")
	}
}
