// Package daemon is contextosd's composition root. Boot starts or reaches
// NATS (the embedded server with its users, or an external deployment),
// loads and checks the signing key against the event stream, builds the
// store, the read model, the gateway and the projections, wires telemetry
// and the health endpoints, and starts the MCP gateway (mcpgw.Listen, handed
// the gateway as its mcpgw.Proposer) and the operator console
// (console.Start, handed its options) when the configuration asks for them;
// Close stops them in reverse. The rules are in kernel, the request path in
// gateway: nothing here decides anything. Neither the console nor mcpgw
// imports this package (TestDoorsDoNotImportTheRoot).
//
// cmd/contextosd parses its flags and calls Boot:
//
//	cfg, err := config.Load(path)
//	rt, err := daemon.Boot(cfg, daemon.BootOptions{Logger: log})
//	defer rt.Close()
//	// rt.URL, rt.MCPURL, rt.ConsoleURL; rt.Gateway serves until Close
//
// (The package is not named runtime, as the composition root is elsewhere
// called, so as not to shadow the standard library's package of that name.)
//
// The tests of this package boot whole daemons on real embedded servers:
// they are the integration tests of the request path, the operator verbs,
// the projections and the telemetry together.
package daemon
