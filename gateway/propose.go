package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/contextos/ledger/aggregates"
	"github.com/contextos/ledger/kernel"
)

// bound is a guarantee that covers the proposal, with what the kernel
// extracted from the arguments.
type bound struct {
	def      kernel.Definition
	digest   string
	resource string
	amount   int64
	ref      aggregates.Ref
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
func (g *Gateway) Propose(ctx context.Context, tenant, principal string, body []byte) Reply {
	if len(body) > g.cfg.Runtime.MaxProposalBytes {
		return g.refuseUnbound(ctx, tenant, principal, body, &kernel.Refusal{Code: kernel.CodeRequestMalformed,
			Reason: fmt.Sprintf("proposal of %d bytes exceeds %d", len(body), g.cfg.Runtime.MaxProposalBytes)})
	}
	p, r := ParseProposal(body)
	if r != nil {
		return g.refuseUnbound(ctx, tenant, principal, body, r)
	}
	tc, ok := g.cfg.Tenant(tenant)
	if !ok {
		return g.refuseUnbound(ctx, tenant, principal, body, &kernel.Refusal{Code: kernel.CodeAuthorityDenied, Reason: "unknown tenant"})
	}
	if _, ok := g.cfg.Capability(p.CapabilityID); !ok {
		// Refused before any operation is opened: the refusal is sampled
		// like a malformed proposal's, so unsurfaced names cannot grow the
		// store one operation each.
		return g.refuseUnbound(ctx, tenant, principal, body, &kernel.Refusal{Code: kernel.CodeCapabilityNotSurfaced,
			Reason: fmt.Sprintf("capability %q is not in the pinned manifest", clipID(p.CapabilityID))})
	}
	opRef, err := aggregates.OperationRef(tenant, p.RunID, p.OperationKey)
	if err != nil {
		return g.refuseUnbound(ctx, tenant, principal, body, &kernel.Refusal{Code: kernel.CodeRequestMalformed, Reason: err.Error()})
	}
	rref, err := runRef(tenant, p.RunID)
	if err != nil {
		return g.refuseUnbound(ctx, tenant, principal, body, &kernel.Refusal{Code: kernel.CodeRequestMalformed, Reason: err.Error()})
	}
	pc := &proposalCtx{g: g, tenant: tenant, principal: principal, p: p, opRef: opRef, runRef: rref, tc: tc, now: g.clock.Now()}
	if p.ApprovalID != "" {
		ref, err := approvalRef(tenant, p.ApprovalID)
		if err != nil {
			return g.refuseUnbound(ctx, tenant, principal, body, &kernel.Refusal{Code: kernel.CodeRequestMalformed, Reason: err.Error()})
		}
		pc.approvalRef = &ref
	}
	cp, surfaced := g.cfg.Capability(p.CapabilityID)
	pc.cp = cp
	args, argRefusal := kernel.DecodeArguments(p.Arguments)
	canonArgs := json.RawMessage(p.Arguments)
	if argRefusal == nil {
		if c, err := kernel.Canonical(canonArgs); err == nil {
			canonArgs = c
		}
	}
	binding := kernel.ActionBinding{Tenant: tenant, Principal: principal, RunID: p.RunID, CapabilityID: p.CapabilityID,
		Arguments: canonArgs, EvidenceRefs: p.EvidenceRefs}
	if cp != nil {
		binding.CapabilityVersion, binding.PolicyDigest = cp.Version, cp.compiledPolicy().Digest()
	}
	if argRefusal == nil {
		pc.digest, _ = kernel.ActionDigest(binding)
	} else {
		sum := sha256.Sum256(body)
		pc.digest = "body:" + hex.EncodeToString(sum[:])
	}
	pc.args = canonArgs

	// Checks that need no ledger, in the order of DESIGN section 1. Each
	// refusal is recorded on the operation, so the same key returns it.
	var refusal *kernel.Refusal
	switch {
	case g.killed(tenant):
		refusal = &kernel.Refusal{Code: kernel.CodeKillSwitchEngaged, Reason: "the tenant's kill switch is engaged"}
	case !surfaced:
		refusal = &kernel.Refusal{Code: kernel.CodeCapabilityNotSurfaced, Reason: fmt.Sprintf("capability %s is not in the pinned manifest", p.CapabilityID)}
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
			if pr := g.pinRefusal(tenant, def.ID); pr != nil {
				refusal = pr
				break
			}
			res, amt, er := def.Extract(args)
			if er != nil {
				refusal = er
				break
			}
			ref, err := aggregates.ExposureRef(tenant, def.ID, res)
			if err != nil {
				refusal = &kernel.Refusal{Code: kernel.CodeResourceInvalid, Reason: err.Error()}
				break
			}
			pc.bound = append(pc.bound, bound{def: def, digest: def.Digest(), resource: res, amount: amt, ref: ref})
		}
	}
	return pc.run(ctx, refusal)
}

// proposalCtx carries one proposal through the sequence.
type proposalCtx struct {
	g         *Gateway
	tenant    string
	principal string
	p         Proposal
	cp        *CapabilityConfig
	args      json.RawMessage
	digest    string
	opRef     aggregates.Ref
	bound     []bound

	tc          *TenantConfig
	now         time.Time // the decision time, from the gateway's clock
	runRef      aggregates.Ref
	approvalRef *aggregates.Ref
	authority   string          // the source of the principal's authority
	runAmount   int64           // what the proposal consumes from its run
	runBudget   string          // the run's budget after the decision
	gate        json.RawMessage // the evidence gate, for gated capabilities
}

func (pc *proposalCtx) refs() []aggregates.Ref {
	refs := []aggregates.Ref{pc.opRef}
	for _, b := range pc.bound {
		refs = append(refs, b.ref)
	}
	return refs
}

func (pc *proposalCtx) controls(op *kernel.Operation, holds []kernel.GuaranteeHold) kernel.Controls {
	c := kernel.Controls{Authority: pc.authority, ApprovalID: pc.p.ApprovalID, RunBudget: pc.runBudget,
		Executor: pc.g.executor, Guarantees: holds, EvidenceGate: pc.gate}
	if c.Authority == "" {
		c.Authority = "none"
	}
	if pc.cp != nil {
		c.CapabilityVersion, c.Risk, c.PolicyDigest = pc.cp.Version, pc.cp.Risk, pc.cp.compiledPolicy().Digest()
	}
	if op != nil {
		c.Generation = op.Generation
	}
	return c
}

func (pc *proposalCtx) holdsOf(states []aggregates.State) []kernel.GuaranteeHold {
	var out []kernel.GuaranteeHold
	for i, b := range pc.bound {
		l := states[i+1].(*kernel.Ledger)
		bal := l.Balance()
		if bal.Limit == 0 {
			bal = kernel.Balance{Limit: b.def.Limit, Available: b.def.Limit}
		}
		out = append(out, kernel.GuaranteeHold{GuaranteeID: b.def.ID, DefinitionDigest: b.digest, Resource: b.resource, Amount: b.amount, Balance: bal})
	}
	return out
}

func rowsOf(holds []kernel.GuaranteeHold) []GuaranteeRow {
	rows := make([]GuaranteeRow, len(holds))
	for i, h := range holds {
		rows[i] = GuaranteeRow{GuaranteeID: h.GuaranteeID, Resource: h.Resource, Balance: h.Balance}
	}
	return rows
}

// run opens the operation, reserves and makes the dispatch-start (or
// records the refusal) in one atomic append over the operation, every
// resource ledger, the run and the approval, then calls the provider and
// settles. The dispatch-start is durable before the provider is called, as
// a separate append would make it, one durable round trip sooner; and a
// crash can no longer leave an attempt reserved but unstarted
// (docs/decisions.md).
func (pc *proposalCtx) run(ctx context.Context, pre *kernel.Refusal) Reply {
	g := pc.g
	opened := kernel.OperationOpened{OperationID: g.ids.New(), Principal: pc.principal, RunID: pc.p.RunID,
		OperationKey: pc.p.OperationKey, CapabilityID: pc.p.CapabilityID, ActionDigest: pc.digest, Executor: g.executor}
	attemptID := g.ids.New()
	g.inflight.add(attemptID)
	defer g.inflight.done(attemptID)
	var reply Reply
	var existing bool
	var generation uint64
	res, err := g.engine.Do(ctx, aggregates.Tx{
		Tenant: pc.tenant,
		Refs:   pc.reserveRefs(),
		Decide: func(s []aggregates.State) ([][]kernel.Event, *kernel.Refusal) {
			op := s[0].(*kernel.Operation)
			out := make([][]kernel.Event, len(s))
			kind, d := kernel.DecideOpen(op, opened)
			existing = kind == kernel.OpenExisting
			if d.Refusal != nil || existing {
				return nil, d.Refusal
			}
			out[0] = d.Events
			refusal := pre
			if refusal == nil {
				// Approval, then run budget, then exposure: a refusal by
				// any drops every event but the operation's record, so
				// nothing is redeemed, consumed or held.
				refusal = pc.decideControls(s, out, pc.tc, opened.OperationID, attemptID)
			}
			if refusal == nil {
				for i, b := range pc.bound {
					rd := kernel.DecideExposure(s[i+1].(*kernel.Ledger), kernel.ReserveStarted{Reserve: kernel.Reserve{GuaranteeID: b.def.ID, Resource: b.resource,
						AttemptID: attemptID, OperationID: opened.OperationID, Amount: b.amount, Limit: b.def.Limit, DefinitionDigest: b.digest}})
					if rd.Refusal != nil {
						refusal = rd.Refusal
						break
					}
					out[i+1] = rd.Events
				}
			}
			holds := pc.holdsOf(s)
			rec := kernel.DecisionRecorded{OperationID: opened.OperationID, Principal: pc.principal, RunID: pc.p.RunID,
				CapabilityID: pc.p.CapabilityID, ActionDigest: pc.digest, Controls: pc.controls(&kernel.Operation{Generation: 1}, holds)}
			if refusal != nil {
				for i := 1; i < len(out); i++ {
					out[i] = nil
				}
				rec.Status, rec.Code, rec.Reason = kernel.StatusRefused, refusal.Code, refusal.Reason
				refused := kernel.OperationRefused{Code: refusal.Code, Reason: refusal.Reason}
				if refusal.Code == kernel.CodeApprovalRequired {
					refused.Arguments = pc.args // what an operator is asked to approve
				}
				out[0] = append(out[0], refused, rec)
				return out, refusal
			}
			var hr []kernel.HoldRef
			for _, b := range pc.bound {
				hr = append(hr, kernel.HoldRef{GuaranteeID: b.def.ID, Resource: b.resource, Amount: b.amount})
			}
			out[0] = append(out[0], kernel.OperationReserved{AttemptID: attemptID, Generation: 1, Holds: hr},
				kernel.OperationDispatchStarted{AttemptID: attemptID, Generation: 1})
			return out, nil
		},
		Done: func(s []aggregates.State) {
			op := s[0].(*kernel.Operation)
			reply = pc.statusReply(op, pc.holdsOf(s))
			generation = op.Generation
		},
	})
	if err != nil {
		return pc.unknownReply(err)
	}
	if res.Refusal != nil && (res.Refusal.Code == kernel.CodeOperationConflict || res.Refusal.Code == kernel.CodeContention) {
		// Nothing was appended to the operation: record the refusal on the
		// principal's refusal subject instead.
		return g.refuseUnbound(ctx, pc.tenant, pc.principal, pc.args, res.Refusal)
	}
	if existing {
		return reply
	}
	if res.Refusal != nil {
		reply.Gate = pc.gate
		return reply
	}
	reply = pc.dispatch(ctx, attemptID, generation)
	reply.Gate = pc.gate
	return reply
}

// statusReply describes an operation as it stands.
func (pc *proposalCtx) statusReply(op *kernel.Operation, holds []kernel.GuaranteeHold) Reply {
	r := Reply{Status: op.Status(), OperationID: op.OperationID, ActionDigest: op.ActionDigest}
	if op.Refusal != nil {
		r.Code, r.Reason = op.Refusal.Code, op.Refusal.Reason
	}
	if a, ok := op.Current(); ok {
		r.AttemptID = a.AttemptID
	}
	r.setBalance(rowsOf(holds))
	return r
}

func (pc *proposalCtx) unknownReply(err error) Reply {
	return Reply{Status: kernel.StatusUnknown, ActionDigest: pc.digest,
		Reason: "the ledger could not be reached; resend the same proposal to learn its outcome: " + err.Error()}
}

// dispatch calls the provider once for an attempt whose dispatch-start is
// stored, and settles.
func (pc *proposalCtx) dispatch(ctx context.Context, attemptID string, generation uint64) Reply {
	g := pc.g
	g.hooks.afterDispatchStart(attemptID)
	obs := g.adapter(pc.cp).Dispatch(ctx, attemptID, pc.args)
	g.hooks.afterProviderCall(attemptID)
	return pc.settle(ctx, attemptID, generation, obs, "provider")
}

// settle records an observation on the operation and every ledger.
func (pc *proposalCtx) settle(ctx context.Context, attemptID string, generation uint64, obs Observation, source string) Reply {
	g := pc.g
	var reply Reply
	res, err := g.engine.Do(ctx, aggregates.Tx{
		Tenant: pc.tenant,
		Refs:   pc.refs(),
		Decide: func(s []aggregates.State) ([][]kernel.Event, *kernel.Refusal) {
			op := s[0].(*kernel.Operation)
			if r := kernel.CheckFence(op, generation); r != nil {
				return nil, r
			}
			return settleEvents(op, s, attemptID, generation, obs, source, func(holds []kernel.GuaranteeHold) kernel.Controls {
				return pc.controls(op, holds)
			}, pc.bound)
		},
		Done: func(s []aggregates.State) {
			reply = pc.statusReply(s[0].(*kernel.Operation), pc.holdsOf(s))
		},
	})
	if err != nil {
		return pc.unknownReply(err)
	}
	if res.Refusal != nil {
		reply.Code, reply.Reason = res.Refusal.Code, res.Refusal.Reason
		if res.Refusal.Code == kernel.CodeExecutorFenced {
			g.incident(pc.tenant, "executor_fenced", attemptID, res.Refusal)
		}
	}
	reply.AttemptID = attemptID
	return reply
}

// settleEvents decides an observation of attemptID on the operation (s[0])
// and its ledgers (s[1:]), with the decision record.
func settleEvents(op *kernel.Operation, s []aggregates.State, attemptID string, generation uint64, obs Observation, source string,
	controls func([]kernel.GuaranteeHold) kernel.Controls, bound []bound) ([][]kernel.Event, *kernel.Refusal) {
	out := make([][]kernel.Event, len(s))
	var refusal *kernel.Refusal
	for i := 1; i < len(s); i++ {
		d := kernel.DecideExposure(s[i].(*kernel.Ledger), kernel.Observe{AttemptID: attemptID, Outcome: obs.Outcome, Source: source, Ref: obs.Ref})
		out[i] = d.Events
		if d.Refusal != nil && refusal == nil {
			refusal = d.Refusal
		}
	}
	if refusal != nil {
		return out, refusal // incidents only; the operation is unchanged
	}
	if countEvents(out) == 0 && len(s) > 1 {
		return nil, nil // the same report again
	}
	if a, ok := op.Current(); ok && a.AttemptID == attemptID && a.Outcome == obs.Outcome && len(s) == 1 {
		return nil, nil
	}
	out[0] = []kernel.Event{kernel.OperationObserved{AttemptID: attemptID, Generation: generation, Outcome: obs.Outcome, Source: source}}
	var holds []kernel.GuaranteeHold
	for i, b := range bound {
		// Balances after this observation: fold a copy-free preview by
		// asking what the ledger will hold once the events apply.
		bal := previewBalance(s[i+1].(*kernel.Ledger), out[i+1])
		holds = append(holds, kernel.GuaranteeHold{GuaranteeID: b.def.ID, DefinitionDigest: b.digest, Resource: b.resource, Amount: b.amount, Balance: bal})
	}
	status := obs.Outcome.Status()
	out[0] = append(out[0], kernel.DecisionRecorded{OperationID: op.OperationID, Principal: op.Principal, RunID: op.RunID,
		CapabilityID: op.CapabilityID, ActionDigest: op.ActionDigest, AttemptID: attemptID, Status: status, Reason: source + ": " + obs.Ref,
		Controls: controls(holds)})
	return out, nil
}

func countEvents(evs [][]kernel.Event) int {
	n := 0
	for _, l := range evs {
		n += len(l)
	}
	return n
}

// previewBalance is the ledger's balance once evs apply, computed on a copy.
func previewBalance(l *kernel.Ledger, evs []kernel.Event) kernel.Balance {
	if len(evs) == 0 {
		return l.Balance()
	}
	c := l.Clone()
	for _, ev := range evs {
		if err := c.Apply(ev); err != nil {
			return l.Balance()
		}
	}
	return c.Balance()
}
