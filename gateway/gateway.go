package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/contextos/ledger/aggregates"
	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/projections"
	"github.com/contextos/ledger/wire"
	"github.com/nats-io/nats.go"
)

// Gateway is the request path: it serves proposals and operator verbs over
// NATS and runs every decision through the kernel via the aggregates engine.
type Gateway struct {
	cfg          *config.Config
	store        events.Store
	engine       *aggregates.Engine
	ids          *aggregates.IDs
	clock        aggregates.Clock
	executor     string
	policyDigest string
	loadedAt     time.Time // when the configuration was loaded: its snapshots' observed_at (compile.go)
	log          *slog.Logger
	hooks        Hooks
	tel          *telemetry // logs, metrics, traces around the handlers; nil: none
	brk          *breakers  // circuit breakers (breaker.go); nil: none

	adapters map[string]Adapter
	model    *projections.Model
	index    readModel
	inflight inflight
	seen     sightings
	auths    authorities // each tenant's authority as last read
	extraOps map[string]OpHandler
	// witnesses is the witnesses' state the proposal step reads
	// (WatchWitnesses; guarded by mu).
	witnesses WitnessView
	wwatch    *witnessWatch // the witnesses' answers (telemetry_witness.go; set under mu)

	mu      sync.RWMutex
	pins    map[string]pinned      // tenant/guarantee
	man     *kernel.Manifest       // the configuration and pins as the kernel reads them; nil: build again (manifest)
	lanes   map[string]*tenantLane // each tenant's lane (Serve), every door's
	subs    []*nats.Subscription
	conns   []*nats.Conn    // the serving connections (Serve)
	closed  []chan struct{} // each of conns' closing, in order
	quiesce sync.Once
	replies *nats.Conn // publishes replies; nil: the serving connection
	own     *owners    // which replica serves which tenants (owners.go); nil: this one serves all

	overloaded  atomic.Uint64 // requests refused overloaded
	rateLimited atomic.Uint64 // proposals refused rate_limited
	badReplies  atomic.Uint64 // requests not answered: their reply subject is outside the requester's inbox
	proposing   atomic.Int64  // proposals admitted (by any door) and not answered yet (queued or being handled)
	maxPayload  atomic.Int64  // the server's max_payload, as the serving connection read it; 0: not serving
	limiter     *limiter      // per-principal proposal rates
	refusals    *refusalSampler
	// flushed is closed when the refusal aggregates' last flush is done
	// (Start's context ended); Stop waits for it.
	flushed chan struct{}
	space   storeSpace // the store's free bytes, as the runtime measures them
}

// Hooks let tests and the chaos harness stop a process at exact points of
// the dispatch sequence. Nil functions do nothing.
type Hooks struct {
	AfterDispatchStart func(attemptID string)
	AfterProviderCall  func(attemptID string)
}

func (h Hooks) afterDispatchStart(id string) {
	if h.AfterDispatchStart != nil {
		h.AfterDispatchStart(id)
	}
}

func (h Hooks) afterProviderCall(id string) {
	if h.AfterProviderCall != nil {
		h.AfterProviderCall(id)
	}
}

// Options are the parts a Gateway is built from.
type Options struct {
	Config   *config.Config
	Store    events.Store
	Sealer   *aggregates.Sealer
	Executor string
	Logger   *slog.Logger
	Hooks    Hooks
	// Adapters overrides the adapter of a capability id (tests).
	Adapters map[string]Adapter
	// Model is the read model the operator verbs and the reconciler read;
	// nil makes one over Store.
	Model *projections.Model
	// Replies, when set, is the connection replies are published through:
	// one whose user may publish only to inboxes (ReplyUser), so that no
	// reply can land anywhere else even if replyAllowed let one through.
	Replies *nats.Conn
}

// New builds a gateway. Call Start to pin definitions and serve.
func New(o Options) *Gateway {
	g := &Gateway{
		cfg: o.Config, store: o.Store, engine: aggregates.NewEngine(o.Store, o.Sealer), ids: o.Sealer.IDs,
		clock: o.Sealer.Clock, executor: o.Executor, log: o.Logger, hooks: o.Hooks,
		adapters: map[string]Adapter{}, extraOps: map[string]OpHandler{}, pins: map[string]pinned{}, lanes: map[string]*tenantLane{},
		replies: o.Replies,
	}
	if g.log == nil {
		g.log = slog.Default()
	}
	g.model = o.Model
	if g.model == nil {
		g.model = projections.NewModel(projections.ModelConfig{Store: o.Store})
	}
	g.index = readModel{g.model}
	g.own = newOwners(g)
	g.mountIntegrity()
	g.mountGuardrails()
	lim := o.Config.Runtime.Limits
	_ = lim.Validate() // defaults for a Config not from ParseConfig
	g.limiter = newLimiter(o.Config, lim)
	g.refusals = newRefusalSampler(o.Config, lim.RefusalWindow.Duration)
	for i := range o.Config.Capabilities {
		cp := &o.Config.Capabilities[i]
		switch cp.Adapter {
		case "http":
			g.adapters[cp.ID] = NewHTTPAdapter(cp)
		case "mcp":
			g.adapters[cp.ID] = NewMCPAdapter(cp)
		default:
			g.adapters[cp.ID] = noopAdapter{}
		}
	}
	for id, a := range o.Adapters {
		g.adapters[id] = a
	}
	g.policyDigest, _ = kernel.Digest(o.Config.Capabilities)
	g.loadedAt = g.clock.Now().UTC()
	g.engine.OnContention = func(tenant string, subjects []string) {
		g.log.Warn("contention exhausted", "tenant", tenant, "subjects", strings.Join(subjects, ","))
	}
	return g
}

// OpHandler serves an operator verb mounted by another package (audit
// export, approvals).
type OpHandler func(ctx context.Context, tenant, operator string, body []byte) wire.OpReply

// Mount adds an operator verb.
func (g *Gateway) Mount(verb string, h OpHandler) { g.extraOps[verb] = h }

// Engine exposes the aggregates engine (recovery tools, tests).
func (g *Gateway) Engine() *aggregates.Engine { return g.engine }

func (g *Gateway) adapter(cp *config.CapabilityConfig) Adapter {
	if a, ok := g.adapters[cp.ID]; ok {
		return a
	}
	return noopAdapter{}
}

// configuredGrant says whether the configuration grants the capability to
// the principal as one of the tenant's agents: the configured fact
// kernel.CheckAuthority decides a grant from, with the operators' grants and
// revocations.
func configuredGrant(tc *config.TenantConfig, principal string, cp *config.CapabilityConfig) bool {
	agent, ok := tc.Agent(principal)
	return ok && slices.Contains(agent.Capabilities, cp.ID)
}

// refuseUnbound records a refusal that cannot be tied to an operation on the
// principal's refusal subject, and replies with it. Refusals of malformed
// and unsurfaced proposals are sampled (refusals.go): the first of each
// principal and code in a window is recorded at once, the others are
// counted and recorded as one aggregate at the window's end.
func (g *Gateway) refuseUnbound(ctx context.Context, tenant, principal string, body []byte, r *kernel.Refusal) wire.Reply {
	sum := sha256.Sum256(body)
	ev := kernel.ProposalRefused{Principal: principal, Code: r.Code, Reason: r.Reason, BodyDigest: hex.EncodeToString(sum[:]), BodyBytes: len(body)}
	g.recordUnbound(ctx, tenant, ev)
	return wire.Reply{Status: wire.StatusRefused, Code: r.Code, Reason: r.Reason}
}

// recordUnbound records ev, a refusal no operation records, on its
// principal's refusal subject, unless the refusal window only counts it.
func (g *Gateway) recordUnbound(ctx context.Context, tenant string, ev kernel.ProposalRefused) {
	if !g.refusals.sample(tenant, ev) {
		g.recordRefusal(ctx, tenant, ev)
	}
}

// recordRefusal appends ev on its principal's refusal subject.
func (g *Gateway) recordRefusal(ctx context.Context, tenant string, ev kernel.ProposalRefused) {
	_, err := g.engine.Run(ctx, tenant, kernel.VerbStep(kernel.KeyRefusals(ev.Principal), func(l *kernel.RefusalLog) (kernel.Decision, any) {
		return kernel.DecideRecordRefusal(l, ev), nil
	}))
	if err != nil {
		g.log.Error("refusal could not be recorded", "tenant", tenant, "principal", ev.Principal, "code", ev.Code, "err", err)
	}
}

// incident logs an incident and reports it to the read model, which lists
// it with the incidents the stream records (an executor fenced before it
// appended anything leaves no event).
func (g *Gateway) incident(tenant string, inc kernel.Incident) {
	g.log.Warn("incident", "tenant", tenant, "kind", inc.Kind, "attempt", inc.AttemptID, "code", inc.Code, "reason", inc.Reason)
	if inc.Code != wire.CodeExecutorFenced {
		return // the stream records it (exposure.incident): the model reads it there
	}
	in := wire.Incident{Kind: inc.Kind, AttemptID: inc.AttemptID, Code: inc.Code, Reason: inc.Reason, At: codec.FormatTime(g.clock.Now())}
	if e, ok := g.index.operationOf(inc.AttemptID); ok && e.tenant == tenant {
		in.OperationID = e.op.OperationID
	}
	g.model.Report(tenant, in)
}

// Model returns the read model the gateway reads.
func (g *Gateway) Model() *projections.Model { return g.model }

// Serve subscribes to each tenant's proposal and operator subjects on nc
// (the runtime's own connection). Replicas share the load through a queue
// group. Every request passes the one admission path (admission.go):
// identity, body bound, per-principal rate, then the tenant's lane (its
// agents' share and its operators' share, each LimitsConfig workers and a
// bounded queue); a request that finds its share full is answered
// overloaded before anything is stored. Subscription callbacks never wait, and their pending limits are
// set above what the lanes can queue, so the server has no reason to drop a
// message as a slow consumer.
//
// Each tenant's proposals arrive on a connection of their own (made with
// nc's options), and all operator verbs on another: one tenant's large or
// many messages then never queue in front of another tenant's, or of an
// operator's, in one TCP stream and one client read loop.
func (g *Gateway) Serve(ctx context.Context, nc *nats.Conn) error {
	lim := g.cfg.Runtime.Limits
	if err := lim.Validate(); err != nil { // a Config not from ParseConfig
		return err
	}
	g.maxPayload.Store(nc.MaxPayload())
	opsConn, err := g.connect(nc, "contextosd-ops")
	if err != nil {
		return err
	}
	for _, t := range g.cfg.Tenants {
		tenant := t.ID
		tenantConn, err := g.connect(nc, "contextosd-"+tenant)
		if err != nil {
			return err
		}
		proposals := newLane(ctx, lim.WorkersPerTenant(len(g.cfg.Tenants), g.cfg.Runtime.Workers), lim.TenantQueue)
		g.mu.Lock()
		g.lanes[tenant] = &tenantLane{agents: proposals, operators: newLane(ctx, lim.OperatorWorkers, lim.OperatorQueue)}
		g.mu.Unlock()
		if err := g.subscribe(tenantConn, "ctx.v1."+tenant+".*.propose", lim.TenantQueue, func(m *nats.Msg) {
			principal := strings.Split(m.Subject, ".")[3]
			if r := kernel.CheckReplySubject(m.Reply, tenant, principal); r != nil {
				// Transport: a reply subject outside the requester's inbox
				// is never answered; its refusal is recorded from the lane.
				if !proposals.offer(func() { g.refuseUnbound(ctx, tenant, principal, m.Data, r) }) {
					g.overloaded.Add(1)
				}
				g.badReplies.Add(1)
				return
			}
			g.admit(ctx, tenant, principal, natsTrace(m.Header), m.Data, func(r wire.Reply) { g.respond(m, r, tenant, verbPropose, principal) })
		}); err != nil {
			return err
		}
		// Compile requests share the proposals' admission: the same rate
		// tokens and the same lane.
		if err := g.subscribe(tenantConn, "ctx.v1."+tenant+".*.context", lim.TenantQueue, func(m *nats.Msg) {
			principal := strings.Split(m.Subject, ".")[3]
			if !wire.ReplyAllowed(m.Reply, tenant, principal) {
				g.badReplies.Add(1)
				return
			}
			g.admitContext(ctx, tenant, principal, m.Data, func(r wire.ContextReply) { g.respond(m, r, tenant, verbPropose, principal) })
		}); err != nil {
			return err
		}
		if err := g.subscribe(opsConn, "ctx.v1."+tenant+".ops.*.*", lim.OperatorQueue, func(m *nats.Msg) {
			tok := strings.Split(m.Subject, ".")
			verb, operator := tok[4], tok[5]
			if !wire.ReplyAllowed(m.Reply, tenant, operator) {
				g.log.Warn("operator request with a reply subject outside its inbox dropped", "tenant", tenant, "operator", operator)
				g.badReplies.Add(1)
				return
			}
			g.admitOp(ctx, tenant, verb, operator, m.Data, func(r wire.OpReply) { g.respond(m, r, tenant, verb, operator) })
		}); err != nil {
			return err
		}
	}
	if err := g.own.start(ctx, nc); err != nil {
		return err
	}
	for _, c := range g.conns {
		if err := c.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// ServingErr reports a serving connection that is not connected: a replica
// whose tenant or operator subscriptions are not back after a store outage
// cannot answer, however healthy the store is.
func (g *Gateway) ServingErr() error {
	for _, c := range g.conns {
		if !c.IsConnected() {
			return fmt.Errorf("serving connection %s is %s", c.Opts.Name, c.Status())
		}
	}
	return nil
}

// connect opens another connection with nc's options.
func (g *Gateway) connect(nc *nats.Conn, name string) (*nats.Conn, error) {
	o := nc.Opts
	o.Name = name
	closed, then := make(chan struct{}), o.ClosedCB
	o.ClosedCB = func(c *nats.Conn) {
		if then != nil {
			then(c)
		}
		close(closed)
	}
	c, err := o.Connect()
	if err != nil {
		return nil, fmt.Errorf("serve: connect %s: %w", name, err)
	}
	g.conns, g.closed = append(g.conns, c), append(g.closed, closed)
	return c, nil
}

// subscribe joins the queue group on subject, a tenant's
// (ctx.v1.<tenant>...), with pending limits above what the lane behind it
// can queue. With ownership on, a request of a tenant another replica owns
// is sent on to it.
func (g *Gateway) subscribe(nc *nats.Conn, subject string, queue int, cb nats.MsgHandler) error {
	sub, err := nc.QueueSubscribe(subject, "contextosd", g.own.route(strings.Split(subject, ".")[2], subject, cb))
	if err != nil {
		return err
	}
	// The callback only queues or refuses, so the pending messages are
	// those arrived during one callback: a few. The limits bound memory
	// against a burst of large bodies all the same.
	if err := sub.SetPendingLimits(4*queue+1024, 256<<20); err != nil {
		return err
	}
	g.subs = append(g.subs, sub)
	return nil
}

// Overloaded returns how many requests this gateway refused overloaded.
func (g *Gateway) Overloaded() uint64 { return g.overloaded.Load() }

// BadReplies returns how many requests this gateway handled without
// answering, because they named a reply subject outside the requester's
// inbox (a proposal's refusal is recorded before it is counted).
func (g *Gateway) BadReplies() uint64 { return g.badReplies.Load() }

// RateLimited returns how many proposals this gateway refused rate_limited.
func (g *Gateway) RateLimited() uint64 { return g.rateLimited.Load() }

// Proposing returns how many proposals this gateway admitted (through any
// door) and has not answered yet, queued or being handled, including those whose requester
// stopped waiting: a proposal's dispatch goes on to its settlement whatever
// its client does.
func (g *Gateway) Proposing() int64 { return g.proposing.Load() }

// Stop quiesces (unless the runtime did already) and then waits for the
// refusal aggregates' last flush, which runs once Start's context is done.
func (g *Gateway) Stop() {
	g.Quiesce()
	if g.flushed != nil {
		// The last window's aggregates are appended before the runtime
		// closes its connection, once Start's context is done.
		select {
		case <-g.flushed:
		case <-time.After(flushTimeout + time.Second):
		}
	}
}

// Quiesce stops taking requests and lets the ones taken finish, so a
// graceful stop loses none: it hands this replica's partitions over,
// unsubscribes from every subject (the server then sends new requests to
// the other replicas, or answers no responders), waits until every lane has
// run what it holds, and drains and closes the serving connections. Each
// wait is bounded by drainTimeout. The runtime calls it before it cancels
// Start's context, which would stop the lanes' workers; Stop calls it too,
// and the second call does nothing.
func (g *Gateway) Quiesce() {
	g.quiesce.Do(g.quiesceOnce)
}

func (g *Gateway) quiesceOnce() {
	g.own.stop() // hands this replica's partitions over at once
	for _, s := range g.subs {
		_ = s.Drain()
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(drainTimeout); !g.lanesIdle(); {
		if time.Now().After(deadline) {
			g.log.Warn("requests still running at stop", "within", drainTimeout)
			break
		}
		<-tick.C
	}
	for _, c := range g.conns {
		_ = c.Drain() // closes it once its subscriptions are drained
	}
	// A drain is asynchronous: until it ends, the server still routes this
	// replica's tenants to it and another replica's forwards get a receipt
	// here. Stopped means neither, so a request sent after Stop reaches a
	// replica that serves.
	deadline := time.After(drainTimeout)
	for _, closed := range g.closed {
		select {
		case <-closed:
		case <-deadline:
			g.log.Warn("serving connections not drained at stop", "within", drainTimeout)
			return
		}
	}
}

// lanesIdle reports whether no lane holds a request.
func (g *Gateway) lanesIdle() bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	for _, l := range g.lanes {
		if !l.agents.idle() || !l.operators.idle() {
			return false
		}
	}
	return true
}

// drainTimeout bounds how long Stop waits for the serving connections'
// drains; a drain that takes longer is left to finish on its own.
const drainTimeout = 5 * time.Second

// verbPropose names a proposal where respond takes a verb.
const verbPropose = "propose"

// respond publishes v as the reply to m, a request of who (an agent for
// verbPropose, else an operator) on tenant's verb. A reply the server would
// refuse (larger than its max_payload) or whose publish fails is never
// dropped in silence: it is logged at error level and counted
// (contextos_replies_unsent_total), and a reply too large is replaced by a
// small one with the code reply_too_large: for an operator verb a refusal
// (ok false), for a proposal the status unknown (the decision was made and
// may have been carried out; resending the same proposal reads it again).
func (g *Gateway) respond(m *nats.Msg, v any, tenant, verb, who string) {
	if m.Reply == "" {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(`{"status":"refused","code":"request_malformed","reason":"reply encoding failed"}`)
	}
	max := g.maxPayload.Load()
	tooLarge := max > 0 && int64(len(b)) > max
	if !tooLarge {
		if err = g.publish(m, b); err == nil {
			return
		}
		tooLarge = errors.Is(err, nats.ErrMaxPayload)
	}
	reason := "publish_error"
	if tooLarge {
		reason = "too_large"
		err = fmt.Errorf("%d bytes, more than the server's max_payload of %d", len(b), max)
	}
	label := verbPropose
	if verb != verbPropose {
		label = g.verbLabel(verb)
	}
	g.log.Error("reply not sent", "tenant", tenant, "verb", label, "requester", who, "bytes", len(b), "reason", reason, "err", err)
	if g.tel != nil {
		g.tel.m.unsent.WithLabelValues(g.tel.tenantLabel(tenant), label, reason).Inc()
	}
	if !tooLarge {
		return // the connection failed: a second publish would too
	}
	why := fmt.Sprintf("the reply of %s was %d bytes, more than the NATS server's max_payload of %d, and was not sent", label, len(b), max)
	var small any = wire.Refused(wire.CodeReplyTooLarge, "%s; ask for a smaller page (limit)", why)
	if verb == verbPropose {
		small = wire.Reply{Status: wire.StatusUnknown, Code: wire.CodeReplyTooLarge, Reason: why + "; resend the same proposal to read its decision"}
	}
	if b, err = json.Marshal(small); err == nil {
		err = g.publish(m, b)
	}
	if err != nil {
		g.log.Error("refusal of an unsent reply not sent either", "tenant", tenant, "verb", label, "requester", who, "err", err)
	}
}

// publish sends a reply through the reply connection, or the one the
// request came on.
func (g *Gateway) publish(m *nats.Msg, b []byte) error {
	if g.replies != nil {
		return g.replies.Publish(m.Reply, b)
	}
	return m.Respond(b)
}

// Executor names this replica in operation claims.
func (g *Gateway) Executor() string { return g.executor }
