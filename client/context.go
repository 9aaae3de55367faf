package client

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/contextos/ledger/wire"
)

// ContextRequest asks for the compiled context of a run (wire.ContextRequest).
type ContextRequest = wire.ContextRequest

// CompiledContext is a compile reply: the digest and the compiled context's
// JSON (schema docs/schema/compiled-context.json).
type CompiledContext struct {
	Digest  string
	Context json.RawMessage
}

// CompileContext asks the daemon for the compiled context of the agent's
// run: payload blocks by bucket, the evidence gate, omissions, negative
// state and the derived tool exposure. It stores nothing and grants
// nothing; it is one request (a refusal is a Refused, rate_limited and
// overloaded included, since it spends the same rate as a proposal).
func (c *Client) CompileContext(ctx context.Context, req ContextRequest) (CompiledContext, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return CompiledContext{}, fmt.Errorf("compile request: %w", err)
	}
	m, err := c.request(ctx, wire.ContextSubject(c.tenant, c.principal), body, c.timeout)
	if err != nil {
		return CompiledContext{}, err
	}
	var r wire.ContextReply
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return CompiledContext{}, fmt.Errorf("compile reply: %w", err)
	}
	if r.Status != wire.ContextCompiled {
		return CompiledContext{}, Refused{Code: Code(r.Code), Reason: r.Reason}
	}
	return CompiledContext{Digest: r.Digest, Context: r.Context}, nil
}
