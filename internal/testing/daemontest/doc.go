// Package daemontest boots a real runtime for the tests of the packages
// around it (ctx, the Go client, the schema vectors, the MCP gateway, the
// console and towerd): an embedded nats-server with JetStream on a
// loopback port, the synthetic refund provider on real HTTP, and the
// one refund configuration of package refundcfg, which every test shares
// instead of writing its own. A test that needs a variation says so in
// Options: an edit of the text (Edit), of the parsed configuration
// (Config), the console's principals and high-risk refund (Console), a
// configuration file (File), or a wrapped provider (Provider).
// Everything it starts is stopped at the end of the test.
//
//	d := daemontest.Boot(t, daemontest.Options{})
//	c, _ := client.Connect(client.Options{URL: d.RT.URL, Tenant: "acme",
//		Principal: "agent_email", Password: daemontest.Passwords["agent_email"]})
//	d.Provider.Script(provider.Pending)
package daemontest
