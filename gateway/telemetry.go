package gateway

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/projections"
	"github.com/contextos/ledger/wire"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// tracerName is the instrumentation scope of the runtime's spans.
const tracerName = "github.com/contextos/ledger/gateway"

// telemetry is what the request path reports through: the log, the
// metrics and the tracer. It wraps the command handlers (proposals,
// operator verbs, the reconciler, adapters, the engine's store) from
// outside; the kernel and the decisions know nothing of it. A nil
// *telemetry does nothing, so a Gateway built without one still works.
type telemetry struct {
	log     *slog.Logger
	tracer  trace.Tracer
	m       *metrics
	cfg     *config.Config
	logArgs bool
}

func newTelemetry(cfg *config.Config, log *slog.Logger, tp trace.TracerProvider) *telemetry {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return &telemetry{log: log, tracer: tp.Tracer(tracerName), m: newMetrics(), cfg: cfg, logArgs: cfg.Runtime.LogArguments}
}

// Stages of a proposal, the values of the stage latency histogram's label.
type stage string

const (
	stageDecode   stage = "decode"   // parse and bind the proposal
	stageDecide   stage = "decide"   // the reserve transaction: decision, signature, durable append
	stageAppend   stage = "append"   // one store append (a group commit), whoever asked for it
	stageProvider stage = "provider" // one provider call (dispatch or query)
	stageSettle   stage = "settle"   // the settle transaction
)

// spanNames are the span of each stage in a proposal's trace.
var spanNames = map[stage]string{stageDecode: "decode", stageDecide: "reserve", stageSettle: "settle"}

// note is what the decorators learn about one request while the handler
// runs: the capability it named and what the provider said. It lives in
// the request's context.
type note struct {
	start  time.Time
	tenant string // the tenant of a proposal; "" for other requests

	mu         sync.Mutex
	capability string
	failures   map[string]Observation // attempt id -> last failed provider observation
}

type noteKey struct{}

func withNote(ctx context.Context) (context.Context, *note) {
	n := &note{start: time.Now()}
	return context.WithValue(ctx, noteKey{}, n), n
}

func noteOf(ctx context.Context) *note {
	n, _ := ctx.Value(noteKey{}).(*note)
	return n
}

func (n *note) failed(attemptID string, obs Observation) {
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.failures == nil {
		n.failures = map[string]Observation{}
	}
	n.failures[attemptID] = obs
}

func (n *note) failure(attemptID string) (Observation, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	o, ok := n.failures[attemptID]
	return o, ok
}

// decoded is called by Propose once the body is parsed: it ends the decode
// stage and names the capability for the decision's log line and labels.
func (t *telemetry) decoded(ctx context.Context, capabilityID string) {
	if t == nil {
		return
	}
	n := noteOf(ctx)
	if n == nil {
		return
	}
	n.mu.Lock()
	n.capability = capabilityID
	n.mu.Unlock()
	d := time.Since(n.start)
	t.m.stages.WithLabelValues(string(stageDecode)).Observe(d.Seconds())
	_, span := t.tracer.Start(ctx, spanNames[stageDecode], trace.WithTimestamp(n.start))
	span.End()
}

// stage starts a stage of the request in ctx; the returned function ends
// it (its span and its latency observation).
func (t *telemetry) stage(ctx context.Context, s stage) func() {
	if t == nil {
		return func() {}
	}
	start := time.Now()
	_, span := t.tracer.Start(ctx, spanNames[s])
	return func() {
		t.m.stages.WithLabelValues(string(s)).Observe(time.Since(start).Seconds())
		span.End()
	}
}

// capLabel is a capability id fit for a metric label: configured ids are
// bounded by the configuration; anything else an agent named is one value.
func (t *telemetry) capLabel(id string) string {
	if _, ok := t.cfg.Capability(id); ok {
		return id
	}
	if id == "" {
		return "none"
	}
	return "unsurfaced"
}

func (t *telemetry) tenantLabel(id string) string {
	if _, ok := t.cfg.Tenant(id); ok {
		return id
	}
	return "unknown"
}

// natsCarrier reads and writes W3C trace context in NATS headers, whose
// keys are case-sensitive (unlike HTTP's): "traceparent" is looked up as
// sent, then case-insensitively.
type natsCarrier nats.Header

func (c natsCarrier) Get(key string) string {
	if v := nats.Header(c).Get(key); v != "" {
		return v
	}
	for k, vs := range c {
		if strings.EqualFold(k, key) && len(vs) > 0 {
			return vs[0]
		}
	}
	return ""
}

func (c natsCarrier) Set(key, value string) { nats.Header(c).Set(key, value) }

func (c natsCarrier) Keys() []string {
	out := make([]string, 0, len(c))
	for k := range c {
		out = append(out, k)
	}
	return out
}

// natsTrace carries the trace context of a NATS message's headers.
func natsTrace(hdr nats.Header) propagation.TextMapCarrier {
	if hdr == nil {
		return nil
	}
	return natsCarrier(hdr)
}

// ProposeObserved is Propose as the admission path (Admit) calls it: inside
// the proposal's trace (continuing the W3C trace context the agent sent in
// carrier, its NATS or HTTP headers; nil for none), then the decision is
// logged and counted and, when the provider failed, the reply says why.
func (g *Gateway) ProposeObserved(ctx context.Context, tenant, principal string, carrier propagation.TextMapCarrier, body []byte) wire.Reply {
	t := g.tel
	if t == nil {
		return g.Propose(ctx, tenant, principal, body)
	}
	if carrier != nil {
		ctx = propagation.TraceContext{}.Extract(ctx, carrier)
	}
	ctx, span := t.tracer.Start(ctx, "propose", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("tenant", tenant), attribute.String("principal", principal)))
	defer span.End()
	ctx, n := withNote(ctx)
	n.tenant = tenant
	reply := g.Propose(ctx, tenant, principal, body)
	d := time.Since(n.start)
	n.mu.Lock()
	capID := n.capability
	n.mu.Unlock()
	capLabel := t.capLabel(capID)
	t.m.decisions.WithLabelValues(t.tenantLabel(tenant), capLabel, string(reply.Status), string(reply.Code)).Inc()
	t.m.proposals.Observe(d.Seconds())
	span.SetAttributes(attribute.String("capability", capLabel), attribute.String("status", string(reply.Status)),
		attribute.String("code", string(reply.Code)), attribute.String("operation_id", reply.OperationID),
		attribute.String("attempt_id", reply.AttemptID), attribute.String("action_digest", reply.ActionDigest))
	if reply.Status == wire.StatusUnknown {
		span.SetStatus(codes.Error, reply.Reason)
	}
	attrs := []any{"tenant", tenant, "principal", principal, "capability", capLabel, "status", reply.Status, "code", reply.Code,
		"operation", reply.OperationID, "attempt", reply.AttemptID, "duration_ms", float64(d.Microseconds()) / 1000}
	if reply.Reason != "" {
		attrs = append(attrs, "reason", reply.Reason)
	}
	if sc := span.SpanContext(); sc.HasTraceID() {
		attrs = append(attrs, "trace_id", sc.TraceID().String())
	}
	if t.logArgs {
		if p, r := ParseProposal(body); r == nil {
			attrs = append(attrs, "arguments", json.RawMessage(p.Arguments))
		}
	}
	t.log.Info("decision", attrs...)
	return reply
}

// readVerbs are operator verbs that change nothing: logged at debug.
var readVerbs = map[string]bool{"exposure": true, "attempts": true, wire.VerbApprovals: true, wire.VerbIncidents: true, wire.VerbDecisions: true}

// observeOp runs an operator verb, logs it (actions at info, reads at
// debug, the kill switch always at warn) and counts it.
func (g *Gateway) observeOp(ctx context.Context, tenant, verb, operator string, body []byte) wire.OpReply {
	t := g.tel
	if t == nil {
		return g.Op(ctx, tenant, verb, operator, body)
	}
	ctx, span := t.tracer.Start(ctx, "op "+g.verbLabel(verb), trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("tenant", tenant), attribute.String("operator", operator)))
	defer span.End()
	ctx, n := withNote(ctx)
	out := g.Op(ctx, tenant, verb, operator, body)
	if verb == "reconcile" {
		g.explainSettled(n, out.Settled)
	}
	result := "ok"
	if !out.OK {
		result = "refused"
	}
	label := g.verbLabel(verb)
	t.m.opActions.WithLabelValues(t.tenantLabel(tenant), label, result).Inc()
	attrs := []any{"tenant", tenant, "operator", operator, "verb", label, "ok", out.OK, "duration_ms", float64(time.Since(n.start).Microseconds()) / 1000}
	if out.Code != "" {
		attrs = append(attrs, "code", out.Code, "reason", out.Reason)
	}
	level := slog.LevelInfo
	if readVerbs[verb] {
		level = slog.LevelDebug
	}
	if verb == "kill-switch" && out.OK {
		var req wire.OpRequest
		if kernel.DecodeRequest(body, &req) == nil && req.Engaged != nil {
			level = slog.LevelWarn
			attrs = append(attrs, "engaged", *req.Engaged, "why", req.Reason)
		} else {
			level = slog.LevelDebug
		}
	}
	if verb == "reconcile" {
		for _, row := range out.Settled {
			t.logSettle(tenant, "reconcile:"+operator, row)
		}
	}
	t.log.Log(ctx, level, "operator action", attrs...)
	return out
}

func (g *Gateway) verbLabel(verb string) string {
	for _, v := range OpVerbs {
		if v == verb {
			return verb
		}
	}
	if _, ok := g.extraOps[verb]; ok {
		return verb
	}
	return "unknown"
}

// explainSettled gives a reconcile row whose query failed the provider's
// reason instead of a silence that reads as an answer.
func (g *Gateway) explainSettled(n *note, rows []wire.SettleRow) {
	for i := range rows {
		obs, ok := n.failure(rows[i].AttemptID)
		if !ok {
			continue
		}
		if rows[i].Reason == "" || rows[i].Reason == "provider reports no change" {
			rows[i].Reason = obs.Ref
		}
	}
}

// logSettle logs what reconciliation did to one attempt.
func (t *telemetry) logSettle(tenant, source string, row wire.SettleRow) {
	result := "settled"
	switch {
	case row.Code == wire.CodeDispatchActive:
		result = "waiting"
	case row.Code != "":
		result = "refused"
	case strings.HasPrefix(row.Reason, "provider "):
		result = "provider_failed"
	}
	t.m.reconciled.WithLabelValues(result).Inc()
	level := slog.LevelInfo
	if result == "provider_failed" || result == "refused" {
		level = slog.LevelWarn
	}
	t.log.Log(context.Background(), level, "reconciled", "tenant", tenant, "source", source, "attempt", row.AttemptID,
		"outcome", row.Outcome, "status", row.Status, "code", row.Code, "reason", row.Reason, "result", result)
}

// reconcileObserved is one background reconciler pass, logged and counted.
func (g *Gateway) reconcileObserved(ctx context.Context) []wire.SettleRow {
	t := g.tel
	if t == nil {
		return g.ReconcileOnce(ctx)
	}
	ctx, span := t.tracer.Start(ctx, "reconcile")
	defer span.End()
	ctx, n := withNote(ctx)
	rows := g.ReconcileOnce(ctx)
	g.explainSettled(n, rows)
	t.m.reconcileRuns.Inc()
	for _, row := range rows {
		oe, _ := g.index.operationOf(row.AttemptID)
		t.logSettle(oe.tenant, "reconciler", row)
	}
	t.log.Debug("reconciler pass", "attempts", len(rows), "duration_ms", float64(time.Since(n.start).Microseconds())/1000)
	return rows
}

// observedAdapter is an adapter wrapped with the provider stage: a span,
// a latency observation, call and error counters, a warning with the reason
// of each failure, and the failure noted for the reply.
type observedAdapter struct {
	a     Adapter
	capID string
	t     *telemetry
}

func (o observedAdapter) Dispatch(ctx context.Context, attemptID string, args json.RawMessage) Observation {
	return o.call(ctx, "dispatch", attemptID, func(ctx context.Context) Observation { return o.a.Dispatch(ctx, attemptID, args) })
}

func (o observedAdapter) Query(ctx context.Context, attemptID string) Observation {
	return o.call(ctx, "query", attemptID, func(ctx context.Context) Observation { return o.a.Query(ctx, attemptID) })
}

func (o observedAdapter) call(ctx context.Context, call, attemptID string, fn func(context.Context) Observation) Observation {
	ctx, span := o.t.tracer.Start(ctx, call, trace.WithAttributes(attribute.String("capability", o.capID), attribute.String("attempt_id", attemptID)))
	defer span.End()
	start := time.Now()
	obs := fn(ctx)
	d := time.Since(start)
	o.t.m.stages.WithLabelValues(string(stageProvider)).Observe(d.Seconds())
	o.t.m.providerCalls.WithLabelValues(o.capID, call, string(obs.Outcome)).Inc()
	span.SetAttributes(attribute.String("outcome", string(obs.Outcome)))
	if obs.Failure == "" {
		return obs
	}
	span.SetStatus(codes.Error, obs.Ref)
	o.t.m.providerErrors.WithLabelValues(o.capID, obs.Failure).Inc()
	noteOf(ctx).failed(attemptID, obs)
	o.t.log.Warn("provider error", "capability", o.capID, "call", call, "attempt", attemptID, "kind", obs.Failure,
		"reason", obs.Ref, "duration_ms", float64(d.Microseconds())/1000)
	return obs
}

// instrument wraps the gateway's adapters and its engine's store with t.
// Call before Start.
func (g *Gateway) instrument(t *telemetry) {
	g.tel = t
	for id, a := range g.adapters {
		g.adapters[id] = observedAdapter{a: a, capID: id, t: t}
	}
	g.engine.Store = meteredStore{Store: g.engine.Store, t: t}
	eng := g.engine
	t.m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "contextos_store_append_busy_seconds_total",
		Help: "Time during which at least one of the engine's appends was in flight; a rate near 1 means the store's append cost bounds the request path."},
		func() float64 { return eng.Stats().AppendBusy.Seconds() }))
	t.m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "contextos_engine_warm_subjects",
		Help: "Subjects whose decided state the engine holds in memory (at most 100,000 idle ones are kept)."},
		func() float64 { return float64(eng.Stats().Warm) }))
	if g.own != nil {
		g.own.register(t.m.reg)
	}
}

// Instrument gives the gateway its telemetry: metrics, logs to log, and
// spans to tp (nil: none). It returns the registry the metrics are in,
// which the composition root serves. Call it once, after New and before
// Start.
func (g *Gateway) Instrument(log *slog.Logger, tp trace.TracerProvider) *prometheus.Registry {
	g.instrument(newTelemetry(g.cfg, log, tp))
	return g.tel.m.reg
}

// WatchState registers the scrape-time metrics over the projections of svc,
// the event stream's head (streamSeq) and the gateway's switches in the
// registry Instrument returned. Call it once the projections run.
func (g *Gateway) WatchState(svc *projections.Service, streamSeq func(context.Context) (uint64, error)) {
	tenants := g.cfg.TenantIDs()
	g.tel.m.reg.MustRegister(&stateSource{tenants: tenants, view: svc.View, audit: svc.Projectors, streamSeq: streamSeq,
		holds: g.openHolds, killed: g.index.killEngaged, breakers: g.breakerStates, proposing: g.Proposing,
		storeFree: g.StoreSpace, minFree: g.cfg.Runtime.MinFreeBytes,
		resourceSeries: g.cfg.Runtime.MetricsResourceSeries, now: g.clock.Now})
}
