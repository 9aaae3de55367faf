package gateway

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/contextos/ledger/aggregates"
	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/kernel"
)

// OpRequest is the body of an operator verb. Fields a verb does not use
// must be empty.
type OpRequest struct {
	GuaranteeID string `json:"guarantee_id,omitempty"`
	Resource    string `json:"resource,omitempty"`
	AttemptID   string `json:"attempt_id,omitempty"`
	Reason      string `json:"reason,omitempty"`
	ArtifactRef string `json:"artifact_ref,omitempty"`
	Engaged     *bool  `json:"engaged,omitempty"`
	All         bool   `json:"all,omitempty"`
}

// OpReply is the reply to an operator verb.
type OpReply struct {
	OK         bool              `json:"ok"`
	Code       kernel.Code       `json:"code,omitempty"`
	Reason     string            `json:"reason,omitempty"`
	Exposure   []ExposureRow     `json:"exposure,omitempty"`
	Attempts   []AttemptRow      `json:"attempts,omitempty"`
	Settled    []SettleRow       `json:"settled,omitempty"`
	Approvals  []PendingApproval `json:"approvals,omitempty"`
	Incidents  []Incident        `json:"incidents,omitempty"`
	KillSwitch *bool             `json:"kill_switch,omitempty"`
	Data       map[string]any    `json:"data,omitempty"`
}

// SettleRow reports what reconciliation or an operator action did to one
// attempt.
type SettleRow struct {
	AttemptID string         `json:"attempt_id"`
	Outcome   kernel.Outcome `json:"outcome,omitempty"`
	Status    kernel.Status  `json:"status,omitempty"`
	Code      kernel.Code    `json:"code,omitempty"`
	Reason    string         `json:"reason,omitempty"`
}

func opRefused(code kernel.Code, format string, args ...any) OpReply {
	return OpReply{Code: code, Reason: fmt.Sprintf(format, args...)}
}

// OpVerbs are the operator verbs, ctx.v1.<tenant>.ops.<verb>.<operator>.
var OpVerbs = append(append([]string{"exposure", "attempts", "reconcile", "close-attempt", "assert-absence", "kill-switch"}, authzVerbs...), readVerbs...)

// Op serves one operator verb. The operator's identity comes from the
// subject's last token, which the NATS server lets only that operator use.
func (g *Gateway) Op(ctx context.Context, tenant, verb, operator string, body []byte) any {
	tc, ok := g.cfg.Tenant(tenant)
	if !ok || !tc.isOperator(operator) {
		return opRefused(kernel.CodeAuthorityDenied, "%s is not an operator of tenant %s", operator, tenant)
	}
	if h, ok := g.extraOps[verb]; ok {
		return h(ctx, tenant, operator, body)
	}
	if reply, ok := g.authzOp(ctx, tenant, verb, operator, body); ok {
		return reply
	}
	if reply, ok := g.readOp(ctx, tenant, verb, body); ok {
		return reply
	}
	var req OpRequest
	if err := kernel.DecodeOptionalRequest(body, &req); err != nil {
		return opRefused(kernel.CodeRequestMalformed, "request: %v", err)
	}
	if err := g.index.catchUp(ctx, g.store); err != nil {
		return opRefused(kernel.CodeContention, "the ledger could not be read: %v", err)
	}
	switch verb {
	case "exposure":
		return OpReply{OK: true, Exposure: g.index.exposure(tenant, req.GuaranteeID, req.Resource)}
	case "attempts":
		return OpReply{OK: true, Attempts: g.index.openAttempts(tenant)}
	case "reconcile":
		return g.opReconcile(ctx, tenant, operator, req)
	case "close-attempt":
		return g.opClose(ctx, tenant, operator, req)
	case "assert-absence":
		return g.opAssertAbsence(ctx, tenant, operator, req)
	case "kill-switch":
		return g.opKillSwitch(ctx, tenant, operator, req)
	}
	return opRefused(kernel.CodeRequestMalformed, "unknown verb %q", verb)
}

func (t *TenantConfig) isOperator(id string) bool {
	for _, o := range t.Operators {
		if o.ID == id {
			return true
		}
	}
	return false
}

// opTarget loads what an action on an attempt needs: its operation's ref
// and the refs of every ledger it holds on.
func (g *Gateway) opTarget(tenant, attemptID string) (opEntry, []aggregates.Ref, []bound, error) {
	oe, ok := g.index.operationOf(attemptID)
	if !ok || oe.tenant != tenant {
		return opEntry{}, nil, nil, errors.New("unknown attempt")
	}
	refs := []aggregates.Ref{{Subject: oe.subject, New: func() aggregates.State { return &kernel.Operation{} }}}
	var bs []bound
	for _, a := range oe.op.Attempts {
		if a.AttemptID != attemptID {
			continue
		}
		for _, h := range a.Holds {
			ref, err := aggregates.ExposureRef(tenant, h.GuaranteeID, h.Resource)
			if err != nil {
				return opEntry{}, nil, nil, err
			}
			refs = append(refs, ref)
			var def kernel.Definition
			for _, d := range g.cfg.Guarantees {
				if d.ID == h.GuaranteeID {
					def = d
				}
			}
			bs = append(bs, bound{def: def, digest: def.Digest(), resource: h.Resource, amount: h.Amount, ref: ref})
		}
	}
	return oe, refs, bs, nil
}

// settleAttempt records obs for attemptID as a new executor generation:
// the claim fences whoever held the operation before, atomically with the
// observation.
func (g *Gateway) settleAttempt(ctx context.Context, tenant, attemptID, source string, obs Observation) SettleRow {
	_, refs, bs, err := g.opTarget(tenant, attemptID)
	if err != nil {
		return SettleRow{AttemptID: attemptID, Code: kernel.CodeAttemptUnknown, Reason: err.Error()}
	}
	row := SettleRow{AttemptID: attemptID, Outcome: obs.Outcome}
	res, err := g.engine.Do(ctx, aggregates.Tx{
		Tenant: tenant,
		Refs:   refs,
		Decide: func(s []aggregates.State) ([][]kernel.Event, *kernel.Refusal) {
			op := s[0].(*kernel.Operation)
			claim := kernel.DecideClaim(op, g.executor+"/"+source)
			if claim.Refusal != nil {
				return nil, claim.Refusal
			}
			gen := op.Generation + 1
			out, refusal := settleEvents(op, s, attemptID, gen, obs, source, func(h []kernel.GuaranteeHold) kernel.Controls {
				c := kernel.Controls{Authority: "reconciliation", Executor: g.executor, Generation: gen, Guarantees: h}
				if cp, ok := g.cfg.Capability(op.CapabilityID); ok {
					c.CapabilityVersion, c.Risk, c.PolicyDigest = cp.Version, cp.Risk, cp.compiledPolicy().Digest()
				}
				return c
			}, bs)
			if refusal != nil || countEvents(out) == 0 {
				return out, refusal
			}
			out[0] = append(append([]kernel.Event(nil), claim.Events...), out[0]...)
			return out, nil
		},
		Done: func(s []aggregates.State) { row.Status = s[0].(*kernel.Operation).Status() },
	})
	if err != nil {
		row.Code, row.Reason = kernel.CodeContention, err.Error()
		return row
	}
	if res.Refusal != nil {
		row.Code, row.Reason = res.Refusal.Code, res.Refusal.Reason
	}
	return row
}

// reconcileGrace is how long after its dispatch-start an attempt that was
// never observed is left to its executor: the provider call may still be in
// flight, and a query then could report an absence that is about to end.
func (g *Gateway) reconcileGrace(cp *CapabilityConfig) time.Duration {
	if cp == nil || cp.Adapter != "http" {
		return time.Second
	}
	return 2*cp.HTTP.Timeout.Duration + time.Second
}

func (g *Gateway) opReconcile(ctx context.Context, tenant, operator string, req OpRequest) OpReply {
	var targets []string
	if req.AttemptID != "" {
		targets = []string{req.AttemptID}
	} else if req.All {
		for _, oe := range g.index.unresolved() {
			if oe.tenant == tenant {
				a, _ := oe.op.Current()
				targets = append(targets, a.AttemptID)
			}
		}
	} else {
		return opRefused(kernel.CodeRequestMalformed, "name attempt_id or set all")
	}
	reply := OpReply{OK: true}
	for _, id := range targets {
		reply.Settled = append(reply.Settled, g.reconcileOne(ctx, tenant, id, "reconcile:"+operator))
	}
	return reply
}

// reconcileOne queries the provider about one attempt and records the
// answer. Unstarted attempts are left alone here (close them instead);
// started ones without an observation wait out the grace period.
func (g *Gateway) reconcileOne(ctx context.Context, tenant, attemptID, source string) SettleRow {
	oe, ok := g.index.operationOf(attemptID)
	if !ok || oe.tenant != tenant {
		return SettleRow{AttemptID: attemptID, Code: kernel.CodeAttemptUnknown, Reason: "no operation holds this attempt"}
	}
	var att kernel.OpAttempt
	for _, a := range oe.op.Attempts {
		if a.AttemptID == attemptID {
			att = a
		}
	}
	if oe.op.Refusal != nil || att.Outcome.Definitive() || att.Closed {
		return SettleRow{AttemptID: attemptID, Status: oe.op.Status(), Reason: "already resolved"}
	}
	if !att.Started {
		return SettleRow{AttemptID: attemptID, Code: kernel.CodeNotStarted, Reason: "dispatch never started: nothing to reconcile; close-attempt releases it"}
	}
	cp, _ := g.cfg.Capability(oe.op.CapabilityID)
	if att.Outcome == "" {
		if since := g.clock.Now().Sub(oe.startedAt[attemptID]); since < g.reconcileGrace(cp) {
			return SettleRow{AttemptID: attemptID, Code: kernel.CodeDispatchActive,
				Reason: fmt.Sprintf("dispatch started %s ago; the provider call may be in flight (grace %s)", since.Round(time.Millisecond), g.reconcileGrace(cp))}
		}
	}
	if cp == nil {
		return SettleRow{AttemptID: attemptID, Code: kernel.CodeCapabilityNotSurfaced, Reason: "capability no longer in the manifest"}
	}
	obs := g.adapter(cp).Query(ctx, attemptID)
	if !obs.Outcome.Definitive() && att.Outcome == obs.Outcome {
		return SettleRow{AttemptID: attemptID, Outcome: obs.Outcome, Status: oe.op.Status(), Reason: "provider reports no change"}
	}
	return g.settleAttempt(ctx, tenant, attemptID, source, obs)
}

func (g *Gateway) opClose(ctx context.Context, tenant, operator string, req OpRequest) OpReply {
	if req.AttemptID == "" {
		return opRefused(kernel.CodeRequestMalformed, "attempt_id is required")
	}
	reason := req.Reason
	if reason == "" {
		reason = "closed by operator " + operator
	}
	_, refs, _, err := g.opTarget(tenant, req.AttemptID)
	if err != nil {
		// An attempt no operation knows: tombstone it on the named ledger
		// so that a late reservation for it is refused.
		if req.GuaranteeID == "" || req.Resource == "" {
			return opRefused(kernel.CodeAttemptUnknown, "attempt %s is unknown; name guarantee_id and resource to tombstone it", req.AttemptID)
		}
		res, bal, err := g.engine.Exposure(ctx, tenant, req.GuaranteeID, req.Resource, kernel.Close{AttemptID: req.AttemptID, Reason: reason})
		if err != nil {
			return opRefused(kernel.CodeContention, "%v", err)
		}
		if res.Refusal != nil {
			return OpReply{Code: res.Refusal.Code, Reason: res.Refusal.Reason}
		}
		return OpReply{OK: true, Exposure: []ExposureRow{{Tenant: tenant, GuaranteeID: req.GuaranteeID, Resource: req.Resource, Balance: bal}}}
	}
	res, err := g.engine.Do(ctx, aggregates.Tx{
		Tenant: tenant,
		Refs:   refs,
		Decide: func(s []aggregates.State) ([][]kernel.Event, *kernel.Refusal) {
			op := s[0].(*kernel.Operation)
			out := make([][]kernel.Event, len(s))
			for i := 1; i < len(s); i++ {
				d := kernel.DecideExposure(s[i].(*kernel.Ledger), kernel.Close{AttemptID: req.AttemptID, Reason: reason})
				if d.Refusal != nil {
					return nil, d.Refusal
				}
				out[i] = d.Events
			}
			claim := kernel.DecideClaim(op, g.executor+"/close:"+operator)
			if claim.Refusal != nil {
				return nil, claim.Refusal
			}
			out[0] = append(claim.Events, kernel.OperationClosed{AttemptID: req.AttemptID, Reason: reason})
			return out, nil
		},
	})
	if err != nil {
		return opRefused(kernel.CodeContention, "%v", err)
	}
	if res.Refusal != nil {
		return OpReply{Code: res.Refusal.Code, Reason: res.Refusal.Reason}
	}
	return OpReply{OK: true, Settled: []SettleRow{{AttemptID: req.AttemptID, Status: kernel.StatusNotApplied, Reason: reason}}}
}

func (g *Gateway) opAssertAbsence(ctx context.Context, tenant, operator string, req OpRequest) OpReply {
	if req.AttemptID == "" || req.ArtifactRef == "" {
		return opRefused(kernel.CodeRequestMalformed, "attempt_id and artifact_ref are required")
	}
	_, refs, _, err := g.opTarget(tenant, req.AttemptID)
	if err != nil {
		return opRefused(kernel.CodeAttemptUnknown, "attempt %s: %v", req.AttemptID, err)
	}
	res, err := g.engine.Do(ctx, aggregates.Tx{
		Tenant: tenant,
		Refs:   refs,
		Decide: func(s []aggregates.State) ([][]kernel.Event, *kernel.Refusal) {
			op := s[0].(*kernel.Operation)
			out := make([][]kernel.Event, len(s))
			for i := 1; i < len(s); i++ {
				d := kernel.DecideExposure(s[i].(*kernel.Ledger), kernel.AssertAbsence{AttemptID: req.AttemptID, Operator: operator, ArtifactRef: req.ArtifactRef})
				if d.Refusal != nil {
					return nil, d.Refusal
				}
				out[i] = d.Events
			}
			claim := kernel.DecideClaim(op, g.executor+"/assert:"+operator)
			if claim.Refusal != nil {
				return nil, claim.Refusal
			}
			out[0] = append(claim.Events, kernel.OperationObserved{AttemptID: req.AttemptID, Generation: op.Generation + 1,
				Outcome: kernel.OutcomeNotApplied, Source: "assertion:" + operator + ":" + req.ArtifactRef})
			return out, nil
		},
	})
	if err != nil {
		return opRefused(kernel.CodeContention, "%v", err)
	}
	if res.Refusal != nil {
		return OpReply{Code: res.Refusal.Code, Reason: res.Refusal.Reason}
	}
	return OpReply{OK: true, Settled: []SettleRow{{AttemptID: req.AttemptID, Outcome: kernel.OutcomeNotApplied, Status: kernel.StatusNotApplied,
		Reason: "absence asserted by " + operator + " with " + req.ArtifactRef}}}
}

func (g *Gateway) opKillSwitch(ctx context.Context, tenant, operator string, req OpRequest) OpReply {
	if req.Engaged == nil {
		v := g.index.killEngaged(tenant)
		return OpReply{OK: true, KillSwitch: &v}
	}
	subject, err := events.Subject(tenant, "control")
	if err != nil {
		return opRefused(kernel.CodeRequestMalformed, "%v", err)
	}
	engaged := *req.Engaged
	_, err = g.engine.Do(ctx, aggregates.Tx{Tenant: tenant, Refs: []aggregates.Ref{{Subject: subject, New: func() aggregates.State { return &kernel.Control{} }}},
		Decide: func(s []aggregates.State) ([][]kernel.Event, *kernel.Refusal) {
			if s[0].(*kernel.Control).Engaged == engaged {
				return nil, nil
			}
			return [][]kernel.Event{{kernel.KillSwitchSet{Engaged: engaged, Operator: operator, Reason: req.Reason}}}, nil
		}})
	if err != nil {
		return opRefused(kernel.CodeContention, "%v", err)
	}
	g.setKill(tenant, engaged)
	return OpReply{OK: true, KillSwitch: &engaged}
}

func (g *Gateway) setKill(tenant string, engaged bool) {
	g.mu.Lock()
	g.kill[tenant] = engaged
	g.mu.Unlock()
}
