// Command chaos runs the chaos harness (package chaos): three contextosd
// processes against one nats-server process or a 3-node JetStream cluster,
// a bounded load of many agents over hundreds of orders, and injected
// faults; it prints the table and exits non-zero on any violation.
//
//	chaos [-mode single|cluster|both] [-duration 60s] [-seed 1] [-v]
package main
