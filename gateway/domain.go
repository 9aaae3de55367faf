package gateway

import (
	"context"
	"fmt"

	"github.com/contextos/ledger/aggregates"
	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/kernel"
)

// DomainError is a configuration that leaves a tenant's enforcement domain
// (kernel.Control.CheckConfigured): Boot and --check-config refuse it.
type DomainError struct {
	Tenant  string
	Refusal *kernel.Refusal
}

func (e *DomainError) Error() string {
	return fmt.Sprintf("tenant %s: %s: %s", e.Tenant, e.Refusal.Code, e.Refusal.Reason)
}

// readDomain reads a tenant's enforcement domain from the stream: its
// control subject, with every pin that is not enrolled there yet (made
// before enrollment existed) enrolled on the copy as DecideBackfill would.
// It returns those pins' ids, in stream order.
func readDomain(ctx context.Context, store events.Store, tenant string) (*kernel.Control, []string, error) {
	cref, err := aggregates.ControlRef(tenant)
	if err != nil {
		return nil, nil, err
	}
	stored, err := store.Read(ctx, cref.Subject, 1)
	if err != nil {
		return nil, nil, fmt.Errorf("read the control subject of %s: %w", tenant, err)
	}
	ctl := &kernel.Control{}
	if err := fold(cref, ctl, stored); err != nil {
		return nil, nil, err
	}
	var missing []string
	err = store.ReplayKind(ctx, tenant, "guarantee", func(s events.Stored) error {
		ev, err := kernel.DecodeEvent(s.Envelope.Type, s.Envelope.V, s.Envelope.Body)
		if err != nil {
			return fmt.Errorf("%s seq %d: %w", s.Subject, s.Seq, err)
		}
		p := &kernel.Pin{}
		if err := p.Apply(ev); err != nil {
			return fmt.Errorf("%s seq %d: %w", s.Subject, s.Seq, err)
		}
		d := kernel.DecideBackfill(kernel.PinState{Pin: p, Control: ctl})
		for _, ev := range d.Control {
			if err := ctl.Apply(ev); err != nil {
				return fmt.Errorf("%s seq %d: %w", s.Subject, s.Seq, err)
			}
			missing = append(missing, p.Definition.ID)
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("read the pins of %s: %w", tenant, err)
	}
	return ctl, missing, nil
}

// checkConfigured is kernel.Control.CheckConfigured of cfg's guarantees
// and capabilities, as a DomainError.
func checkConfigured(cfg *config.Config, tenant string, ctl *kernel.Control) error {
	surfaced := func(id string) bool { _, ok := cfg.Capability(id); return ok }
	if r := ctl.CheckConfigured(cfg.Guarantees, surfaced); r != nil {
		return &DomainError{Tenant: tenant, Refusal: r}
	}
	return nil
}

// CheckDomain checks cfg against the enforcement domain of each of its
// tenants in store without writing anything: the configuration must govern
// every capability it surfaces that a guarantee pinned in the stream
// governs (a *DomainError otherwise, as Boot would refuse it). Warnings name
// what Boot accepts but fails closed on: a configured definition that
// differs from its pin in what it means.
func CheckDomain(ctx context.Context, cfg *config.Config, store events.Store) (warnings []string, err error) {
	for _, t := range cfg.Tenants {
		ctl, _, err := readDomain(ctx, store, t.ID)
		if err != nil {
			return warnings, err
		}
		if err := checkConfigured(cfg, t.ID, ctl); err != nil {
			return warnings, err
		}
		for _, def := range cfg.Guarantees {
			p, ok := ctl.Enrolled(def.ID)
			if !ok {
				continue
			}
			if d := kernel.DecidePin(&kernel.Pin{Tenant: t.ID, Definition: p.Definition, Digest: p.Digest}, t.ID, def); d.Refusal != nil {
				warnings = append(warnings, fmt.Sprintf("tenant %s: %s: %s; proposals it covers will be refused", t.ID, d.Refusal.Code, d.Refusal.Reason))
			}
		}
	}
	return warnings, nil
}

// enterDomain enrolls the pins of tenant that are not enrolled yet and
// refuses a configuration that leaves its enforcement domain, before this
// replica pins anything.
func (g *Gateway) enterDomain(ctx context.Context, tenant string) error {
	ctl, missing, err := readDomain(ctx, g.store, tenant)
	if err != nil {
		return err
	}
	for _, id := range missing {
		r, err := g.engine.Backfill(ctx, tenant, id)
		if err != nil {
			return fmt.Errorf("enroll the pin of %s/%s: %w", tenant, id, err)
		}
		if r != nil {
			return fmt.Errorf("enroll the pin of %s/%s: %w", tenant, id, r)
		}
		g.log.Info("guarantee enrolled in the enforcement domain", "tenant", tenant, "guarantee", id)
	}
	return checkConfigured(g.cfg, tenant, ctl)
}

// carry is the ledger of a replaced guarantee that a hold reads: its key
// and its subject.
type carry struct {
	key kernel.LedgerKey
	ref aggregates.Ref
}

// carriesOf are the ledgers, on a hold's resource and window, of the
// guarantees the hold's guarantee replaces.
func (g *Gateway) carriesOf(tenant string, h kernel.Hold) ([]carry, error) {
	g.mu.RLock()
	replaced := g.pins[tenant+"/"+h.GuaranteeID].replaced
	g.mu.RUnlock()
	var out []carry
	for _, id := range replaced {
		ref, err := aggregates.ExposureWindowRef(tenant, id, h.Resource, h.Window)
		if err != nil {
			return nil, err
		}
		out = append(out, carry{key: kernel.LedgerKey{GuaranteeID: id, Resource: h.Resource, Window: h.Window}, ref: ref})
	}
	return out, nil
}
