package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"go.opentelemetry.io/otel/trace"
	"strings"
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

// bindLedgers binds the ledger of every one of bs, by the key of its hold,
// into the state's and the decision's ledgers.
func bindLedgers(bs []bound, states *map[kernel.LedgerKey]*kernel.Ledger, evs *map[kernel.LedgerKey][]kernel.Event) []aggregates.Binding {
	out := make([]aggregates.Binding, len(bs))
	for i, b := range bs {
		out[i] = aggregates.BindKey(b.ref, states, evs, b.hold.Key())
	}
	return out
}

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
// Every check is the kernel's (kernel.PrepareProposal and Check, then
// kernel.DecidePropose in the reserve transaction); the gateway loads what
// they read, appends and dispatches.
func (g *Gateway) Propose(ctx context.Context, tenant, principal string, body []byte) wire.Reply {
	if r := g.spaceRefusal(); r != nil {
		// Refused before anything is stored, as a full lane is.
		g.overloaded.Add(1)
		return wire.Reply{Status: wire.StatusRefused, Code: r.Code, Reason: r.Reason}
	}
	in := kernel.ProposeInput{Manifest: g.manifest(), Tenant: tenant, Principal: principal, Body: body, Now: g.clock.Now(), Executor: g.executor}
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		in.TraceID = sc.TraceID().String()
	}
	prep := kernel.PrepareProposal(in)
	p := wire.Proposal(prep.Proposal())
	g.tel.decoded(ctx, p.CapabilityID)
	if r := prep.Unbound(); r != nil {
		return g.refuseUnbound(ctx, tenant, principal, body, r)
	}
	tc, _ := g.cfg.Tenant(tenant)
	cp, _ := g.cfg.Capability(p.CapabilityID)
	opRef, err := aggregates.OperationRef(tenant, p.RunID, p.OperationKey)
	if err != nil {
		return g.refuseUnbound(ctx, tenant, principal, body, kernel.RefuseMalformed(err))
	}
	rref, err := RunRef(tenant, p.RunID)
	if err != nil {
		return g.refuseUnbound(ctx, tenant, principal, body, kernel.RefuseMalformed(err))
	}
	csub, err := codec.Subject(tenant, "control")
	if err != nil {
		return g.refuseUnbound(ctx, tenant, principal, body, kernel.RefuseMalformed(err))
	}
	pc := &proposalCtx{g: g, tenant: tenant, principal: principal, p: p, cp: cp, opRef: opRef, runRef: rref, controlRef: controlRef(csub), tc: tc, now: in.Now}
	if p.ApprovalID != "" {
		ref, err := ApprovalRef(tenant, p.ApprovalID)
		if err != nil {
			return g.refuseUnbound(ctx, tenant, principal, body, kernel.RefuseMalformed(err))
		}
		pc.approvalRef = &ref
	}
	// The fresh reads of the checks that need no ledger; the kernel applies
	// them in the order of DESIGN section 1 (the kill switch is read in the
	// reserve decision itself, so a replica that missed its change cannot
	// dispatch). Each refusal is recorded on the operation, so the same key
	// returns it.
	st, err := g.proposalReads(ctx, tc, principal, p, cp)
	if err != nil {
		return pc.unknownReply(err)
	}
	c := prep.Check(st)
	pc.args, pc.digest, pc.controls, pc.runAmount, pc.pack = c.Arguments, c.Digest, c.Controls, c.RunAmount, c.Pack
	pc.gate, pc.approval = c.Controls.EvidenceGate, c.Approval
	refusal := c.Refusal
	for _, h := range c.Holds {
		ref, err := aggregates.ExposureWindowRef(tenant, h.GuaranteeID, h.Resource, h.Window)
		if err != nil {
			refusal = kernel.RefuseResource(err)
			break
		}
		b := bound{hold: h, ref: ref}
		for _, k := range c.Replaced[kernel.LedgerKey{GuaranteeID: h.GuaranteeID, Resource: h.Resource, Window: h.Window}] {
			ref, err := aggregates.ExposureWindowRef(tenant, k.GuaranteeID, k.Resource, k.Window)
			if err != nil {
				refusal = kernel.RefuseResource(err)
				break
			}
			b.carries = append(b.carries, carry{key: k, ref: ref})
		}
		if refusal != nil {
			break
		}
		pc.bound = append(pc.bound, b)
	}
	return pc.run(ctx, refusal)
}

// proposalReads reads what the checks of a proposal read fresh: the
// principal's authority (when it is an agent), the capability's breaker as
// this replica follows it, and for a gated capability the evidence the
// proposal names, its run and the tenant's pack catalog. An error means a
// subject could not be read.
func (g *Gateway) proposalReads(ctx context.Context, tc *config.TenantConfig, principal string, p wire.Proposal, cp *config.CapabilityConfig) (kernel.ProposeState, error) {
	st := kernel.ProposeState{Breaker: g.breakerState(tc.ID, cp.ID)}
	if _, ok := tc.Agent(principal); ok {
		ref, err := authorityRef(tc.ID)
		if err != nil {
			return st, err
		}
		if st.Authority, err = g.auths.read(ctx, g.store, tc.ID, ref); err != nil {
			return st, err
		}
	}
	if cp.Pack() == nil {
		return st, nil
	}
	st.Evidence = map[string]*kernel.EvidenceRecord{}
	for _, name := range p.EvidenceRefs {
		ref, err := evidenceRef(tc.ID, name)
		if err != nil {
			return st, err
		}
		es, err := g.load(ctx, ref)
		if err != nil {
			return st, err
		}
		st.Evidence[name] = es.(*kernel.EvidenceRecord)
	}
	ref, err := RunRef(tc.ID, p.RunID)
	if err != nil {
		return st, err
	}
	rs, err := g.load(ctx, ref)
	if err != nil {
		return st, err
	}
	st.Run = rs.(*kernel.Run)
	st.Packs = &kernel.PackCatalog{}
	if st.Run.Pack != nil {
		if st.Packs, err = g.loadPacks(ctx, tc.ID); err != nil {
			return st, err
		}
	}
	return st, nil
}

// ActionDigest is the digest of the action p binds for principal of tenant
// (what an approval names and a reply reports), or why p is refused.
func ActionDigest(tenant, principal string, p wire.Proposal, cp *config.CapabilityConfig) (string, *kernel.Refusal) {
	act, r := kernel.BindAction(tenant, principal, kernel.Proposal(p), cp.Kernel())
	return act.Digest, r
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
	runAmount   int64           // what the proposal consumes from its run
	gate        json.RawMessage // the evidence gate, for gated capabilities
	controls    kernel.Controls // the checks' controls; once reserved, as the reserve decision recorded them
	approval    bool            // the capability requires an approval
	pack        *kernel.PackRef // the pack version the gate was compiled under
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
	attemptID := g.ids.New()
	g.inflight.add(attemptID)
	defer g.inflight.done(attemptID)
	cmd := kernel.Propose{
		Opened: kernel.OperationOpened{OperationID: g.ids.New(), Principal: pc.principal, RunID: pc.p.RunID,
			OperationKey: pc.p.OperationKey, CapabilityID: pc.p.CapabilityID, ActionDigest: pc.digest, Executor: g.executor},
		AttemptID: attemptID, Holds: holdsOf(pc.bound), Refusal: pre, ApprovalID: pc.p.ApprovalID, Now: pc.now,
		RunAmount: pc.runAmount, AllowUnadmitted: pc.tc.AllowsUnadmitted(), Controls: pc.controls, Arguments: pc.args, Pack: pc.pack,
		ApprovalRequired: pc.approval, Risk: pc.cp.Risk, SameActionFence: pc.cp.SameActionFenced(),
	}
	var st kernel.ProposalState
	var d kernel.ProposalDecision
	bind := []aggregates.Binding{aggregates.Bind(pc.opRef, &st.Op, &d.Op)}
	bind = append(bind, bindLedgers(pc.bound, &st.Ledgers, &d.Ledgers)...)
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
			return g.refuseUnbound(ctx, pc.tenant, pc.principal, pc.args, kernel.KeyHeldByAnother(pc.p.RunID, pc.p.OperationKey))
		}
		ref, err := aggregates.ScopedOperationRef(pc.tenant, pc.p.RunID, pc.p.OperationKey, pc.principal)
		if err != nil {
			return g.refuseUnbound(ctx, pc.tenant, pc.principal, pc.args, kernel.RefuseMalformed(err))
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
	// Settle reports under the version the reservation was decided on.
	held := make(map[kernel.LedgerKey]kernel.Hold, len(d.Holds))
	for _, h := range d.Holds {
		held[h.Key()] = h
	}
	for i, b := range pc.bound {
		if h, ok := held[b.hold.Key()]; ok {
			pc.bound[i].hold = h
		}
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
	reply := pc.settle(ctx, attemptID, generation, obs)
	if obs.Failure != "" && reply.Reason == "" && (reply.Status == wire.StatusUnknown || reply.Status == wire.StatusPending) {
		// Why the outcome is open: the provider's failure, not silence.
		reply.Reason = obs.Ref
	}
	return reply
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
		Bind:   append([]aggregates.Binding{aggregates.Bind(pc.opRef, &st.Op, &d.Op)}, bindLedgers(pc.bound, &st.Ledgers, &d.Ledgers)...),
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
