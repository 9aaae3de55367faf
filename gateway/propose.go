package gateway

import (
	"context"
	"go.opentelemetry.io/otel/trace"
	"strings"

	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
)

// manifest is the configuration and the guarantees' pins as the kernel
// reads them, built again once a pin changes.
func (g *Gateway) manifest() *kernel.Manifest {
	g.mu.RLock()
	m := g.man
	g.mu.RUnlock()
	if m != nil {
		return m
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.man == nil {
		pins := map[string]map[string]kernel.PinnedGuarantee{}
		for k, p := range g.pins {
			tenant, id, _ := strings.Cut(k, "/")
			if pins[tenant] == nil {
				pins[tenant] = map[string]kernel.PinnedGuarantee{}
			}
			pins[tenant][id] = kernel.PinnedGuarantee{Pin: p.pin, Refusal: p.refusal, Replaced: p.replaced}
		}
		g.man = g.cfg.Manifest(pins)
	}
	return g.man
}

// Propose runs the dispatch sequence for one proposal of (tenant,
// principal), identities the caller took from the authenticated subject.
// Every check is the kernel's proposal step (kernel.ProposeInput.Step),
// which the engine runs (aggregates.Engine.Run): it loads what the step
// reads, appends its effects and decides again on a conflict; the gateway
// supplies the runtime's inputs (clock, ids, witnesses, refusal window),
// records what the effects leave to it and dispatches.
func (g *Gateway) Propose(ctx context.Context, tenant, principal string, body []byte) wire.Reply {
	if r := g.spaceRefusal(); r != nil {
		// Refused before anything is stored, as a full lane is.
		g.overloaded.Add(1)
		return wire.Reply{Status: wire.StatusRefused, Code: r.Code, Reason: r.Reason}
	}
	in := kernel.ProposeInput{Manifest: g.manifest(), Tenant: tenant, Principal: principal, Body: body, Now: g.clock.Now(), Executor: g.executor,
		AttemptID: g.ids.New(), OperationID: g.ids.New(), Witness: g.witnessStatus(tenant), Refusals: g.refusals.view(tenant)}
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		in.TraceID = sc.TraceID().String()
	}
	prep := kernel.PrepareProposal(in)
	g.tel.decoded(ctx, prep.Proposal().CapabilityID)
	return g.propose(ctx, tenant, in, prep.Step(), prep.Digest())
}

// propose runs the proposal step: one atomic append opens the operation,
// redeems its approval, charges its run and reserves with the
// dispatch-start on every resource ledger (or records the refusal); then
// the provider is called and the attempt settled. The dispatch-start is
// durable before the provider is called, as a separate append would make
// it, one durable round trip sooner; and a crash can no longer leave an
// attempt reserved but unstarted (docs/decisions.md).
func (g *Gateway) propose(ctx context.Context, tenant string, in kernel.ProposeInput, step kernel.Step, digest string) wire.Reply {
	g.inflight.add(in.AttemptID)
	defer g.inflight.done(in.AttemptID)
	endStage := g.tel.stage(ctx, stageDecide)
	eff, err := g.engine.Run(ctx, tenant, step)
	endStage()
	if err != nil {
		return engineErrorReply(err, digest, false)
	}
	if eff.Scoped {
		// The key of the run is another principal's: this principal's
		// operation with it is on the principal's own subject of the key.
		in.Scoped = true
		return g.propose(ctx, tenant, in, in.Step(), digest)
	}
	if t := eff.Tally; t != nil {
		g.refusals.add(tenant, t.Key, t.Refused, t.Whole)
	}
	if u := eff.Unbound; u != nil {
		// Nothing was appended to an operation: the refusal is recorded on
		// the principal's refusal subject instead.
		g.recordUnbound(ctx, tenant, *u)
	}
	if eff.Dispatch == nil {
		return replyOf(eff.Reply)
	}
	return g.dispatch(ctx, tenant, *eff.Dispatch, digest)
}

// replyOf is the wire form of a kernel step's reply.
func replyOf(r kernel.Reply) wire.Reply {
	w := wire.Reply{Status: r.Status, Code: r.Code, Reason: r.Reason, OperationID: r.OperationID, AttemptID: r.AttemptID, ActionDigest: r.ActionDigest, Gate: r.Gate}
	w.SetGuarantees(rowsOf(r.Guarantees))
	return w
}

// ActionDigest is the digest of the action p binds for principal of tenant
// (what an approval names and a reply reports), or why p is refused.
func ActionDigest(tenant, principal string, p wire.Proposal, cp *config.CapabilityConfig) (string, *kernel.Refusal) {
	act, r := kernel.BindAction(tenant, principal, kernel.Proposal(p), cp.Kernel())
	return act.Digest, r
}

func rowsOf(holds []kernel.GuaranteeHold) []wire.GuaranteeRow {
	rows := make([]wire.GuaranteeRow, len(holds))
	for i, h := range holds {
		rows[i] = wire.GuaranteeRow{GuaranteeID: h.GuaranteeID, Resource: h.Resource, Balance: wire.Balance(h.Balance)}
	}
	return rows
}

// engineErrorReply is the reply to an engine error of a proposal's
// decision (dispatched: of its settlement, after the provider was called),
// coded by storeFault. The store not answering leaves the outcome unknown
// (resend); a stored event the kernel refuses is no outage: nothing was
// appended by this call, so before the dispatch it is a refusal, and after
// it the provider's outcome is not recorded (unknown), and resending cannot
// help either way.
func engineErrorReply(err error, digest string, dispatched bool) wire.Reply {
	code, reason := storeFault(err)
	status := wire.StatusUnknown
	if code == wire.CodeStoredEventRefused && !dispatched {
		status = wire.StatusRefused
	}
	return wire.Reply{Status: status, Code: code, ActionDigest: digest, Reason: reason}
}

// dispatch calls the provider once for an attempt whose dispatch-start is
// stored, and settles.
func (g *Gateway) dispatch(ctx context.Context, tenant string, d kernel.Dispatch, digest string) wire.Reply {
	g.hooks.afterDispatchStart(d.AttemptID)
	cp, _ := g.cfg.Capability(d.CapabilityID)
	obs := g.adapter(cp).Dispatch(ctx, d.AttemptID, d.Arguments)
	// Counted here, in the request path, so a breaker trips whether or not
	// the gateway is instrumented.
	g.breakerFailure(ctx, tenant, d.CapabilityID, obs)
	g.hooks.afterProviderCall(d.AttemptID)
	reply := g.settle(ctx, tenant, d, obs, digest)
	if obs.Failure != "" && reply.Reason == "" && (reply.Status == wire.StatusUnknown || reply.Status == wire.StatusPending) {
		// Why the outcome is open: the provider's failure, not silence.
		reply.Reason = obs.Ref
	}
	return reply
}

// settle records the provider's report on the operation and every ledger
// (kernel.SettleInput.Step).
func (g *Gateway) settle(ctx context.Context, tenant string, d kernel.Dispatch, obs Observation, digest string) wire.Reply {
	defer g.tel.stage(ctx, stageSettle)()
	eff, err := g.engine.Run(ctx, tenant, d.Settle(obs.Outcome, obs.Ref, g.clock.Now()).Step())
	if err != nil {
		return engineErrorReply(err, digest, true)
	}
	for _, in := range eff.Incidents {
		g.incident(tenant, in)
	}
	return replyOf(eff.Reply)
}
