package kernel

import (
	"time"

	"github.com/contextos/ledger/wire"
)

// What a proposal holds, and the settlement of what the provider (or
// reconciliation) reported as a decision over named states (DecideSettle;
// SettleStep is the step a runtime drives).

// Hold is one guarantee a proposal binds: the resource ledger it reserves on
// and what it reserves.
type Hold struct {
	GuaranteeID      string
	DefinitionDigest string
	Resource         string
	Amount           int64
	Limit            int64
	Observe          bool   // the guarantee is in observe mode: over the limit is recorded, not refused
	Window           string // the calendar window of the ledger (Definition.WindowAt), if any
	Rolling          int64  // the rolling window's duration in seconds, if any
	// Carried is what the guarantees this one replaces hold and committed
	// on the resource; ProposeStep sets it from their ledgers.
	Carried int64
}

// Key is the key of the hold's ledger.
func (h Hold) Key() LedgerKey { return h.ledgerKey() }

// SettleState is what a settlement reads: the operation and the ledger of
// every guarantee its attempt holds on.
type SettleState struct {
	Op      *Operation
	Ledgers map[LedgerKey]*Ledger // the ledger of every one of Settle.Holds, by its key (Hold.Key)
}

// Settle records a report on an attempt.
type Settle struct {
	AttemptID string
	Outcome   Outcome
	Source    string // who reported: "provider", "reconciler", "reconcile:<operator>"
	Ref       string // the provider's reference for the report
	// Generation is the executor's generation, which must be the
	// operation's current one (CheckFence). With Claimant set it is
	// ignored: the claimant takes the operation over first, at the next
	// generation, atomically with the report (reconciliation).
	Generation uint64
	Claimant   string
	Holds      []Hold
	Now        time.Time // the decision time
	// Controls are the controls recorded with the report; DecideSettle
	// fills in the guarantees and the generation.
	Controls Controls
}

// SettleDecision is DecideSettle's result.
type SettleDecision struct {
	Op      []Event
	Ledgers map[LedgerKey][]Event // by the key of their ledger
	Refusal *Refusal
}

// DecideSettle records a report on every ledger and on the operation, with
// the decision record. A fenced executor is refused (CodeExecutorFenced)
// and nothing is appended. A report every ledger refuses is not recorded on
// the operation, but the ledgers' incidents are (a report that contradicts
// a seal: CodeObservationContradictsSeal, with the operation's incident).
// The same report again appends nothing.
func DecideSettle(s SettleState, c Settle) SettleDecision {
	gen := c.Generation
	var claim []Event
	if c.Claimant != "" {
		cl := DecideClaim(s.Op, c.Claimant)
		if cl.Refusal != nil {
			return SettleDecision{Refusal: cl.Refusal}
		}
		claim, gen = cl.Events, s.Op.Generation+1
	} else if r := CheckFence(s.Op, gen); r != nil {
		return SettleDecision{Refusal: r}
	}
	d := SettleDecision{Ledgers: map[LedgerKey][]Event{}}
	n := 0
	for _, h := range c.Holds {
		ld := DecideExposure(orNew(s.Ledgers[h.Key()]), Observe{AttemptID: c.AttemptID, Outcome: c.Outcome, Source: c.Source, Ref: c.Ref, Now: c.Now})
		d.Ledgers[h.Key()] = ld.Events
		n += len(ld.Events)
		if ld.Refusal != nil && d.Refusal == nil {
			d.Refusal = ld.Refusal
		}
	}
	if inc, ok := contradiction(s.Op, c); ok {
		// The operation records the contradiction too, so it is seen
		// also for an operation that holds on no ledger.
		d.Op = []Event{inc}
		if d.Refusal == nil {
			d.Refusal = refuse(wire.CodeObservationContradictsSeal, "attempt %s is sealed %s; %s report from %s refused and recorded as an incident",
				c.AttemptID, inc.Sealed, c.Outcome, c.Source)
		}
		return d
	}
	if _, sealed := s.Op.Sealed(c.AttemptID); sealed && d.Refusal == nil {
		return SettleDecision{} // repeats and non-definitive reports after a seal change nothing
	}
	if d.Refusal != nil {
		return d // incidents only; the operation is unchanged
	}
	if n == 0 && s.Op.records(c.AttemptID, c.Outcome) {
		return SettleDecision{} // the same report again (see SettleStep)
	}
	holds := make([]GuaranteeHold, len(c.Holds))
	for i, h := range c.Holds {
		// Balances after this report: the ledger as it will be once its
		// events apply, folded on a copy.
		holds[i] = GuaranteeHold{GuaranteeID: h.GuaranteeID, DefinitionDigest: h.DefinitionDigest, Resource: h.Resource, Amount: h.Amount,
			Balance: previewBalance(orNew(s.Ledgers[h.Key()]), d.Ledgers[h.Key()])}
	}
	if len(holds) == 0 {
		holds = nil
	}
	ctl := c.Controls
	ctl.Generation, ctl.Guarantees = gen, holds
	d.Op = append(claim, decisionRecord(opIdentity(s.Op), c.AttemptID, c.Outcome.Status(), "", c.Source+": "+c.Ref, ctl),
		OperationObserved{AttemptID: c.AttemptID, Generation: gen, Outcome: c.Outcome, Source: c.Source})
	return d
}

// previewBalance is the ledger's balance once evs apply, computed on a copy.
func previewBalance(l *Ledger, evs []Event) Balance {
	if len(evs) == 0 {
		return l.Balance()
	}
	c := l.Clone()
	for _, ev := range evs {
		if err := c.Apply(ev); err != nil {
			return l.Balance()
		}
	}
	return c.Balance()
}
