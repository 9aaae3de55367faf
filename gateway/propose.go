package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"go.opentelemetry.io/otel/trace"
	"time"

	"github.com/contextos/ledger/aggregates"
	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
)

// bound is a guarantee that covers the proposal, with what the kernel
// extracted from the arguments, and the subject of its resource ledger.
type bound struct {
	hold kernel.Hold
	ref  aggregates.Ref
	// carries are the ledgers of the guarantees it replaces, whose
	// exposure on the resource counts against its limit.
	carries []carry
}

func holdsOf(bs []bound) []kernel.Hold {
	out := make([]kernel.Hold, len(bs))
	for i, b := range bs {
		out[i] = b.hold
	}
	return out
}

func ledgerRefs(bs []bound) []aggregates.Ref {
	out := make([]aggregates.Ref, len(bs))
	for i, b := range bs {
		out[i] = b.ref
	}
	return out
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

// Propose runs the dispatch sequence for one proposal of (tenant,
// principal), identities the caller took from the authenticated subject.
func (g *Gateway) Propose(ctx context.Context, tenant, principal string, body []byte) wire.Reply {
	if r := g.spaceRefusal(); r != nil {
		// Refused before anything is stored, as a full lane is.
		g.overloaded.Add(1)
		return wire.Reply{Status: wire.StatusRefused, Code: r.Code, Reason: r.Reason}
	}
	if len(body) > g.cfg.Runtime.MaxProposalBytes {
		return g.refuseUnbound(ctx, tenant, principal, body, &kernel.Refusal{Code: wire.CodeRequestMalformed,
			Reason: fmt.Sprintf("proposal of %d bytes exceeds %d", len(body), g.cfg.Runtime.MaxProposalBytes)})
	}
	p, r := ParseProposal(body)
	g.tel.decoded(ctx, p.CapabilityID)
	if r != nil {
		return g.refuseUnbound(ctx, tenant, principal, body, r)
	}
	tc, ok := g.cfg.Tenant(tenant)
	if !ok {
		return g.refuseUnbound(ctx, tenant, principal, body, &kernel.Refusal{Code: wire.CodeAuthorityDenied, Reason: "unknown tenant"})
	}
	if _, ok := g.cfg.Capability(p.CapabilityID); !ok {
		// Refused before any operation is opened: the refusal is sampled
		// like a malformed proposal's, so unsurfaced names cannot grow the
		// store one operation each.
		return g.refuseUnbound(ctx, tenant, principal, body, &kernel.Refusal{Code: wire.CodeCapabilityNotSurfaced,
			Reason: fmt.Sprintf("capability %q is not in the pinned manifest", clipID(p.CapabilityID))})
	}
	opRef, err := aggregates.OperationRef(tenant, p.RunID, p.OperationKey)
	if err != nil {
		return g.refuseUnbound(ctx, tenant, principal, body, &kernel.Refusal{Code: wire.CodeRequestMalformed, Reason: err.Error()})
	}
	rref, err := RunRef(tenant, p.RunID)
	if err != nil {
		return g.refuseUnbound(ctx, tenant, principal, body, &kernel.Refusal{Code: wire.CodeRequestMalformed, Reason: err.Error()})
	}
	csub, err := codec.Subject(tenant, "control")
	if err != nil {
		return g.refuseUnbound(ctx, tenant, principal, body, &kernel.Refusal{Code: wire.CodeRequestMalformed, Reason: err.Error()})
	}
	pc := &proposalCtx{g: g, tenant: tenant, principal: principal, p: p, opRef: opRef, runRef: rref, controlRef: controlRef(csub), tc: tc, now: g.clock.Now()}
	if p.ApprovalID != "" {
		ref, err := ApprovalRef(tenant, p.ApprovalID)
		if err != nil {
			return g.refuseUnbound(ctx, tenant, principal, body, &kernel.Refusal{Code: wire.CodeRequestMalformed, Reason: err.Error()})
		}
		pc.approvalRef = &ref
	}
	cp, surfaced := g.cfg.Capability(p.CapabilityID)
	pc.cp = cp
	act, argRefusal := bindAction(tenant, principal, p, cp, g.cfg.AmountPointers(p.CapabilityID)...)
	args := act.args
	pc.args, pc.digest = act.canon, act.digest
	if argRefusal != nil {
		sum := sha256.Sum256(body)
		pc.args, pc.digest = json.RawMessage(p.Arguments), "body:"+hex.EncodeToString(sum[:])
	}

	// Checks that need no ledger, in the order of DESIGN section 1 (the
	// kill switch is read in the reserve decision itself, so a replica that
	// missed its change cannot dispatch). Each refusal is recorded on the
	// operation, so the same key returns it.
	var refusal *kernel.Refusal
	switch {
	case g.breakerRefusal(tenant, p.CapabilityID) != nil:
		refusal = g.breakerRefusal(tenant, p.CapabilityID)
	case !surfaced:
		refusal = &kernel.Refusal{Code: wire.CodeCapabilityNotSurfaced, Reason: fmt.Sprintf("capability %s is not in the pinned manifest", p.CapabilityID)}
	case argRefusal != nil:
		refusal = argRefusal
	default:
		// Authority, policy and evidence, from fresh reads; approval and
		// the run budget are decided in the reserve transaction below.
		refusal, err = pc.checkControls(ctx, tc, args)
		if err != nil {
			return pc.unknownReply(err)
		}
	}
	if refusal == nil {
		for _, def := range g.cfg.GuaranteesFor(p.CapabilityID) {
			pin, pr := g.pinOf(tenant, def.ID)
			if pr != nil {
				refusal = pr
				break
			}
			res, amt, er := def.Extract(args)
			if er != nil {
				refusal = er
				break
			}
			hold := pin.PinnedHold(res, amt)
			if pin.Definition.Calendar() {
				hold.Window = pin.Definition.WindowAt(g.cfg.Zone(pin.Definition.TimeZone), pc.now).Key
			}
			ref, err := aggregates.ExposureWindowRef(tenant, def.ID, res, hold.Window)
			if err != nil {
				refusal = &kernel.Refusal{Code: wire.CodeResourceInvalid, Reason: err.Error()}
				break
			}
			carries, err := g.carriesOf(tenant, hold)
			if err != nil {
				refusal = &kernel.Refusal{Code: wire.CodeResourceInvalid, Reason: err.Error()}
				break
			}
			pc.bound = append(pc.bound, bound{hold: hold, ref: ref, carries: carries})
		}
	}
	return pc.run(ctx, refusal)
}

// action is a proposal's tool call as it is bound: its decoded arguments,
// their canonical bytes (exactly what the provider receives) and the digest
// of the binding over those bytes.
type action struct {
	args   map[string]any
	canon  json.RawMessage
	digest string
}

// ActionDigest is the digest of the action p binds for principal of tenant
// (what an approval names and a reply reports), or why p is refused.
func ActionDigest(tenant, principal string, p wire.Proposal, cp *config.CapabilityConfig) (string, *kernel.Refusal) {
	act, r := bindAction(tenant, principal, p, cp)
	return act.digest, r
}

// bindAction decodes a proposal's arguments strictly and binds them. Any
// failure refuses the proposal (request_malformed): a digest is never left
// empty nor made over other bytes than the provider's.
func bindAction(tenant, principal string, p wire.Proposal, cp *config.CapabilityConfig, amountPointers ...kernel.Pointer) (action, *kernel.Refusal) {
	args, r := kernel.DecodeArguments(p.Arguments, amountPointers...)
	if r != nil {
		return action{}, r
	}
	canon, err := kernel.Canonical(json.RawMessage(p.Arguments))
	if err != nil {
		return action{}, &kernel.Refusal{Code: wire.CodeRequestMalformed, Reason: "arguments cannot be canonicalized: " + err.Error()}
	}
	binding := kernel.ActionBinding{Tenant: tenant, Principal: principal, RunID: p.RunID, CapabilityID: p.CapabilityID,
		Arguments: canon, EvidenceRefs: p.EvidenceRefs}
	if cp != nil {
		binding.CapabilityVersion, binding.PolicyDigest = cp.Version, cp.CompiledPolicy().Digest()
	}
	digest, err := kernel.ActionDigest(binding)
	if err != nil {
		return action{}, &kernel.Refusal{Code: wire.CodeRequestMalformed, Reason: "the action cannot be digested: " + err.Error()}
	}
	return action{args: args, canon: canon, digest: digest}, nil
}

// proposalCtx carries one proposal through the sequence.
type proposalCtx struct {
	g         *Gateway
	tenant    string
	principal string
	p         wire.Proposal
	cp        *config.CapabilityConfig
	args      json.RawMessage
	digest    string
	opRef     aggregates.Ref
	scoped    bool // opRef is the principal's own subject of the key (kernel.OpenScoped)
	bound     []bound

	tc          *config.TenantConfig
	now         time.Time // the decision time, from the gateway's clock
	runRef      aggregates.Ref
	controlRef  aggregates.Ref
	approvalRef *aggregates.Ref
	authority   string                  // the source of the principal's authority
	runAmount   int64                   // what the proposal consumes from its run
	gate        json.RawMessage         // the evidence gate, for gated capabilities
	controls    kernel.Controls         // as the reserve decision recorded them
	context     *kernel.CompiledContext // the evidence gate's compiled context, for gated capabilities
	traceID     string                  // the trace id of the proposal's span, if one is active
	pack        *kernel.PackRef         // the pack version the gate was compiled under
}

// baseControls are the controls of the proposal as the gateway knows them;
// the kernel adds the run budget, the guarantees and the generation.
func (pc *proposalCtx) baseControls() kernel.Controls {
	c := kernel.Controls{Authority: pc.authority, ApprovalID: pc.p.ApprovalID, Executor: pc.g.executor, EvidenceGate: pc.gate,
		Trace: kernel.TraceOf(kernel.TraceInput{Context: pc.context, EvidenceRefs: pc.p.EvidenceRefs, Arguments: pc.args,
			ManifestDigest: pc.g.cfg.Digest, TraceID: pc.traceID})}
	if pc.cp != nil {
		c.CapabilityVersion, c.Risk, c.PolicyDigest = pc.cp.Version, pc.cp.Risk, pc.cp.CompiledPolicy().Digest()
	}
	return c
}

func rowsOf(holds []kernel.GuaranteeHold) []wire.GuaranteeRow {
	rows := make([]wire.GuaranteeRow, len(holds))
	for i, h := range holds {
		rows[i] = wire.GuaranteeRow{GuaranteeID: h.GuaranteeID, Resource: h.Resource, Balance: wire.Balance(h.Balance)}
	}
	return rows
}

// run opens the operation, reserves and makes the dispatch-start (or
// records the refusal) in one atomic append over the operation, every
// resource ledger, the run and the approval (kernel.DecidePropose), then
// calls the provider and settles. The dispatch-start is durable before the
// provider is called, as a separate append would make it, one durable round
// trip sooner; and a crash can no longer leave an attempt reserved but
// unstarted (docs/decisions.md).
func (pc *proposalCtx) run(ctx context.Context, pre *kernel.Refusal) wire.Reply {
	g := pc.g
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		pc.traceID = sc.TraceID().String()
	}
	attemptID := g.ids.New()
	g.inflight.add(attemptID)
	defer g.inflight.done(attemptID)
	cmd := kernel.Propose{
		Opened: kernel.OperationOpened{OperationID: g.ids.New(), Principal: pc.principal, RunID: pc.p.RunID,
			OperationKey: pc.p.OperationKey, CapabilityID: pc.p.CapabilityID, ActionDigest: pc.digest, Executor: g.executor},
		AttemptID: attemptID, Holds: holdsOf(pc.bound), Refusal: pre, ApprovalID: pc.p.ApprovalID, Now: pc.now,
		RunAmount: pc.runAmount, AllowUnadmitted: pc.tc.AllowsUnadmitted(), Controls: pc.baseControls(), Arguments: pc.args, Pack: pc.pack,
	}
	if pc.cp != nil {
		cmd.ApprovalRequired, cmd.Risk = approvalRequired(pc.cp), pc.cp.Risk
		cmd.SameActionFence = pc.cp.SameActionFenced()
	}
	var st kernel.ProposalState
	var d kernel.ProposalDecision
	bind := []aggregates.Binding{aggregates.Bind(pc.opRef, &st.Op, &d.Op)}
	bind = append(bind, aggregates.BindEach(ledgerRefs(pc.bound), &st.Ledgers, &d.Ledgers)...)
	bind = append(bind, aggregates.Bind(pc.runRef, &st.Run, &d.Run))
	if pc.approvalRef != nil {
		bind = append(bind, aggregates.Bind(*pc.approvalRef, &st.Approval, &d.Approval))
	}
	bind = append(bind, aggregates.Guard(pc.controlRef, &st.Control))
	bind = append(bind, readReplaced(pc.bound, &st.Replaced)...)
	iref, err := integrityRef(pc.tenant)
	if err != nil {
		return pc.unknownReply(err)
	}
	bind = append(bind, aggregates.Guard(iref, &st.Integrity))
	witness := g.witnessStatus(pc.tenant)
	var reply wire.Reply
	var generation uint64
	// A refusal the kernel tallies is recorded whole only as the first of
	// its key in the refusal window; the rest append nothing and are
	// counted into the window's aggregate (kernel.RefusalTally).
	var key kernel.RefusalKey
	var whole, counted bool
	endStage := g.tel.stage(ctx, stageDecide)
	res, err := g.engine.Do(ctx, aggregates.Tx{
		Tenant: pc.tenant,
		Bind:   bind,
		Decide: func() *kernel.Refusal {
			st.Witness = witness
			d = kernel.DecidePropose(st, cmd)
			counted = false
			if d.Refusal != nil && !d.Existing {
				key = g.refusals.key(pc.tenant, pc.principal, d.Refusal.Code, pc.p.CapabilityID)
				whole = g.refusals.whole(pc.tenant, key)
				counted = d.Counted(whole)
			}
			return d.Refusal
		},
		Done: func() {
			holds := cmd.Holds
			if d.Holds != nil {
				holds = d.Holds // as the latest versions of their guarantees bind them
			}
			if counted {
				reply = wire.Reply{Status: wire.StatusRefused, Code: d.Refusal.Code, Reason: d.Refusal.Reason, ActionDigest: pc.digest}
				reply.SetGuarantees(rowsOf(kernel.HoldsOf(holds, st.Ledgers)))
				return
			}
			reply = statusReply(st.Op, kernel.HoldsOf(holds, st.Ledgers))
			generation = st.Op.Generation
		},
	})
	endStage()
	if err != nil {
		return pc.unknownReply(err)
	}
	if res.Refusal != nil && !d.Existing && kernel.Tallied(res.Refusal.Code) && res.Refusal == d.Refusal {
		sum := sha256.Sum256(pc.args)
		g.refusals.add(pc.tenant, key, kernel.ProposalRefused{Principal: pc.principal, Code: res.Refusal.Code, Reason: res.Refusal.Reason,
			BodyDigest: hex.EncodeToString(sum[:]), BodyBytes: len(pc.args)}, !counted)
	}
	if res.Refusal != nil && (res.Refusal.Code == wire.CodeOperationConflict || res.Refusal.Code == wire.CodeContention) {
		// Nothing was appended to the operation: record the refusal on the
		// principal's refusal subject instead.
		return g.refuseUnbound(ctx, pc.tenant, pc.principal, pc.args, res.Refusal)
	}
	if d.Scoped {
		// The key of the run is another principal's: this principal's
		// operation with it is on the principal's own subject of the key.
		if pc.scoped {
			return g.refuseUnbound(ctx, pc.tenant, pc.principal, pc.args, &kernel.Refusal{Code: wire.CodeOperationConflict,
				Reason: fmt.Sprintf("operation key %q of run %q is held by another principal", clipID(pc.p.OperationKey), clipID(pc.p.RunID))})
		}
		ref, err := aggregates.ScopedOperationRef(pc.tenant, pc.p.RunID, pc.p.OperationKey, pc.principal)
		if err != nil {
			return g.refuseUnbound(ctx, pc.tenant, pc.principal, pc.args, &kernel.Refusal{Code: wire.CodeRequestMalformed, Reason: err.Error()})
		}
		pc.opRef, pc.scoped = ref, true
		return pc.run(ctx, pre)
	}
	if d.Existing {
		return reply
	}
	if res.Refusal != nil {
		reply.Gate = pc.gate
		return reply
	}
	pc.controls = d.Controls
	for i := range d.Holds {
		pc.bound[i].hold = d.Holds[i] // settle reports under the version the reservation was decided on
	}
	reply = pc.dispatch(ctx, attemptID, generation)
	reply.Gate = pc.gate
	return reply
}

// statusReply describes an operation as it stands.
func statusReply(op *kernel.Operation, holds []kernel.GuaranteeHold) wire.Reply {
	r := wire.Reply{Status: op.Status(), OperationID: op.OperationID, ActionDigest: op.ActionDigest}
	if op.Refusal != nil {
		r.Code, r.Reason = op.Refusal.Code, op.Refusal.Reason
	}
	if a, ok := op.Current(); ok {
		r.AttemptID = a.AttemptID
	}
	r.SetGuarantees(rowsOf(holds))
	return r
}

// unknownReply answers a proposal whose decision the engine could not make
// or store. The store not answering leaves the outcome unknown (resend); a
// stored event the kernel refuses is no outage, and resending cannot help.
func (pc *proposalCtx) unknownReply(err error) wire.Reply {
	return engineErrorReply(err, pc.digest, false)
}

// engineErrorReply is the reply to an engine error of a proposal's
// decision (dispatched: of its settlement, after the provider was called).
func engineErrorReply(err error, digest string, dispatched bool) wire.Reply {
	if aggregates.CodeOf(err) == wire.CodeStoredEventRefused {
		// Nothing was appended by this call. Before the dispatch that is a
		// refusal; after it, the provider's outcome is not recorded.
		status := wire.StatusRefused
		if dispatched {
			status = wire.StatusUnknown
		}
		return wire.Reply{Status: status, Code: wire.CodeStoredEventRefused, ActionDigest: digest,
			Reason: "a stored event of this proposal's state is refused by the kernel; nothing is decided on that state until an operator looks: " + err.Error()}
	}
	return wire.Reply{Status: wire.StatusUnknown, Code: wire.CodeLedgerUnavailable, ActionDigest: digest,
		Reason: "the ledger could not be reached; resend the same proposal to learn its outcome: " + err.Error()}
}

// dispatch calls the provider once for an attempt whose dispatch-start is
// stored, and settles.
func (pc *proposalCtx) dispatch(ctx context.Context, attemptID string, generation uint64) wire.Reply {
	g := pc.g
	g.hooks.afterDispatchStart(attemptID)
	obs := g.adapter(pc.cp).Dispatch(ctx, attemptID, pc.args)
	if obs.Failure != "" || obs.Outcome == kernel.OutcomeUnknown {
		// Counted here, in the request path, so a breaker trips whether or
		// not the gateway is instrumented.
		g.breakerFailure(ctx, pc.tenant, pc.p.CapabilityID, obs)
	}
	g.hooks.afterProviderCall(attemptID)
	return pc.settle(ctx, attemptID, generation, obs)
}

// settle records the provider's report on the operation and every ledger.
func (pc *proposalCtx) settle(ctx context.Context, attemptID string, generation uint64, obs Observation) wire.Reply {
	g := pc.g
	ctl := pc.controls
	ctl.Guarantees = nil
	cmd := kernel.Settle{AttemptID: attemptID, Outcome: obs.Outcome, Source: "provider", Ref: obs.Ref, Generation: generation, Now: g.clock.Now(),
		Holds: holdsOf(pc.bound), Controls: ctl}
	var reply wire.Reply
	var st kernel.SettleState
	var d kernel.SettleDecision
	defer g.tel.stage(ctx, stageSettle)()
	res, err := g.engine.Do(ctx, aggregates.Tx{
		Tenant: pc.tenant,
		Bind:   append([]aggregates.Binding{aggregates.Bind(pc.opRef, &st.Op, &d.Op)}, aggregates.BindEach(ledgerRefs(pc.bound), &st.Ledgers, &d.Ledgers)...),
		Decide: func() *kernel.Refusal { d = kernel.DecideSettle(st, cmd); return d.Refusal },
		Done:   func() { reply = statusReply(st.Op, kernel.HoldsOf(cmd.Holds, st.Ledgers)) },
	})
	if err != nil {
		return engineErrorReply(err, pc.digest, true)
	}
	if res.Refusal != nil {
		reply.Code, reply.Reason = res.Refusal.Code, res.Refusal.Reason
		if res.Refusal.Code == wire.CodeExecutorFenced {
			g.incident(pc.tenant, "executor_fenced", attemptID, res.Refusal)
		}
	}
	reply.AttemptID = attemptID
	return reply
}
