// Command bench measures, in one run, raw JetStream appends (one at a time
// and atomic batches), kernel decisions, reservations through the
// aggregates engine (10k resources uniform and one hot resource), full
// governed proposals over NATS, cold loads in a large stream, and a
// PostgreSQL peer doing the same reservations by hand, for the durable
// (fsync before ack) and relaxed settings, and the engine's adaptive group
// commit send policy against each fixed one, taking turns in one run. It prints progress and ratios and
// writes BENCHMARKS.md with a chart.
//
//	go run ./cmd/bench [-duration 4s] [-out BENCHMARKS.md] [-chart docs/benchmarks.png]
package main
