package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

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
		cp := &CapabilityConfig{ID: "pay", Effectful: true, Adapter: "mcp",
			MCP:      MCPToolConfig{URL: url, Tool: "pay", IdempotencyArgument: "idem", Timeout: Duration{2 * time.Second}},
			Recovery: RecoveryConfig{Completion: "/payment/state", Applied: []string{"captured"}, NotApplied: []string{"declined"}, Pending: []string{"processing"}}}
		if err := cp.validateMCPManifest(); err != nil {
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
	lookup := &CapabilityConfig{ID: "lookup", Adapter: "mcp", MCP: MCPToolConfig{URL: hs.URL, Tool: "pay"}}
	if err := lookup.validateMCPManifest(); err != nil {
		t.Fatal(err)
	}
	for answer, want := range map[string]kernel.Outcome{"on_hold": kernel.OutcomeApplied, "error-bare": kernel.OutcomeNotApplied} {
		if obs := NewMCPAdapter(lookup).Dispatch(context.Background(), "att_2", json.RawMessage(`{"answer":"`+answer+`"}`)); obs.Outcome != want {
			t.Fatalf("read-only %s: %+v, want %s", answer, obs, want)
		}
	}
}

func TestMCPConfigValidation(t *testing.T) {
	base := `[nats]
data_dir = "d"
[[tenants]]
id = "acme"
  [[tenants.agents]]
  id = "a1"
  password = "p"
  %s
  [[tenants.agents]]
  id = "a2"
  password = "p"
  %s
  [[tenants.operators]]
  id = "o1"
  password = "p"
  %s
[[capabilities]]
id = "%s"
adapter = "%s"
effectful = true
%s
%s
`
	mcpCap := `  [capabilities.mcp]
  url = "http://127.0.0.1:9/mcp"
  tool = "pay"
  [capabilities.recovery]
  completion = "/s"
  applied = ["ok"]
  not_applied = ["no"]`
	tok := `mcp_token = "0123456789abcdef01234567"`
	cases := []struct {
		name                   string
		a1, a2, op             string
		capID, adapter, schema string
		cap, mcp               string
		ok                     bool
	}{
		{"mcp adapter", tok, "", "", "pay", "mcp", "", mcpCap, "", true},
		{"mcp gateway on", tok, "", "", "pay", "mcp", "", mcpCap, "[mcp]\nlisten = \"127.0.0.1:0\"\nallowed_origins = [\"http://localhost:3000\"]", true},
		{"arguments schema", tok, "", "", "pay", "mcp", `arguments_schema = '{"type":"object"}'`, mcpCap, "", true},
		{"schema not an object", tok, "", "", "pay", "mcp", `arguments_schema = '{"type":"string"}'`, mcpCap, "", false},
		{"schema not JSON", tok, "", "", "pay", "mcp", `arguments_schema = '{'`, mcpCap, "", false},
		{"shared token", tok, tok, "", "pay", "mcp", "", mcpCap, "", false},
		{"short token", `mcp_token = "short"`, "", "", "pay", "mcp", "", mcpCap, "", false},
		{"operator token", "", "", tok, "pay", "mcp", "", mcpCap, "", false},
		{"listen not loopback", tok, "", "", "pay", "mcp", "", mcpCap, "[mcp]\nlisten = \"0.0.0.0:8080\"", false},
		{"origin with a path", tok, "", "", "pay", "mcp", "", mcpCap, "[mcp]\nlisten = \"127.0.0.1:0\"\nallowed_origins = [\"http://x/y\"]", false},
		{"origins without listen", tok, "", "", "pay", "mcp", "", mcpCap, "[mcp]\nallowed_origins = [\"http://x\"]", false},
		{"capability id not a tool name", tok, "", "", "pay/now", "mcp", "", mcpCap, "[mcp]\nlisten = \"127.0.0.1:0\"", false},
		{"no tool", tok, "", "", "pay", "mcp", "", "  [capabilities.mcp]\n  url = \"http://127.0.0.1:9/mcp\"\n  [capabilities.recovery]\n  completion = \"/s\"\n  applied = [\"ok\"]\n  not_applied = [\"no\"]", "", false},
		{"no completion", tok, "", "", "pay", "mcp", "", "  [capabilities.mcp]\n  url = \"http://127.0.0.1:9/mcp\"\n  tool = \"pay\"", "", false},
		{"query_url on mcp", tok, "", "", "pay", "mcp", "", mcpCap + "\n  query_url = \"http://x\"", "", false},
		{"mcp table on http", tok, "", "", "pay", "http", "", "  [capabilities.http]\n  url = \"http://x\"\n  [capabilities.mcp]\n  tool = \"pay\"", "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := fmt.Sprintf(base, c.a1, c.a2, c.op, c.capID, c.adapter, c.schema, c.cap) + c.mcp + "\n"
			_, err := ParseConfig([]byte(src))
			if (err == nil) != c.ok {
				t.Fatalf("err = %v, want ok=%v\n%s", err, c.ok, src)
			}
		})
	}
}
