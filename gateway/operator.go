package gateway

import (
	"context"

	"github.com/contextos/ledger/aggregates"
	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
)

// recordOperatorRefusal appends ev on its operator's refusal subject,
// ctx.ev.<tenant>.refusal.<operator> (operators and agents of a tenant
// never share an id). Only configured operators reach it, through their
// own NATS user and the tenant's bounded operator lane.
func (g *Gateway) recordOperatorRefusal(ctx context.Context, tenant string, ev kernel.OperatorRefused) {
	_, err := g.engine.Run(ctx, tenant, kernel.VerbStep(kernel.KeyRefusals(ev.Operator), func(l *kernel.RefusalLog) (kernel.Decision, any) {
		return kernel.DecideRecordOperatorRefusal(l, ev), nil
	}))
	if err != nil {
		g.log.Error("operator refusal could not be recorded", "tenant", tenant, "operator", ev.Operator, "verb", ev.Verb, "code", ev.Code, "err", err)
	}
}

// holdForSecond records an action the tenant's two-person rule holds for a
// second operator, and answers second_operator_required with the request's
// id; held is false when it could not be recorded (the reply is then an
// ordinary refusal).
func (g *Gateway) holdForSecond(ctx context.Context, tenant, operator, verb string, scope kernel.Scope, body []byte) (reply wire.OpReply, held bool) {
	id := g.ids.New()
	if _, err := aggregates.RefOf(tenant, kernel.KeyOperatorRequest(id)); err != nil {
		return wire.Refused(wire.CodeRequestMalformed, "%v", err), false
	}
	tc, _ := g.cfg.Tenant(tenant)
	cmd := kernel.RequestOperatorAction{RequestID: id, Operator: operator, Verb: verb, Scope: scope, Body: body, Now: g.clock.Now()}
	if tc != nil {
		cmd.TTL = tc.OperatorPolicy().RequestTTL
	}
	eff, err := g.engine.Run(ctx, tenant, kernel.VerbStep(kernel.KeyOperatorRequest(id), func(q *kernel.OperatorRequest) (kernel.Decision, any) {
		return kernel.DecideOperatorRequest(q, cmd), nil
	}))
	if err != nil {
		return storeRefusal(err), false
	}
	if eff.Refusal != nil {
		return wire.OpReply{Code: eff.Refusal.Code, Reason: eff.Refusal.Reason}, false
	}
	g.log.Warn("operator action held for a second operator", "tenant", tenant, "operator", operator, "verb", verb, "request", id)
	r := kernel.SecondOperatorRequired(verb, scope, id)
	return wire.OpReply{Code: r.Code, Reason: r.Reason, Data: map[string]any{"request_id": id}}, true
}

// opConfirm is a second operator's confirmation: kernel.DecideConfirm
// records it on the request's subject (once: the append is guarded by the
// sequence it read), then the action is carried out as its requester asked
// it.
func (g *Gateway) opConfirm(ctx context.Context, tc *config.TenantConfig, operator string, body []byte) wire.OpReply {
	var req wire.ConfirmRequest
	if r := decodeOp(body, &req); r != nil {
		return *r
	}
	if r := kernel.CheckConfirmRequest(req); r != nil {
		return wire.OpReply{Code: r.Code, Reason: r.Reason}
	}
	if _, err := aggregates.RefOf(tc.ID, kernel.KeyOperatorRequest(req.RequestID)); err != nil {
		return wire.Refused(wire.CodeRequestMalformed, "request_id: %v", err)
	}
	cmd := kernel.Confirm{RequestID: req.RequestID, Operator: operator, Scopes: tc.OperatorScopes(operator), Now: g.clock.Now()}
	eff, err := g.engine.Run(ctx, tc.ID, kernel.VerbStep(kernel.KeyOperatorRequest(req.RequestID), func(q *kernel.OperatorRequest) (kernel.Decision, any) {
		d := kernel.DecideConfirm(q, cmd)
		if d.Refusal != nil {
			return d, nil
		}
		return d, *q.Request
	}))
	if err != nil {
		return storeRefusal(err)
	}
	if eff.Refusal != nil {
		return wire.OpReply{Code: eff.Refusal.Code, Reason: eff.Refusal.Reason}
	}
	held := eff.Reply.Data.(kernel.OperatorRequested)
	g.log.Warn("operator request confirmed", "tenant", tc.ID, "operator", operator, "requester", held.Operator, "verb", held.Verb, "request", req.RequestID)
	return g.dispatchOp(ctx, tc.ID, held.Verb, held.Operator, []byte(held.Body))
}
