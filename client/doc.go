// Package client is the Go client of contextosd's agent and operator APIs
// over NATS (docs/wire.md): it connects with a principal's credentials,
// uses the principal's inbox prefix, resends a proposal under the same
// operation key until its outcome is known, and turns refusals into typed
// errors carrying the catalog's stable codes. It imports the wire contract
// (package wire, whose structs its messages are) and nats.go only, nothing
// of the runtime (TestDeps). Audit returns the client of the audit and
// export verbs. A refusal's Retry says what may be done next (never, same,
// later, operator). TestWireVectors reads the golden replies of
// testdata/wire with the client's own decoding.
//
//	c, err := client.Connect(client.Options{URL: url, Tenant: "acme", Principal: "agent_email", Password: pw})
//	d, err := c.Propose(ctx, client.Proposal{RunID: "run_1", OperationKey: "refund-ord_881",
//		CapabilityID: "adp_payments.issue_refund", Arguments: args})
//	var r client.Refused
//	if errors.As(err, &r) && r.Code == client.CodeExceeded { ... }
package client
