package gateway

import (
	"context"
	"fmt"

	"github.com/contextos/ledger/aggregates"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
)

// guaranteeVerbs are the verbs served by guaranteeOp.
var guaranteeVerbs = []string{"guarantee-set-limit", "guarantee-history", wire.VerbGuaranteeImport}

// pinned is a guarantee's pin as this gateway read it at start: pins never
// change once made, so it is safe to keep; the versions made later live on
// the control subject, read in every reservation.
type pinned struct {
	pin     *kernel.Pin
	refusal *kernel.Refusal // the configured definition means something else
	// replaced are the guarantees it replaces (kernel.Control.Replaced),
	// whose ledgers its holds read: fixed once it is pinned, since a
	// replaced guarantee can no longer be pinned.
	replaced []string
}

// PinAll pins every configured guarantee for every tenant and remembers each
// pin. First it enrolls in each tenant's enforcement domain the pins made
// before enrollment existed, and refuses (a *DomainError) a configuration
// that leaves the domain: one that omits a guarantee pinned over a
// capability it surfaces, or replaces one in a way it may not. A guarantee
// whose configured meaning differs from its pin fails closed: every
// proposal it covers is refused with the pin's refusal. A configuration that
// differs only in the limit or mode boots with a warning naming the verb
// that changes them: the stream's version is the one used.
func (g *Gateway) PinAll(ctx context.Context) error {
	for _, t := range g.cfg.Tenants {
		if err := g.enterDomain(ctx, t.ID); err != nil {
			return err
		}
		csub, err := codec.Subject(t.ID, "control")
		if err != nil {
			return err
		}
		var ctl *kernel.Control
		for _, def := range g.cfg.Guarantees {
			r, err := g.engine.Pin(ctx, t.ID, def)
			if err != nil {
				return fmt.Errorf("pin %s/%s: %w", t.ID, def.ID, err)
			}
			ref, err := aggregates.PinRef(t.ID, def.ID)
			if err != nil {
				return err
			}
			st, err := g.load(ctx, ref)
			if err != nil {
				return fmt.Errorf("read the pin of %s/%s: %w", t.ID, def.ID, err)
			}
			p := st.(*kernel.Pin)
			g.mu.Lock()
			g.pins[t.ID+"/"+def.ID] = pinned{pin: p, refusal: r}
			g.man = nil
			g.mu.Unlock()
			if r != nil {
				g.log.Error("guarantee definition differs from its pin; proposals it covers will be refused", "tenant", t.ID, "guarantee", def.ID, "reason", r.Reason)
				continue
			}
			if ctl == nil {
				cs, err := g.load(ctx, controlRef(csub))
				if err != nil {
					return fmt.Errorf("read the control subject of %s: %w", t.ID, err)
				}
				ctl = cs.(*kernel.Control)
			}
			if drift := ctl.Drift(p, def); drift != "" {
				g.log.Warn("the configuration differs from the guarantee's version in the stream, which is used; change it with ctx guarantee set-limit",
					"tenant", t.ID, "guarantee", def.ID, "configured", drift)
			}
		}
		if err := g.rememberReplaced(ctx, t.ID, csub); err != nil {
			return err
		}
	}
	return nil
}

// rememberReplaced reads, once the tenant's guarantees are pinned, which
// guarantees each configured one replaces.
func (g *Gateway) rememberReplaced(ctx context.Context, tenant, csub string) error {
	cs, err := g.load(ctx, controlRef(csub))
	if err != nil {
		return fmt.Errorf("read the control subject of %s: %w", tenant, err)
	}
	ctl := cs.(*kernel.Control)
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, def := range g.cfg.Guarantees {
		k := tenant + "/" + def.ID
		p := g.pins[k]
		p.replaced = ctl.Replaced(def.ID)
		g.pins[k] = p
	}
	g.man = nil
	return nil
}

// pinOf returns the pin of (tenant, guarantee) or the refusal of every
// proposal the guarantee covers.
func (g *Gateway) pinOf(tenant, guaranteeID string) (*kernel.Pin, *kernel.Refusal) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	p, ok := g.pins[tenant+"/"+guaranteeID]
	pg, r := kernel.ResolvePin(guaranteeID, kernel.PinnedGuarantee{Pin: p.pin, Refusal: p.refusal}, ok)
	return pg.Pin, r
}

// guaranteeOp serves a guarantee verb; ok is false for any other verb.
func (g *Gateway) guaranteeOp(ctx context.Context, tenant, verb, operator string, body []byte) (wire.OpReply, bool) {
	switch verb {
	case "guarantee-set-limit":
		var req wire.SetLimitRequest
		if r := decodeOp(body, &req); r != nil {
			return *r, true
		}
		return g.opSetLimit(ctx, tenant, operator, req), true
	case "guarantee-history":
		var req wire.GuaranteeHistoryRequest
		if r := decodeOp(body, &req); r != nil {
			return *r, true
		}
		return g.opGuaranteeHistory(ctx, tenant, req, false), true
	case wire.VerbGuaranteeImport:
		var req wire.ImportRequest
		if r := decodeOp(body, &req); r != nil {
			return *r, true
		}
		return g.opImport(ctx, tenant, operator, req), true
	}
	return wire.OpReply{}, false
}

func (g *Gateway) opSetLimit(ctx context.Context, tenant, operator string, req wire.SetLimitRequest) wire.OpReply {
	pref, err := aggregates.PinRef(tenant, req.GuaranteeID)
	if err != nil {
		return wire.Refused(wire.CodeRequestMalformed, "guarantee: %v", err)
	}
	if _, err := codec.Subject(tenant, "control"); err != nil {
		return wire.Refused(wire.CodeRequestMalformed, "%v", err)
	}
	// A pin never changes once made (Pin.Apply refuses a second), so it
	// is read as it is, outside the transaction on the control subject.
	ps, err := g.load(ctx, pref)
	if err != nil {
		return storeRefusal(err)
	}
	cmd := kernel.Redefine{GuaranteeID: req.GuaranteeID, Resource: req.Resource, Limit: req.Limit, Mode: req.Mode,
		Operator: operator, Reason: req.Reason, Now: g.clock.Now()}
	pin := ps.(*kernel.Pin)
	eff, err := g.engine.Run(ctx, tenant, kernel.VerbStep(kernel.KeyControl, func(c *kernel.Control) (kernel.Decision, any) {
		return kernel.DecideRedefine(kernel.RedefineState{Pin: pin, Control: c}, cmd), nil
	}))
	if err != nil {
		return storeRefusal(err)
	}
	if eff.Refusal != nil {
		return wire.OpReply{Code: eff.Refusal.Code, Reason: eff.Refusal.Reason}
	}
	g.log.Info("guarantee redefined", "tenant", tenant, "operator", operator, "guarantee", req.GuaranteeID,
		"resource", req.Resource, "limit", req.Limit, "mode", req.Mode, "reason", req.Reason)
	return g.opGuaranteeHistory(ctx, tenant, wire.GuaranteeHistoryRequest{GuaranteeID: req.GuaranteeID}, true)
}

// opGuaranteeHistory lists the versions of a guarantee from the stream, a
// page at a time; latest asks for the last page, the newest version last
// (what guarantee-set-limit answers with).
func (g *Gateway) opGuaranteeHistory(ctx context.Context, tenant string, req wire.GuaranteeHistoryRequest, latest bool) wire.OpReply {
	pg, r := g.pager(listVersions, req.Limit, req.Cursor)
	if r != nil {
		return *r
	}
	pref, err := aggregates.PinRef(tenant, req.GuaranteeID)
	if err != nil {
		return wire.Refused(wire.CodeRequestMalformed, "guarantee: %v", err)
	}
	st, err := g.load(ctx, pref)
	if err != nil {
		return storeRefusal(err)
	}
	p := st.(*kernel.Pin)
	if r := kernel.CheckPinnedHistory(p, req.GuaranteeID, tenant); r != nil {
		return wire.OpReply{Code: r.Code, Reason: r.Reason}
	}
	rows := []wire.VersionRow{{Version: 1, Limit: p.Definition.Limit, Mode: modeName(p.Definition.Mode), Reason: "pinned at first use"}}
	csub, err := codec.Subject(tenant, "control")
	if err != nil {
		return wire.Refused(wire.CodeRequestMalformed, "%v", err)
	}
	stored, err := g.store.Read(ctx, csub, 1)
	if err != nil {
		return storeRefusal(err)
	}
	for _, s := range stored {
		if s.Envelope.Type != kernel.TypeGuaranteeRedefined {
			continue
		}
		ev, err := kernel.DecodeEvent(s.Envelope.Type, s.Envelope.V, s.Envelope.Body)
		if err != nil {
			return storeRefusal(&aggregates.StoredEventError{Subject: csub, Seq: s.Seq, Err: err})
		}
		if e := ev.(kernel.GuaranteeRedefined); e.GuaranteeID == req.GuaranteeID {
			rows = append(rows, wire.VersionRow{Version: e.Version, At: e.At, Operator: e.Operator, Reason: e.Reason,
				Resource: e.Resource, Limit: e.Limit, Mode: e.Mode})
		}
	}
	if latest && len(rows) > pg.limit {
		pg.after = versionKey(rows[len(rows)-pg.limit-1])
	}
	reply := wire.OpReply{OK: true}
	reply.Versions, reply.NextCursor = page(pg, rows, versionKey, showVersion)
	return reply
}

func modeName(m string) string {
	if m == "" {
		return kernel.ModeEnforce
	}
	return m
}
