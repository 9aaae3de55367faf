// Package daemontest boots a real runtime for the tests of the packages
// around it (ctx, the Go client, the schema vectors): an embedded
// nats-server with JetStream on a loopback port, the synthetic refund
// provider on real HTTP, and the refund configuration of refund.toml, which
// every such test shares instead of writing its own. Everything it starts
// is stopped at the end of the test.
//
//	d := daemontest.Boot(t, daemontest.Options{})
//	c, _ := client.Connect(client.Options{URL: d.RT.URL, Tenant: "acme",
//		Principal: "agent_email", Password: daemontest.Passwords["agent_email"]})
//	d.Provider.Script(provider.Pending)
package daemontest
