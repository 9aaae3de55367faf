package gateway

import (
	"context"
	"fmt"

	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
	"go.opentelemetry.io/otel/propagation"
)

// Admission is the one path every door (NATS, MCP) takes an agent's
// request (a proposal, a compile request) through, in this order, before
// the request's handler sees it:
//
//  1. identity: the (tenant, principal) the door authenticated (the NATS
//     subject the server let the agent publish on, the MCP bearer token);
//     an unknown tenant or the name ops is refused authority_denied;
//  2. body bound: a body over runtime max_proposal_bytes spends no rate
//     token; it is refused request_malformed from the tenant's lane (a
//     proposal's refusal is recorded, sampled);
//  3. per-principal rate: one token bucket per agent, whichever door the
//     request came through and whatever its kind (rate_limited, nothing
//     stored);
//  4. per-tenant lane: the tenant's workers and bounded queue, shared by
//     every door and every kind of request (overloaded when full, nothing
//     stored);
//
// then ProposeObserved (or the compile request's handler) in the lane's
// worker. A door adds transport only.
//
// admit answers through answer exactly once: at once for a refusal of
// steps 1, 3 and 4, else from the lane's worker. answer must not block.
func (g *Gateway) admit(ctx context.Context, tenant, principal string, trace propagation.TextMapCarrier, body []byte, answer func(wire.Reply)) {
	refuse := func(code wire.Code, reason string) {
		answer(wire.Reply{Status: wire.StatusRefused, Code: code, Reason: reason})
	}
	g.proposing.Add(1)
	queued := g.admission(tenant, principal, len(body), "proposals", refuse, func(oversize bool) {
		defer g.proposing.Add(-1)
		if oversize {
			answer(g.refuseUnbound(ctx, tenant, principal, body, &kernel.Refusal{Code: wire.CodeRequestMalformed,
				Reason: fmt.Sprintf("proposal of %d bytes exceeds %d", len(body), g.cfg.Runtime.MaxProposalBytes)}))
			return
		}
		answer(g.ProposeObserved(ctx, tenant, principal, trace, body))
	})
	if !queued {
		g.proposing.Add(-1)
	}
}

// admission runs steps 1 to 4 of Admission for a request of bodyLen bytes
// (what names the kind of request in a refusal's reason). It calls refuse
// at once for a refusal of steps 1, 3 and 4, and otherwise queues job in
// the tenant's lane (oversize: the body is over the bound, and job must
// refuse it). It reports whether job was queued.
func (g *Gateway) admission(tenant, principal string, bodyLen int, what string, refuse func(wire.Code, string), job func(oversize bool)) bool {
	if _, ok := g.cfg.Tenant(tenant); !ok {
		refuse(wire.CodeAuthorityDenied, "unknown tenant")
		return false
	}
	if principal == "ops" {
		refuse(wire.CodeAuthorityDenied, "ops is not a principal")
		return false
	}
	oversize := bodyLen > g.cfg.Runtime.MaxProposalBytes
	if !oversize && !g.limiter.allow(tenant, principal) {
		g.rateLimited.Add(1)
		refuse(wire.CodeRateLimited, "more "+what+" than "+principal+"'s rate limit allows; nothing was stored, slow down")
		return false
	}
	if l := g.laneOf(tenant); l != nil && l.offer(func() { job(oversize) }) {
		return true
	}
	g.overloaded.Add(1)
	refuse(wire.CodeOverloaded, "tenant "+tenant+" has every proposal worker busy and its queue full; nothing was stored, retry later")
	return false
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

// laneOf is tenant's proposal lane; nil before Serve.
func (g *Gateway) laneOf(tenant string) *lane {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.lanes[tenant]
}
