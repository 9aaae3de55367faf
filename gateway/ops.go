package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/contextos/ledger/aggregates"
	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
)

// OpVerbs are the operator verbs, ctx.v1.<tenant>.ops.<verb>.<operator>.
var OpVerbs = append([]string{"exposure", "attempts", "reconcile", "close-attempt", "assert-absence", "kill-switch", wire.VerbConfirm}, append(append(append(authzVerbs, guaranteeVerbs...), modelVerbs...), packVerbs...)...)

// Op serves one operator verb. The operator's identity comes from the
// subject's last token, which the NATS server lets only that operator use.
// Every verb passes kernel.DecideOperatorVerb first (the operator's scopes,
// the tenant's two-person rule), and every refusal of a configured
// operator is recorded as a signed operator.refused event (operator.go).
func (g *Gateway) Op(ctx context.Context, tenant, verb, operator string, body []byte) wire.OpReply {
	tc, ok := g.cfg.Tenant(tenant)
	if r := kernel.CheckOperator(ok, ok && tc.IsOperator(operator), operator, tenant); r != nil {
		return wire.OpReply{Code: r.Code, Reason: r.Reason}
	}
	v := kernel.DecideOperatorVerb(tc.OperatorPolicy(), kernel.OperatorAction{Operator: operator, Scopes: tc.OperatorScopes(operator), Verb: verb, Body: body})
	var reply wire.OpReply
	switch {
	case v.Refusal != nil:
		reply = wire.OpReply{Code: v.Refusal.Code, Reason: v.Refusal.Reason}
	case v.SecondOperator:
		var held bool
		if reply, held = g.holdForSecond(ctx, tenant, operator, verb, v.Scope, body); held {
			return reply // the request event records it
		}
	case verb == wire.VerbConfirm:
		reply = g.opConfirm(ctx, tc, operator, body)
	default:
		reply = g.dispatchOp(ctx, tenant, verb, operator, body)
	}
	if !reply.OK && reply.Code != "" {
		g.recordOperatorRefusal(ctx, tenant, kernel.OperatorReplyRefused(operator, verb, body, reply))
	}
	return reply
}

// dispatchOp serves a verb the operator may use now.
func (g *Gateway) dispatchOp(ctx context.Context, tenant, verb, operator string, body []byte) wire.OpReply {
	if h, ok := g.extraOps[verb]; ok {
		return h(ctx, tenant, operator, body)
	}
	if reply, ok := g.guaranteeOp(ctx, tenant, verb, operator, body); ok {
		return reply
	}
	if reply, ok := g.authzOp(ctx, tenant, verb, operator, body); ok {
		return reply
	}
	if tc, ok := g.cfg.Tenant(tenant); ok {
		if reply, ok := g.packOp(ctx, tc, verb, operator, body); ok {
			return reply
		}
	}
	if reply, ok := g.readOp(ctx, tenant, verb, body); ok {
		return reply
	}
	var req wire.OpRequest
	if err := kernel.DecodeOptionalRequest(body, &req); err != nil {
		return wire.Refused(wire.CodeRequestMalformed, "request: %v", err)
	}
	if err := g.index.catchUp(ctx, g.store); err != nil {
		return storeRefusal(err)
	}
	var reply wire.OpReply
	switch verb {
	case "exposure":
		return g.opExposure(tenant, req)
	case "attempts":
		p, r := g.pager(listAttempts, req.Limit, req.Cursor)
		if r != nil {
			return *r
		}
		reply = wire.OpReply{OK: true}
		reply.Attempts, reply.NextCursor = page(p, g.index.openAttempts(tenant), attemptKey, showAttempt)
		return reply
	case "reconcile":
		reply = g.opReconcile(ctx, tenant, operator, req)
	case "close-attempt":
		reply = g.opClose(ctx, tenant, operator, req)
	case "assert-absence":
		reply = g.opAssertAbsence(ctx, tenant, operator, req)
	case "kill-switch":
		return g.opKillSwitch(ctx, tenant, operator, req)
	default:
		r := kernel.RefuseUnknownVerb(verb)
		return wire.OpReply{Code: r.Code, Reason: r.Reason}
	}
	for i := range reply.Settled {
		reply.Settled[i] = showSettle(reply.Settled[i])
	}
	for i := range reply.Exposure {
		reply.Exposure[i] = showExposure(reply.Exposure[i])
	}
	return reply
}

// opExposure lists the tenant's balances, of one guarantee or resource
// when the request names them, a page at a time.
func (g *Gateway) opExposure(tenant string, req wire.OpRequest) wire.OpReply {
	p, r := g.pager(listExposure, req.Limit, req.Cursor)
	if r != nil {
		return *r
	}
	if r := kernel.CheckExposureRequest(req); r != nil {
		return wire.OpReply{Code: r.Code, Reason: r.Reason}
	}
	rows := g.index.exposure(tenant, req.GuaranteeID, req.Resource)
	if d := req.ResourceDigest; d != "" {
		rows = slices.DeleteFunc(rows, func(r wire.ExposureRow) bool {
			if r.ResourceDigest != "" {
				return r.ResourceDigest != d
			}
			return wire.Digest(r.Resource) != d
		})
	}
	reply := wire.OpReply{OK: true}
	reply.Exposure, reply.NextCursor = page(p, rows, exposureKey, showExposure)
	return reply
}

// opTarget finds what an action on an attempt needs: its operation (from
// the index) with its key, and the attempt's holds, each as the pin of its
// guarantee binds it.
func (g *Gateway) opTarget(tenant, attemptID string) (opEntry, kernel.Key, []kernel.Hold, error) {
	oe, ok := g.operationOf(tenant, attemptID)
	if !ok {
		return opEntry{}, kernel.Key{}, nil, errors.New("unknown attempt")
	}
	key, err := opKeyOf(tenant, oe)
	if err != nil {
		return opEntry{}, kernel.Key{}, nil, err
	}
	var holds []kernel.Hold
	for _, a := range oe.op.Attempts {
		if a.AttemptID != attemptID {
			continue
		}
		for _, h := range a.Holds {
			hold := kernel.Hold{GuaranteeID: h.GuaranteeID, Resource: h.Resource, Amount: h.Amount, Window: h.Window, DefinitionDigest: kernel.Definition{}.Digest()}
			if pin, r := g.pinOf(tenant, h.GuaranteeID); r == nil {
				hold = pin.PinnedHold(h.Resource, h.Amount)
				hold.Window = h.Window
			}
			holds = append(holds, hold)
		}
	}
	return oe, key, holds, nil
}

// opKeyOf is the key of an operation the index holds: the key's subject of
// its run, or the principal's own subject of the key (kernel.OpenScoped).
func opKeyOf(tenant string, oe opEntry) (kernel.Key, error) {
	for _, k := range []kernel.Key{kernel.KeyOperation(oe.op.RunID, oe.op.OperationKey),
		kernel.KeyScopedOperation(oe.op.RunID, oe.op.OperationKey, oe.op.Principal)} {
		ref, err := aggregates.RefOf(tenant, k)
		if err != nil {
			return kernel.Key{}, err
		}
		if ref.Subject == oe.subject {
			return k, nil
		}
	}
	return kernel.Key{}, fmt.Errorf("operation %s is stored on %s, the subject of none of its keys", oe.op.OperationID, oe.subject)
}

// operationOf looks an attempt's operation up in the index.
func (g *Gateway) operationOf(tenant, attemptID string) (opEntry, bool) {
	oe, ok := g.index.operationOf(attemptID)
	return oe, ok && oe.tenant == tenant
}

// settleAttempt records obs for attemptID as a new executor generation:
// the claim fences whoever held the operation before, atomically with the
// observation.
func (g *Gateway) settleAttempt(ctx context.Context, tenant, attemptID, source string, obs Observation) wire.SettleRow {
	oe, key, holds, err := g.opTarget(tenant, attemptID)
	if err != nil {
		r := kernel.RefuseAttemptTarget(err)
		return wire.SettleRow{AttemptID: attemptID, Code: r.Code, Reason: r.Reason}
	}
	ctl := kernel.Controls{Authority: "reconciliation", Executor: g.executor}
	if cp, ok := g.cfg.Capability(oe.op.CapabilityID); ok {
		ctl.CapabilityVersion, ctl.Risk, ctl.PolicyDigest = cp.Version, cp.Risk, cp.CompiledPolicy().Digest()
	}
	in := kernel.SettleInput{Operation: key, AttemptID: attemptID, Holds: holds, Outcome: obs.Outcome, Source: source, Ref: obs.Ref,
		Claimant: g.executor + "/" + source, Now: g.clock.Now(), Controls: ctl}
	row := wire.SettleRow{AttemptID: attemptID, Outcome: wire.Outcome(obs.Outcome)}
	eff, err := g.engine.Run(ctx, tenant, in.Step())
	if err != nil {
		row.Code, row.Reason = storeFault(err)
		return row
	}
	row.Status = eff.Reply.Status
	if eff.Refusal != nil {
		row.Code, row.Reason = eff.Refusal.Code, eff.Refusal.Reason
	}
	for _, inc := range eff.Incidents {
		g.incident(tenant, inc)
	}
	return row
}

// ReconcileGrace is how long an attempt of cp is left to its executor
// (config.CapabilityConfig.Grace).
func (g *Gateway) ReconcileGrace(cp *config.CapabilityConfig) time.Duration { return cp.Grace() }

func (g *Gateway) opReconcile(ctx context.Context, tenant, operator string, req wire.OpRequest) wire.OpReply {
	if r := kernel.CheckReconcileRequest(req); r != nil {
		return wire.OpReply{Code: r.Code, Reason: r.Reason}
	}
	targets := []string{req.AttemptID}
	if req.AttemptID == "" {
		targets = nil
		for _, oe := range g.index.unresolved() {
			if oe.tenant == tenant {
				a, _ := oe.op.Current()
				targets = append(targets, a.AttemptID)
			}
		}
	}
	reply := wire.OpReply{OK: true}
	for _, id := range targets {
		reply.Settled = append(reply.Settled, g.reconcileOne(ctx, tenant, id, "reconcile:"+operator, false))
	}
	return reply
}

// reconcileOne does what kernel.PlanReconcile says reconciliation may do
// with one attempt: query the provider by its idempotency key and settle
// the answer, close it (the background sweep, for an executor lost before
// dispatch-start), or nothing yet.
func (g *Gateway) reconcileOne(ctx context.Context, tenant, attemptID, source string, sweep bool) wire.SettleRow {
	oe, ok := g.operationOf(tenant, attemptID)
	if r := kernel.CheckReconcileTarget(ok, false, false); r != nil {
		return wire.SettleRow{AttemptID: attemptID, Code: r.Code, Reason: r.Reason}
	}
	cp, _ := g.cfg.Capability(oe.op.CapabilityID)
	plan := kernel.PlanReconcile(&oe.op, kernel.ReconcileInput{AttemptID: attemptID, Sweep: sweep, Age: g.seen.since(attemptID, g.clock.Now()),
		Grace: g.ReconcileGrace(cp), InFlight: sweep && g.inflight.has(attemptID)})
	switch plan.Action {
	case kernel.ReconcileClose:
		r := g.opClose(ctx, tenant, "reconciler", wire.OpRequest{AttemptID: attemptID, Reason: plan.Reason})
		return wire.SettleRow{AttemptID: attemptID, Status: wire.StatusNotApplied, Code: r.Code, Reason: r.Reason}
	case kernel.ReconcileQuery:
	case kernel.ReconcileNothing:
		g.seen.forget(attemptID)
		return wire.SettleRow{AttemptID: attemptID, Status: plan.Status, Code: plan.Code, Reason: plan.Reason}
	default:
		return wire.SettleRow{AttemptID: attemptID, Status: plan.Status, Code: plan.Code, Reason: plan.Reason}
	}
	if r := kernel.CheckReconcileTarget(true, true, cp != nil); r != nil {
		return wire.SettleRow{AttemptID: attemptID, Code: r.Code, Reason: r.Reason}
	}
	obs := g.adapter(cp).Query(ctx, attemptID)
	if kernel.Unchanged(&oe.op, attemptID, obs.Outcome) {
		return wire.SettleRow{AttemptID: attemptID, Outcome: wire.Outcome(obs.Outcome), Status: oe.op.Status(), Reason: "provider reports no change"}
	}
	row := g.settleAttempt(ctx, tenant, attemptID, source, obs)
	if row.Code == "" && !sweep {
		if sealed, ok := oe.op.Sealed(attemptID); ok {
			row.Status, row.Reason = sealed.Status(), "already resolved; the provider agrees"
		}
	}
	return row
}

func (g *Gateway) opClose(ctx context.Context, tenant, operator string, req wire.OpRequest) wire.OpReply {
	_, known := g.operationOf(tenant, req.AttemptID)
	if r := kernel.CheckCloseRequest(req, known); r != nil {
		return wire.OpReply{Code: r.Code, Reason: r.Reason}
	}
	reason := req.Reason
	if reason == "" {
		reason = "closed by operator " + operator
	}
	if !known {
		// An attempt no operation knows: tombstone it on the named ledger
		// so that a late reservation for it is refused.
		resource, r := g.resolveResource(tenant, req.GuaranteeID, req.Resource, req.ResourceDigest)
		if r != nil {
			return *r
		}
		res, bal, err := g.engine.Exposure(ctx, tenant, req.GuaranteeID, resource, kernel.Close{AttemptID: req.AttemptID, Reason: reason})
		if err != nil {
			return storeRefusal(err)
		}
		if res.Refusal != nil {
			return wire.OpReply{Code: res.Refusal.Code, Reason: res.Refusal.Reason}
		}
		return wire.OpReply{OK: true, Exposure: []wire.ExposureRow{{Tenant: tenant, GuaranteeID: req.GuaranteeID, Resource: resource, Balance: wire.Balance(bal)}}}
	}
	if r := g.release(ctx, tenant, kernel.ReleaseInput{AttemptID: req.AttemptID, Executor: g.executor, Operator: operator, Reason: reason}); r != nil {
		return *r
	}
	return wire.OpReply{OK: true, Settled: []wire.SettleRow{{AttemptID: req.AttemptID, Status: wire.StatusNotApplied, Reason: reason}}}
}

func (g *Gateway) opAssertAbsence(ctx context.Context, tenant, operator string, req wire.OpRequest) wire.OpReply {
	_, known := g.operationOf(tenant, req.AttemptID)
	if r := kernel.CheckAssertAbsenceRequest(req, known); r != nil {
		return wire.OpReply{Code: r.Code, Reason: r.Reason}
	}
	if r := g.release(ctx, tenant, kernel.ReleaseInput{AttemptID: req.AttemptID, Executor: g.executor, Operator: operator, ArtifactRef: req.ArtifactRef}); r != nil {
		return *r
	}
	return wire.OpReply{OK: true, Settled: []wire.SettleRow{{AttemptID: req.AttemptID, Outcome: wire.OutcomeNotApplied, Status: wire.StatusNotApplied,
		Reason: "absence asserted by " + operator + " with " + req.ArtifactRef}}}
}

// release runs the release step (close-attempt and assert-absence,
// kernel.ReleaseInput.Step) over the attempt's operation and the ledgers
// it holds on; it returns the refusal reply, or nil.
func (g *Gateway) release(ctx context.Context, tenant string, in kernel.ReleaseInput) *wire.OpReply {
	_, key, holds, err := g.opTarget(tenant, in.AttemptID)
	if err != nil {
		r := kernel.RefuseAttemptTarget(fmt.Errorf("attempt %s: %w", in.AttemptID, err))
		return &wire.OpReply{Code: r.Code, Reason: r.Reason}
	}
	in.Operation = key
	for _, h := range holds {
		in.Holds = append(in.Holds, kernel.HoldRef{GuaranteeID: h.GuaranteeID, Resource: h.Resource, Amount: h.Amount, Window: h.Window})
	}
	eff, err := g.engine.Run(ctx, tenant, in.Step())
	if err != nil {
		r := storeRefusal(err)
		return &r
	}
	if eff.Refusal != nil {
		return &wire.OpReply{Code: eff.Refusal.Code, Reason: eff.Refusal.Reason}
	}
	return nil
}

func (g *Gateway) opKillSwitch(ctx context.Context, tenant, operator string, req wire.OpRequest) wire.OpReply {
	if req.Engaged == nil {
		v := g.index.killEngaged(tenant)
		return wire.OpReply{OK: true, KillSwitch: &v}
	}
	if _, err := codec.Subject(tenant, "control"); err != nil {
		return wire.Refused(wire.CodeRequestMalformed, "%v", err)
	}
	engaged := *req.Engaged
	cmd := kernel.SetKillSwitch{Engaged: engaged, Operator: operator, Reason: req.Reason}
	_, err := g.engine.Run(ctx, tenant, kernel.VerbStep(kernel.KeyControl, func(c *kernel.Control) (kernel.Decision, any) {
		return kernel.DecideKillSwitch(c, cmd), nil
	}))
	if err != nil {
		return storeRefusal(err)
	}
	return wire.OpReply{OK: true, KillSwitch: &engaged}
}

func controlRef(subject string) aggregates.Ref {
	return aggregates.Ref{Subject: subject, New: func() aggregates.State { return &kernel.Control{} }}
}
