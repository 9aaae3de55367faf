// Package tlsenv starts what the clients' TLS suites connect to, the way a
// production deployment is reached: a private CA; a TLS-only nats-server
// that verifies client certificates and knows every principal of a
// configuration by password and by nkey, with a contextosd runtime
// (daemon.Boot, itself an nkey user) and the synthetic provider behind it;
// and a second TLS-only nats-server in operator mode that knows every
// principal by a creds file (JWT), with nobody behind its subjects.
//
// It writes every file a client needs (CA, client certificate and key,
// nkey seeds, creds files) under one directory and describes them in an
// Info; cmd/tlsenv prints that Info as JSON for the Python and TypeScript
// suites, and the Go client's tests call Start directly.
//
//	env, err := tlsenv.Start(tlsenv.Options{Config: "examples/shared-guarantees/contextos.toml", Dir: dir})
//	defer env.Close()
//	c, err := client.Connect(client.Options{URL: env.Info.URL, Tenant: "acme", Principal: "agent_email",
//		NKeyFile: env.Info.NKeys["agent_email"], TLSCAFile: env.Info.CAFile,
//		TLSCertFile: env.Info.CertFile, TLSKeyFile: env.Info.KeyFile})
package tlsenv
