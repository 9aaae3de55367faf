package mcpgw

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	"github.com/contextos/ledger/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TokenClient is an HTTP client that sends token as its bearer credential.
// It follows no redirect: the token goes to the endpoint it was given for,
// never to one a response names.
func TokenClient(token string) *http.Client { return RunClient(token, "") }

// RunClient is TokenClient that also names run in RunHeader on every
// request ("" names none), so tools/list is that run's tool exposure.
func RunClient(token, run string) *http.Client {
	return &http.Client{Transport: bearer{token: token, run: run, next: http.DefaultTransport},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

type bearer struct {
	token, run string
	next       http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	if b.run != "" {
		r.Header.Set(RunHeader, b.run)
	}
	return b.next.RoundTrip(r)
}

// Connect opens a client session to the gateway at endpoint as the agent
// token names.
func Connect(ctx context.Context, endpoint, token, name string) (*mcp.ClientSession, error) {
	return ConnectRun(ctx, endpoint, token, "", name)
}

// ConnectRun is Connect naming run in RunHeader ("" names none).
func ConnectRun(ctx context.Context, endpoint, token, run, name string) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, nil)
	return c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: RunClient(token, run),
		DisableStandaloneSSE: true, MaxRetries: -1}, nil)
}

// Bridge serves the gateway's tools on t (stdio, for clients that speak only
// stdio) and forwards every call to the gateway at endpoint as the agent
// token names; it returns when t closes. The token never leaves the bridge
// but as the Authorization header of its requests to endpoint. A non-empty
// run is named in RunHeader, so the tools served are that run's exposure.
func Bridge(ctx context.Context, endpoint, token, run string, t mcp.Transport) error {
	up := &upstream{endpoint: endpoint, token: token, run: run}
	cs, err := up.session(ctx)
	if err != nil {
		return fmt.Errorf("connect %s: %w", endpoint, err)
	}
	defer up.close()
	srv := mcp.NewServer(&mcp.Implementation{Name: "contextos-mcp-stdio", Version: "1"}, &mcp.ServerOptions{Instructions: instructions})
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("list tools of %s: %w", endpoint, err)
		}
		srv.AddTool(tool, up.forward(tool.Name))
	}
	return srv.Run(ctx, t)
}

// upstream is the bridge's session to the gateway, opened again after a
// transport failure (the gateway keeps no session state, so a new session
// after a daemon restart serves the same tools).
type upstream struct {
	endpoint, token, run string
	mu                   sync.Mutex
	cs                   *mcp.ClientSession
}

func (u *upstream) session(ctx context.Context) (*mcp.ClientSession, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.cs != nil {
		return u.cs, nil
	}
	cs, err := ConnectRun(ctx, u.endpoint, u.token, u.run, "contextos-mcp-stdio")
	if err != nil {
		return nil, err
	}
	u.cs = cs
	return cs, nil
}

func (u *upstream) drop(cs *mcp.ClientSession) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.cs == cs {
		_ = cs.Close()
		u.cs = nil
	}
}

func (u *upstream) close() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.cs != nil {
		_ = u.cs.Close()
	}
}

// forward relays one tool call. A call the gateway did not answer has an
// unknown outcome: the result says so as the gateway does when its store
// does not answer (ledger_unavailable), and resending the same
// operation_key learns it.
func (u *upstream) forward(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		cs, err := u.session(ctx)
		if err == nil {
			var res *mcp.CallToolResult
			if res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: req.Params.Arguments}); err == nil {
				return res, nil
			}
			u.drop(cs)
		}
		return Result(wire.Reply{Status: wire.StatusUnknown, Code: wire.CodeLedgerUnavailable,
			Reason: "the gateway did not answer; resend the same operation_key to learn the outcome: " + err.Error()}), nil
	}
}
