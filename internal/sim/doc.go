// Package sim is a deterministic simulator of the runtime: several gateway
// replicas (each with its own engine, warm state and index) share one
// simulated event store, call one simulated provider and read one simulated
// clock, and every choice — which replica serves which request, which
// append fails, loses its acknowledgement or conflicts, what the provider
// answers, when a replica restarts and loses everything it held in memory —
// is drawn from one seed. The same seed replays the same run, event for
// event.
//
// The driver runs the real request path (gateway.Gateway.Propose), the
// real engine, the real reconciler (ReconcileOnce) and the real read model
// (projections.Model) from one goroutine, one call at a time. The
// engine still commits on its own goroutine, but each Do is waited for
// before the next call starts, so there is never more than one transaction
// in flight and the order of every store call is the driver's. Concurrency
// between replicas is simulated inside the provider call: while one
// replica waits for the provider, the driver may serve other requests on
// the other replicas (and advance the clock) before the reply returns.
//
// After every step the driver checks the invariants (see Check); at the end
// of a run it audits the whole stream, replays it offline with the
// verifier's fold and compares that with the read model, and checks the
// recorded history for linearizability with lincheck.
package sim
