// Command tlsenv starts the environment the clients' TLS suites run
// against (internal/testing/tlsenv): a private CA, a TLS-only nats-server with the
// principals as password and nkey users and a contextosd runtime behind
// it, and a TLS-only operator-mode server with the principals as creds
// users. It prints one line of JSON (tlsenv.Info: URLs, CA, client
// certificate, seeds, creds files) once everything answers, then reads
// commands on standard input: "restart" restarts the server with the
// runtime on the same port (it prints "restarted"); end of input stops
// everything.
//
//	tlsenv --config examples/shared-guarantees/contextos.toml --dir /tmp/env
package main
