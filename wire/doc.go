// Package wire is the ctx.v1 wire contract (docs/wire.md): every request
// and reply an agent or an operator exchanges with contextosd over NATS, the
// subjects they travel on and the inbox rule, the input limits, and the
// catalog of stable codes with each code's retry class. It imports the
// standard library only, so that a client needs nothing of the runtime.
//
// An agent publishes a Proposal on ProposeSubject and reads a Reply; an
// operator sends a verb's request on OpSubject and reads an OpReply:
//
//	body, _ := json.Marshal(wire.Proposal{RunID: run, OperationKey: key, CapabilityID: cap, Arguments: args})
//	m, err := nc.Request(wire.ProposeSubject(tenant, me), body, timeout)
//	var r wire.Reply
//	err = json.Unmarshal(m.Data, &r)
//	switch {
//	case r.Status == wire.StatusUnknown:
//		// resend the same proposal later to learn its outcome
//	case r.Code != "":
//		retry := wire.RetryOf(r.Code) // never, same, later or operator
//	}
//
// The connection's inbox prefix must be InboxPrefix(tenant, me): the server
// lets a principal subscribe to nothing else, and the runtime replies only
// there (ReplyAllowed).
//
// The code lists of the Go, Python and TypeScript clients, the schemas' code
// enum and the TypeScript clients' member lists are generated from this
// package (go generate ./wire; wire/gen's TestGenerated fails while one
// differs); every JSON Schema of docs/schema and the Python message types are
// checked against its structs member by member (TestSchemasAreTheWire,
// TestPythonTypes), and the MCP tool's input schema takes its members and
// bounds from Proposal (mcpgw's TestToolSchemaIsTheProposal).
package wire

//go:generate go run ./gen
