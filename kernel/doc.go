// Package kernel holds every rule of the ledger, once, as pure steps over
// named states: the exposure ledger of one resource and its receipts,
// guarantee definitions and their pins, amounts, pointers and resource
// forms, the action digest, authority, policy, approvals, run budgets, the
// evidence gate and the context compiler, operations and their fencing,
// recovery classification and reconciliation, breakers, the kill switch and
// the log's integrity. It does no I/O and reads no clock and no randomness:
// time, ids and observations are inputs (TestDeps, TestNoClock). Its codes
// are package wire's catalog.
//
// Each state is folded from its subject's events by Apply; a Decide step
// reads the states and a command and returns the events to append or a
// refusal, changing nothing:
//
//	var l kernel.Ledger
//	for _, ev := range stored {
//		if err := l.Apply(ev); err != nil { ... } // a stored event the kernel refuses
//	}
//	d := kernel.DecideExposure(&l, kernel.Reserve{AttemptID: id, Amount: 800, ...})
//	if d.Refusal != nil {
//		return d.Refusal // a stable code and a reason; nothing appended
//	}
//	// append d.Events with the sequence the ledger was read at, then Apply them
//
// A decision over several subjects is one step over a struct of named
// states (DecidePropose, DecideSettle, DecideRelease, ...). The offline
// verifier replays exported events through the same functions.
package kernel
