// Package bench measures the ledger against its ceilings and a PostgreSQL
// peer: raw JetStream appends, kernel decisions, reservations through the
// aggregates engine, full governed proposals over NATS, and cold loads, each
// as throughput with p50/p99 latency at several concurrencies. cmd/bench
// runs them all in one process and writes BENCHMARKS.md; the Go benchmarks
// in aggregates/ measure the same reservation workloads under `go test`.
//
// Every figure is a closed loop: n workers each start the next operation as
// soon as the previous one returned, for a fixed time after a warm-up.
// Ratios are taken between figures of the same run, on the same machine.
package bench
