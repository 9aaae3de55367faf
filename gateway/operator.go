package gateway

import (
	"context"

	"github.com/contextos/ledger/aggregates"
	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
)

// recordOperatorRefusal appends ev on its operator's refusal subject,
// ctx.ev.<tenant>.refusal.<operator> (operators and agents of a tenant
// never share an id). Only configured operators reach it, through their
// own NATS user and the tenant's bounded operator lane.
func (g *Gateway) recordOperatorRefusal(ctx context.Context, tenant string, ev kernel.OperatorRefused) {
	subject, err := codec.Subject(tenant, "refusal", ev.Operator)
	if err == nil {
		var l *kernel.RefusalLog
		var d kernel.Decision
		ref := aggregates.Ref{Subject: subject, New: func() aggregates.State { return &kernel.RefusalLog{} }}
		_, err = g.engine.Do(ctx, aggregates.Tx{Tenant: tenant, Bind: []aggregates.Binding{aggregates.Bind(ref, &l, &d.Events)},
			Decide: func() *kernel.Refusal { d = kernel.DecideRecordOperatorRefusal(l, ev); return d.Refusal }})
	}
	if err != nil {
		g.log.Error("operator refusal could not be recorded", "tenant", tenant, "operator", ev.Operator, "verb", ev.Verb, "code", ev.Code, "err", err)
	}
}

// requestRef is the subject of a two-person request.
func requestRef(tenant, requestID string) (aggregates.Ref, error) {
	subject, err := codec.Subject(tenant, "oprequest", requestID)
	return aggregates.Ref{Subject: subject, New: func() aggregates.State { return &kernel.OperatorRequest{} }}, err
}

// holdForSecond records an action the tenant's two-person rule holds for a
// second operator, and answers second_operator_required with the request's
// id; held is false when it could not be recorded (the reply is then an
// ordinary refusal).
func (g *Gateway) holdForSecond(ctx context.Context, tenant, operator, verb string, scope kernel.Scope, body []byte) (reply wire.OpReply, held bool) {
	id := g.ids.New()
	ref, err := requestRef(tenant, id)
	if err != nil {
		return wire.Refused(wire.CodeRequestMalformed, "%v", err), false
	}
	tc, _ := g.cfg.Tenant(tenant)
	cmd := kernel.RequestOperatorAction{RequestID: id, Operator: operator, Verb: verb, Scope: scope, Body: body, Now: g.clock.Now()}
	if tc != nil {
		cmd.TTL = tc.OperatorPolicy().RequestTTL
	}
	var q *kernel.OperatorRequest
	var d kernel.Decision
	res, err := g.engine.Do(ctx, aggregates.Tx{Tenant: tenant, Bind: []aggregates.Binding{aggregates.Bind(ref, &q, &d.Events)},
		Decide: func() *kernel.Refusal { d = kernel.DecideOperatorRequest(q, cmd); return d.Refusal }})
	if err != nil {
		return wire.Refused(wire.CodeLedgerUnavailable, "%v", err), false
	}
	if res.Refusal != nil {
		return wire.OpReply{Code: res.Refusal.Code, Reason: res.Refusal.Reason}, false
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
	ref, err := requestRef(tc.ID, req.RequestID)
	if err != nil {
		return wire.Refused(wire.CodeRequestMalformed, "request_id: %v", err)
	}
	cmd := kernel.Confirm{RequestID: req.RequestID, Operator: operator, Scopes: tc.OperatorScopes(operator), Now: g.clock.Now()}
	var q *kernel.OperatorRequest
	var d kernel.Decision
	var held kernel.OperatorRequested
	res, err := g.engine.Do(ctx, aggregates.Tx{Tenant: tc.ID, Bind: []aggregates.Binding{aggregates.Bind(ref, &q, &d.Events)},
		Decide: func() *kernel.Refusal {
			d = kernel.DecideConfirm(q, cmd)
			if d.Refusal == nil {
				held = *q.Request
			}
			return d.Refusal
		}})
	if err != nil {
		return wire.Refused(wire.CodeLedgerUnavailable, "%v", err)
	}
	if res.Refusal != nil {
		return wire.OpReply{Code: res.Refusal.Code, Reason: res.Refusal.Reason}
	}
	g.log.Warn("operator request confirmed", "tenant", tc.ID, "operator", operator, "requester", held.Operator, "verb", held.Verb, "request", req.RequestID)
	return g.dispatchOp(ctx, tc.ID, held.Verb, held.Operator, []byte(held.Body))
}
