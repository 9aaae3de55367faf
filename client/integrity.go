package client

import (
	"context"

	"github.com/contextos/ledger/wire"
)

// IntegrityState is the tenant's audit log integrity: an open incident
// (a witness answered that the log shrank or forked: dispatch is stopped)
// and the witnesses' state.
type IntegrityState = wire.IntegrityState

// Integrity reads the tenant's audit log integrity.
func (c *Client) Integrity(ctx context.Context) (IntegrityState, error) {
	var d struct {
		Integrity IntegrityState `json:"integrity"`
	}
	err := c.opData(ctx, "integrity", struct{}{}, &d)
	return d.Integrity, err
}

// ResolveIntegrity records an operator's resolution of the integrity
// incident (resolution "restored" or "rotated", the ticket and a statement
// of what happened); proposals are dispatched again once it is recorded.
func (c *Client) ResolveIntegrity(ctx context.Context, resolution, artifactRef, statement string) (IntegrityState, error) {
	var d struct {
		Integrity IntegrityState `json:"integrity"`
	}
	err := c.opData(ctx, "integrity-resolve", wire.IntegrityRequest{Resolution: resolution, ArtifactRef: artifactRef, Statement: statement}, &d)
	return d.Integrity, err
}
