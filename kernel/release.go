package kernel

import (
	"fmt"
	"time"

	"github.com/contextos/ledger/wire"
)

// What reconciliation may do next with an attempt (the release itself is
// ReleaseStep, attempt.go), and the decisions of other operator verbs.

// ReconcileAction is what reconciliation may do next with an attempt.
type ReconcileAction uint8

// Reconcile actions.
const (
	ReconcileNothing ReconcileAction = iota // resolved, or nothing to do yet: see the plan's Code and Reason
	ReconcileQuery                          // query the provider by the attempt's idempotency key, then settle the answer
	ReconcileClose                          // close the unstarted attempt of an executor that is gone
	ReconcileWait                           // the dispatch may still be in flight: try again after the grace period
)

// ReconcileInput is what a reconciler knows about an attempt besides its
// operation.
type ReconcileInput struct {
	AttemptID string
	// Sweep is the background reconciler's pass (it closes unstarted
	// attempts of lost executors); otherwise an operator named the attempt.
	Sweep bool
	// Age is how long this replica has known the attempt (since its
	// reservation or dispatch-start), on its own clock; Grace is how long
	// an attempt is left to its executor.
	Age, Grace time.Duration
	// InFlight is true when this replica is dispatching the attempt itself.
	InFlight bool
}

// ReconcilePlan is PlanReconcile's answer.
type ReconcilePlan struct {
	Action ReconcileAction
	Code   wire.Code   // why nothing is done, when it is a refusal
	Reason string      // why nothing is done
	Status wire.Status // the operation's status, for an attempt already resolved
}

// PlanReconcile says what reconciliation may do with an attempt: an
// attempt already sealed is queried only when an operator names it (a
// report that contradicts the seal is then an incident, never a change);
// an unstarted one is closed by the background pass once its executor is
// gone (past the grace, not in flight here) and otherwise left to the
// operator's close-attempt; a started one without an observation waits out
// the grace period, since the provider call may still be in flight and a
// query could report an absence that is about to end.
func PlanReconcile(op *Operation, c ReconcileInput) ReconcilePlan {
	var att OpAttempt
	found := false
	for _, a := range op.Attempts {
		if a.AttemptID == c.AttemptID {
			att, found = a, true
		}
	}
	switch {
	case !found:
		return ReconcilePlan{Code: wire.CodeAttemptUnknown, Reason: "no operation holds this attempt"}
	case c.InFlight:
		return ReconcilePlan{Action: ReconcileWait, Code: wire.CodeDispatchActive, Reason: "this replica is dispatching the attempt"}
	case op.Refusal != nil:
		return ReconcilePlan{Status: op.Status(), Reason: "already resolved"}
	case att.Outcome.Definitive() || att.Closed:
		if c.Sweep || !att.Started {
			return ReconcilePlan{Status: op.Status(), Reason: "already resolved"}
		}
		return ReconcilePlan{Action: ReconcileQuery}
	case !att.Started && c.Sweep:
		if c.Age < c.Grace {
			return ReconcilePlan{Action: ReconcileWait, Code: wire.CodeDispatchActive, Reason: "reserved moments ago; its executor may still start it"}
		}
		return ReconcilePlan{Action: ReconcileClose, Reason: "executor lost before dispatch-start"}
	case !att.Started:
		return ReconcilePlan{Code: wire.CodeNotStarted, Reason: "dispatch never started: nothing to reconcile; close-attempt releases it"}
	case att.Outcome == "" && c.Age < c.Grace:
		return ReconcilePlan{Action: ReconcileWait, Code: wire.CodeDispatchActive,
			Reason: fmt.Sprintf("dispatch started %s ago; the provider call may be in flight (grace %s)", c.Age.Round(time.Millisecond), c.Grace)}
	}
	return ReconcilePlan{Action: ReconcileQuery}
}

// Unchanged reports whether a provider's answer to a reconciliation query
// changes nothing: the same non-definitive outcome the attempt already has.
func Unchanged(op *Operation, attemptID string, answer Outcome) bool {
	if answer.Definitive() {
		return false
	}
	for _, a := range op.Attempts {
		if a.AttemptID == attemptID {
			return a.Outcome == answer
		}
	}
	return false
}

// AdmitState is what an admission reads: the run, and its parent when it
// draws from one (nil otherwise), and the tenant's pack catalog (nil:
// empty).
type AdmitState struct {
	Run    *Run
	Parent *Run
	Packs  *PackCatalog
}

// DecideAdmitRun is DecideAdmit over named subjects. The run pins the pack
// version PackSpec names, or without one the promoted version (PinPack);
// a version never published is refused with CodePackUnknown.
func DecideAdmitRun(s AdmitState, c AdmitRun) AdmitDecision {
	pin, r := PinPack(s.Packs, c.PackSpec)
	if r != nil {
		return AdmitDecision{Refusal: r}
	}
	if c.PackSpec != "" || s.Run == nil || !s.Run.Admitted {
		c.Pack = pin // a repeated admission without a spec keeps the run's pin
	}
	return DecideAdmit(s.Run, s.Parent, c)
}

// SetKillSwitch engages or releases a tenant's kill switch.
type SetKillSwitch struct {
	Engaged  bool
	Operator string
	Reason   string
}

// DecideKillSwitch records a change of the kill switch; setting it to what
// it is changes nothing.
func DecideKillSwitch(c *Control, cmd SetKillSwitch) Decision {
	if c.Engaged == cmd.Engaged {
		return Decision{}
	}
	return Decision{Events: []Event{KillSwitchSet{Engaged: cmd.Engaged, Operator: cmd.Operator, Reason: cmd.Reason}}}
}

// DecideRecordRefusal records a proposal refused before it could be tied to
// an operation on the principal's refusal subject.
func DecideRecordRefusal(_ *RefusalLog, r ProposalRefused) Decision {
	return Decision{Events: []Event{r}}
}

// MarkState is what a conflict marker reads: the record of every evidence
// reference it names, in the marker's order.
type MarkState struct {
	Records map[string]*EvidenceRecord // by evidence reference
}

// MarkDecision is DecideMark's result.
type MarkDecision struct {
	Records map[string][]Event // by evidence reference
	Refusal *Refusal
}

// DecideMark records a conflict marker (or its resolution) on every
// evidence reference it names, so it is found through any of them; one
// refusal refuses it on all.
func DecideMark(s MarkState, operator string, m EvidenceConflictMarker) MarkDecision {
	d := MarkDecision{Records: map[string][]Event{}}
	for _, ref := range m.EvidenceRefs {
		rd := DecideMarkEvidence(orNew(s.Records[ref]), MarkEvidence{Ref: ref, Operator: operator, Marker: m})
		if rd.Refusal != nil {
			return MarkDecision{Refusal: rd.Refusal}
		}
		d.Records[ref] = rd.Events
	}
	return d
}
