// Package aggregates runs kernel steps against the event store: it loads
// the subjects a step names, asks the kernel, and appends the decided
// events keyed by subject with the sequence each decision was made on.
//
//	eng := aggregates.NewEngine(store, sealer)
//	eng.Snapshots = snaps // optional: jetsnap.Ensure(ctx, js, replicas)
//	eff, err := eng.Run(ctx, tenant, in.Step()) // in: a kernel.ProposeInput, SettleInput...
//	switch {
//	case err != nil:
//		// aggregates.CodeOf(err): ledger_unavailable (*UnavailableError:
//		// the store did not answer, the outcome is unknown) or
//		// stored_event_refused (*StoredEventError: a stored event the
//		// kernel refuses, with its subject and sequence)
//	case eff.Dispatch != nil:
//		// the append is stored: call the provider, then run the
//		// settlement, eff.Dispatch.Settle(outcome, ref, now).Step()
//	default:
//		// reply with eff.Reply
//	}
//
// Run maps each kernel.Key to its subject (RefOf; every subject is the one
// the runtime always stored its kind under), loads it as its kernel.Access
// says (warm state for Write, Guard and Stale reads, a read of the store
// during the call for Fresh ones), decides, and appends the effects as part
// of a group commit; on a conflict it decides again on the refreshed
// states, at most MaxAttempts times, then answers the step's Contended
// (shared_guarantee_contention, never a dispatch).
//
// Transactions of one process are decided in arrival order per subject on
// the engine's committer goroutine, on warm state that already holds the
// decisions before them, and appended together as JetStream atomic batches
// (group commit); see Engine for the send policy.
package aggregates
