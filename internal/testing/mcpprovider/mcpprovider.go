package mcpprovider

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Mode is how the provider answers one issue_refund call.
type Mode string

// Modes.
const (
	Applied Mode = "applied" // {"refund":{"status":"succeeded"}}
	Pending Mode = "pending" // {"refund":{"status":"pending"}}; Settle decides later
	// Break records the refund as succeeded, then closes the connection
	// without answering: the transport breaks mid-call.
	Break Mode = "break"
)

// RefundArgs are issue_refund's arguments.
type RefundArgs struct {
	OrderID        string `json:"order_id" jsonschema:"the order to refund"`
	AmountMinor    int64  `json:"amount_minor" jsonschema:"the amount in minor units"`
	Currency       string `json:"currency,omitempty" jsonschema:"ISO 4217 currency"`
	IdempotencyKey string `json:"idempotency_key" jsonschema:"the caller's idempotency key"`
}

// LookupArgs are get_refund's arguments.
type LookupArgs struct {
	IdempotencyKey string `json:"idempotency_key" jsonschema:"the idempotency key of the refund"`
}

// Result is both tools' structured content.
type Result struct {
	Refund State `json:"refund"`
}

// State is a refund's state: succeeded, pending, failed or not_found.
type State struct {
	Status  string `json:"status"`
	OrderID string `json:"order_id,omitempty"`
	Amount  int64  `json:"amount_minor,omitempty"`
}

// Stats counts what the provider saw.
type Stats struct {
	Calls   int // issue_refund calls
	Queries int // get_refund calls
	Applied int // refunds issued
}

// Server is the provider's state.
type Server struct {
	mu      sync.Mutex
	script  []Mode
	refunds map[string]*State
	stats   Stats
	breaks  int // answers to drop, set by a Break call
}

// New returns an empty provider.
func New() *Server { return &Server{refunds: map[string]*State{}} }

// Script sets the answers of the next calls, in order; afterwards every call
// is Applied.
func (s *Server) Script(modes ...Mode) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, modes...)
}

// Settle decides a pending refund ("succeeded" or "failed").
func (s *Server) Settle(key, status string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.refunds[key]
	if !ok {
		return false
	}
	if status == "succeeded" && r.Status != "succeeded" {
		s.stats.Applied++
	}
	r.Status = status
	return true
}

// Stats returns the call counts.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Refund returns the refund of a key, if any.
func (s *Server) Refund(key string) (State, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.refunds[key]
	if !ok {
		return State{}, false
	}
	return *r, true
}

// MCP is the provider's MCP server.
func (s *Server) MCP() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "demo-payments", Version: "1"}, nil)
	destructive := true
	mcp.AddTool(srv, &mcp.Tool{Name: "issue_refund", Description: "Issue a refund on an order, once per idempotency key.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &destructive, IdempotentHint: true}}, s.issue)
	mcp.AddTool(srv, &mcp.Tool{Name: "get_refund", Description: "Look a refund up by its idempotency key.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, s.lookup)
	return srv
}

func (s *Server) issue(_ context.Context, _ *mcp.CallToolRequest, in RefundArgs) (*mcp.CallToolResult, Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Calls++
	if r, ok := s.refunds[in.IdempotencyKey]; ok {
		return nil, Result{Refund: *r}, nil
	}
	mode := Applied
	if len(s.script) > 0 {
		mode, s.script = s.script[0], s.script[1:]
	}
	r := &State{Status: "succeeded", OrderID: in.OrderID, Amount: in.AmountMinor}
	switch mode {
	case Pending:
		r.Status = "pending"
	case Break:
		s.breaks++
	}
	if r.Status == "succeeded" {
		s.stats.Applied++
	}
	s.refunds[in.IdempotencyKey] = r
	return nil, Result{Refund: *r}, nil
}

func (s *Server) lookup(_ context.Context, _ *mcp.CallToolRequest, in LookupArgs) (*mcp.CallToolResult, Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Queries++
	if r, ok := s.refunds[in.IdempotencyKey]; ok {
		return nil, Result{Refund: *r}, nil
	}
	return nil, Result{Refund: State{Status: "not_found"}}, nil
}

// Handler serves the MCP server over stateless streamable HTTP. After a
// Break call it closes that request's connection instead of answering
// (with calls in flight at once, the first request to finish after the
// Break call is the one cut: scripts that break run their calls one by one).
func (s *Server) Handler() http.Handler {
	srv := s.MCP()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if s.takeBreak() {
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					_ = conn.Close()
					return
				}
			}
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	})
}

func (s *Server) takeBreak() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.breaks == 0 {
		return false
	}
	s.breaks--
	return true
}
