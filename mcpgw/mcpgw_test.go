package mcpgw_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextos/ledger/daemon"
	"github.com/contextos/ledger/internal/testing/daemontest"
	"github.com/contextos/ledger/internal/testing/gatewaytest"
	"github.com/contextos/ledger/internal/testing/mcpprovider"
	"github.com/contextos/ledger/internal/testing/provider"
	"github.com/contextos/ledger/mcpgw"
	"github.com/contextos/ledger/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tokens of mcpConfig.
const (
	emailToken  = "acme-email-token-0123456789abcdef"
	chatToken   = "acme-chat-token-0123456789abcdef"
	globexToken = "globex-email-token-0123456789abcdef"
)

const (
	httpRefund = "adp_payments.issue_refund" // an HTTP provider
	mcpRefund  = "mcp_payments.issue_refund" // a tool of an MCP server
)

// env is a booted runtime (real embedded NATS) with the MCP gateway, an
// HTTP provider and an MCP provider, all on loopback.
type env struct {
	t       testing.TB
	rt      *daemon.Runtime
	prov    *provider.Server
	mcpProv *mcpprovider.Server
}

func start(t testing.TB) *env { return startWith(t, nil, nil) }

// startWith is start with the configuration's text edited by edit and the
// HTTP provider's handler wrapped by wrap (either may be nil).
func startWith(t testing.TB, edit func(string) string, wrap func(http.Handler) http.Handler) *env {
	t.Helper()
	return startOpts(t, edit, wrap, daemon.BootOptions{})
}

// startOpts is startWith booting with opts.
func startOpts(t testing.TB, edit func(string) string, wrap func(http.Handler) http.Handler, opts daemon.BootOptions) *env {
	t.Helper()
	e := &env{t: t, mcpProv: mcpprovider.New()}
	ms := httptest.NewServer(e.mcpProv.Handler())
	t.Cleanup(ms.Close)
	d := daemontest.Boot(t, daemontest.Options{Provider: wrap, Boot: opts, Edit: func(s string) string {
		s = mcpConfig(t, ms.URL)(s)
		if edit != nil {
			s = edit(s)
		}
		return s
	}})
	if d.RT.MCPURL == "" {
		t.Fatal("no MCP endpoint")
	}
	e.rt, e.prov = d.RT, d.Provider
	return e
}

// mcpConfig turns the refund configuration into the MCP gateway tests'
// one: the MCP endpoint on loopback; bearer tokens for acme's agent_email
// and agent_chat and globex's agent_email, and an operator ops_alice in
// globex too; an arguments schema on the HTTP refund; and mcpRefund, a tool
// of the MCP server at mcpURL under its own per-order ceiling, which both
// acme agents may call. agent_email's tools are the two refunds and
// crm.lookup. The test fails if the configuration no longer has a line
// this edits.
func mcpConfig(t testing.TB, mcpURL string) func(string) string {
	return func(s string) string {
		t.Helper()
		for _, r := range [][2]string{
			{`  password = "email-secret-passphrase"
  capabilities = ["adp_payments.issue_refund", "crm.lookup", "bank.wire"]
`, `  password = "email-secret-passphrase"
  mcp_token = "` + emailToken + `"
  capabilities = ["adp_payments.issue_refund", "mcp_payments.issue_refund", "crm.lookup"]
`},
			{`  password = "chat-secret-passphrase"
  capabilities = ["adp_payments.issue_refund"]
`, `  password = "chat-secret-passphrase"
  mcp_token = "` + chatToken + `"
  capabilities = ["adp_payments.issue_refund", "mcp_payments.issue_refund"]
`},
			{`  password = "globex-secret-passphrase"
  capabilities = ["adp_payments.issue_refund"]
`, `  password = "globex-secret-passphrase"
  mcp_token = "` + globexToken + `"
  capabilities = ["adp_payments.issue_refund"]

  [[tenants.operators]]
  id = "ops_alice"
  password = "globex-alice-secret"
`},
			{`adapter = "http"
`, `adapter = "http"
arguments_schema = '''{"type":"object","required":["order_id","amount_minor"],"properties":{"order_id":{"type":"string"},"amount_minor":{"type":"integer","minimum":1},"currency":{"type":"string"}}}'''
`},
		} {
			if n := strings.Count(s, r[0]); n != 1 {
				t.Fatalf("the configuration has %d of %q", n, r[0])
			}
			s = strings.Replace(s, r[0], r[1], 1)
		}
		return s + `
[mcp]
listen = "127.0.0.1:0"
allowed_origins = ["http://localhost:6274"]

[[capabilities]]
id = "mcp_payments.issue_refund"
version = "1"
risk = "medium"
effectful = true
adapter = "mcp"

  [capabilities.mcp]
  url = "` + mcpURL + `"
  tool = "issue_refund"
  query_tool = "get_refund"
  timeout = "2s"

  [capabilities.recovery]
  completion = "/refund/status"
  applied = ["succeeded"]
  not_applied = ["failed", "not_found"]
  pending = ["pending"]

[[guarantees]]
id = "mcp-refunds-per-order"
capability_ids = ["mcp_payments.issue_refund"]
resource_pointer = "/order_id"
amount_pointer = "/amount_minor"
limit = 100000
unit = "INR_minor"
`
	}
}

// session connects the Go SDK's client with a bearer token.
func (e *env) session(token string) *mcp.ClientSession {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := mcpgw.Connect(ctx, e.rt.MCPURL, token, "test-agent")
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func refundArgs(run, key, order string, amount int64) map[string]any {
	return map[string]any{"run_id": run, "operation_key": key,
		"arguments": map[string]any{"order_id": order, "amount_minor": amount, "currency": "INR"}}
}

// callTool calls a tool and decodes the structured decision reply.
func callTool(t testing.TB, cs *mcp.ClientSession, tool string, args any) (*mcp.CallToolResult, wire.Reply) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", tool, err)
	}
	var r wire.Reply
	if res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("structured content: %v", err)
		}
	}
	return res, r
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func wantBalance(t *testing.T, r wire.Reply, committed, held, available int64) {
	t.Helper()
	if r.Committed == nil || *r.Committed != committed || *r.Held != held || *r.Available != available {
		got, _ := json.Marshal(r)
		t.Fatalf("balances: got %s, want committed=%d held=%d available=%d", got, committed, held, available)
	}
}

// op runs an operator verb through the gateway's entry point for them.
func (e *env) op(tenant, verb string, req wire.OpRequest) wire.OpReply {
	e.t.Helper()
	b, _ := json.Marshal(req)
	return e.rt.Gateway.Op(context.Background(), tenant, verb, "ops_alice", b)
}

func (e *env) exposure(tenant, guarantee, resource string) []wire.ExposureRow {
	e.t.Helper()
	r := e.op(tenant, "exposure", wire.OpRequest{GuaranteeID: guarantee, Resource: resource})
	if !r.OK {
		e.t.Fatalf("exposure refused: %s %s", r.Code, r.Reason)
	}
	return r.Exposure
}

func TestMCPListTools(t *testing.T) {
	e := start(t)
	cs := e.session(emailToken)
	tools := map[string]*mcp.Tool{}
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		tools[tool.Name] = tool
	}
	for _, id := range []string{httpRefund, mcpRefund, "crm.lookup"} {
		if tools[id] == nil {
			t.Fatalf("tool %s missing from %v", id, tools)
		}
	}
	schema, _ := json.Marshal(tools[httpRefund].InputSchema)
	var s struct {
		Required   []string                   `json:"required"`
		Additional bool                       `json:"additionalProperties"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(schema, &s); err != nil {
		t.Fatal(err)
	}
	if strings.Join(s.Required, ",") != "run_id,operation_key,arguments" || s.Additional {
		t.Fatalf("input schema %s", schema)
	}
	var args map[string]any
	_ = json.Unmarshal(s.Properties["arguments"], &args)
	if req, _ := args["required"].([]any); len(req) != 2 || req[0] != "order_id" {
		t.Fatalf("arguments schema is not the manifest's: %s", s.Properties["arguments"])
	}
	if a := tools[httpRefund].Annotations; a == nil || a.ReadOnlyHint || a.DestructiveHint == nil || !*a.DestructiveHint {
		t.Fatalf("an effectful capability's annotations: %+v", a)
	}
	if a := tools["crm.lookup"].Annotations; a == nil || !a.ReadOnlyHint {
		t.Fatalf("a non-effectful capability's annotations: %+v", a)
	}
	// The whole tool as a client sees it, against its golden file.
	got, _ := json.MarshalIndent(tools[httpRefund], "", "  ")
	got = append(got, '\n')
	const golden = "testdata/tool_issue_refund.json"
	if *rewrite {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("tool %s differs from %s (go test -rewrite to accept):\n%s", httpRefund, golden, got)
	}
}

var rewrite = flag.Bool("rewrite", false, "rewrite the golden files")

// TestMCPSeedRace: two agents, each with its own token, propose INR 800 on
// ord_881 (ceiling INR 1,000) at once over MCP: one applied, one an error
// result starting with shared_guarantee_exceeded; the provider saw one call.
func TestMCPSeedRace(t *testing.T) {
	e := start(t)
	sessions := []*mcp.ClientSession{e.session(emailToken), e.session(chatToken)}
	type out struct {
		res *mcp.CallToolResult
		r   wire.Reply
	}
	outs := make([]out, 2)
	var wg sync.WaitGroup
	for i, cs := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, r := callTool(t, cs, httpRefund, refundArgs("run_"+string(rune('a'+i)), "refund-881", "ord_881", 80000))
			outs[i] = out{res, r}
		}()
	}
	wg.Wait()
	applied, refused := 0, 0
	for _, o := range outs {
		switch {
		case !o.res.IsError && o.r.Status == wire.StatusApplied:
			applied++
			wantBalance(t, o.r, 80000, 0, 20000)
			if len(o.r.ActionDigest) < 64 || o.r.AttemptID == "" {
				t.Fatalf("no action digest in %+v", o.r)
			}
		case o.res.IsError:
			refused++
			if !strings.HasPrefix(text(o.res), string(wire.CodeExceeded)+":") {
				t.Fatalf("refusal text %q does not start with the code", text(o.res))
			}
			if o.r.Status != wire.StatusRefused || o.r.Code != wire.CodeExceeded {
				t.Fatalf("refusal's structured content %+v", o.r)
			}
		default:
			t.Fatalf("unexpected result %+v: %s", o.r, text(o.res))
		}
	}
	if applied != 1 || refused != 1 {
		t.Fatalf("applied %d refused %d, want one each", applied, refused)
	}
	if st := e.prov.Stats(); st.Calls != 1 || st.Applied != 1 {
		t.Fatalf("provider saw %+v, want exactly one call", st)
	}
	rows := e.exposure("acme", "refunds-per-order", "ord_881")
	if len(rows) != 1 || rows[0].Committed != 80000 || rows[0].Held != 0 {
		t.Fatalf("exposure %+v", rows)
	}
}

// TestMCPPendingReconciled: a refund the provider reports pending holds its
// amount; once the provider settles it, the operator's reconcile commits it,
// and resending the same operation key over MCP returns applied.
func TestMCPPendingReconciled(t *testing.T) {
	e := start(t)
	e.prov.Script(provider.Pending)
	cs := e.session(emailToken)
	args := refundArgs("run_p", "refund-p", "ord_p", 30000)
	res, r := callTool(t, cs, httpRefund, args)
	if res.IsError || r.Status != wire.StatusPending {
		t.Fatalf("got %+v: %s", r, text(res))
	}
	wantBalance(t, r, 0, 30000, 70000)
	if !e.prov.Settle(r.AttemptID, "succeeded") {
		t.Fatal("provider does not know the attempt")
	}
	rec := e.op("acme", "reconcile", wire.OpRequest{All: true})
	if !rec.OK || len(rec.Settled) != 1 || rec.Settled[0].Status != wire.StatusApplied {
		t.Fatalf("reconcile: %+v", rec)
	}
	res, r = callTool(t, cs, httpRefund, args)
	if res.IsError || r.Status != wire.StatusApplied {
		t.Fatalf("resend: %+v: %s", r, text(res))
	}
	wantBalance(t, r, 30000, 0, 70000)
	if st := e.prov.Stats(); st.Calls != 1 {
		t.Fatalf("the resend reached the provider: %+v", st)
	}
}

// post sends one JSON-RPC request to the endpoint by hand.
func post(t *testing.T, url, token string, header http.Header, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

func TestMCPOriginsAndTokens(t *testing.T) {
	e := start(t)
	cases := []struct {
		name   string
		token  string
		origin string
		url    string
		want   int
	}{
		{"no origin (a non-browser client)", emailToken, "", e.rt.MCPURL, http.StatusOK},
		{"configured origin", emailToken, "http://localhost:6274", e.rt.MCPURL, http.StatusOK},
		{"foreign origin", emailToken, "https://evil.example", e.rt.MCPURL, http.StatusForbidden},
		{"configured host, other port", emailToken, "http://localhost:6275", e.rt.MCPURL, http.StatusForbidden},
		{"null origin", emailToken, "null", e.rt.MCPURL, http.StatusForbidden},
		{"foreign origin without a token", "", "https://evil.example", e.rt.MCPURL, http.StatusForbidden},
		{"no token", "", "", e.rt.MCPURL, http.StatusUnauthorized},
		{"unknown token", "acme.agent_email", "", e.rt.MCPURL, http.StatusUnauthorized},
		{"a tenant in the path", globexToken, "", strings.TrimSuffix(e.rt.MCPURL, "/mcp") + "/mcp/acme", http.StatusNotFound},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := http.Header{}
			if c.origin != "" {
				h.Set("Origin", c.origin)
			}
			if resp := post(t, c.url, c.token, h, initialize); resp.StatusCode != c.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, c.want)
			}
		})
	}
}

// TestMCPPreflight: a browser page at a configured origin may call the
// endpoint (its CORS preflight is answered, without a token as browsers
// send it); a page anywhere else may not.
func TestMCPPreflight(t *testing.T) {
	e := start(t)
	for origin, want := range map[string]int{"http://localhost:6274": http.StatusNoContent, "https://evil.example": http.StatusForbidden} {
		req, _ := http.NewRequest(http.MethodOptions, e.rt.MCPURL, nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "authorization, content-type")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("preflight from %s: %d, want %d", origin, resp.StatusCode, want)
		}
		if got := resp.Header.Get("Access-Control-Allow-Origin"); (want == http.StatusNoContent) != (got == origin) {
			t.Fatalf("preflight from %s: Access-Control-Allow-Origin %q", origin, got)
		}
	}
	resp := post(t, e.rt.MCPURL, emailToken, http.Header{"Origin": {"http://localhost:6274"}}, initialize)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Access-Control-Allow-Origin") != "http://localhost:6274" {
		t.Fatalf("a call from the configured origin: %d %v", resp.StatusCode, resp.Header)
	}
}

// TestMCPTokenDecidesTenant: a globex token's call lands in globex whatever
// the request claims: headers naming acme are ignored, and arguments that
// carry a tenant, a principal or another capability are refused
// request_malformed by the gateway's strict proposal parser.
func TestMCPTokenDecidesTenant(t *testing.T) {
	e := start(t)
	// Headers a confused or hostile client might think choose the tenant.
	client := mcpgw.TokenClient(globexToken)
	client.Transport = headerTransport{next: client.Transport, h: http.Header{
		"X-Tenant": {"acme"}, "X-Principal": {"agent_email"}, "Mcp-Tenant": {"acme"}}}
	c := mcp.NewClient(&mcp.Implementation{Name: "smuggler", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: e.rt.MCPURL, HTTPClient: client,
		DisableStandaloneSSE: true, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, r := callTool(t, cs, httpRefund, refundArgs("run_g", "refund-g", "ord_g", 90000))
	if res.IsError || r.Status != wire.StatusApplied {
		t.Fatalf("globex call: %+v %s", r, text(res))
	}
	if rows := e.exposure("acme", "refunds-per-order", "ord_g"); len(rows) != 0 {
		t.Fatalf("the call landed in acme: %+v", rows)
	}
	if rows := e.exposure("globex", "refunds-per-order", "ord_g"); len(rows) != 1 || rows[0].Committed != 90000 {
		t.Fatalf("globex exposure %+v", rows)
	}
	for name, extra := range map[string]map[string]any{
		"tenant":        {"tenant": "acme"},
		"principal":     {"principal": "agent_chat"},
		"capability_id": {"capability_id": mcpRefund},
	} {
		args := refundArgs("run_g", "refund-"+name, "ord_g2", 100)
		for k, v := range extra {
			args[k] = v
		}
		res, r := callTool(t, cs, httpRefund, args)
		if !res.IsError || r.Code != wire.CodeRequestMalformed || !strings.HasPrefix(text(res), "request_malformed:") {
			t.Fatalf("%s smuggled in the arguments: %+v %s", name, r, text(res))
		}
	}
	if st := e.prov.Stats(); st.Calls != 1 {
		t.Fatalf("provider calls %+v, want only the clean one", st)
	}
}

type headerTransport struct {
	next http.RoundTripper
	h    http.Header
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.h {
		r.Header[k] = v
	}
	return t.next.RoundTrip(r)
}

// TestMCPRefusalCodes: a refusal of each kind reaches the client as an
// error result whose text starts with the stable code.
func TestMCPRefusalCodes(t *testing.T) {
	e := start(t)
	globex := e.session(globexToken)
	email := e.session(emailToken)
	cases := []struct {
		name string
		cs   *mcp.ClientSession
		tool string
		args any
		code wire.Code
	}{
		{"no grant", globex, mcpRefund, refundArgs("run_r", "k1", "ord_r", 100), wire.CodeAuthorityDenied},
		{"amount invalid", email, httpRefund, refundArgs("run_r", "k2", "ord_r", 0), wire.CodeAmountInvalid},
		{"no operation key", email, httpRefund, map[string]any{"run_id": "run_r", "arguments": map[string]any{"order_id": "o", "amount_minor": 1}}, wire.CodeRequestMalformed},
		{"arguments not an object", email, httpRefund, map[string]any{"run_id": "run_r", "operation_key": "k3", "arguments": "x"}, wire.CodeRequestMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, r := callTool(t, c.cs, c.tool, c.args)
			if !res.IsError || r.Code != c.code || !strings.HasPrefix(text(res), string(c.code)+":") {
				t.Fatalf("got %+v %q, want %s", r, text(res), c.code)
			}
		})
	}
}

// TestMCPBridge: the stdio bridge serves the gateway's tools to a client
// that speaks only stdio (here the SDK client over a pipe).
func TestMCPBridge(t *testing.T) {
	e := start(t)
	clientR, bridgeW := pipe(t)
	bridgeR, clientW := pipe(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	// The bridge reaches the gateway through a proxy the test can cut.
	target, _ := url.Parse(e.rt.MCPURL)
	proxy := httptest.NewServer(httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host}))
	defer proxy.Close()
	go func() {
		done <- mcpgw.Bridge(ctx, proxy.URL+mcpgw.Path, chatToken, "", &mcp.IOTransport{Reader: bridgeR, Writer: bridgeW})
	}()
	c := mcp.NewClient(&mcp.Implementation{Name: "stdio-agent", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.IOTransport{Reader: clientR, Writer: clientW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 3 {
		t.Fatalf("%d tools through the bridge, want 3", n)
	}
	res, r := callTool(t, cs, httpRefund, refundArgs("run_b", "refund-b", "ord_b", 1000))
	if res.IsError || r.Status != wire.StatusApplied {
		t.Fatalf("bridged call: %+v %s", r, text(res))
	}
	proxy.CloseClientConnections()
	proxy.Close()
	res, r = callTool(t, cs, httpRefund, refundArgs("run_b", "refund-b2", "ord_b", 1000))
	if !res.IsError || r.Status != wire.StatusUnknown || !strings.HasPrefix(text(res), "ledger_unavailable:") {
		t.Fatalf("a call the gateway did not answer: %+v %s", r, text(res))
	}
	_ = cs.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the bridge did not stop when its client closed")
	}
}

func pipe(t *testing.T) (*os.File, *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

// The provider side: the capability's provider is a tool of an MCP server,
// so the agent's MCP call is governed on its way to another MCP server.

func TestMCPProviderApplies(t *testing.T) {
	e := start(t)
	cs := e.session(emailToken)
	res, r := callTool(t, cs, mcpRefund, refundArgs("run_m", "refund-m1", "ord_m1", 40000))
	if res.IsError || r.Status != wire.StatusApplied {
		t.Fatalf("got %+v: %s", r, text(res))
	}
	wantBalance(t, r, 40000, 0, 60000)
	got, ok := e.mcpProv.Refund(r.AttemptID)
	if !ok || got.Status != "succeeded" || got.OrderID != "ord_m1" || got.Amount != 40000 {
		t.Fatalf("the provider holds %+v under the attempt id", got)
	}
	if st := e.mcpProv.Stats(); st.Calls != 1 || st.Applied != 1 {
		t.Fatalf("provider saw %+v", st)
	}
}

func TestMCPProviderPending(t *testing.T) {
	e := start(t)
	e.mcpProv.Script(mcpprovider.Pending)
	cs := e.session(emailToken)
	_, r := callTool(t, cs, mcpRefund, refundArgs("run_m", "refund-m2", "ord_m2", 40000))
	if r.Status != wire.StatusPending {
		t.Fatalf("got %+v", r)
	}
	wantBalance(t, r, 0, 40000, 60000)
	// Still pending at the provider: reconciliation changes nothing.
	rec := e.op("acme", "reconcile", wire.OpRequest{AttemptID: r.AttemptID})
	if len(rec.Settled) != 1 || rec.Settled[0].Status != wire.StatusPending {
		t.Fatalf("reconcile while pending: %+v", rec)
	}
	e.mcpProv.Settle(r.AttemptID, "succeeded")
	rec = e.op("acme", "reconcile", wire.OpRequest{AttemptID: r.AttemptID})
	if len(rec.Settled) != 1 || rec.Settled[0].Status != wire.StatusApplied {
		t.Fatalf("reconcile after settle: %+v", rec)
	}
	if rows := e.exposure("acme", "mcp-refunds-per-order", "ord_m2"); len(rows) != 1 || rows[0].Committed != 40000 || rows[0].Held != 0 {
		t.Fatalf("exposure %+v", rows)
	}
	if st := e.mcpProv.Stats(); st.Calls != 1 || st.Queries != 2 {
		t.Fatalf("provider saw %+v, want one call and two queries", st)
	}
}

// TestMCPProviderTransportBreaks: the provider applies the refund and the
// connection breaks before its answer: the outcome is unknown and the hold
// stays (no second call can overrun the ceiling), until reconciliation
// asks the query tool and commits it.
func TestMCPProviderTransportBreaks(t *testing.T) {
	e := start(t)
	e.mcpProv.Script(mcpprovider.Break)
	cs := e.session(emailToken)
	_, r := callTool(t, cs, mcpRefund, refundArgs("run_m", "refund-m3", "ord_m3", 80000))
	if r.Status != wire.StatusUnknown {
		t.Fatalf("got %+v, want unknown", r)
	}
	wantBalance(t, r, 0, 80000, 20000)
	res, r2 := callTool(t, e.session(chatToken), mcpRefund, refundArgs("run_c", "refund-m3", "ord_m3", 80000))
	if !res.IsError || r2.Code != wire.CodeExceeded {
		t.Fatalf("a second refund while the first is unknown: %+v %s", r2, text(res))
	}
	rec := e.op("acme", "reconcile", wire.OpRequest{All: true})
	if len(rec.Settled) != 1 || rec.Settled[0].Status != wire.StatusApplied {
		t.Fatalf("reconcile: %+v", rec)
	}
	if rows := e.exposure("acme", "mcp-refunds-per-order", "ord_m3"); len(rows) != 1 || rows[0].Committed != 80000 || rows[0].Held != 0 {
		t.Fatalf("exposure %+v", rows)
	}
	if st := e.mcpProv.Stats(); st.Calls != 1 || st.Applied != 1 {
		t.Fatalf("provider saw %+v, want the one call", st)
	}
}

// TestMCPDefaultClient: a client with the SDK's default transport (which
// opens a standalone SSE stream, answered 405 by the stateless endpoint)
// lists and calls tools all the same.
func TestMCPDefaultClient(t *testing.T) {
	e := start(t)
	c := mcp.NewClient(&mcp.Implementation{Name: "default", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.rt.MCPURL, HTTPClient: mcpgw.TokenClient(emailToken)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, r := callTool(t, cs, "crm.lookup", map[string]any{"run_id": "run_d", "operation_key": "lookup-1", "arguments": map[string]any{"q": "x"}})
	if res.IsError || r.Status != wire.StatusApplied {
		t.Fatalf("got %+v %s", r, text(res))
	}
}

// BenchmarkMCPPropose: one governed refund per iteration, each on its own
// order, from an MCP client through the gateway to an HTTP provider and to
// an MCP provider (a fresh MCP session per provider call).
// The baseline is the same proposal over NATS to the HTTP provider.
func BenchmarkMCPPropose(b *testing.B) {
	b.Run("nats-baseline", func(b *testing.B) {
		e := start(b)
		nc := gatewaytest.Connect(b, e.rt.URL, "email-secret-passphrase", "acme", "agent_email")
		b.ResetTimer()
		for i := range b.N {
			key := fmt.Sprintf("bench-%d", i)
			args := refundArgs("run_bench", key, "ord_"+key, 100)
			args["capability_id"] = httpRefund
			if r := gatewaytest.Propose(b, nc, "acme", "agent_email", args); r.Status != wire.StatusApplied {
				b.Fatalf("%+v", r)
			}
		}
	})
	for _, tool := range []string{httpRefund, mcpRefund} {
		b.Run(tool, func(b *testing.B) {
			e := start(b)
			cs := e.session(emailToken)
			b.ResetTimer()
			for i := range b.N {
				key := fmt.Sprintf("bench-%d", i)
				if res, r := callTool(b, cs, tool, refundArgs("run_bench", key, "ord_"+key, 100)); res.IsError || r.Status != wire.StatusApplied {
					b.Fatalf("%+v %s", r, text(res))
				}
			}
		})
	}
}
