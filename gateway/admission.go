package gateway

import (
	"context"

	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
	"go.opentelemetry.io/otel/propagation"
)

// caller is who a door says sends a request: the (tenant, principal) the
// door authenticated (the NATS subject the server let the requester
// publish on, the MCP bearer token, the console's or tower's operator
// login, which is that operator's NATS user), and what the request asks
// (for an operator verb, the operator is the principal).
type caller struct {
	tenant, principal string
	kind              kernel.AdmitKind
}

// admission is the one path every request takes, whatever its door (NATS
// proposals and compile requests, MCP tool calls, and the operator verbs of
// ctx, the console and tower), before the kernel's decision sees it. Its
// rule and order (identity, body bound, per-principal rate, per-tenant
// lane) are kernel.Admit's; admission measures what Admit asks for. The
// rate is one token bucket per principal, whichever door the request came
// through; the lane is the tenant's workers and bounded queues, shared by
// every door: an agent's request takes the lane's agent share, an
// operator's the share kept for the tenant's operators, which no agent can
// fill (docs/authorization.md).
//
// admission returns the refusal of identity, rate or lane, with nothing
// queued; otherwise it has queued run in the tenant's lane and returns nil.
// run's oversized, when not nil, is the body bound's refusal, which run
// records and answers from the lane.
func (g *Gateway) admission(c caller, size int, run func(oversized *kernel.Refusal)) *kernel.Refusal {
	tc, ok := g.cfg.Tenant(c.tenant)
	in := kernel.AdmitInput{Kind: c.kind, Tenant: c.tenant, Principal: c.principal, TenantKnown: ok,
		IsOperator: ok && tc.IsOperator(c.principal), Size: size, MaxSize: g.cfg.Runtime.MaxProposalBytes}
	for {
		a := kernel.Admit(in)
		switch a.Next {
		case kernel.MeasureRate:
			in.Rate = kernel.VerdictOf(g.limiter.allow(c.tenant, c.principal))
			if in.Rate == kernel.Failed {
				g.rateLimited.Add(1)
			}
		case kernel.MeasureLane:
			l := g.laneOf(c.tenant)
			in.Lane = kernel.VerdictOf(l != nil && l.share(c.kind == kernel.AdmitOperator).offer(func() { run(a.Oversized) }))
			if in.Lane == kernel.Failed {
				g.overloaded.Add(1)
			}
		default:
			return a.Refusal
		}
	}
}

// admit takes an agent's proposal through admission, then
// ProposeObserved in the lane's worker. A door adds transport only.
//
// admit answers through answer exactly once: at once for a refusal of
// admission, else from the lane's worker. answer must not block.
func (g *Gateway) admit(ctx context.Context, tenant, principal string, trace propagation.TextMapCarrier, body []byte, answer func(wire.Reply)) {
	g.proposing.Add(1)
	r := g.admission(caller{tenant: tenant, principal: principal, kind: kernel.AdmitProposal}, len(body), func(oversized *kernel.Refusal) {
		defer g.proposing.Add(-1)
		if oversized != nil {
			answer(g.refuseUnbound(ctx, tenant, principal, body, oversized))
			return
		}
		answer(g.ProposeObserved(ctx, tenant, principal, trace, body))
	})
	if r != nil {
		g.proposing.Add(-1)
		answer(wire.Reply{Status: wire.StatusRefused, Code: r.Code, Reason: r.Reason})
	}
}

// admitOp takes an operator's verb through the same admission, then the
// operator decision (Op, observed) in the lane's worker: the door of ctx,
// the console and tower, which all reach the runtime on the operator's
// subject. A refused oversized body is recorded as the operator's refusal.
// answer is called exactly once and must not block.
func (g *Gateway) admitOp(ctx context.Context, tenant, verb, operator string, body []byte, answer func(wire.OpReply)) {
	r := g.admission(caller{tenant: tenant, principal: operator, kind: kernel.AdmitOperator}, len(body), func(r *kernel.Refusal) {
		if r != nil {
			g.recordOperatorRefusal(ctx, tenant, kernel.NewOperatorRefused(operator, verb, body, r))
			answer(wire.OpReply{Code: r.Code, Reason: r.Reason})
			return
		}
		answer(g.observeOp(ctx, tenant, verb, operator, body))
	})
	if r != nil {
		answer(wire.OpReply{Code: r.Code, Reason: r.Reason})
	}
}

// Admit is the admission path (admit) for a door that waits for the
// reply, the MCP gateway's: it returns once the proposal is answered. The
// decision runs to its end in the lane whatever ctx does, so a client that
// hangs up mid-call cannot cut a dispatch short; a resend learns it.
func (g *Gateway) Admit(ctx context.Context, tenant, principal string, trace propagation.TextMapCarrier, body []byte) wire.Reply {
	done := make(chan wire.Reply, 1)
	g.admit(context.WithoutCancel(ctx), tenant, principal, trace, body, func(r wire.Reply) { done <- r })
	return <-done
}

// laneOf is tenant's lane; nil before Serve.
func (g *Gateway) laneOf(tenant string) *tenantLane {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.lanes[tenant]
}
