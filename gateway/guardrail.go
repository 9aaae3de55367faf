package gateway

import (
	"context"
	"sort"
	"time"

	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
)

// mountGuardrails serves the guardrail verbs over the tenant's control
// subject; the rules are the kernel's (DecideGuardrail, DecideWaiver,
// CheckControl).
func (g *Gateway) mountGuardrails() {
	g.extraOps[kernel.VerbGuardrails] = func(ctx context.Context, tenant, _ string, body []byte) wire.OpReply {
		var req struct{}
		if err := kernel.DecodeOptionalRequest(body, &req); err != nil {
			return wire.Refused(wire.CodeRequestMalformed, "request: %v", err)
		}
		return g.controlDo(ctx, tenant, func(*kernel.Control) kernel.Decision { return kernel.Decision{} })
	}
	g.extraOps[kernel.VerbGuardrail] = func(ctx context.Context, tenant, operator string, body []byte) wire.OpReply {
		var req wire.GuardrailRequest
		if err := kernel.DecodeRequest(body, &req); err != nil {
			return wire.Refused(wire.CodeRequestMalformed, "request: %v", err)
		}
		cmd := kernel.SetGuardrail{GuardrailID: req.GuardrailID, CapabilityID: req.CapabilityID, Disabled: req.Disabled,
			MaxAmount: req.MaxAmount, Remove: req.Remove, Operator: operator, Reason: req.Reason}
		return g.controlDo(ctx, tenant, func(c *kernel.Control) kernel.Decision { return kernel.DecideGuardrail(c, cmd) })
	}
	g.extraOps[kernel.VerbWaiver] = func(ctx context.Context, tenant, operator string, body []byte) wire.OpReply {
		var req wire.WaiverRequest
		if err := kernel.DecodeRequest(body, &req); err != nil {
			return wire.Refused(wire.CodeRequestMalformed, "request: %v", err)
		}
		if req.Revoke {
			cmd := kernel.RevokeWaiver{WaiverID: req.WaiverID, Now: g.clock.Now(), Operator: operator, Reason: req.Reason}
			return g.controlDo(ctx, tenant, func(c *kernel.Control) kernel.Decision { return kernel.DecideRevokeWaiver(c, cmd) })
		}
		until, r := kernel.ParseWaiverUntil(req.Until)
		if r != nil {
			return wire.OpReply{Code: r.Code, Reason: r.Reason}
		}
		cmd := kernel.GrantWaiver{WaiverID: req.WaiverID, GuardrailID: req.GuardrailID, RunID: req.RunID, Resource: req.Resource,
			Until: until, Now: g.clock.Now(), Operator: operator, Reason: req.Reason}
		return g.controlDo(ctx, tenant, func(c *kernel.Control) kernel.Decision { return kernel.DecideWaiver(c, cmd) })
	}
}

// controlDo decides over the tenant's control subject and answers with its
// guardrails and the waivers in force after the decision.
func (g *Gateway) controlDo(ctx context.Context, tenant string, decide func(*kernel.Control) kernel.Decision) wire.OpReply {
	if _, err := codec.Subject(tenant, "control"); err != nil {
		return wire.Refused(wire.CodeRequestMalformed, "%v", err)
	}
	now := g.clock.Now()
	eff, err := g.engine.Run(ctx, tenant, kernel.VerbStep(kernel.KeyControl, func(c *kernel.Control) (kernel.Decision, any) {
		d := decide(c)
		if d.Refusal != nil {
			return d, nil
		}
		return d, guardrailData(c, d.Events, now)
	}))
	if err != nil {
		return storeRefusal(err)
	}
	if eff.Refusal != nil {
		return wire.OpReply{Code: eff.Refusal.Code, Reason: eff.Refusal.Reason}
	}
	data, _ := eff.Reply.Data.(map[string]any)
	return wire.OpReply{OK: true, Data: data}
}

// guardrailData lists the guardrails and the waivers in force at now of a
// control state with events applied to a copy of its guardrails.
func guardrailData(c *kernel.Control, evs []kernel.Event, now time.Time) map[string]any {
	cp := kernel.Control{Guardrails: map[string]kernel.GuardrailSet{}, Waivers: map[string]kernel.WaiverGranted{}}
	for k, v := range c.Guardrails {
		cp.Guardrails[k] = v
	}
	for k, v := range c.Waivers {
		cp.Waivers[k] = v
	}
	for _, ev := range evs {
		_ = cp.Apply(ev)
	}
	grs := make([]kernel.GuardrailSet, 0, len(cp.Guardrails))
	for _, gr := range cp.Guardrails {
		grs = append(grs, gr)
	}
	sort.Slice(grs, func(i, j int) bool { return grs[i].GuardrailID < grs[j].GuardrailID })
	ws := []kernel.WaiverGranted{}
	for _, w := range cp.Waivers {
		if w.Until.After(now) {
			ws = append(ws, w)
		}
	}
	sort.Slice(ws, func(i, j int) bool { return ws[i].WaiverID < ws[j].WaiverID })
	return map[string]any{"guardrails": grs, "waivers": ws}
}
