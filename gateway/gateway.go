package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/contextos/ledger/aggregates"
	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/kernel"
	"github.com/nats-io/nats.go"
)

// Gateway is the request path: it serves proposals and operator verbs over
// NATS and runs every decision through the kernel via the aggregates engine.
type Gateway struct {
	cfg          *Config
	store        events.Store
	engine       *aggregates.Engine
	ids          *aggregates.IDs
	clock        aggregates.Clock
	executor     string
	policyDigest string
	log          *slog.Logger
	hooks        Hooks
	tel          *telemetry // logs, metrics, traces around the handlers; nil: none
	brk          *breakers  // circuit breakers (breaker.go); nil: none

	adapters map[string]Adapter
	index    *index
	inflight inflight
	seen     sightings
	extraOps map[string]OpHandler

	mu      sync.RWMutex
	pins    map[string]pinned // tenant/guarantee
	subs    []*nats.Subscription
	workers chan struct{}
	replies *nats.Conn // publishes replies; nil: the serving connection
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
	Config   *Config
	Store    events.Store
	Sealer   *aggregates.Sealer
	Executor string
	Logger   *slog.Logger
	Hooks    Hooks
	// Adapters overrides the adapter of a capability id (tests).
	Adapters map[string]Adapter
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
		adapters: map[string]Adapter{}, index: newIndex(), extraOps: map[string]OpHandler{}, pins: map[string]pinned{},
		workers: make(chan struct{}, o.Config.Runtime.Workers), replies: o.Replies,
	}
	if g.log == nil {
		g.log = slog.Default()
	}
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
	g.engine.OnContention = func(tenant string, subjects []string) {
		g.log.Warn("contention exhausted", "tenant", tenant, "subjects", strings.Join(subjects, ","))
	}
	return g
}

// OpHandler serves an operator verb mounted by another package (audit
// export, approvals).
type OpHandler func(ctx context.Context, tenant, operator string, body []byte) any

// Mount adds an operator verb.
func (g *Gateway) Mount(verb string, h OpHandler) { g.extraOps[verb] = h }

// Engine exposes the aggregates engine (recovery tools, tests).
func (g *Gateway) Engine() *aggregates.Engine { return g.engine }

func (g *Gateway) adapter(cp *CapabilityConfig) Adapter {
	if a, ok := g.adapters[cp.ID]; ok {
		return a
	}
	return noopAdapter{}
}

// authorize checks the principal's authority over the capability.
func (g *Gateway) authorize(tc *TenantConfig, principal string, cp *CapabilityConfig) *kernel.Refusal {
	agent, ok := tc.Agent(principal)
	if !ok {
		return &kernel.Refusal{Code: kernel.CodeAuthorityDenied, Reason: fmt.Sprintf("%s is not an agent of tenant %s", principal, tc.ID)}
	}
	for _, c := range agent.Capabilities {
		if c == cp.ID {
			return nil
		}
	}
	return &kernel.Refusal{Code: kernel.CodeAuthorityDenied, Reason: fmt.Sprintf("%s holds no grant for %s", principal, cp.ID)}
}

// refuseUnbound records a refusal that cannot be tied to an operation on the
// principal's refusal subject, and replies with it.
func (g *Gateway) refuseUnbound(ctx context.Context, tenant, principal string, body []byte, r *kernel.Refusal) Reply {
	sum := sha256.Sum256(body)
	ev := kernel.ProposalRefused{Principal: principal, Code: r.Code, Reason: r.Reason, BodyDigest: hex.EncodeToString(sum[:]), BodyBytes: len(body)}
	subject, err := events.Subject(tenant, "refusal", principal)
	if err == nil {
		var l *kernel.RefusalLog
		var d kernel.Decision
		ref := aggregates.Ref{Subject: subject, New: func() aggregates.State { return &kernel.RefusalLog{} }}
		_, err = g.engine.Do(ctx, aggregates.Tx{Tenant: tenant, Bind: []aggregates.Binding{aggregates.Bind(ref, &l, &d.Events)},
			Decide: func() *kernel.Refusal { d = kernel.DecideRecordRefusal(l, ev); return d.Refusal }})
	}
	if err != nil {
		g.log.Error("refusal could not be recorded", "tenant", tenant, "principal", principal, "code", r.Code, "err", err)
	}
	return Reply{Status: kernel.StatusRefused, Code: r.Code, Reason: r.Reason}
}

// incident logs an incident; the signed record of it is the refused event
// itself or the incident event the kernel decided.
func (g *Gateway) incident(tenant, kind, attemptID string, r *kernel.Refusal) {
	g.log.Warn("incident", "tenant", tenant, "kind", kind, "attempt", attemptID, "code", r.Code, "reason", r.Reason)
}

// Serve subscribes to the proposal and operator subjects on nc (the
// runtime's own connection). Replicas share the load through a queue group.
func (g *Gateway) Serve(ctx context.Context, nc *nats.Conn) error {
	handle := func(fn func(m *nats.Msg)) nats.MsgHandler {
		return func(m *nats.Msg) {
			select {
			case g.workers <- struct{}{}:
			case <-ctx.Done():
				return
			}
			go func() {
				defer func() { <-g.workers }()
				fn(m)
			}()
		}
	}
	sub, err := nc.QueueSubscribe("ctx.v1.*.*.propose", "contextosd", handle(func(m *nats.Msg) {
		tok := strings.Split(m.Subject, ".")
		tenant, principal := tok[2], tok[3]
		if !replyAllowed(m.Reply, tenant, principal) {
			g.refuseUnbound(ctx, tenant, principal, m.Data, &kernel.Refusal{Code: kernel.CodeRequestMalformed,
				Reason: "reply subject outside the principal's inbox " + InboxPrefix(tenant, principal) + ".>"})
			return
		}
		var reply Reply
		if principal == "ops" {
			reply = Reply{Status: kernel.StatusRefused, Code: kernel.CodeAuthorityDenied, Reason: "ops is not a principal"}
		} else {
			reply = g.observePropose(ctx, tenant, principal, m.Header, m.Data)
		}
		g.respond(m, reply)
	}))
	if err != nil {
		return err
	}
	g.subs = append(g.subs, sub)
	sub, err = nc.QueueSubscribe("ctx.v1.*.ops.*.*", "contextosd", handle(func(m *nats.Msg) {
		tok := strings.Split(m.Subject, ".")
		if !replyAllowed(m.Reply, tok[2], tok[5]) {
			g.log.Warn("operator request with a reply subject outside its inbox dropped", "tenant", tok[2], "operator", tok[5])
			return
		}
		g.respond(m, g.observeOp(ctx, tok[2], tok[4], tok[5], m.Data))
	}))
	if err != nil {
		return err
	}
	g.subs = append(g.subs, sub)
	return nc.Flush()
}

// Stop unsubscribes; in-flight requests finish.
func (g *Gateway) Stop() {
	for _, s := range g.subs {
		_ = s.Drain()
	}
}

// replyAllowed reports whether the runtime may publish a reply to subject
// for (tenant, principal): only inside the principal's own inbox. The
// runtime's user may publish anywhere (it appends to ctx.ev.>), so a reply
// subject chosen by a requester must never be trusted: one naming an event
// subject would make the runtime store a reply as if it were an event.
// An empty reply (a publish without request) is allowed: nothing is sent.
func replyAllowed(subject, tenant, principal string) bool {
	return subject == "" || strings.HasPrefix(subject, InboxPrefix(tenant, principal)+".")
}

func (g *Gateway) respond(m *nats.Msg, v any) {
	if m.Reply == "" {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(`{"status":"refused","code":"request_malformed","reason":"reply encoding failed"}`)
	}
	if g.replies != nil {
		_ = g.replies.Publish(m.Reply, b)
		return
	}
	_ = m.Respond(b)
}

// Executor names this replica in operation claims.
func (g *Gateway) Executor() string { return g.executor }
