// Package daemontest boots a real runtime for the tests of package daemon
// and of the packages around it (ctx, the Go client, the schema vectors,
// the MCP gateway, the console and towerd): an embedded nats-server with
// JetStream on a loopback port, the synthetic refund provider on real
// HTTP, and the one refund configuration of package refundcfg, which every test shares
// instead of writing its own. A test that needs a variation says so in
// Options: an edit of the text (Edit), of the parsed configuration
// (Config), the console's principals and high-risk refund (Console), a
// configuration file (File), a wrapped provider (Provider), the runtime's
// log (Log), or a restart or another replica over an earlier Daemon's data
// and provider (Of). Start is Boot for a runtime expected to refuse to
// start. Everything it starts is stopped at the end of the test.
//
//	d := daemontest.Boot(t, daemontest.Options{})
//	c, _ := client.Connect(client.Options{URL: d.RT.URL, Tenant: "acme",
//		Principal: "agent_email", Password: daemontest.Passwords["agent_email"]})
//	d.Provider.Script(provider.Pending)
package daemontest
