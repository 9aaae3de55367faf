package kernel

import (
	"encoding/json"
	"fmt"

	"github.com/contextos/ledger/wire"
)

// Operation is the state of one (tenant, run, operation key): the agent's
// idempotency unit. It is claimed by an executor generation; only the current
// generation may start or observe an attempt.
type Operation struct {
	OperationID  string         `json:"operation_id"`
	Principal    string         `json:"principal"`
	RunID        string         `json:"run_id"`
	OperationKey string         `json:"operation_key"`
	CapabilityID string         `json:"capability_id"`
	ActionDigest string         `json:"action_digest"`
	Executor     string         `json:"executor"`
	Generation   uint64         `json:"generation"`
	Attempts     []OpAttempt    `json:"attempts"`
	Refusal      *RefusalRecord `json:"refusal,omitempty"`
	// Pack is the context pack version the operation was decided under.
	Pack *PackRef `json:"pack,omitempty"`
}

// OpAttempt is one attempt of an operation.
type OpAttempt struct {
	AttemptID  string    `json:"attempt_id"`
	Generation uint64    `json:"generation"`
	Holds      []HoldRef `json:"holds"`
	Started    bool      `json:"started"`
	Outcome    Outcome   `json:"outcome,omitempty"`
	Closed     bool      `json:"closed,omitempty"`
}

// HoldRef names one exposure ledger an attempt holds on.
type HoldRef struct {
	GuaranteeID string `json:"guarantee_id"`
	Resource    string `json:"resource"`
	Amount      int64  `json:"amount"`
	Window      string `json:"window,omitempty"` // the calendar window whose ledger holds it
}

// RefusalRecord is a refusal as recorded.
type RefusalRecord struct {
	Code   wire.Code `json:"code"`
	Reason string    `json:"reason"`
}

// Opened reports whether the operation exists.
func (o *Operation) Opened() bool { return o.OperationID != "" }

// Claims reports whether the operation holds its operation key: every
// opened operation but one refused before any reservation, which holds
// nothing and may be opened afresh (DecideOpen).
func (o *Operation) Claims() bool { return o.Opened() && !(o.Refusal != nil && len(o.Attempts) == 0) }

// Current returns the latest attempt, if any.
func (o *Operation) Current() (OpAttempt, bool) {
	if len(o.Attempts) == 0 {
		return OpAttempt{}, false
	}
	return o.Attempts[len(o.Attempts)-1], true
}

// Status is the operation's status as a decision reply reports it.
func (o *Operation) Status() wire.Status {
	if o.Refusal != nil {
		return wire.StatusRefused
	}
	a, ok := o.Current()
	switch {
	case !ok || a.Outcome == "":
		if ok && a.Closed {
			return wire.StatusNotApplied
		}
		return wire.StatusPending
	case a.Closed && !a.Outcome.Definitive():
		return wire.StatusNotApplied
	}
	return a.Outcome.Status()
}

// Status is the reply status an observation of this outcome gives: applied,
// not_applied and pending as such; unknown and partial are unknown.
func (o Outcome) Status() wire.Status {
	switch o {
	case OutcomeApplied:
		return wire.StatusApplied
	case OutcomeNotApplied:
		return wire.StatusNotApplied
	case OutcomePending:
		return wire.StatusPending
	}
	return wire.StatusUnknown
}

// Resolved reports whether the operation needs nothing more: refused, or its
// current attempt sealed or closed.
func (o *Operation) Resolved() bool {
	if o.Refusal != nil {
		return true
	}
	a, ok := o.Current()
	return ok && (a.Outcome.Definitive() || a.Closed)
}

// Operation event types.
const (
	TypeOperationOpened          = "operation.opened"
	TypeOperationRefused         = "operation.refused"
	TypeOperationReserved        = "operation.reserved"
	TypeOperationDispatchStarted = "operation.dispatch_started"
	TypeOperationObserved        = "operation.observed"
	TypeOperationClaimed         = "operation.claimed"
	TypeOperationClosed          = "operation.closed"
	TypeOperationIncident        = "operation.incident"
)

// OperationOpened opens an operation, claimed by its first executor.
type OperationOpened struct {
	OperationID  string `json:"operation_id"`
	Principal    string `json:"principal"`
	RunID        string `json:"run_id"`
	OperationKey string `json:"operation_key"`
	CapabilityID string `json:"capability_id"`
	ActionDigest string `json:"action_digest"`
	Executor     string `json:"executor"`
	Generation   uint64 `json:"generation"`
	// Pack is the context pack version the proposal is decided under (its
	// gate's, or its run's pin); every decision record of the operation
	// names it.
	Pack *PackRef `json:"pack,omitempty"`
}

// OperationRefused records that the operation was refused; it is final.
// Arguments are the canonical arguments of a proposal refused with
// CodeApprovalRequired (and only then): what the operator is asked to
// approve, shown by the pending approvals of the read model.
type OperationRefused struct {
	Code      wire.Code       `json:"code"`
	Reason    string          `json:"reason"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// OperationReserved records a new attempt and the exposure it holds.
type OperationReserved struct {
	AttemptID  string    `json:"attempt_id"`
	Generation uint64    `json:"generation"`
	Holds      []HoldRef `json:"holds"`
}

// OperationDispatchStarted records the durable dispatch-start of an attempt.
type OperationDispatchStarted struct {
	AttemptID  string `json:"attempt_id"`
	Generation uint64 `json:"generation"`
}

// OperationObserved records an observation of an attempt.
type OperationObserved struct {
	AttemptID  string  `json:"attempt_id"`
	Generation uint64  `json:"generation"`
	Outcome    Outcome `json:"outcome"`
	Source     string  `json:"source"`
}

// OperationClaimed raises the executor generation: recovery or another
// replica takes the operation over and fences every older executor.
type OperationClaimed struct {
	Executor   string `json:"executor"`
	Generation uint64 `json:"generation"`
}

// OperationClosed records that an unstarted attempt was closed.
type OperationClosed struct {
	AttemptID string `json:"attempt_id"`
	Reason    string `json:"reason"`
}

// EventType implements Event.
func (OperationOpened) EventType() string { return TypeOperationOpened }

// EventType implements Event.
func (OperationRefused) EventType() string { return TypeOperationRefused }

// EventType implements Event.
func (OperationReserved) EventType() string { return TypeOperationReserved }

// EventType implements Event.
func (OperationDispatchStarted) EventType() string { return TypeOperationDispatchStarted }

// EventType implements Event.
func (OperationObserved) EventType() string { return TypeOperationObserved }

// EventType implements Event.
func (OperationClaimed) EventType() string { return TypeOperationClaimed }

// EventType implements Event.
func (OperationClosed) EventType() string { return TypeOperationClosed }

// OperationIncident records a report that contradicts the attempt's seal
// (a provider that reports applied after an absence was asserted, or the
// reverse). It changes nothing: the seal stands, the incident is there for
// the operator and the audit.
type OperationIncident struct {
	AttemptID string    `json:"attempt_id"`
	Kind      wire.Code `json:"kind"`
	Sealed    Outcome   `json:"sealed"`
	Observed  Outcome   `json:"observed"`
	Source    string    `json:"source"`
	Ref       string    `json:"ref,omitempty"`
}

// EventType implements Event.
func (OperationIncident) EventType() string { return TypeOperationIncident }

func init() {
	register[OperationOpened](TypeOperationOpened)
	register[OperationRefused](TypeOperationRefused)
	register[OperationReserved](TypeOperationReserved)
	register[OperationDispatchStarted](TypeOperationDispatchStarted)
	register[OperationObserved](TypeOperationObserved)
	register[OperationClaimed](TypeOperationClaimed)
	register[OperationClosed](TypeOperationClosed)
	register[OperationIncident](TypeOperationIncident)
}

// OpenResult says what DecideOpen found.
type OpenResult uint8

// Results of DecideOpen.
const (
	OpenNew      OpenResult = iota + 1 // a new operation: append the events
	OpenExisting                       // the same proposal again: reply with its status
	// OpenScoped: the key of the run is held by another principal's
	// operation; this principal's operation with that key is on the
	// principal's own subject of the key (the key scoped by principal),
	// where the proposal is decided again.
	OpenScoped
)

// DecideOpen decides whether a proposal opens a new operation. An
// operation key belongs to the principal that opened it:
//
//   - the same principal with the same action digest is the same operation
//     (never a second reservation; a resend reads its outcome, a refusal
//     included);
//   - an operation refused before any reservation does not claim its key:
//     another action, of any principal, opens the key afresh;
//   - another principal's operation that claims the key sends the proposal
//     to the principal's own subject of the key (OpenScoped);
//   - the same principal with another action on a claimed key is refused
//     operation_key_conflict.
func DecideOpen(o *Operation, opened OperationOpened) (OpenResult, Decision) {
	if o.Opened() {
		switch {
		case o.Principal == opened.Principal && o.ActionDigest == opened.ActionDigest && o.CapabilityID == opened.CapabilityID:
			return OpenExisting, Decision{}
		case !o.Claims():
		case o.Principal != opened.Principal:
			return OpenScoped, Decision{}
		default:
			return 0, no(wire.CodeOperationConflict, "operation key %q of run %q is bound to another action (%s)", o.OperationKey, o.RunID, short(o.ActionDigest))
		}
	}
	opened.Generation = 1
	return OpenNew, Decision{Events: []Event{opened}}
}

// CheckFence refuses an executor whose generation is not the operation's
// current one: it was taken over and must not start or observe anything.
func CheckFence(o *Operation, generation uint64) *Refusal {
	if !o.Opened() {
		return refuse(wire.CodeAttemptUnknown, "operation does not exist")
	}
	if generation != o.Generation {
		return refuse(wire.CodeExecutorFenced, "executor generation %d is fenced; operation %s is at generation %d (%s)", generation, o.OperationID, o.Generation, o.Executor)
	}
	return nil
}

// Sealed returns the outcome an attempt is sealed with: its definitive
// outcome, not_applied for an attempt closed before any, and false for an
// attempt still open.
func (o *Operation) Sealed(attemptID string) (Outcome, bool) {
	for _, a := range o.Attempts {
		if a.AttemptID != attemptID {
			continue
		}
		switch {
		case a.Outcome.Definitive():
			return a.Outcome, true
		case a.Closed:
			return OutcomeNotApplied, true
		}
	}
	return "", false
}

// contradiction is the incident a definitive report makes on an attempt
// sealed with the other outcome.
func contradiction(o *Operation, c SettleInput) (OperationIncident, bool) {
	sealed, ok := o.Sealed(c.AttemptID)
	if !ok || !c.Outcome.Definitive() || c.Outcome == sealed {
		return OperationIncident{}, false
	}
	return OperationIncident{AttemptID: c.AttemptID, Kind: wire.CodeObservationContradictsSeal, Sealed: sealed, Observed: c.Outcome,
		Source: c.Source, Ref: c.Ref}, true
}

// DecideClaim raises the generation for a new executor.
func DecideClaim(o *Operation, executor string) Decision {
	if !o.Opened() {
		return no(wire.CodeAttemptUnknown, "operation does not exist")
	}
	return Decision{Events: []Event{OperationClaimed{Executor: executor, Generation: o.Generation + 1}}}
}

// Apply folds an operation event.
func (o *Operation) Apply(ev Event) error {
	find := func(id string) (*OpAttempt, error) {
		for i := range o.Attempts {
			if o.Attempts[i].AttemptID == id {
				return &o.Attempts[i], nil
			}
		}
		return nil, fmt.Errorf("operation %s has no attempt %s", o.OperationID, id)
	}
	if _, isOpen := ev.(OperationOpened); !isOpen && !o.Opened() {
		return fmt.Errorf("%s before operation.opened", ev.EventType())
	}
	switch e := ev.(type) {
	case OperationOpened:
		if o.Claims() {
			return fmt.Errorf("operation %s opened twice", o.OperationID)
		}
		// A key whose operation was refused before any reservation is
		// opened afresh (DecideOpen): the new operation replaces it.
		*o = Operation{OperationID: e.OperationID, Principal: e.Principal, RunID: e.RunID, OperationKey: e.OperationKey,
			CapabilityID: e.CapabilityID, ActionDigest: e.ActionDigest, Executor: e.Executor, Generation: e.Generation, Pack: e.Pack}
	case OperationRefused:
		o.Refusal = &RefusalRecord{Code: e.Code, Reason: e.Reason}
	case OperationReserved:
		o.Attempts = append(o.Attempts, OpAttempt{AttemptID: e.AttemptID, Generation: e.Generation, Holds: e.Holds})
	case OperationDispatchStarted:
		a, err := find(e.AttemptID)
		if err != nil {
			return err
		}
		a.Started = true
	case OperationObserved:
		a, err := find(e.AttemptID)
		if err != nil {
			return err
		}
		if !a.Outcome.Definitive() {
			a.Outcome = e.Outcome
		}
	case OperationClosed:
		a, err := find(e.AttemptID)
		if err != nil {
			return err
		}
		a.Closed = true
	case DecisionRecorded, OperationIncident:
		// Records change nothing; they are there for the operator and the audit.
	case OperationClaimed:
		if e.Generation <= o.Generation {
			return fmt.Errorf("claim of generation %d does not raise %d", e.Generation, o.Generation)
		}
		o.Generation, o.Executor = e.Generation, e.Executor
	default:
		return fmt.Errorf("event %T does not belong to an operation", ev)
	}
	return nil
}

// TypeDecisionRecorded is the type of DecisionRecorded.
const TypeDecisionRecorded = "decision.recorded"

// DecisionRecorded is the signed record of one decided proposal: what was
// decided and every control that was active when it was.
type DecisionRecorded struct {
	OperationID  string      `json:"operation_id"`
	Principal    string      `json:"principal"`
	RunID        string      `json:"run_id"`
	CapabilityID string      `json:"capability_id"`
	ActionDigest string      `json:"action_digest"`
	AttemptID    string      `json:"attempt_id,omitempty"`
	Status       wire.Status `json:"status"`
	Code         wire.Code   `json:"code,omitempty"`
	Reason       string      `json:"reason,omitempty"`
	Controls     Controls    `json:"controls_active"`
	DecisionTrace
	// The context pack version the decision was compiled under: the
	// run's pinned version, or the gated capability's configured pack.
	PackID      string `json:"pack_id,omitempty"`
	PackVersion string `json:"pack_version,omitempty"`
	PackDigest  string `json:"pack_digest,omitempty"`
}

// Controls are the controls a decision was made under.
type Controls struct {
	Authority         string            `json:"authority"`
	CapabilityVersion string            `json:"capability_version"`
	Risk              string            `json:"risk"`
	PolicyDigest      string            `json:"policy_digest,omitempty"`
	ApprovalID        string            `json:"approval_id,omitempty"`
	RunBudget         string            `json:"run_budget,omitempty"`
	Executor          string            `json:"executor"`
	Generation        uint64            `json:"generation"`
	Guarantees        []GuaranteeHold   `json:"guarantees,omitempty"`
	EvidenceGate      json.RawMessage   `json:"evidence_gate,omitempty"`
	Extra             map[string]string `json:"extra,omitempty"`
	// Trace is what the decision depended on; the record carries it at its
	// top level (decisionRecord), so it is not encoded here.
	Trace DecisionTrace `json:"-"`
}

// GuaranteeHold is one guarantee a decision held or was refused on, with
// the balances after the decision.
type GuaranteeHold struct {
	GuaranteeID      string `json:"guarantee_id"`
	DefinitionDigest string `json:"definition_digest"`
	Resource         string `json:"resource"`
	Amount           int64  `json:"amount"`
	Balance
}

// EventType implements Event.
func (DecisionRecorded) EventType() string { return TypeDecisionRecorded }

func init() { register[DecisionRecorded](TypeDecisionRecorded) }
