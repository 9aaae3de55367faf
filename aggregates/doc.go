// Package aggregates is the load-decide-append loop: it folds a subject's
// events into kernel state, asks the kernel, and appends the decided events
// with the sequence the decision was made on.
//
//	eng := aggregates.NewEngine(store, sealer)
//	eng.Snapshots = snaps // optional: jetsnap.Ensure(ctx, js, replicas)
//	res, err := eng.Do(ctx, aggregates.Tx{
//		Tenant: tenant,
//		Refs:   []aggregates.Ref{opRef, ledgerRef}, // one or more subjects
//		Decide: func(s []aggregates.State) ([][]kernel.Event, *kernel.Refusal) {
//			// pure: kernel decisions on s, events per ref
//		},
//		Done: func(s []aggregates.State) { /* read balances */ },
//	})
//
// Transactions of one process are decided in arrival order per subject on
// the engine's committer goroutine, on warm state that already holds the
// decisions before them, and appended together as JetStream atomic batches
// (group commit); see Engine. Exhausted contention is a refusal
// (shared_guarantee_contention), never a dispatch.
package aggregates
