// Package gateway is the request path over NATS: it serves the agents'
// proposals (ctx.v1.<tenant>.<principal>.propose) and the operators' verbs
// (ctx.v1.<tenant>.ops.<verb>.<operator>), with the identity taken from the
// subject the NATS server let the requester publish on. A proposal, its
// settlement, a release and a breaker's failure are kernel steps
// (kernel.ProposeInput, SettleInput, ReleaseInput, FailureInput) that the
// aggregates engine runs (Engine.Run: it loads what the step reads, appends
// its effects, decides again on a conflict); the gateway supplies the
// runtime's inputs, calls the provider through the capability's adapter
// (HTTP or MCP, each with its recovery contract) once the dispatch-start is
// stored, and settles what the provider reported. The reconciler and the circuit
// breakers run here too, and telemetry wraps the request path as a
// decorator. It holds no rule of its own: every refusal is a kernel
// decision, and the messages are package wire's.
//
// The usage loop of the composition root (package daemon):
//
//	g := gateway.New(gateway.Options{Config: cfg, Store: store, Sealer: sealer, Executor: id, Logger: log, Model: model})
//	g.Mount(verb, handler)             // the projections' audit verbs
//	err := g.StartBreakers(ctx, nc)
//	err = g.Start(ctx, nc)             // pin the guarantees, serve, reconcile
//	...
//	g.Stop()
//
// and of a door that is not NATS (the MCP gateway), through the one
// admission path (identity, body bound, per-principal rate, the tenant's
// lane; admission.go) every door passes:
//
//	reply := g.Admit(ctx, tenant, principal, trace, body) // wire.Reply
package gateway
