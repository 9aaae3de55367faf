package gateway

import (
	"context"
	"fmt"

	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
	"go.opentelemetry.io/otel/propagation"
)

// Admission is the one path every door (NATS, MCP) takes an agent's
// proposal through, in this order, before the proposal path sees it:
//
//  1. identity: the (tenant, principal) the door authenticated (the NATS
//     subject the server let the agent publish on, the MCP bearer token);
//     an unknown tenant or the name ops is refused authority_denied;
//  2. body bound: a body over runtime max_proposal_bytes spends no rate
//     token; it is refused request_malformed (and recorded, sampled) from
//     the tenant's lane;
//  3. per-principal rate: one token bucket per agent, whichever door the
//     proposal came through (rate_limited, nothing stored);
//  4. per-tenant lane: the tenant's proposal workers and bounded queue,
//     shared by every door (overloaded when full, nothing stored);
//
// then ProposeObserved in the lane's worker. A door adds transport only.
//
// admit answers through answer exactly once: at once for a refusal of
// steps 1, 3 and 4, else from the lane's worker. answer must not block.
func (g *Gateway) admit(ctx context.Context, tenant, principal string, trace propagation.TextMapCarrier, body []byte, answer func(wire.Reply)) {
	if _, ok := g.cfg.Tenant(tenant); !ok {
		answer(wire.Reply{Status: wire.StatusRefused, Code: wire.CodeAuthorityDenied, Reason: "unknown tenant"})
		return
	}
	if principal == "ops" {
		answer(wire.Reply{Status: wire.StatusRefused, Code: wire.CodeAuthorityDenied, Reason: "ops is not a principal"})
		return
	}
	oversize := len(body) > g.cfg.Runtime.MaxProposalBytes
	if !oversize && !g.limiter.allow(tenant, principal) {
		g.rateLimited.Add(1)
		answer(wire.Reply{Status: wire.StatusRefused, Code: wire.CodeRateLimited,
			Reason: "more proposals than " + principal + "'s rate limit allows; nothing was stored, slow down"})
		return
	}
	job := func() {
		defer g.proposing.Add(-1)
		if oversize {
			answer(g.refuseUnbound(ctx, tenant, principal, body, &kernel.Refusal{Code: wire.CodeRequestMalformed,
				Reason: fmt.Sprintf("proposal of %d bytes exceeds %d", len(body), g.cfg.Runtime.MaxProposalBytes)}))
			return
		}
		answer(g.ProposeObserved(ctx, tenant, principal, trace, body))
	}
	g.proposing.Add(1)
	if l := g.laneOf(tenant); l != nil && l.offer(job) {
		return
	}
	g.proposing.Add(-1)
	g.overloaded.Add(1)
	answer(wire.Reply{Status: wire.StatusRefused, Code: wire.CodeOverloaded,
		Reason: "tenant " + tenant + " has every proposal worker busy and its queue full; nothing was stored, retry later"})
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
