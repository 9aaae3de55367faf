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

// Proposer decides the proposal of an agent (tenant, principal) and
// returns its reply: the gateway's request path with its logs, metrics and
// traces (gateway.Gateway's ProposeObserved), the one every door passes.
// trace carries the caller's traceparent, if any.
type Proposer interface {
	ProposeObserved(ctx context.Context, tenant, principal string, trace propagation.TextMapCarrier, body []byte) wire.Reply
	// AuthFailed counts a request refused for its bearer token (door "mcp").
	AuthFailed(door string)
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
	s := &Server{URL: "http://" + ln.Addr().String() + Path, http: &http.Server{
		Handler: Handler(cfg, gw, log), ReadHeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 16 << 10,
	}}
	bounded := &limitListener{Listener: ln, slots: make(chan struct{}, connsPerWorker*cfg.Runtime.Workers)}
	go func() {
		if err := s.http.Serve(bounded); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("mcp gateway stopped", "err", err)
		}
	}()
	return s, nil
}

// Close stops the endpoint; calls in flight are cut off, and their
// attempts, already durable, are settled by reconciliation.
func (s *Server) Close() error { return s.http.Close() }

// Handler is the MCP gateway as an http.Handler: the origin check, then
// the bearer token, then a bounded number of calls at once into a
// stateless streamable HTTP handler (no session is kept between requests,
// so no client can grow the server's memory by opening sessions).
func Handler(cfg *config.Config, gw Proposer, log *slog.Logger) http.Handler {
	srv := mcp.NewServer(&mcp.Implementation{Name: "contextosd", Title: "ContextOS ledger", Version: "1"},
		&mcp.ServerOptions{Instructions: instructions})
	for i := range cfg.Capabilities {
		cp := &cfg.Capabilities[i]
		srv.AddTool(toolOf(cp), call(gw, cp.ID))
	}
	stream := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		Stateless: true, JSONResponse: true, Logger: log,
		MaxRequestBodyBytes: int64(cfg.Runtime.MaxProposalBytes) + envelopeBytes,
	})
	mux := http.NewServeMux()
	mux.Handle(Path, limit(cfg.Runtime.Workers, stream))
	bearer := auth.RequireBearerToken(verifier(cfg, gw), &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})
	return originCheck(cfg.MCP.AllowedOrigins, bearer(mux))
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
			h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Accept, Mcp-Protocol-Version, Mcp-Session-Id, Last-Event-ID")
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// connsPerWorker bounds open connections (idle keep-alive ones included)
// at this many per request slot: a client cannot hold the daemon's memory
// by opening connections and leaving them idle.
const connsPerWorker = 2

// limitListener accepts a connection only while fewer than cap(slots) are
// open; past that Accept waits for one to close.
type limitListener struct {
	net.Listener
	slots chan struct{}
}

func (l *limitListener) Accept() (net.Conn, error) {
	l.slots <- struct{}{}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.slots }}, nil
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// limit serves at most n requests at once and answers 503 past that,
// before anything is decided.
func limit(n int, next http.Handler) http.Handler {
	slots := make(chan struct{}, n)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
			next.ServeHTTP(w, r)
		default:
			w.Header().Set("Retry-After", "1")
			http.Error(w, "overloaded: retry later", http.StatusServiceUnavailable)
		}
	})
}
