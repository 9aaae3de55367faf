package kernel

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/contextos/ledger/wire"
)

// The governed step of a proposal, decided over the subjects it rests on,
// each named: DecidePropose opens the operation, redeems its approval,
// charges its run and reserves on every resource ledger it binds, with the
// dispatch-start, as one decision that a runtime appends atomically;
// DecideSettle records what the provider (or reconciliation) reported.

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
	// on the resource; DecidePropose sets it from ProposalState.Replaced.
	Carried int64
}

// ProposalState is what the reserve decision reads.
type ProposalState struct {
	Op       *Operation
	Ledgers  map[LedgerKey]*Ledger // the ledger of every one of Propose.Holds, by its key (Hold.Key)
	Run      *Run
	Approval *Approval // nil when the proposal names no approval
	Control  *Control  // the tenant's control subject (kill switch, enforcement domain); nil reads as released and empty
	// Replaced are the ledgers, on the holds' resources, of the guarantees
	// the held ones replace (Control.Replaced): read, never appended to.
	Replaced map[LedgerKey]*Ledger
	// Integrity is the tenant's integrity subject (an open incident of a
	// rewritten or forked audit log); nil reads as none.
	Integrity *LogIntegrity
	// Witness is the runtime's live view of its witnesses for the tenant's
	// log (CheckLogIntegrity).
	Witness WitnessStatus
}

// Propose is one proposal that reached the ledger.
type Propose struct {
	Opened    OperationOpened // the operation the proposal opens
	AttemptID string          // the attempt it reserves and starts
	Holds     []Hold          // the guarantees it binds, in configuration order
	// Refusal is what the checks that need no ledger decided (capability
	// not surfaced, arguments, authority, policy, evidence, a failed pin):
	// it is recorded on the operation, so the same key returns it.
	Refusal *Refusal

	ApprovalRequired bool
	ApprovalID       string // the approval the proposal names, if any
	Risk             string
	Now              time.Time // the decision time

	RunAmount       int64 // what the proposal consumes from its run's amount budget
	AllowUnadmitted bool  // whether a run never admitted may consume (ConsumeRun)

	// Controls are the controls the decision is made under; DecidePropose
	// fills in the run budget, the guarantees and the generation.
	Controls Controls

	// Arguments are the canonical arguments the action digest binds. A
	// refusal for want of an approval records them (what an operator is
	// asked to approve); no other event does.
	Arguments json.RawMessage

	// SameActionFence is whether the capability's proposals are fenced
	// (Capability.SameActionFenced): each reservation then carries the
	// SameActionKey of the capability and Arguments, and is refused while
	// an attempt of the same action is unresolved on its ledger.
	SameActionFence bool

	// Pack is the context pack version the evidence gate was compiled
	// under; nil: the decision records the run's pinned version, if any.
	Pack *PackRef
}

// ProposalDecision is DecidePropose's result: the events per subject.
type ProposalDecision struct {
	Holds    []Hold // the holds as the latest versions of their guarantees bind them
	Op       []Event
	Ledgers  map[LedgerKey][]Event // by the key of their ledger
	Run      []Event
	Approval []Event
	// Existing is the same proposal again: nothing is appended, the reply
	// is the operation's status.
	Existing bool
	// Scoped: the key is held by another principal's operation; nothing is
	// appended, and the proposal is decided again on the principal's own
	// subject of the key (OpenScoped).
	Scoped bool
	// Controls are the controls recorded with the decision (the run
	// budget after it); the settlement records them again.
	Controls Controls
	Refusal  *Refusal
}

// DecidePropose decides one proposal. The operation key is decided by
// DecideOpen: the same principal's same action is the same operation
// (Existing); another principal's claimed key sends the proposal to the
// principal's own subject of it (Scoped); the same principal's other action
// on a claimed key is refused (CodeOperationConflict); in these nothing is
// appended. Otherwise the
// operation is opened and the checks run in the order of DESIGN section 1:
// the kill switch, the log's integrity (CheckLogIntegrity), then what the
// checks before the ledger decided, then the enforcement domain (every
// guarantee pinned over the capability is held, CodeDomainMismatch), then
// approval, run budget and exposure (with the same-action fence when
// c.SameActionFence: CodeUnresolvedAttempt while an attempt of the same
// capability and arguments is unresolved on a ledger it holds). A refusal by any drops every event but
// the operation's record (opened, refused, the decision record), so nothing
// is redeemed, consumed or held. An accepted proposal holds on every ledger
// and its operation records the reservation and the dispatch-start, all in
// one decision: the dispatch-start is durable before the provider is called.
func DecidePropose(s ProposalState, c Propose) ProposalDecision {
	c.Opened.Pack = pinOf(c.Pack, s.Run)
	kind, open := DecideOpen(s.Op, c.Opened)
	if open.Refusal != nil {
		return ProposalDecision{Refusal: open.Refusal}
	}
	switch kind {
	case OpenExisting:
		return ProposalDecision{Existing: true}
	case OpenScoped:
		return ProposalDecision{Scoped: true}
	}
	d := ProposalDecision{Op: open.Events, Ledgers: map[LedgerKey][]Event{}}
	runBudget := s.Run.Describe()
	refusal := c.Refusal
	if r := CheckControl(s.Control, Guarded{CapabilityID: c.Opened.CapabilityID, RunID: c.Opened.RunID, Holds: c.Holds,
		RunAmount: c.RunAmount, Now: c.Now}); r != nil {
		refusal = r
	} else if r := CheckLogIntegrity(s.Integrity, s.Witness); r != nil {
		refusal = r
	}
	if refusal == nil {
		refusal = s.Control.checkHolds(c.Opened.CapabilityID, c.Holds)
	}
	// Each hold carries its guarantee's pinned limit and mode; the control
	// subject holds their later versions, and the exposure the guarantees
	// it replaces carry forward.
	c.Holds = slices.Clone(c.Holds)
	for i := range c.Holds {
		c.Holds[i] = s.Control.Bind(c.Holds[i])
		carried, r := s.Control.carried(c.Holds[i], s.Replaced, c.Now)
		if r != nil && refusal == nil {
			refusal = r
		}
		c.Holds[i].Carried = carried
	}
	d.Holds = c.Holds
	if refusal == nil {
		ap := DecideApproval(s.Approval, RedeemApproval{Required: c.ApprovalRequired, ApprovalID: c.ApprovalID,
			ActionDigest: c.Opened.ActionDigest, Risk: c.Risk, OperationID: c.Opened.OperationID, Now: c.Now})
		refusal = ap.Refusal
		if refusal == nil && s.Approval != nil {
			d.Approval = ap.Events
		}
	}
	if refusal == nil {
		run := DecideConsume(s.Run, ConsumeRun{RunID: c.Opened.RunID, Principal: c.Opened.Principal, OperationID: c.Opened.OperationID,
			AttemptID: c.AttemptID, Amount: c.RunAmount, AllowUnadmitted: c.AllowUnadmitted})
		refusal = run.Refusal
		if refusal == nil {
			d.Run = run.Events
			after := *s.Run
			for _, ev := range run.Events {
				if after.Apply(ev) == nil {
					runBudget = after.Describe()
				}
			}
		}
	}
	var action string
	if refusal == nil && c.SameActionFence && len(c.Holds) > 0 {
		action, refusal = sameAction(c.Opened.CapabilityID, c.Arguments)
	}
	if refusal == nil {
		for _, h := range c.Holds {
			rd := DecideExposure(orNew(s.Ledgers[h.Key()]), ReserveStarted{Reserve: Reserve{GuaranteeID: h.GuaranteeID, Resource: h.Resource,
				AttemptID: c.AttemptID, OperationID: c.Opened.OperationID, Amount: h.Amount, Limit: h.Limit, DefinitionDigest: h.DefinitionDigest,
				Observe: h.Observe, Window: h.Window, Rolling: h.Rolling, Now: c.Now, Carried: h.Carried, Action: action}})
			if rd.Refusal != nil {
				refusal = rd.Refusal
				break
			}
			d.Ledgers[h.Key()] = rd.Events
		}
	}
	d.Controls = c.Controls
	if d.Controls.Authority == "" {
		d.Controls.Authority = "none"
	}
	d.Controls.RunBudget, d.Controls.Guarantees, d.Controls.Generation = runBudget, HoldsOf(c.Holds, s.Ledgers), 1
	if refusal != nil {
		rec := decisionRecord(c.Opened, "", wire.StatusRefused, refusal.Code, refusal.Reason, d.Controls)
		refused := OperationRefused{Code: refusal.Code, Reason: refusal.Reason}
		if refusal.Code == wire.CodeApprovalRequired {
			refused.Arguments = c.Arguments
		}
		return ProposalDecision{Op: append(d.Op, refused, rec), Holds: d.Holds, Controls: d.Controls, Refusal: refusal}
	}
	hr := make([]HoldRef, len(c.Holds))
	for i, h := range c.Holds {
		hr[i] = HoldRef{GuaranteeID: h.GuaranteeID, Resource: h.Resource, Amount: h.Amount, Window: h.Window}
	}
	if len(hr) == 0 {
		hr = nil
	}
	d.Op = append(d.Op, OperationReserved{AttemptID: c.AttemptID, Generation: 1, Holds: hr},
		OperationDispatchStarted{AttemptID: c.AttemptID, Generation: 1})
	return d
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
	if n == 0 && len(c.Holds) > 0 {
		return SettleDecision{} // the same report again
	}
	if a, ok := s.Op.Current(); ok && a.AttemptID == c.AttemptID && a.Outcome == c.Outcome && len(c.Holds) == 0 {
		return SettleDecision{}
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
	d.Op = append(claim, OperationObserved{AttemptID: c.AttemptID, Generation: gen, Outcome: c.Outcome, Source: c.Source},
		decisionRecord(opIdentity(s.Op), c.AttemptID, c.Outcome.Status(), "", c.Source+": "+c.Ref, ctl))
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
