package client

import (
	"encoding/json"
	"fmt"

	"github.com/contextos/ledger/wire"
)

// The evidence gate of a decision, as the kernel decides it (docs/context.md,
// docs/schema/evidence-gate.json).
type (
	// EvidenceGate is the proof obligation of the capability's decision:
	// required, satisfied and unresolved obligations, the conflicts naming
	// them, the sufficiency and whether commit is allowed.
	EvidenceGate = wire.EvidenceGate
	// EvidenceConflictMarker is a conflict between evidence refs over
	// some requirements, unresolved or resolved.
	EvidenceConflictMarker = wire.EvidenceConflictMarker
	// ConflictResolution is how a resolved conflict was resolved.
	ConflictResolution = wire.ConflictResolution
)

// DecisionGate decodes the evidence gate a decision carries: nil when the
// capability is not gated by a decision spec, an error when the member is
// not a gate.
func DecisionGate(d Decision) (*EvidenceGate, error) {
	if len(d.Gate) == 0 || string(d.Gate) == "null" {
		return nil, nil
	}
	var g EvidenceGate
	if err := json.Unmarshal(d.Gate, &g); err != nil {
		return nil, fmt.Errorf("decision evidence_gate: %w", err)
	}
	return &g, nil
}
