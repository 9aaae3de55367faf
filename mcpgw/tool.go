package mcpgw

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/propagation"
)

// toolOf is a capability's MCP tool. Its input is the proposal
// (wire.Proposal, with its bounds) less the capability id (the tool's name): the run, the operation key, the
// capability's arguments (under the manifest's arguments_schema), and
// optionally evidence refs and an approval.
//
// The operation key is required rather than taken from the JSON-RPC
// request id: the SDK does not expose that id to tool handlers, and it
// could not serve anyway, since clients number requests afresh in every
// session, so a resend after a reconnect would carry a new id (a second
// operation) and two sessions would reuse the same ids for different calls.
func toolOf(cp *config.CapabilityConfig) *mcp.Tool {
	schema := fmt.Sprintf(`{"type":"object","additionalProperties":false,"required":["run_id","operation_key","arguments"],"properties":{`+
		`"run_id":{"type":"string","minLength":1,"maxLength":%[2]d,"description":"the agent run this call belongs to"},`+
		`"operation_key":{"type":"string","minLength":1,"maxLength":%[2]d,"description":"your stable idempotency key for this action: the same key returns the same operation, never a second reservation"},`+
		`"arguments":%[1]s,`+
		`"evidence_refs":{"type":"array","maxItems":%[3]d,"items":{"type":"string","minLength":1,"maxLength":%[4]d}},`+
		`"approval_id":{"type":"string","maxLength":%[2]d}}}`, cp.ArgumentsSchemaJSON(), wire.MaxIDBytes, wire.MaxEvidenceRefs, wire.MaxEvidenceRefBytes)
	effectful := cp.Effectful
	return &mcp.Tool{
		Name:        cp.ID,
		Description: fmt.Sprintf("Governed capability %s (version %s, risk %s).", cp.ID, cp.Version, cp.Risk),
		InputSchema: json.RawMessage(schema),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: !cp.Effectful, DestructiveHint: &effectful, IdempotentHint: true},
	}
}

// call is a tool's handler: the proposal goes through the admission path
// every door passes (Proposer: the gateway's Admit) under the identity the
// token names, and its reply is the result.
func call(gw Proposer, capID string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		id, ok := identityOf(req.Extra)
		if !ok {
			return nil, errors.New("no verified identity") // unreachable behind the bearer check
		}
		// A client that hangs up mid-call must not cut a dispatch short:
		// the decision runs to its end, and a resend learns it.
		var trace propagation.TextMapCarrier // the client's traceparent, if it sent one
		if req.Extra != nil && req.Extra.Header != nil {
			trace = propagation.HeaderCarrier(req.Extra.Header)
		}
		reply := gw.Admit(context.WithoutCancel(ctx), id.tenant, id.principal, trace, ProposalBody(capID, req.Params.Arguments))
		return Result(reply), nil
	}
}

// ProposalBody is the proposal of a call to capID's tool: the tool's
// arguments object with capability_id as its first member. Everything else
// is decided by the gateway's strict proposal parser, so a call that names
// its own capability_id (a duplicate member), a tenant or a principal (an
// unknown member), or is not an object, is refused request_malformed and
// recorded like any malformed NATS proposal.
func ProposalBody(capID string, args json.RawMessage) []byte {
	id, _ := json.Marshal(capID)
	body := append([]byte(`{"capability_id":`), id...)
	rest := bytes.TrimLeft(args, " \t\r\n")
	if len(rest) == 0 || rest[0] != '{' {
		// Not an object: a body the parser refuses, with the raw value kept
		// where the digest of the refused body covers it.
		return append(append(body, `,"arguments":`...), nonEmpty(args)...)
	}
	rest = bytes.TrimLeft(rest[1:], " \t\r\n")
	if len(rest) > 0 && rest[0] == '}' {
		return append(body, rest...)
	}
	return append(append(body, ','), rest...)
}

func nonEmpty(b []byte) []byte {
	if len(bytes.TrimSpace(b)) == 0 {
		return []byte("null}")
	}
	return append(bytes.Clone(b), '}')
}

// Result is the tool result of a decision: the reply as structured
// content. A refusal, a call the ledger did not answer (whose outcome a
// resend learns), and an outcome left unknown by a stored event the kernel
// refuses (which no resend learns) are error results whose text starts with
// the code.
func Result(r wire.Reply) *mcp.CallToolResult {
	b, err := json.Marshal(r)
	if err != nil {
		b = []byte(`{"status":"unknown"}`)
	}
	res := &mcp.CallToolResult{StructuredContent: json.RawMessage(b)}
	if r.Status == wire.StatusRefused || r.Code == wire.CodeLedgerUnavailable || r.Code == wire.CodeStoredEventRefused {
		res.IsError = true
		res.Content = []mcp.Content{&mcp.TextContent{Text: string(r.Code) + ": " + r.Reason}}
		return res
	}
	res.Content = []mcp.Content{&mcp.TextContent{Text: string(b)}}
	return res
}
