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
// (projections.Model). Most steps are one call at a time from the driver's
// goroutine: each Do is waited for before the next call starts, so the
// order of every store call is the driver's. Concurrency between replicas
// is simulated inside the provider call: while one replica waits for the
// provider, the driver may serve other requests on the other replicas (and
// advance the clock) before the reply returns.
//
// A group step runs two to four proposals on one replica at once, each on
// its own goroutine, through the engine's aggregates.Pacer seam (see
// scheduler): one goroutine runs at a time, the next one drawn from the
// seed, and only when the committer waits with nothing in flight; the
// engine holds its group commit until every live proposal waits on it, so
// the transactions of several proposals (their reservations, their
// dispatch-starts, their settlements) are decided on top of each other
// and stored as one atomic batch, and a conflict re-decides the part of
// the group it touched. The trace says "group commit of N transactions".
// The scheduler seals on the committer, so ids are drawn in
// decision order, and the simulation sets AppendBatches: the parallel
// single appends of AppendMeasured, and two committers deciding at the
// same instant, are not simulated (the linearizability test and the chaos
// harness cover them on real JetStream). Neither are crashes or nested
// requests inside a group.
//
// After every step the driver checks the invariants (see Check); at the end
// of a run it audits the whole stream, replays it offline with the
// verifier's fold and compares that with the read model, and checks the
// recorded history for linearizability with lincheck.
package sim
