package kernel

import (
	"encoding/json"
	"time"

	"github.com/contextos/ledger/wire"
)

// Effects are what a step decided, for the runtime to carry out. Like
// raft's Ready, they come with an order the runtime must keep:
//
//  1. Append first, as one atomic append: every key's events on the
//     sequence its state was read at (so a state that moved since stores
//     nothing), with every Guard read of the step checked in the same
//     append. Nothing of it is stored, or all of it is. If it does not
//     store, the effects are dropped and the step is decided again on the
//     fresher states (a step is pure: deciding again is safe), a bounded
//     number of times (then Step.Contended answers).
//  2. Dispatch only once that append is acknowledged stored: the
//     dispatch-start it carries is durable before the provider is called,
//     and a dispatch is never made on a decision that did not take effect.
//  3. Reply only once the append is acknowledged (a reply to a decision
//     that is not stored could be contradicted by the one that is), and
//     after the dispatch's settlement when there is a Dispatch (its
//     SettleStep gives the final reply).
//  4. A refusal is a decision like any other: its record (the operation's
//     refusal and decision record) is in Append and stored first. A
//     refusal with nothing to append (an operation key bound to another
//     action, a proposal refused before it names an operation) stores
//     nothing but Unbound.
//     Except with Prefix: then the events may be stored as any prefix of
//     Order (each key's events in their order, one at a time, each on the
//     sequence of the one before on its subject), as long as no event is
//     stored on a subject that moved since its state was read. A prefix
//     stored and then a conflict or error: the stored part stays, and the
//     step decided again on the fresher states completes it.
//  5. Unbound and Incidents after the append; they never gate the reply.
//     Unbound goes to the principal's refusal subject (KeyRefusals), which
//     the runtime may sample: the record of a refusal that opened nothing.
//
// Effects with neither events to append nor a refusal are a no-op (the same
// proposal again, a repeated report): the runtime answers it only once it
// knows the states it was decided on were current during the call.
type Effects struct {
	// Append holds the events to append, by the key of their subject; a
	// key's events go in their order. Every key is one of the step's
	// Write reads.
	Append map[Key][]Event
	// Refusal is the step's refusal, if it refused.
	Refusal *Refusal
	// Reply is the answer to the caller.
	Reply Reply
	// Dispatch is the provider call to make after the append, if any.
	Dispatch *Dispatch
	// Unbound is a refusal to record on the principal's refusal subject.
	Unbound *ProposalRefused
	// Incidents are for the operator's attention (logs, the read model);
	// the stream records those that Append holds as well.
	Incidents []Incident
	// Window is the failure window a FailureStep leaves, which replaces
	// the runtime's.
	Window *FailureWindow
	// Scoped says the proposal's operation key is held by another
	// principal's operation: nothing is appended, and the proposal is to be
	// decided again on the principal's own subject of the key
	// (ProposeInput.Scoped).
	Scoped bool
	// Prefix says the events may be stored as any prefix of Order (see
	// above) rather than all or nothing: every such prefix is a state the
	// step completes when it is decided again. Order names every key of
	// Append, in the order their events are to be stored.
	Prefix bool
	Order  []Key
	// Tally is a refusal the runtime's refusal window adds
	// (RefusalTally.Add) once the effects are stored.
	Tally *TalliedRefusal
}

// TalliedRefusal is a refused proposal of a tallied code as its refusal
// window counts it: recorded whole (its operation's record is in Append),
// or only counted (nothing is appended; the window's aggregate stands for
// it).
type TalliedRefusal struct {
	Key     RefusalKey
	Refused ProposalRefused
	Whole   bool
}

// Events returns the events Effects appends to k.
func (e Effects) Events(k Key) []Event { return e.Append[k] }

// put adds events to append to k.
func (e *Effects) put(k Key, evs ...Event) {
	if len(evs) == 0 {
		return
	}
	if e.Append == nil {
		e.Append = map[Key][]Event{}
	}
	e.Append[k] = append(e.Append[k], evs...)
}

// Reply is a governed step's answer: the decision reply of a proposal, or
// of a settlement, reconciliation or release of an attempt.
type Reply struct {
	Status       wire.Status
	Code         wire.Code
	Reason       string
	OperationID  string
	AttemptID    string
	ActionDigest string
	// Guarantees are the balances, after the decision, of every guarantee
	// the operation holds (or was refused on), in configuration order.
	Guarantees []GuaranteeHold
	// Gate is the evidence gate of a gated capability's proposal.
	Gate json.RawMessage
	// Data is what a verb's reply reports beyond its refusal (VerbStep).
	Data any
}

// Dispatch is a provider call an accepted proposal makes once its append is
// stored, with what its settlement needs.
type Dispatch struct {
	Operation    Key // the operation's key
	OperationID  string
	AttemptID    string
	Generation   uint64 // the executor generation that dispatches
	CapabilityID string
	// Arguments are the canonical arguments, exactly the bytes the action
	// digest binds: what the provider receives.
	Arguments json.RawMessage
	// Holds are the guarantees the attempt holds, as the latest versions
	// of the guarantees bound them when it was reserved.
	Holds []Hold
	// Controls are the controls the reservation recorded.
	Controls Controls
	// Gate is the proposal's evidence gate, which its reply carries.
	Gate json.RawMessage
}

// Settle is the settlement of the dispatch by the provider's report.
func (d Dispatch) Settle(outcome Outcome, ref string, now time.Time) SettleInput {
	ctl := d.Controls
	ctl.Guarantees = nil
	return SettleInput{Operation: d.Operation, AttemptID: d.AttemptID, Holds: d.Holds, Outcome: outcome, Source: "provider", Ref: ref,
		Generation: d.Generation, Now: now, Controls: ctl, Gate: d.Gate}
}

// Incident is something an operator should look at: an executor fenced, a
// report that contradicts a seal.
type Incident struct {
	Kind      string
	AttemptID string
	Code      wire.Code
	Reason    string
}

// refused is the reply to a refusal that names no operation.
func refusedReply(r *Refusal) Reply {
	return Reply{Status: wire.StatusRefused, Code: r.Code, Reason: r.Reason}
}

// statusOf describes an operation as it stands, with the balances of the
// guarantees it holds.
func statusOf(op *Operation, holds []GuaranteeHold) Reply {
	r := Reply{Status: op.Status(), OperationID: op.OperationID, ActionDigest: op.ActionDigest, Guarantees: holds}
	if op.Refusal != nil {
		r.Code, r.Reason = op.Refusal.Code, op.Refusal.Reason
	}
	if a, ok := op.Current(); ok {
		r.AttemptID = a.AttemptID
	}
	return r
}

// ledgerSealed corrects the status of an operation whose current attempt
// the operation records no definitive outcome of, but a ledger it holds on
// has sealed by an observation: a provider's report stored as a prefix
// (Effects.Prefix), the operation's part not yet, and on an attempt that
// holds on several ledgers perhaps not every ledger's. The report took
// effect with the first ledger's observation, so the status is its
// outcome, as the balances show it; the operation records it when a
// report comes again (reconciliation). Ledgers not read leave the status
// as it is.
func ledgerSealed(r Reply, op *Operation, ledgers map[LedgerKey]*Ledger) Reply {
	a, ok := op.Current()
	if !ok {
		return r
	}
	if x, ok := sealedOnLedgers(op, ledgers, a.AttemptID); ok {
		r.Status = x.Status()
	}
	return r
}

// sealedOnLedgers returns the outcome the ledgers of attempt attemptID are
// sealed with, when the operation records no definitive outcome of the
// attempt (nor closed it): applied for committed receipts, not_applied for
// released ones. A provider's report is stored ledger by ledger, then on
// the operation (Effects.Prefix), so any ledger sealed without the
// operation says the report's outcome, and the ledgers after it in the
// chain may still hold the attempt unsealed. Only a release stored whole
// (a close, an assertion) seals a ledger otherwise, and the operation then
// records it. False when a ledger is not in ledgers or does not hold the
// attempt, when none is sealed, or when the sealed ones differ.
func sealedOnLedgers(op *Operation, ledgers map[LedgerKey]*Ledger, attemptID string) (Outcome, bool) {
	if op.Refusal != nil {
		return "", false
	}
	for _, a := range op.Attempts {
		if a.AttemptID != attemptID {
			continue
		}
		if !a.Started || a.Closed || a.Outcome.Definitive() || len(a.Holds) == 0 {
			return "", false
		}
		var sealed Outcome
		for _, h := range a.Holds {
			l := ledgers[h.ledgerKey()]
			if l == nil {
				return "", false
			}
			rc, ok := l.Receipt(a.AttemptID)
			if !ok {
				return "", false
			}
			o, ok := receiptSeal(rc)
			switch {
			case !ok:
				continue // later in the chain than the cut
			case sealed != "" && o != sealed:
				return "", false
			}
			sealed = o
		}
		return sealed, sealed != ""
	}
	return "", false
}

// receiptSeal is the outcome a sealed receipt holds: applied for a
// committed one, not_applied for a released one; false while it is not
// sealed.
func receiptSeal(rc Receipt) (Outcome, bool) {
	switch rc.State {
	case StateCommitted:
		return OutcomeApplied, true
	case StateReleased:
		return OutcomeNotApplied, true
	}
	return "", false
}
