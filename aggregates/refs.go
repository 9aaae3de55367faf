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
		// Long resource ids share a hashed token only with negligible
		// probability; the body carries the full id, so a collision is
		// caught instead of merging two ledgers.
		Check:    kernel.LedgerKey{GuaranteeID: guaranteeID, Resource: resource, Window: window}.Key().Check,
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

// ControlRef is the tenant's control subject: the kill switch, the versions
// of its guarantees and the enforcement domain.
func ControlRef(tenant string) (Ref, error) {
	subject, err := codec.Subject(tenant, "control")
	if err != nil {
		return Ref{}, err
	}
	return Ref{Subject: subject, New: func() State { return &kernel.Control{} }}, nil
}

// OperationRef is the operation (tenant, run, operation key).
func OperationRef(tenant, runID, operationKey string) (Ref, error) {
	subject, err := codec.Subject(tenant, "operation", runID, operationKey)
	if err != nil {
		return Ref{}, err
	}
	return Ref{Subject: subject, New: func() State { return &kernel.Operation{} }}, nil
}

// ScopedOperationRef is principal's own operation (tenant, run, operation
// key), used when the key of the run is held by another principal's
// operation (kernel.OpenScoped). OperationRef stays the subject of every
// other operation, so operations stored before keys were scoped are read
// where they always were.
func ScopedOperationRef(tenant, runID, operationKey, principal string) (Ref, error) {
	subject, err := codec.Subject(tenant, "operation", runID, operationKey, principal)
	if err != nil {
		return Ref{}, err
	}
	return Ref{Subject: subject, New: func() State { return &kernel.Operation{} }}, nil
}

// Exposure decides one command on one resource ledger
// (kernel.ExposureStep): the load-decide-append loop for callers that need
// a single ledger (tests, benchmarks, operator actions on one resource). It
// returns the ledger's balance once the decision applies.
func (e *Engine) Exposure(ctx context.Context, tenant, guaranteeID, resource string, cmd kernel.Command) (Result, kernel.Balance, error) {
	eff, err := e.Run(ctx, tenant, kernel.ExposureStep(kernel.LedgerKey{GuaranteeID: guaranteeID, Resource: resource}, cmd))
	if err != nil {
		return Result{}, kernel.Balance{}, err
	}
	bal, _ := eff.Reply.Data.(kernel.Balance)
	return Result{Refusal: eff.Refusal}, bal, nil
}

// Pin pins def for tenant on first use and refuses any later difference;
// the pin enrolls the guarantee in the tenant's enforcement domain, on its
// control subject, in the same atomic append (kernel.EnrollStep).
func (e *Engine) Pin(ctx context.Context, tenant string, def kernel.Definition) (*kernel.Refusal, error) {
	eff, err := e.Run(ctx, tenant, kernel.EnrollStep(tenant, def))
	return eff.Refusal, err
}

// Backfill enrolls a guarantee pinned before enrollment existed in the
// tenant's enforcement domain (kernel.BackfillStep); it appends nothing
// for one enrolled or never pinned.
func (e *Engine) Backfill(ctx context.Context, tenant, guaranteeID string) (*kernel.Refusal, error) {
	eff, err := e.Run(ctx, tenant, kernel.BackfillStep(guaranteeID))
	return eff.Refusal, err
}

// RefOf is the subject of a kernel key of tenant, with how to make its
// state and check its events (kernel.Key.New, kernel.Key.Check). Every
// subject is the one the runtime has always stored the kind under:
//
//	operation  ctx.ev.<tenant>.operation.<run>.<operation key>
//	run        ctx.ev.<tenant>.run.<run>
//	approval   ctx.ev.<tenant>.approval.<approval id>
//	evidence   ctx.ev.<tenant>.evidence.<ref>
//	ledger     ctx.ev.<tenant>.exposure.<guarantee>.<resource token>[.<window>]
//	control    ctx.ev.<tenant>.control
//	integrity  ctx.ev.<tenant>.integrity
//	authority  ctx.ev.<tenant>.authority
//	breaker    ctx.ev.<tenant>.breaker.<capability>
//	refusals   ctx.ev.<tenant>.refusal.<principal>
//	pin        ctx.ev.<tenant>.guarantee.<guarantee>
//	packs      ctx.ev.<tenant>.pack
//	request    ctx.ev.<tenant>.oprequest.<request id>
//
// (each <...> but the guarantee and the window a codec.KeyToken).
func RefOf(tenant string, k kernel.Key) (Ref, error) {
	if k.Kind == kernel.KindLedger {
		return ExposureWindowRef(tenant, k.ID, k.Sub, k.Window)
	}
	var subject string
	var err error
	switch k.Kind {
	case kernel.KindOperation:
		if k.Scope != "" {
			subject, err = codec.Subject(tenant, "operation", k.ID, k.Sub, k.Scope)
		} else {
			subject, err = codec.Subject(tenant, "operation", k.ID, k.Sub)
		}
	case kernel.KindRun:
		subject, err = codec.Subject(tenant, "run", k.ID)
	case kernel.KindApproval:
		subject, err = codec.Subject(tenant, "approval", k.ID)
	case kernel.KindEvidence:
		subject, err = codec.Subject(tenant, "evidence", k.ID)
	case kernel.KindControl:
		subject, err = codec.Subject(tenant, "control")
	case kernel.KindIntegrity:
		subject, err = codec.Subject(tenant, "integrity")
	case kernel.KindAuthority:
		subject, err = codec.Subject(tenant, "authority")
	case kernel.KindBreaker:
		subject, err = codec.Subject(tenant, "breaker", k.ID)
	case kernel.KindRefusals:
		subject, err = codec.Subject(tenant, "refusal", k.ID)
	case kernel.KindPin:
		subject, err = codec.Subject(tenant, "guarantee", k.ID)
	case kernel.KindPacks:
		subject, err = codec.Subject(tenant, "pack")
	case kernel.KindOperatorRequest:
		subject, err = codec.Subject(tenant, "oprequest", k.ID)
	default:
		return Ref{}, fmt.Errorf("aggregates: key of an invalid kind: %v", k)
	}
	if err != nil {
		return Ref{}, err
	}
	ref := Ref{Subject: subject, New: func() State { return k.New() }}
	switch k.Kind {
	case kernel.KindApproval, kernel.KindRun, kernel.KindEvidence:
		ref.Check = k.Check
	}
	return ref, nil
}
