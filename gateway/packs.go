package gateway

import (
	"context"

	"github.com/contextos/ledger/aggregates"
	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
)

// Operator verbs of context pack versions: the kernel decides each
// (kernel/pack.go); the gateway loads the tenant's pack subject, asks and
// appends.

// packVerbs are the verbs served by packOp.
var packVerbs = []string{wire.VerbPacks, wire.VerbPackPublish, wire.VerbPackPromote, wire.VerbPackRollback}

// packRef is the reference of the tenant's pack subject.
func packRef(tenant string) (aggregates.Ref, error) {
	s, err := codec.Subject(tenant, "pack")
	return aggregates.Ref{Subject: s, New: func() aggregates.State { return &kernel.PackCatalog{} }}, err
}

// packOp serves a pack verb; ok is false for any other verb.
func (g *Gateway) packOp(ctx context.Context, tc *config.TenantConfig, verb, operator string, body []byte) (wire.OpReply, bool) {
	var decide func(*kernel.PackCatalog) kernel.Decision
	switch verb {
	case wire.VerbPacks:
		var req wire.PacksRequest
		if err := kernel.DecodeOptionalRequest(body, &req); err != nil {
			return wire.Refused(wire.CodeRequestMalformed, "request: %v", err), true
		}
		if err := g.model.Sync(ctx); err != nil {
			return wire.Refused(wire.CodeProjectionUnavailable, "the read model could not catch up: %v", err), true
		}
		data := map[string]any{"packs": g.model.Packs(tc.ID)}
		if req.Version != "" {
			v, ok := g.model.Pack(tc.ID, req.Version)
			if !ok {
				r := kernel.RefusePackUnknown(clipID(req.Version))
				return wire.OpReply{Code: r.Code, Reason: r.Reason}, true
			}
			data["pack"] = v.Pack
		}
		return wire.OpReply{OK: true, Data: data}, true
	case wire.VerbPackPublish:
		var req wire.PackPublishRequest
		if r := decodeOp(body, &req); r != nil {
			return *r, true
		}
		p, err := kernel.ParseContextPack(req.Pack)
		if err != nil {
			return wire.Refused(wire.CodeContextInvalid, "%v", err), true
		}
		cmd := kernel.PublishPack{Operator: operator, Pack: p}
		decide = func(c *kernel.PackCatalog) kernel.Decision { return kernel.DecidePublishPack(c, cmd) }
	case wire.VerbPackPromote:
		var req wire.PackPromoteRequest
		if r := decodeOp(body, &req); r != nil {
			return *r, true
		}
		cmd := kernel.PromotePack{Operator: operator, Spec: req.Version, AbstentionBoundBP: tc.AbstentionBoundBP()}
		if len(req.Eval) > 0 {
			var ev kernel.ReleaseEval
			if err := kernel.DecodeRequest(req.Eval, &ev); err != nil {
				return wire.Refused(wire.CodeRequestMalformed, "eval: %v", err), true
			}
			cmd.Eval = &ev
		}
		decide = func(c *kernel.PackCatalog) kernel.Decision { return kernel.DecidePromotePack(c, cmd) }
	case wire.VerbPackRollback:
		if err := kernel.DecodeOptionalRequest(body, &struct{}{}); err != nil {
			return wire.Refused(wire.CodeRequestMalformed, "request: %v", err), true
		}
		cmd := kernel.RollbackPack{Operator: operator}
		decide = func(c *kernel.PackCatalog) kernel.Decision { return kernel.DecideRollbackPack(c, cmd) }
	default:
		return wire.OpReply{}, false
	}
	if _, err := packRef(tc.ID); err != nil {
		return wire.Refused(wire.CodeRequestMalformed, "%v", err), true
	}
	eff, err := g.engine.Run(ctx, tc.ID, kernel.VerbStep(kernel.KeyPacks, func(c *kernel.PackCatalog) (kernel.Decision, any) {
		d := decide(c)
		return d, packsOf(kernel.AfterOf(c, d.Events, kernel.PackCatalog.Copy))
	}))
	if err != nil {
		return storeRefusal(err), true
	}
	if eff.Refusal != nil {
		return wire.OpReply{Code: eff.Refusal.Code, Reason: eff.Refusal.Reason}, true
	}
	return wire.OpReply{OK: true, Data: map[string]any{"packs": eff.Reply.Data, "recorded": len(eff.Events(kernel.KeyPacks)) > 0}}, true
}

// packsOf lists a catalog's versions as the packs verb does.
func packsOf(c *kernel.PackCatalog) wire.Packs {
	out := wire.Packs{Versions: []wire.PackRef{}}
	if c == nil {
		return out
	}
	for _, v := range c.Versions {
		out.Versions = append(out.Versions, v.PackRef)
	}
	if v, ok := c.Promoted(); ok {
		out.Promoted = &v.PackRef
	}
	return out
}

// loadPacks reads the tenant's pack catalog from the store (fresh: a
// version published or promoted on any replica counts for the next
// admission or proposal).
func (g *Gateway) loadPacks(ctx context.Context, tenant string) (*kernel.PackCatalog, error) {
	ref, err := packRef(tenant)
	if err != nil {
		return nil, err
	}
	st, err := g.load(ctx, ref)
	if err != nil {
		return nil, err
	}
	return st.(*kernel.PackCatalog), nil
}

// clipID shortens an agent-chosen id for a reason string.
func clipID(s string) string {
	for i := range s {
		if i >= 64 {
			return s[:i] + "..."
		}
	}
	return s
}

// gatePack loads what kernel.ResolveGatePack reads for a run (the run and,
// when it pins a version, the pack catalog) and resolves the pack a gated
// capability's evidence gate is compiled under: the rule a proposal is
// gated by. An error means a subject could not be read.
func (g *Gateway) gatePack(ctx context.Context, tenant, runID string, cp *config.CapabilityConfig) (kernel.ContextPack, *kernel.PackRef, *kernel.Refusal, error) {
	ref, err := RunRef(tenant, runID)
	if err != nil {
		return *cp.Pack(), nil, kernel.RefuseMalformed(err), nil
	}
	st, err := g.load(ctx, ref)
	if err != nil {
		return *cp.Pack(), nil, nil, err
	}
	run := st.(*kernel.Run)
	cat := &kernel.PackCatalog{}
	if run.Pack != nil {
		if cat, err = g.loadPacks(ctx, tenant); err != nil {
			return *cp.Pack(), nil, nil, err
		}
	}
	pack, pin, r := kernel.ResolveGatePack(cp.Kernel(), runID, run, cat)
	return pack, pin, r, nil
}
