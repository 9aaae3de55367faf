package wire

import "encoding/json"

// MaxContextBytes bounds the compiled context a compile request returns:
// the JSON of the CompiledContext (payload blocks, gate, omissions,
// negative state, tool exposure). The pack's buckets already bound the
// payload; this bounds the whole reply under the NATS default max_payload
// (1 MiB) with room for the envelope. A context over it is never cut (a
// block cut short would no longer match its content hash): the request is
// refused with CodeContextTooLarge and the agent names fewer refs, or an
// operator narrows the pack's buckets.
const MaxContextBytes = 512 << 10

// ContextRequest is the body of an agent's compile request (subject
// ContextSubject, MCP tool ContextTool): the run, the capability whose
// context pack and decision govern the step the agent is about to take,
// and the evidence refs it would name in its proposal. Identity comes from
// the door, never from the body.
type ContextRequest struct {
	RunID        string   `json:"run_id"`
	CapabilityID string   `json:"capability_id"`
	EvidenceRefs []string `json:"evidence_refs,omitempty"`
}

// ContextStatus is the status of a compile reply. Its zero value is invalid.
type ContextStatus string

// Statuses of a compile reply.
const (
	ContextCompiled ContextStatus = "compiled"
	ContextRefused  ContextStatus = "refused"
)

// ContextReply answers a compile request: the compiled context (the
// kernel's CompiledContext, schema docs/schema/compiled-context.json) and
// its digest, or a refusal with a stable code. A compile request stores
// nothing and grants nothing: a later proposal is decided as always.
type ContextReply struct {
	Status  ContextStatus   `json:"status"`
	Code    Code            `json:"code,omitempty"`
	Reason  string          `json:"reason,omitempty"`
	Digest  string          `json:"digest,omitempty"`
	Context json.RawMessage `json:"context,omitempty"`
}

// ContextRefusal is a refused ContextReply.
func ContextRefusal(code Code, reason string) ContextReply {
	return ContextReply{Status: ContextRefused, Code: code, Reason: reason}
}

// ContextTool is the name of the MCP tool that serves compile requests.
const ContextTool = "context_compile"
