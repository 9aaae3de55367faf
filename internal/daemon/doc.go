// Package daemon is contextosd's composition root. Boot starts or reaches
// NATS (the embedded server with its users, or an external deployment),
// loads and checks the signing key against the event stream, builds the
// store, the read model, the gateway and the projections, wires telemetry
// and the health endpoints, and starts the MCP gateway and the console it
// is handed; Close stops them in reverse. The rules are in kernel, the
// request path in gateway: nothing here decides anything.
//
// The tests of this package boot whole daemons on real embedded servers:
// they are the integration tests of the request path, the operator verbs,
// the projections and the telemetry together.
package daemon
