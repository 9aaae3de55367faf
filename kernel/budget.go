package kernel

import (
	"errors"
	"fmt"

	"github.com/contextos/ledger/wire"
)

// Run is the budget state of one run subject: what was admitted (calls and
// amount), what its proposals consumed and what it delegated to child runs.
// Nothing refills a run: not a refusal after consumption, not a released
// hold, not a finished child. The zero value is a run never admitted.
type Run struct {
	RunID           string   `json:"run_id"`
	ParentRunID     string   `json:"parent_run_id,omitempty"`
	Principal       string   `json:"principal,omitempty"`
	Admitted        bool     `json:"admitted"`
	Calls           int64    `json:"calls"`
	Amount          int64    `json:"amount"`
	UsedCalls       int64    `json:"used_calls"`
	UsedAmount      int64    `json:"used_amount"`
	DelegatedCalls  int64    `json:"delegated_calls"`
	DelegatedAmount int64    `json:"delegated_amount"`
	Children        []string `json:"children,omitempty"`
	// Pack is the context pack version the run pinned at admission (nil:
	// none was named or promoted).
	Pack *PackRef `json:"pack,omitempty"`
}

// Available returns the calls and amount the run may still consume or
// delegate. A run never admitted has none.
func (r *Run) Available() (calls, amount int64) {
	if !r.Admitted {
		return 0, 0
	}
	return r.Calls - r.UsedCalls - r.DelegatedCalls, r.Amount - r.UsedAmount - r.DelegatedAmount
}

// Describe is the run's budget as a decision's controls record it.
func (r *Run) Describe() string {
	if !r.Admitted {
		return fmt.Sprintf("run %s: not admitted, unbudgeted (used calls %d, amount %d)", r.RunID, r.UsedCalls, r.UsedAmount)
	}
	return fmt.Sprintf("run %s: calls %d+%d delegated of %d, amount %d+%d delegated of %d",
		r.RunID, r.UsedCalls, r.DelegatedCalls, r.Calls, r.UsedAmount, r.DelegatedAmount, r.Amount)
}

// Run event types.
const (
	TypeRunAdmitted  = "run.admitted"
	TypeRunDelegated = "run.delegated"
	TypeRunConsumed  = "run.consumed"
)

// RunAdmitted declares a run's budget. A child run (ParentRunID set) is
// admitted in the same atomic batch as its parent's RunDelegated.
type RunAdmitted struct {
	RunID       string `json:"run_id"`
	ParentRunID string `json:"parent_run_id,omitempty"`
	Principal   string `json:"principal"`
	Operator    string `json:"operator"`
	Calls       int64  `json:"calls"`
	Amount      int64  `json:"amount"`
	// Pack is the context pack version the run pins (PinPack).
	Pack *PackRef `json:"pack,omitempty"`
}

// RunDelegated moves part of a run's budget to a child run.
type RunDelegated struct {
	RunID      string `json:"run_id"`
	ChildRunID string `json:"child_run_id"`
	Calls      int64  `json:"calls"`
	Amount     int64  `json:"amount"`
}

// RunConsumed charges one proposal (one call and its amount) to a run. It is
// appended in the same atomic batch as the proposal's reservation.
type RunConsumed struct {
	RunID       string `json:"run_id"`
	OperationID string `json:"operation_id"`
	AttemptID   string `json:"attempt_id"`
	Principal   string `json:"principal"`
	Calls       int64  `json:"calls"`
	Amount      int64  `json:"amount"`
}

// EventType implements Event.
func (RunAdmitted) EventType() string { return TypeRunAdmitted }

// EventType implements Event.
func (RunDelegated) EventType() string { return TypeRunDelegated }

// EventType implements Event.
func (RunConsumed) EventType() string { return TypeRunConsumed }

func init() {
	register[RunAdmitted](TypeRunAdmitted)
	register[RunDelegated](TypeRunDelegated)
	register[RunConsumed](TypeRunConsumed)
}

// RunIDOf returns the run id an event of a run subject names, for checking
// that a hashed subject token holds the run it should.
func RunIDOf(ev Event) string {
	switch e := ev.(type) {
	case RunAdmitted:
		return e.RunID
	case RunDelegated:
		return e.RunID
	case RunConsumed:
		return e.RunID
	}
	return ""
}

// Apply folds a run event. It refuses events that would overdraw an
// admitted run (a corrupt or foreign stream).
func (r *Run) Apply(ev Event) error {
	if id := RunIDOf(ev); id == "" || (r.RunID != "" && id != r.RunID) {
		return fmt.Errorf("event %T names run %q on the subject of run %q", ev, id, r.RunID)
	}
	switch e := ev.(type) {
	case RunAdmitted:
		if r.Admitted {
			return fmt.Errorf("run %s admitted twice", e.RunID)
		}
		if e.Calls < 0 || e.Amount < 0 || e.Calls > MaxAmount || e.Amount > MaxAmount {
			return errors.New("run admitted with a negative or oversized budget")
		}
		r.RunID, r.ParentRunID, r.Principal, r.Admitted, r.Calls, r.Amount, r.Pack = e.RunID, e.ParentRunID, e.Principal, true, e.Calls, e.Amount, e.Pack
	case RunDelegated:
		calls, amount := r.Available()
		if !r.Admitted || e.Calls < 0 || e.Amount < 0 || e.Calls > calls || e.Amount > amount {
			return fmt.Errorf("delegation of calls %d amount %d overdraws run %s", e.Calls, e.Amount, e.RunID)
		}
		r.DelegatedCalls += e.Calls
		r.DelegatedAmount += e.Amount
		r.Children = append(r.Children, e.ChildRunID)
	case RunConsumed:
		if e.Calls < 0 || e.Amount < 0 || e.Amount > MaxAmount {
			return errors.New("run consumption with a negative or oversized charge")
		}
		if r.Admitted {
			calls, amount := r.Available()
			if e.Calls > calls || e.Amount > amount {
				return fmt.Errorf("consumption of calls %d amount %d overdraws run %s", e.Calls, e.Amount, e.RunID)
			}
		}
		r.RunID = e.RunID
		r.UsedCalls += e.Calls
		r.UsedAmount += e.Amount
	default:
		return fmt.Errorf("event %T does not belong to a run subject", ev)
	}
	return nil
}

// AdmitRun is an admission command: a run's budget, drawn from its parent
// when ParentRunID is set. Principal is the agent whose proposals may
// consume it.
type AdmitRun struct {
	RunID       string
	ParentRunID string
	Principal   string
	Operator    string
	Calls       int64
	Amount      int64
	// PackSpec names the pack version to pin (id@version or digest; empty:
	// the promoted one); DecideAdmitRun resolves it into Pack.
	PackSpec string
	Pack     *PackRef
}

// AdmitDecision is DecideAdmit's result: the events of the child run and of
// the parent run (none without a parent), to be appended in one atomic
// batch.
type AdmitDecision struct {
	Child   []Event
	Parent  []Event
	Refusal *Refusal
}

// DecideAdmit admits a run. A run is admitted once: the same admission
// again is a no-op, a different one is refused with CodeRunAlreadyAdmitted.
// A child's budget must fit in what the parent still has available
// (CodeRunBudgetExhausted otherwise); it is moved out of the parent by the
// parent's RunDelegated, so the sum over a tree of runs never grows.
// parent is ignored (and may be nil) without ParentRunID.
func DecideAdmit(child, parent *Run, c AdmitRun) AdmitDecision {
	bad := func(code wire.Code, format string, args ...any) AdmitDecision {
		return AdmitDecision{Refusal: refuse(code, format, args...)}
	}
	switch {
	case c.RunID == "" || c.Principal == "" || c.Operator == "":
		return bad(wire.CodeRequestMalformed, "an admission names the run, the principal and the operator")
	case c.ParentRunID == c.RunID:
		return bad(wire.CodeRequestMalformed, "run %s cannot be its own parent", c.RunID)
	case c.Calls < 1 || c.Calls > MaxAmount || c.Amount < 0 || c.Amount > MaxAmount:
		return bad(wire.CodeRequestMalformed, "calls must be in 1..2^53-1 and amount in 0..2^53-1")
	}
	if child.Admitted {
		if child.ParentRunID == c.ParentRunID && child.Principal == c.Principal && child.Calls == c.Calls && child.Amount == c.Amount &&
			(c.Pack == nil || child.Pack != nil && *child.Pack == *c.Pack) {
			return AdmitDecision{}
		}
		return bad(wire.CodeRunAlreadyAdmitted, "run %s is already admitted with another budget; a budget is never raised", c.RunID)
	}
	adm := RunAdmitted{RunID: c.RunID, ParentRunID: c.ParentRunID, Principal: c.Principal, Operator: c.Operator, Calls: c.Calls, Amount: c.Amount, Pack: c.Pack}
	if c.ParentRunID == "" {
		return AdmitDecision{Child: []Event{adm}}
	}
	if parent == nil || !parent.Admitted {
		return bad(wire.CodeRunBudgetExhausted, "parent run %s was never admitted; it has no budget to delegate", c.ParentRunID)
	}
	calls, amount := parent.Available()
	if c.Calls > calls || c.Amount > amount {
		return bad(wire.CodeRunBudgetExhausted, "parent run %s has calls %d and amount %d available; the child asks for %d and %d",
			c.ParentRunID, calls, amount, c.Calls, c.Amount)
	}
	return AdmitDecision{Child: []Event{adm}, Parent: []Event{RunDelegated{RunID: c.ParentRunID, ChildRunID: c.RunID, Calls: c.Calls, Amount: c.Amount}}}
}

// ConsumeRun charges one proposal to its run. AllowUnadmitted says what a
// run never admitted may do: consume without a limit (still recorded, so a
// later admission sees the usage and every replica conflicts on the run
// subject) or nothing.
type ConsumeRun struct {
	RunID           string
	Principal       string
	OperationID     string
	AttemptID       string
	Amount          int64
	AllowUnadmitted bool
}

// DecideConsume charges one call and Amount to the run. Refusals:
// CodeRunBudgetExhausted when the run was never admitted (and unadmitted
// runs are not allowed) or has not one call or the amount left;
// CodeAuthorityDenied when the run was admitted for another principal.
func DecideConsume(r *Run, c ConsumeRun) Decision {
	if c.RunID == "" || c.Amount < 0 || c.Amount > MaxAmount {
		return no(wire.CodeRequestMalformed, "a run charge names the run and a non-negative amount")
	}
	ev := RunConsumed{RunID: c.RunID, OperationID: c.OperationID, AttemptID: c.AttemptID, Principal: c.Principal, Calls: 1, Amount: c.Amount}
	if !r.Admitted {
		if !c.AllowUnadmitted {
			return no(wire.CodeRunBudgetExhausted, "run %s was never admitted; it has no budget", c.RunID)
		}
		return Decision{Events: []Event{ev}}
	}
	if r.Principal != c.Principal {
		return no(wire.CodeAuthorityDenied, "run %s is admitted for principal %s, not %s", c.RunID, r.Principal, c.Principal)
	}
	calls, amount := r.Available()
	if calls < 1 {
		return no(wire.CodeRunBudgetExhausted, "run %s has no call left (%d used, %d delegated, of %d)", c.RunID, r.UsedCalls, r.DelegatedCalls, r.Calls)
	}
	if c.Amount > amount {
		return no(wire.CodeRunBudgetExhausted, "run %s has amount %d left; the proposal needs %d", c.RunID, amount, c.Amount)
	}
	return Decision{Events: []Event{ev}}
}
