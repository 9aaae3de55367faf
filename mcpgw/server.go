package mcpgw

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/wire"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/propagation"
)

// Path is where the streamable HTTP endpoint is served.
const Path = "/mcp"

// envelopeBytes is room for the JSON-RPC envelope around a proposal.
const envelopeBytes = 4 << 10

// identity is what a token names.
type identity struct{ tenant, principal string }

// Server is a running MCP gateway.
type Server struct {
	// URL is the endpoint, http://<listen>/mcp.
	URL  string
	http *http.Server
}

// Proposer admits and decides the proposal of an agent (tenant, principal)
// and returns its reply: the gateway's admission path (gateway.Gateway's
// Admit: body bound, the agent's rate limit and its tenant's lane, shared
// with the NATS door), then its request path with logs, metrics and traces.
// trace carries the caller's traceparent, if any.
type Proposer interface {
	Admit(ctx context.Context, tenant, principal string, trace propagation.TextMapCarrier, body []byte) wire.Reply
	// AuthFailed counts a request refused for its bearer token (door "mcp").
	AuthFailed(door string)
	// AdmitContext admits and answers an agent's compile request through
	// the same admission (gateway.Gateway's AdmitContext).
	AdmitContext(ctx context.Context, tenant, principal string, body []byte) wire.ContextReply
	// ExposedTools lists the capabilities whose tools the agent sees in
	// run ("": no run named): its derived tool exposure under the run's
	// pinned pack (gateway.Gateway's ExposedTools).
	ExposedTools(ctx context.Context, tenant, principal, run string) ([]string, error)
}

// Listen serves Handler on cfg.MCP.Listen, which must be loopback.
func Listen(cfg *config.Config, gw Proposer, log *slog.Logger) (*Server, error) {
	ln, err := net.Listen("tcp", cfg.MCP.Listen)
	if err != nil {
		return nil, fmt.Errorf("mcp.listen: %w", err)
	}
	if ip := ln.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() {
		ln.Close()
		return nil, fmt.Errorf("mcp.listen: loopback only, not %s", ip)
	}
	slots := newConnSlots(cfg)
	s := &Server{URL: "http://" + ln.Addr().String() + Path, http: &http.Server{
		Handler: handler(cfg, gw, log, slots), ReadHeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 16 << 10,
		ConnContext: slots.connContext, ConnState: slots.connState,
	}}
	go func() {
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("mcp gateway stopped", "err", err)
		}
	}()
	return s, nil
}

// Close stops the endpoint; calls in flight are cut off, and their
// attempts, already durable, are settled by reconciliation.
func (s *Server) Close() error { return s.http.Close() }

// Handler is the MCP gateway as an http.Handler: the origin check, then
// the bearer token, then a bounded number of calls at once per tenant into
// a stateless streamable HTTP handler (no session is kept between requests,
// so no client can grow the server's memory by opening sessions). Listen
// adds the connection slots (per tenant, claimed after the token).
func Handler(cfg *config.Config, gw Proposer, log *slog.Logger) http.Handler {
	return handler(cfg, gw, log, nil)
}

func handler(cfg *config.Config, gw Proposer, log *slog.Logger, conns *connSlots) http.Handler {
	srv := mcp.NewServer(&mcp.Implementation{Name: "contextosd", Title: "ContextOS ledger", Version: "1"},
		&mcp.ServerOptions{Instructions: instructions})
	for i := range cfg.Capabilities {
		cp := &cfg.Capabilities[i]
		srv.AddTool(toolOf(cp), call(gw, cp.ID))
	}
	srv.AddTool(contextTool(), compileCall(gw))
	srv.AddReceivingMiddleware(exposure(gw))
	stream := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		Stateless: true, JSONResponse: true, Logger: log,
		MaxRequestBodyBytes: int64(cfg.Runtime.MaxProposalBytes) + envelopeBytes,
	})
	mux := http.NewServeMux()
	mux.Handle(Path, conns.admit(limit(cfg, stream)))
	bearer := auth.RequireBearerToken(verifier(cfg, gw), &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})
	return closeRefused(originCheck(cfg.MCP.AllowedOrigins, bearer(mux)))
}

const instructions = "Each tool is a governed capability: a call is a proposal that the ledger decides " +
	"(authority, policy, budgets, shared limits) before the provider is called. Give every distinct action its own " +
	"operation_key and resend the same key to learn the outcome of a call whose reply was lost; a refusal is an " +
	"error result whose text starts with its stable code."

// verifier maps a bearer token to its agent. Tokens are compared by their
// SHA-256, so the lookup's timing says nothing about a token's bytes. A
// token that names no agent is counted as an authentication failure of the
// mcp door (the token itself is never recorded).
func verifier(cfg *config.Config, gw Proposer) auth.TokenVerifier {
	tokens := map[[32]byte]identity{}
	for _, t := range cfg.Tenants {
		for _, a := range t.Agents {
			if a.MCPToken != "" {
				tokens[sha256.Sum256([]byte(a.MCPToken))] = identity{tenant: t.ID, principal: a.ID}
			}
		}
	}
	return func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		id, ok := tokens[sha256.Sum256([]byte(token))]
		if !ok {
			gw.AuthFailed("mcp")
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: wire.UserName(id.tenant, id.principal),
			Extra: map[string]any{"tenant": id.tenant, "principal": id.principal}}, nil
	}
}

// identityOf is the agent the request's verified token names.
func identityOf(extra *mcp.RequestExtra) (identity, bool) {
	if extra == nil || extra.TokenInfo == nil {
		return identity{}, false
	}
	tenant, _ := extra.TokenInfo.Extra["tenant"].(string)
	principal, _ := extra.TokenInfo.Extra["principal"].(string)
	return identity{tenant: tenant, principal: principal}, tenant != "" && principal != ""
}

// originCheck refuses a browser request whose Origin is not configured:
// a page on another site must not drive an agent's token through the
// agent's own browser. Requests without an Origin are not from a page. A
// configured origin gets the CORS answers a browser needs to call the
// endpoint with a bearer token (its preflight, and the response headers).
func originCheck(allowed []string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o := r.Header.Get("Origin")
		if o == "" {
			next.ServeHTTP(w, r)
			return
		}
		n, err := config.NormalizeOrigin(o)
		if err != nil || !slices.Contains(allowed, n) {
			http.Error(w, "origin not allowed", http.StatusForbidden)
			return
		}
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", o)
		h.Add("Vary", "Origin")
		h.Set("Access-Control-Expose-Headers", "Mcp-Session-Id, Mcp-Protocol-Version")
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Set("Access-Control-Allow-Methods", "POST")
			h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Accept, Mcp-Protocol-Version, Mcp-Session-Id, Last-Event-ID, "+RunHeader)
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// closeRefused closes the connection of a request refused before its
// token was accepted (401, 403): a connection holds a slot only once a
// request on it carried a valid token, and one that never does is not
// kept open for its client to reuse.
func closeRefused(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&refusedWriter{ResponseWriter: w}, r)
	})
}

type refusedWriter struct {
	http.ResponseWriter
	wrote bool
}

func (w *refusedWriter) WriteHeader(code int) {
	if !w.wrote && (code == http.StatusUnauthorized || code == http.StatusForbidden) {
		w.Header().Set("Connection", "close")
	}
	w.wrote = true
	w.ResponseWriter.WriteHeader(code)
}

func (w *refusedWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

func (w *refusedWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *refusedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// connsPerWorker bounds each tenant's open connections (idle keep-alive
// ones included) at this many per request slot: a client cannot hold the
// daemon's memory by opening connections and leaving them idle, nor one
// tenant's connections shut another tenant out.
const connsPerWorker = 2

// connSlots are each tenant's connection slots. A connection claims one of
// its tenant's when a request on it first carries a valid token, and
// frees it when it closes. A connection that never sends a request holds
// none and is closed after the server's ReadHeaderTimeout; one whose
// request carries no valid token is answered 401 and closed
// (closeRefused).
type connSlots struct {
	tenants map[string]chan struct{}
	mu      sync.Mutex
	open    map[net.Conn]*connSlot
}

// connSlot is what one connection holds: its tenant's slot, once claimed.
type connSlot struct {
	mu     sync.Mutex
	tenant string
	slots  chan struct{}
}

type connKey struct{}

func newConnSlots(cfg *config.Config) *connSlots {
	c := &connSlots{tenants: map[string]chan struct{}{}, open: map[net.Conn]*connSlot{}}
	for _, t := range cfg.Tenants {
		c.tenants[t.ID] = make(chan struct{}, connsPerWorker*cfg.Runtime.Workers)
	}
	return c
}

func (c *connSlots) connContext(ctx context.Context, conn net.Conn) context.Context {
	s := &connSlot{}
	c.mu.Lock()
	c.open[conn] = s
	c.mu.Unlock()
	return context.WithValue(ctx, connKey{}, s)
}

func (c *connSlots) connState(conn net.Conn, st http.ConnState) {
	if st != http.StateClosed && st != http.StateHijacked {
		return
	}
	c.mu.Lock()
	s := c.open[conn]
	delete(c.open, conn)
	c.mu.Unlock()
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.slots != nil {
		<-s.slots
		s.slots = nil
	}
}

// admit lets a request through once its connection holds a slot of the
// tenant its token names: claimed now if the connection holds none (or
// another tenant's), refused 503 (and the connection closed) when the
// tenant's slots are all held.
func (c *connSlots) admit(next http.Handler) http.Handler {
	if c == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, _ := r.Context().Value(connKey{}).(*connSlot)
		tenant, ok := tenantOf(r)
		if s == nil || !ok {
			http.Error(w, "no verified identity", http.StatusUnauthorized)
			return
		}
		s.mu.Lock()
		if s.tenant != tenant {
			// A pooled connection may carry another tenant's token next:
			// it then holds that tenant's slot instead.
			slots := c.tenants[tenant]
			select {
			case slots <- struct{}{}:
				if s.slots != nil {
					<-s.slots
				}
				s.tenant, s.slots = tenant, slots
			default:
				s.mu.Unlock()
				w.Header().Set("Connection", "close")
				w.Header().Set("Retry-After", "1")
				http.Error(w, "overloaded: every connection of tenant "+tenant+" is open; retry later", http.StatusServiceUnavailable)
				return
			}
		}
		s.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

// tenantOf is the tenant the request's verified token names.
func tenantOf(r *http.Request) (string, bool) {
	info := auth.TokenInfoFromContext(r.Context())
	if info == nil {
		return "", false
	}
	tenant, _ := info.Extra["tenant"].(string)
	return tenant, tenant != ""
}

// limit serves at most cfg.Runtime.Workers requests of each tenant at once
// and answers 503 past that, before anything is decided: one tenant's slow
// calls never take another tenant's slots.
func limit(cfg *config.Config, next http.Handler) http.Handler {
	slots := map[string]chan struct{}{}
	for _, t := range cfg.Tenants {
		slots[t.ID] = make(chan struct{}, cfg.Runtime.Workers)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tenant, ok := tenantOf(r)
		if !ok || slots[tenant] == nil {
			http.Error(w, "no verified identity", http.StatusUnauthorized)
			return
		}
		select {
		case slots[tenant] <- struct{}{}:
			defer func() { <-slots[tenant] }()
			next.ServeHTTP(w, r)
		default:
			w.Header().Set("Retry-After", "1")
			http.Error(w, "overloaded: retry later", http.StatusServiceUnavailable)
		}
	})
}
