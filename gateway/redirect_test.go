package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/kernel"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestAdaptersFollowNoRedirect: a provider endpoint (http or mcp adapter)
// that answers a call with a redirect to another real loopback server
// leaves the call unknown, and the other server never sees the call, for
// each redirect status.
func TestAdaptersFollowNoRedirect(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "target", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "pay", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{StructuredContent: map[string]any{"state": "captured"}}, nil
	})
	mcpTarget := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	var hits atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path == "/mcp" {
			mcpTarget.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"state":"captured"}`))
	}))
	t.Cleanup(target.Close)
	for _, status := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL+r.URL.Path, status)
		}))
		t.Cleanup(redirector.Close)
		contract := config.RecoveryConfig{Completion: "/state", Applied: []string{"captured"}, NotApplied: []string{"declined"}}

		mcpCap := &config.CapabilityConfig{ID: "pay", Effectful: true, Adapter: "mcp", Recovery: contract,
			MCP: config.MCPToolConfig{URL: redirector.URL + "/mcp", Tool: "pay", Timeout: config.Duration{Duration: 2 * time.Second}}}
		if err := mcpCap.ValidateMCP(); err != nil {
			t.Fatal(err)
		}
		if obs := NewMCPAdapter(mcpCap).Dispatch(context.Background(), "att_1", json.RawMessage(`{}`)); obs.Outcome != kernel.OutcomeUnknown {
			t.Fatalf("mcp adapter, %d: %+v, want unknown", status, obs)
		}

		httpCap := &config.CapabilityConfig{ID: "pay", Effectful: true, Adapter: "http", Recovery: contract,
			HTTP: config.HTTPConfig{URL: redirector.URL + "/refunds", Method: http.MethodPost, Timeout: config.Duration{Duration: 2 * time.Second}, IdempotencyHeader: "Idempotency-Key"}}
		if obs := NewHTTPAdapter(httpCap).Dispatch(context.Background(), "att_1", json.RawMessage(`{}`)); obs.Outcome != kernel.OutcomeUnknown {
			t.Fatalf("http adapter, %d: %+v, want unknown", status, obs)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the redirect target saw %d requests", n)
	}
}
