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

// TestMCPAdapterContract: the recovery contract over a tool result's
// structured content, against a Go SDK MCP server whose tool answers what
// the order id asks for. Only a listed state settles; an unlisted state, an
// error result with no listed state, a result with no structured content
// and a transport failure are unknown.
func TestMCPAdapterContract(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "contract", Version: "1"}, nil)
	var seenKey atomic.Pointer[string]
	srv.AddTool(&mcp.Tool{Name: "pay", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in struct {
			Answer string `json:"answer"`
			Key    string `json:"idem"`
		}
		_ = json.Unmarshal(req.Params.Arguments, &in)
		seenKey.Store(&in.Key)
		switch in.Answer {
		case "none":
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
		case "error-declined":
			return &mcp.CallToolResult{IsError: true, StructuredContent: map[string]any{"payment": map[string]any{"state": "declined"}}}, nil
		case "error-bare":
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "boom"}}}, nil
		}
		return &mcp.CallToolResult{StructuredContent: map[string]any{"payment": map[string]any{"state": in.Answer}}}, nil
	})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}))
	defer hs.Close()
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()

	adapter := func(url string) *MCPAdapter {
		cp := &config.CapabilityConfig{ID: "pay", Effectful: true, Adapter: "mcp",
			MCP:      config.MCPToolConfig{URL: url, Tool: "pay", IdempotencyArgument: "idem", Timeout: config.Duration{Duration: 2 * time.Second}},
			Recovery: config.RecoveryConfig{Completion: "/payment/state", Applied: []string{"captured"}, NotApplied: []string{"declined"}, Pending: []string{"processing"}}}
		if err := cp.ValidateMCP(); err != nil {
			t.Fatal(err)
		}
		return NewMCPAdapter(cp)
	}
	cases := []struct {
		answer string
		url    string
		want   kernel.Outcome
	}{
		{"captured", hs.URL, kernel.OutcomeApplied},
		{"declined", hs.URL, kernel.OutcomeNotApplied},
		{"processing", hs.URL, kernel.OutcomePending},
		{"on_hold", hs.URL, kernel.OutcomeUnknown},
		{"none", hs.URL, kernel.OutcomeUnknown},
		{"error-declined", hs.URL, kernel.OutcomeNotApplied},
		{"error-bare", hs.URL, kernel.OutcomeUnknown},
		{"captured", dead.URL, kernel.OutcomeUnknown},
	}
	for _, c := range cases {
		t.Run(c.answer+"@"+c.url, func(t *testing.T) {
			seenKey.Store(new(string))
			obs := adapter(c.url).Dispatch(context.Background(), "att_1", json.RawMessage(`{"answer":"`+c.answer+`","idem":"agent-chosen"}`))
			if obs.Outcome != c.want {
				t.Fatalf("outcome %s (%s), want %s", obs.Outcome, obs.Ref, c.want)
			}
			if got := *seenKey.Load(); c.url == hs.URL && got != "att_1" {
				t.Fatalf("the tool saw idempotency key %q, want the attempt id", got)
			}
		})
	}
	if obs := adapter(hs.URL).Query(context.Background(), "att_1"); obs.Outcome != kernel.OutcomeUnknown || obs.Ref != "no mcp.query_tool" {
		t.Fatalf("query without a query tool: %+v", obs)
	}
	// A read-only capability declares no contract: its result is applied,
	// its error result not applied.
	lookup := &config.CapabilityConfig{ID: "lookup", Adapter: "mcp", MCP: config.MCPToolConfig{URL: hs.URL, Tool: "pay"}}
	if err := lookup.ValidateMCP(); err != nil {
		t.Fatal(err)
	}
	for answer, want := range map[string]kernel.Outcome{"on_hold": kernel.OutcomeApplied, "error-bare": kernel.OutcomeNotApplied} {
		if obs := NewMCPAdapter(lookup).Dispatch(context.Background(), "att_2", json.RawMessage(`{"answer":"`+answer+`"}`)); obs.Outcome != want {
			t.Fatalf("read-only %s: %+v, want %s", answer, obs, want)
		}
	}
}
