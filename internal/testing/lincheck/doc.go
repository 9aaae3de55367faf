// Package lincheck checks recorded histories of the gateway against a
// sequential model of the exposure ledger, with porcupine, and audits an
// event stream for the bank-style invariants.
//
// A history is what clients saw: every proposal, exposure read and operator
// action, with its invocation and return time and its output. A call that
// timed out is recorded with Output.Unknown: the checker treats it as a
// pending operation that may or may not have taken effect, at any point
// after its invocation.
//
// The usage loop:
//
//	h := lincheck.NewHistory()
//	id := h.Begin()                    // before the request is sent
//	... send, wait for the reply ...
//	h.End(id, client, input, output)   // or output.Unknown on a timeout
//	res := lincheck.Check(h.Operations(), 30*time.Second, t.TempDir())
//	if !res.OK { ... res.Visualization is an HTML file ... }
//
// A proposal is two operations of the model with the same window: its
// reservation (the first transaction of the dispatch sequence) and its
// settlement (the observation and the balances the reply reports). Both may
// linearize anywhere inside the call, reservation first, so another
// client's read may see the hold in between, as it can in the real system.
//
// Audit folds a stream with the kernel's own Ledger and Operation types,
// checks every signature, checks committed + held <= limit after every
// event, and returns what each attempt became, for accounting against the
// provider's records.
package lincheck
