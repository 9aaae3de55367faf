package gateway

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/kernel"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCPAdapter calls a tool of an existing MCP server (streamable HTTP) under
// a recovery contract over the tool result's structured content: the state
// at recovery.completion says applied, not applied or pending; a transport
// failure, or a result (error or not) whose state the contract does not
// list, is unknown. Each call is its own MCP session, so a broken
// connection never leaves a half-open session behind.
type MCPAdapter struct {
	Cap      *config.CapabilityConfig
	Contract kernel.RecoveryContract
	Client   *http.Client
}

// NewMCPAdapter returns the adapter of an mcp capability.
func NewMCPAdapter(cp *config.CapabilityConfig) *MCPAdapter {
	r := cp.Recovery
	return &MCPAdapter{
		Cap:      cp,
		Contract: kernel.RecoveryContract{Completion: r.Completion, Applied: r.Applied, NotApplied: r.NotApplied, Pending: r.Pending},
		// As for the http adapter: a redirect is the provider's answer, not
		// an instruction to send the call somewhere else (an unknown).
		Client: &http.Client{Transport: providerTransport(nil),
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
	}
}

// maxToolResultBytes bounds the structured content the adapter classifies.
const maxToolResultBytes = 1 << 20

// Dispatch calls the tool with the arguments and the attempt id as the
// idempotency argument.
func (a *MCPAdapter) Dispatch(ctx context.Context, attemptID string, args json.RawMessage) Observation {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(args, &m); err != nil || m == nil {
		return Observation{Outcome: kernel.OutcomeUnknown, Ref: "request: arguments are not an object"}
	}
	key, _ := json.Marshal(attemptID)
	m[a.Cap.MCP.IdempotencyArgument] = key
	return a.call(ctx, a.Cap.MCP.Tool, m)
}

// Query calls the query tool with the attempt id; without one the attempt
// stays unknown.
func (a *MCPAdapter) Query(ctx context.Context, attemptID string) Observation {
	if a.Cap.MCP.QueryTool == "" {
		return Observation{Outcome: kernel.OutcomeUnknown, Ref: "no mcp.query_tool"}
	}
	return a.call(ctx, a.Cap.MCP.QueryTool, map[string]any{a.Cap.MCP.IdempotencyArgument: attemptID})
}

func (a *MCPAdapter) call(ctx context.Context, tool string, args any) Observation {
	ctx, cancel := context.WithTimeout(ctx, a.Cap.MCP.Timeout.Duration)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "contextosd", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: a.Cap.MCP.URL, HTTPClient: a.Client,
		MaxRetries: -1, DisableStandaloneSSE: true}, nil)
	if err != nil {
		return Observation{Outcome: kernel.OutcomeUnknown, Ref: "transport error"}
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return Observation{Outcome: kernel.OutcomeUnknown, Ref: "transport error"}
	}
	return a.classify(res)
}

// classify reads the result's structured content under the contract. A
// capability that is not effectful declares none: it changes nothing, so
// its answer is all there is to observe.
func (a *MCPAdapter) classify(res *mcp.CallToolResult) Observation {
	if !a.Cap.Effectful && a.Contract.Completion == "" {
		if res.IsError {
			return Observation{Outcome: kernel.OutcomeNotApplied, Ref: "error result"}
		}
		return Observation{Outcome: kernel.OutcomeApplied, Ref: "result"}
	}
	body, err := json.Marshal(res.StructuredContent)
	if err != nil || len(body) > maxToolResultBytes {
		return Observation{Outcome: kernel.OutcomeUnknown, Ref: "broken reply"}
	}
	// A tool result is the provider's answer, successful or not: it stands
	// where an HTTP adapter has a 2xx body, so only the listed state settles.
	out, state := a.Contract.Classify(kernel.ProviderReply{Status: http.StatusOK, Body: body})
	ref := state
	switch {
	case ref == "" && res.IsError:
		ref = "error result"
	case ref == "":
		ref = "no completion state"
	case res.IsError:
		ref = "error result: " + ref
	}
	return Observation{Outcome: out, Ref: ref}
}
