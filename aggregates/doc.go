// Package aggregates is the load-decide-append loop: it folds a subject's
// events into kernel state, asks the kernel, and appends the decided events
// with the sequence the decision was made on.
//
//	eng := aggregates.NewEngine(store, sealer)
//	eng.Snapshots = snaps // optional: jetsnap.Ensure(ctx, js, replicas)
//	var st kernel.SettleState // named fields: Op, Ledgers
//	var d kernel.SettleDecision
//	res, err := eng.Do(ctx, aggregates.Tx{
//		Tenant: tenant,
//		Bind: append([]aggregates.Binding{aggregates.Bind(opRef, &st.Op, &d.Op)},
//			aggregates.BindEach(ledgerRefs, &st.Ledgers, &d.Ledgers)...),
//		Decide: func() *kernel.Refusal { d = kernel.DecideSettle(st, cmd); return d.Refusal }, // one kernel step
//		Done:   func() { /* read balances of st */ },
//	})
//
// Transactions of one process are decided in arrival order per subject on
// the engine's committer goroutine, on warm state that already holds the
// decisions before them, and appended together as JetStream atomic batches
// (group commit); see Engine. Exhausted contention is a refusal
// (shared_guarantee_contention), never a dispatch.
package aggregates
