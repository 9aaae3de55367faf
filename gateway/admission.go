package gateway

import (
	"context"
	"fmt"

	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
	"go.opentelemetry.io/otel/propagation"
)

// caller is who a door says sends a request: the (tenant, principal) the
// door authenticated (the NATS subject the server let the requester
// publish on, the MCP bearer token, the console's or tower's operator
// login, which is that operator's NATS user), and whether the request is
// an operator verb (operator is then the principal).
type caller struct {
	tenant, principal string
	operator          bool
}

// admission is the one path every request takes, whatever its door (NATS
// proposals and compile requests, MCP tool calls, and the operator verbs of ctx, the console
// and tower), in this order, before the kernel's decision sees it:
//
//  1. identity: an unknown tenant, the name ops, or (for an operator
//     verb) a name that is not one of the tenant's operators is refused
//     authority_denied;
//  2. body bound: a body over runtime max_proposal_bytes spends no rate
//     token; it is refused request_malformed from the tenant's lane, where
//     the refusal is recorded;
//  3. per-principal rate: one token bucket per principal, whichever door
//     the request came through (rate_limited, nothing stored);
//  4. per-tenant lane: the tenant's workers and bounded queues, shared by
//     every door (overloaded when full, nothing stored). An agent's
//     request takes the lane's agent share, an operator's the share kept
//     for the tenant's operators, which no agent can fill
//     (docs/authorization.md).
//
// admission returns the refusal of steps 1, 3 or 4, with nothing queued;
// otherwise it has queued run (oversize says step 2 refused it) in the
// tenant's lane and returns nil.
func (g *Gateway) admission(c caller, size int, run func(oversize bool)) *kernel.Refusal {
	tc, ok := g.cfg.Tenant(c.tenant)
	switch {
	case !ok:
		return &kernel.Refusal{Code: wire.CodeAuthorityDenied, Reason: "unknown tenant"}
	case c.principal == "ops":
		return &kernel.Refusal{Code: wire.CodeAuthorityDenied, Reason: "ops is not a principal"}
	case c.operator && !tc.IsOperator(c.principal):
		return &kernel.Refusal{Code: wire.CodeAuthorityDenied, Reason: fmt.Sprintf("%s is not an operator of tenant %s", c.principal, c.tenant)}
	}
	oversize := size > g.cfg.Runtime.MaxProposalBytes
	what, who := "proposals", "proposal"
	if c.operator {
		what, who = "requests", "operator"
	}
	if !oversize && !g.limiter.allow(c.tenant, c.principal) {
		g.rateLimited.Add(1)
		return &kernel.Refusal{Code: wire.CodeRateLimited,
			Reason: "more " + what + " than " + c.principal + "'s rate limit allows; nothing was stored, slow down"}
	}
	l := g.laneOf(c.tenant)
	if l != nil && l.share(c.operator).offer(func() { run(oversize) }) {
		return nil
	}
	g.overloaded.Add(1)
	return &kernel.Refusal{Code: wire.CodeOverloaded,
		Reason: "tenant " + c.tenant + " has every " + who + " worker busy and its queue full; nothing was stored, retry later"}
}

// oversized is the refusal of a body over the bound.
func (g *Gateway) oversized(what string, size int) *kernel.Refusal {
	return &kernel.Refusal{Code: wire.CodeRequestMalformed,
		Reason: fmt.Sprintf("%s of %d bytes exceeds %d", what, size, g.cfg.Runtime.MaxProposalBytes)}
}

// admit takes an agent's proposal through admission, then
// ProposeObserved in the lane's worker. A door adds transport only.
//
// admit answers through answer exactly once: at once for a refusal of
// admission, else from the lane's worker. answer must not block.
func (g *Gateway) admit(ctx context.Context, tenant, principal string, trace propagation.TextMapCarrier, body []byte, answer func(wire.Reply)) {
	g.proposing.Add(1)
	r := g.admission(caller{tenant: tenant, principal: principal}, len(body), func(oversize bool) {
		defer g.proposing.Add(-1)
		if oversize {
			answer(g.refuseUnbound(ctx, tenant, principal, body, g.oversized("proposal", len(body))))
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
	r := g.admission(caller{tenant: tenant, principal: operator, operator: true}, len(body), func(oversize bool) {
		if oversize {
			r := g.oversized("operator request", len(body))
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
