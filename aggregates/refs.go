package aggregates

import (
	"context"
	"fmt"

	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
)

// ExposureRef is the ledger of one (tenant, guarantee, resource).
func ExposureRef(tenant, guaranteeID, resource string) (Ref, error) {
	return ExposureWindowRef(tenant, guaranteeID, resource, "")
}

// ExposureWindowRef is the ledger of one (tenant, guarantee, resource) in a
// calendar window ("" for a guarantee without one).
func ExposureWindowRef(tenant, guaranteeID, resource, window string) (Ref, error) {
	subject, err := codec.ExposureWindowSubject(tenant, guaranteeID, resource, window)
	if err != nil {
		return Ref{}, err
	}
	return Ref{
		Subject: subject,
		New:     func() State { return &kernel.Ledger{} },
		Check: func(ev kernel.Event) error {
			// Long resource ids share a hashed token only with negligible
			// probability; the body carries the full id, so a collision is
			// caught here instead of merging two ledgers.
			if r, ok := ev.(kernel.ExposureReserved); ok && (r.Resource != resource || r.GuaranteeID != guaranteeID || r.Window != window) {
				return fmt.Errorf("reservation for %q/%q on the subject of %q/%q", r.GuaranteeID, r.Resource, guaranteeID, resource)
			}
			return nil
		},
		Snapshot: true,
		CheckState: func(s State) error {
			// A snapshot must be of this very ledger (or of an empty one).
			if l := s.(*kernel.Ledger); l.Limit != 0 && (l.Resource != resource || l.GuaranteeID != guaranteeID) {
				return fmt.Errorf("snapshot of %q/%q on the subject of %q/%q", l.GuaranteeID, l.Resource, guaranteeID, resource)
			}
			return nil
		},
	}, nil
}

// PinRef is the pinned definition of (tenant, guarantee).
func PinRef(tenant, guaranteeID string) (Ref, error) {
	subject, err := codec.Subject(tenant, "guarantee", guaranteeID)
	if err != nil {
		return Ref{}, err
	}
	return Ref{Subject: subject, New: func() State { return &kernel.Pin{} }}, nil
}

// OperationRef is the operation (tenant, run, operation key).
func OperationRef(tenant, runID, operationKey string) (Ref, error) {
	subject, err := codec.Subject(tenant, "operation", runID, operationKey)
	if err != nil {
		return Ref{}, err
	}
	return Ref{Subject: subject, New: func() State { return &kernel.Operation{} }}, nil
}

// Exposure decides one command on one resource ledger: the load-decide-append
// loop for callers that need a single ledger (tests, benchmarks, operator
// actions on one resource).
func (e *Engine) Exposure(ctx context.Context, tenant, guaranteeID, resource string, cmd kernel.Command) (Result, kernel.Balance, error) {
	ref, err := ExposureRef(tenant, guaranteeID, resource)
	if err != nil {
		return Result{}, kernel.Balance{}, err
	}
	var bal kernel.Balance
	var l *kernel.Ledger
	var d kernel.Decision
	res, err := e.Do(ctx, Tx{
		Tenant: tenant,
		Bind:   []Binding{Bind(ref, &l, &d.Events)},
		Decide: func() *kernel.Refusal { d = kernel.DecideExposure(l, cmd); return d.Refusal },
		Done:   func() { bal = l.Balance() },
	})
	return res, bal, err
}

// Pin pins def for tenant on first use and refuses any later difference.
func (e *Engine) Pin(ctx context.Context, tenant string, def kernel.Definition) (*kernel.Refusal, error) {
	ref, err := PinRef(tenant, def.ID)
	if err != nil {
		return nil, err
	}
	var p *kernel.Pin
	var d kernel.Decision
	res, err := e.Do(ctx, Tx{
		Tenant: tenant,
		Bind:   []Binding{Bind(ref, &p, &d.Events)},
		Decide: func() *kernel.Refusal { d = kernel.DecidePin(p, tenant, def); return d.Refusal },
	})
	return res.Refusal, err
}
