package kernel

import (
	"fmt"
	"time"

	"github.com/contextos/ledger/wire"
)

// MaxReceipts is the number of open receipts (reserved, started or held) one
// resource ledger may hold at once. Sealed receipts do not count: the ledger
// keeps the newest RecentSealed of them for idempotent and contradicting
// reports and folds the older ones into its ArchivedReceipts summary, so a
// ledger's state and its snapshot stay bounded however long it lives and no
// history locks a resource out.
const MaxReceipts = 1024

// RecentSealed is how many sealed receipts a ledger keeps after it archives
// the older ones. A reservation that finds twice as many sealed receipts
// listed archives first, so archiving runs at most once per RecentSealed
// seals and a ledger lists at most MaxListed receipts.
const RecentSealed = 256

// MaxListed bounds the receipts a ledger (and its snapshot) lists.
const MaxListed = MaxReceipts + 2*RecentSealed

// ArchivedReceipts is the accounted summary of the sealed receipts a ledger
// no longer lists: how many committed and with what amount, how many were
// released. The archived committed amount stays in Committed.
type ArchivedReceipts struct {
	Committed       int64 `json:"committed"`
	CommittedAmount int64 `json:"committed_amount"`
	Released        int64 `json:"released"`
}

// ReceiptState is where an attempt's receipt is in the ledger state machine
// (DESIGN section 4). The zero value is invalid.
type ReceiptState uint8

// Receipt states.
const (
	StateReserved  ReceiptState = iota + 1 // held, dispatch not started: may be closed
	StateStarted                           // held, dispatch started, nothing observed
	StateHeld                              // held, started, a non-definitive observation exists
	StateCommitted                         // sealed: the effect applied
	StateReleased                          // sealed: proven absent or closed unstarted
)

var stateNames = [...]string{"invalid", "reserved", "started", "held", "committed", "released"}

// String returns the persisted name of the state.
func (s ReceiptState) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "invalid"
}

// MarshalText encodes the state by name.
func (s ReceiptState) MarshalText() ([]byte, error) {
	if s < StateReserved || s > StateReleased {
		return nil, fmt.Errorf("invalid receipt state %d", s)
	}
	return []byte(s.String()), nil
}

// UnmarshalText decodes a state name.
func (s *ReceiptState) UnmarshalText(b []byte) error {
	for i := StateReserved; i <= StateReleased; i++ {
		if string(b) == stateNames[i] {
			*s = i
			return nil
		}
	}
	return fmt.Errorf("invalid receipt state %q", b)
}

// The next safe step of an open receipt, by state. They are persisted in
// exported views; never change one.
const (
	NextStepReserved = "close-attempt or dispatch"
	NextStepStarted  = "reconcile with the provider"
	NextStepHeld     = "reconcile; operator may assert absence with evidence"
)

// NextSafeStep says what may safely be done about a receipt in this state:
// an unstarted one may be closed; a started one may hold an effect, so only
// the provider's answer settles it; a held one was observed, so an
// operator's accountable assertion may also release it. Sealed: "".
func (s ReceiptState) NextSafeStep() string {
	switch s {
	case StateReserved:
		return NextStepReserved
	case StateStarted:
		return NextStepStarted
	case StateHeld:
		return NextStepHeld
	}
	return ""
}

// Open reports whether the receipt still holds exposure.
func (s ReceiptState) Open() bool { return s == StateReserved || s == StateStarted || s == StateHeld }

// Receipt is one attempt's claim on a resource.
type Receipt struct {
	AttemptID   string       `json:"attempt_id"`
	OperationID string       `json:"operation_id"`
	Amount      int64        `json:"amount"`
	State       ReceiptState `json:"state"`
	// Last is the last observation recorded for the attempt, if any.
	Last Outcome `json:"last,omitempty"`
	// Action is the attempt's SameActionKey when its capability is fenced:
	// while the receipt is open, a new operation of the same action is
	// refused.
	Action string `json:"action,omitempty"`
}

// Balance is the accounting view of one resource. Carried is what the
// guarantees a guarantee replaces hold and committed on the resource, which
// counts against its limit: Available = Limit - Committed - Held - Carried.
type Balance struct {
	Limit     int64 `json:"limit"`
	Committed int64 `json:"committed"`
	Held      int64 `json:"held"`
	Available int64 `json:"available"`
	Carried   int64 `json:"carried,omitempty"`
}

// Ledger is the exposure state of one (tenant, guarantee, resource). It is
// built only by Apply; Decide reads it and never changes it. The zero value
// is an empty ledger.
type Ledger struct {
	GuaranteeID      string    `json:"guarantee_id"`
	Resource         string    `json:"resource"`
	DefinitionDigest string    `json:"definition_digest"`
	Limit            int64     `json:"limit"`
	Committed        int64     `json:"committed"`
	Held             int64     `json:"held"`
	Receipts         []Receipt `json:"receipts"`
	Tombstones       []string  `json:"tombstones"`
	// Archived summarizes the sealed receipts no longer in Receipts.
	Archived ArchivedReceipts `json:"archived_receipts"`
	// OverLimit counts reservations made over the limit in observe mode.
	OverLimit int64 `json:"over_limit,omitempty"`
	// Window is the calendar window this ledger counts; Rolling the
	// duration in seconds of its rolling window, whose committed amounts
	// are kept in Buckets (their sum is Committed).
	Window  string   `json:"window,omitempty"`
	Rolling int64    `json:"rolling_seconds,omitempty"`
	Buckets []Bucket `json:"buckets,omitempty"`
	// Imported is the exposure committed before adoption that operators
	// imported (part of Committed); Imports are those imports, by
	// reference, at most MaxImports.
	Imported int64          `json:"imported,omitempty"`
	Imports  []ImportRecord `json:"imports,omitempty"`

	index   map[string]int      // attempt id -> position in Receipts
	tombs   map[string]struct{} // attempt ids closed before they were seen
	openOp  map[string]int      // operation id -> open receipts
	openAct map[string]int      // same-action key -> open receipts
	open    int                 // open receipts
}

// OpenReceipts is the number of receipts that still hold exposure.
func (l *Ledger) OpenReceipts() int { return l.open }

// Balance returns the ledger's balances. An empty ledger has no limit yet.
func (l *Ledger) Balance() Balance {
	return Balance{Limit: l.Limit, Committed: l.Committed, Held: l.Held, Available: l.Limit - l.Committed - l.Held}
}

// BalanceUnder returns the ledger's balances under a guarantee's current
// limit, which may differ from the limit of its last reservation once an
// operator changed it (a lowered limit shows a negative available).
func (l *Ledger) BalanceUnder(limit int64) Balance {
	return Balance{Limit: limit, Committed: l.Committed, Held: l.Held, Available: limit - l.Committed - l.Held}
}

// Receipt returns the receipt of an attempt.
func (l *Ledger) Receipt(attemptID string) (Receipt, bool) {
	i, ok := l.index[attemptID]
	if !ok {
		return Receipt{}, false
	}
	return l.Receipts[i], true
}

// Tombstoned reports whether the attempt was closed before it was seen.
func (l *Ledger) Tombstoned(attemptID string) bool {
	_, ok := l.tombs[attemptID]
	return ok
}

// Rebuild restores the private indexes after the exported fields were
// decoded (a snapshot) and checks the snapshot's internal consistency.
func (l *Ledger) Rebuild() error {
	l.index = make(map[string]int, len(l.Receipts))
	l.openOp = make(map[string]int)
	l.openAct = make(map[string]int)
	l.tombs = make(map[string]struct{}, len(l.Tombstones))
	l.open = 0
	a := l.Archived
	if a.Committed < 0 || a.Released < 0 || a.CommittedAmount < 0 || a.CommittedAmount > MaxAmount || (a.Committed == 0) != (a.CommittedAmount == 0) {
		return fmt.Errorf("snapshot has an invalid archive summary %+v", a)
	}
	if len(l.Receipts) > MaxListed {
		return fmt.Errorf("snapshot lists %d receipts, more than %d", len(l.Receipts), MaxListed)
	}
	if len(l.Imports) > MaxImports {
		return fmt.Errorf("snapshot lists %d imports, more than %d", len(l.Imports), MaxImports)
	}
	var imported int64
	for _, r := range l.Imports {
		if r.Amount <= 0 || r.Amount > MaxAmount {
			return fmt.Errorf("snapshot has an invalid import %+v", r)
		}
		imported += r.Amount
	}
	if imported != l.Imported {
		return fmt.Errorf("snapshot imports sum to %d, not %d", imported, l.Imported)
	}
	committed, held := a.CommittedAmount+imported, int64(0)
	if l.Rolling < 0 || (l.Rolling == 0 && len(l.Buckets) > 0) {
		return fmt.Errorf("snapshot has buckets without a rolling window")
	}
	for i, r := range l.Receipts {
		if _, dup := l.index[r.AttemptID]; dup {
			return fmt.Errorf("duplicate receipt %s", r.AttemptID)
		}
		l.index[r.AttemptID] = i
		switch {
		case r.State.Open():
			held += r.Amount
			l.openOp[r.OperationID]++
			if r.Action != "" {
				l.openAct[r.Action]++
			}
			l.open++
		case r.State == StateCommitted:
			committed += r.Amount
		case r.State != StateReleased:
			return fmt.Errorf("receipt %s has invalid state", r.AttemptID)
		}
	}
	for _, t := range l.Tombstones {
		l.tombs[t] = struct{}{}
	}
	if l.Rolling > 0 {
		// A rolling window counts what its buckets hold, not every
		// committed receipt.
		committed = 0
		for i, b := range l.Buckets {
			if b.Amount <= 0 || (i > 0 && b.Start <= l.Buckets[i-1].Start) {
				return fmt.Errorf("snapshot has an invalid bucket %+v", b)
			}
			committed += b.Amount
		}
	}
	if committed != l.Committed || held != l.Held {
		return fmt.Errorf("snapshot balances committed=%d held=%d disagree with receipts committed=%d held=%d", l.Committed, l.Held, committed, held)
	}
	if l.OverLimit < 0 || (committed+held > l.Limit && l.OverLimit == 0) {
		return fmt.Errorf("snapshot violates the ceiling: %d + %d > %d", committed, held, l.Limit)
	}
	return nil
}

// Command is an input to DecideExposure.
type Command interface{ command() }

// Reserve asks to hold Amount on Resource for an attempt.
type Reserve struct {
	GuaranteeID      string
	Resource         string
	AttemptID        string
	OperationID      string
	Amount           int64
	Limit            int64
	DefinitionDigest string
	Observe          bool      // observe mode: over the limit is reserved and marked, not refused
	Window           string    // the calendar window of the ledger, if any
	Rolling          int64     // the rolling window's duration in seconds, if any
	Now              time.Time // the decision time
	// Carried is the exposure on the resource of the guarantees this one
	// replaces: it counts against Limit with the ledger's own.
	Carried int64
	// Action is the proposal's SameActionKey when its capability is
	// fenced, else empty: a reservation whose action an open receipt of
	// another operation shares is refused (the same-action fence).
	Action string
}

// StartDispatch asks to open the dispatch gate for an attempt.
type StartDispatch struct{ AttemptID string }

// ReserveStarted is a Reserve whose dispatch gate opens in the same
// decision: the reservation's events, then the dispatch-start. A runtime
// that makes both durable in one atomic append before it calls the provider
// (the gateway) saves a whole durable round trip per proposal, and no
// attempt is ever left reserved but unstarted by a crash between the two.
// It decides exactly what Reserve then StartDispatch decide one after the
// other (TestReserveStartedIsReserveThenStart).
type ReserveStarted struct{ Reserve }

// Observe records a provider or reconciliation report for an attempt.
type Observe struct {
	AttemptID string
	Outcome   Outcome
	Source    string
	Ref       string
	Now       time.Time // the decision time
}

// Close closes an unstarted attempt, or tombstones one never seen.
type Close struct {
	AttemptID string
	Reason    string
}

// AssertAbsence releases a started attempt on an operator's assertion.
type AssertAbsence struct {
	AttemptID   string
	Operator    string
	ArtifactRef string
}

func (Reserve) command()        {}
func (ReserveStarted) command() {}
func (StartDispatch) command()  {}
func (Observe) command()        {}
func (Close) command()          {}
func (AssertAbsence) command()  {}

// DecideExposure decides a command against the ledger of one resource. It
// does not change l; the caller appends the events and folds them with Apply.
func DecideExposure(l *Ledger, cmd Command) Decision {
	switch c := cmd.(type) {
	case Reserve:
		return decideReserve(l, c)
	case ReserveStarted:
		d := decideReserve(l, c.Reserve)
		if d.Refusal != nil {
			return d
		}
		if len(d.Events) == 0 {
			// The attempt already holds its reservation: start it as is.
			return DecideExposure(l, StartDispatch{AttemptID: c.AttemptID})
		}
		// A new receipt is reserved, so its gate opens.
		return Decision{Events: append(d.Events, ExposureDispatchStarted{AttemptID: c.AttemptID})}
	case StartDispatch:
		r, ok := l.Receipt(c.AttemptID)
		switch {
		case !ok && l.Tombstoned(c.AttemptID):
			return no(wire.CodeAttemptClosed, "attempt %s was closed before it was reserved", c.AttemptID)
		case !ok:
			return no(wire.CodeAttemptUnknown, "attempt %s holds no reservation on this resource", c.AttemptID)
		case r.State == StateReserved:
			return Decision{Events: []Event{ExposureDispatchStarted{AttemptID: c.AttemptID}}}
		case r.State == StateStarted:
			return Decision{} // a retried start: the gate is already open
		case r.State == StateReleased:
			return no(wire.CodeAttemptClosed, "attempt %s is released; it may not start", c.AttemptID)
		default:
			return no(wire.CodeAttemptKnown, "attempt %s was already dispatched and observed (%s)", c.AttemptID, r.State)
		}
	case Observe:
		return decideObserve(l, c)
	case Close:
		r, ok := l.Receipt(c.AttemptID)
		switch {
		case !ok && l.Tombstoned(c.AttemptID):
			return Decision{}
		case !ok:
			return Decision{Events: []Event{ExposureTombstoned{AttemptID: c.AttemptID, Reason: c.Reason}}}
		case r.State == StateReserved:
			return Decision{Events: []Event{ExposureClosed{AttemptID: c.AttemptID, Reason: c.Reason}}}
		case r.State == StateStarted || r.State == StateHeld:
			return no(wire.CodeDispatchActive, "attempt %s started dispatch; only evidence of absence can release it", c.AttemptID)
		default:
			return no(wire.CodeAttemptClosed, "attempt %s is already sealed %s", c.AttemptID, r.State)
		}
	case Import:
		return decideImport(l, c)
	case AssertAbsence:
		if c.Operator == "" || c.ArtifactRef == "" {
			return no(wire.CodeRequestMalformed, "an absence assertion must name the operator and an artifact reference")
		}
		r, ok := l.Receipt(c.AttemptID)
		switch {
		case !ok:
			return no(wire.CodeAttemptUnknown, "attempt %s holds no reservation on this resource", c.AttemptID)
		case r.State == StateReserved:
			return no(wire.CodeNotStarted, "attempt %s never started; close it instead", c.AttemptID)
		case r.State == StateStarted:
			return no(wire.CodeAbsenceUnproven, "attempt %s has no observation yet; reconcile with the provider first", c.AttemptID)
		case r.State == StateHeld:
			return Decision{Events: []Event{ExposureAbsenceAsserted{AttemptID: c.AttemptID, Operator: c.Operator, ArtifactRef: c.ArtifactRef}}}
		default:
			return no(wire.CodeAttemptClosed, "attempt %s is already sealed %s", c.AttemptID, r.State)
		}
	}
	return no(wire.CodeRequestMalformed, "unknown command %T", cmd)
}

func decideReserve(l *Ledger, c Reserve) Decision {
	if l.DefinitionDigest != "" && l.DefinitionDigest != c.DefinitionDigest {
		return no(wire.CodeDefinitionMismatch, "resource ledger is pinned to definition %s, not %s", short(l.DefinitionDigest), short(c.DefinitionDigest))
	}
	if c.Limit <= 0 || c.Limit > MaxAmount {
		return no(wire.CodeDefinitionInvalid, "limit %d must be in 1..2^53-1", c.Limit)
	}
	if l.Limit != 0 && (l.Window != c.Window || l.Rolling != c.Rolling) {
		return no(wire.CodeDefinitionMismatch, "resource ledger counts window %q (rolling %ds), not %q (rolling %ds)", l.Window, l.Rolling, c.Window, c.Rolling)
	}
	if l.Tombstoned(c.AttemptID) {
		return no(wire.CodeAttemptClosed, "attempt %s was closed before it was reserved", c.AttemptID)
	}
	if r, ok := l.Receipt(c.AttemptID); ok {
		if r.OperationID == c.OperationID && r.Amount == c.Amount && r.State.Open() {
			return Decision{} // a retried reservation: it already holds
		}
		return no(wire.CodeAttemptKnown, "attempt %s already has a %s receipt", c.AttemptID, r.State)
	}
	if l.openOp[c.OperationID] > 0 {
		return no(wire.CodeUnresolvedAttempt, "operation %s has an unresolved attempt on this resource; reconcile it first", c.OperationID)
	}
	if l.open >= MaxReceipts {
		return no(wire.CodeReceiptsSaturated, "resource has %d open receipts, the maximum; settle or reconcile them first", l.open)
	}
	if c.Amount <= 0 || c.Amount > MaxAmount {
		return no(wire.CodeAmountInvalid, "amount %d must be in 1..2^53-1", c.Amount)
	}
	committed := l.Committed
	if c.Rolling > 0 {
		committed = l.CommittedAt(c.Now)
	}
	if c.Carried < 0 {
		return no(wire.CodeAmountInvalid, "carried exposure %d is negative", c.Carried)
	}
	over := committed+l.Held+c.Carried+c.Amount > c.Limit
	switch {
	case over && !c.Observe && c.Carried > 0:
		return no(wire.CodeExceeded, "%s: committed %d + held %d + carried %d (from the guarantees it replaces) + amount %d exceeds limit %d (available %d)",
			c.GuaranteeID, committed, l.Held, c.Carried, c.Amount, c.Limit, c.Limit-committed-l.Held-c.Carried)
	case over && !c.Observe:
		return no(wire.CodeExceeded, "%s: committed %d + held %d + amount %d exceeds limit %d (available %d)",
			c.GuaranteeID, committed, l.Held, c.Amount, c.Limit, c.Limit-committed-l.Held)
	case c.Action != "" && !c.Observe && l.openAct[c.Action] > 0:
		// The same-action fence, within the ceiling: what the ceiling
		// refuses anyway keeps its own code. A guarantee in observe mode
		// refuses nothing, so it does not fence either.
		return no(wire.CodeUnresolvedAttempt, "%s", l.fenced(c.Action))
	}
	var at string
	if c.Rolling > 0 {
		at = formatAt(c.Now)
	}
	return Decision{Events: []Event{ExposureReserved{
		GuaranteeID: c.GuaranteeID, Resource: c.Resource, AttemptID: c.AttemptID, OperationID: c.OperationID,
		Amount: c.Amount, Limit: c.Limit, DefinitionDigest: c.DefinitionDigest, OverLimit: over,
		Window: c.Window, Rolling: c.Rolling, At: at, Carried: c.Carried, Action: c.Action,
	}}}
}

// fenced is the reason of a same-action refusal: it names the open attempt
// of the same action, so the agent can ask after its own operation and an
// operator can reconcile it.
func (l *Ledger) fenced(action string) string {
	for _, r := range l.Receipts {
		if r.State.Open() && r.Action == action {
			return fmt.Sprintf("the same action (capability and arguments) is unresolved on this resource: attempt %s of operation %s is %s; "+
				"resend that operation's key to learn its outcome; a new operation of this action is refused until the attempt is reconciled",
				r.AttemptID, r.OperationID, r.State)
		}
	}
	return "the same action (capability and arguments) is unresolved on this resource; reconcile it first"
}

func decideObserve(l *Ledger, c Observe) Decision {
	if !c.Outcome.Valid() {
		return no(wire.CodeRequestMalformed, "unknown outcome %q", c.Outcome)
	}
	r, ok := l.Receipt(c.AttemptID)
	if !ok {
		return no(wire.CodeAttemptUnknown, "attempt %s holds no reservation on this resource", c.AttemptID)
	}
	obs := ExposureObserved{AttemptID: c.AttemptID, Outcome: c.Outcome, Source: c.Source, Ref: c.Ref}
	if l.Rolling > 0 && c.Outcome == OutcomeApplied {
		obs.At = formatAt(c.Now)
	}
	switch r.State {
	case StateReserved:
		return no(wire.CodeNotStarted, "attempt %s has no dispatch-start; nothing can have been observed", c.AttemptID)
	case StateStarted, StateHeld:
		if !c.Outcome.Definitive() && r.Last == c.Outcome {
			return Decision{} // the same non-definitive report again changes nothing
		}
		return Decision{Events: []Event{obs}}
	}
	sealed := OutcomeApplied
	if r.State == StateReleased {
		sealed = OutcomeNotApplied
	}
	if !c.Outcome.Definitive() || c.Outcome == sealed {
		return Decision{} // repeats and non-definitive reports after a seal change nothing
	}
	return Decision{
		Events: []Event{ExposureIncident{AttemptID: c.AttemptID, Kind: wire.CodeObservationContradictsSeal,
			Sealed: sealed, Observed: c.Outcome, Source: c.Source, Ref: c.Ref}},
		Refusal: refuse(wire.CodeObservationContradictsSeal, "attempt %s is sealed %s; %s report from %s refused and recorded as an incident",
			c.AttemptID, sealed, c.Outcome, c.Source),
	}
}

func no(code wire.Code, format string, args ...any) Decision {
	return Decision{Refusal: refuse(code, format, args...)}
}

// Apply folds one event into the ledger. It refuses events that do not fit
// the state (a corrupt or foreign stream) instead of guessing; the ledger is
// unchanged when it returns an error.
func (l *Ledger) Apply(ev Event) error {
	if l.index == nil {
		l.index = make(map[string]int)
		l.openOp = make(map[string]int)
		l.openAct = make(map[string]int)
		l.tombs = make(map[string]struct{})
	}
	switch e := ev.(type) {
	case ExposureReserved:
		if _, ok := l.index[e.AttemptID]; ok {
			return fmt.Errorf("attempt %s reserved twice", e.AttemptID)
		}
		if l.Limit != 0 && (e.Resource != l.Resource || e.GuaranteeID != l.GuaranteeID || e.DefinitionDigest != l.DefinitionDigest ||
			e.Window != l.Window || e.Rolling != l.Rolling) {
			return fmt.Errorf("reservation %s belongs to another ledger or definition", e.AttemptID)
		}
		at, err := parseAt(e.At)
		if err != nil || e.Rolling < 0 || (e.Rolling > 0 && e.At == "") {
			return fmt.Errorf("reservation %s has an invalid rolling window or time", e.AttemptID)
		}
		committed := l.Committed
		if e.Rolling > 0 {
			gone, _ := l.expired(at)
			committed -= gone
		}
		if over := committed+l.Held+e.Carried+e.Amount > e.Limit; e.Limit <= 0 || e.Limit > MaxAmount || e.Amount <= 0 || e.Carried < 0 || over != e.OverLimit {
			return fmt.Errorf("reservation %s of %d breaks the ceiling %d (committed %d, held %d)", e.AttemptID, e.Amount, e.Limit, l.Committed, l.Held)
		}
		if l.open >= MaxReceipts {
			return fmt.Errorf("reservation %s exceeds %d open receipts", e.AttemptID, MaxReceipts)
		}
		l.GuaranteeID, l.Resource, l.Limit, l.DefinitionDigest, l.Window = e.GuaranteeID, e.Resource, e.Limit, e.DefinitionDigest, e.Window
		l.Rolling = e.Rolling
		l.expire(at)
		if len(l.Receipts)-l.open >= 2*RecentSealed {
			l.archive()
		}
		l.index[e.AttemptID] = len(l.Receipts)
		l.Receipts = append(l.Receipts, Receipt{AttemptID: e.AttemptID, OperationID: e.OperationID, Amount: e.Amount, State: StateReserved, Action: e.Action})
		l.Held += e.Amount
		l.openOp[e.OperationID]++
		if e.Action != "" {
			l.openAct[e.Action]++
		}
		l.open++
		if e.OverLimit {
			l.OverLimit++
		}
	case ExposureDispatchStarted:
		return l.move(e.AttemptID, func(r *Receipt) error {
			if r.State != StateReserved {
				return fmt.Errorf("dispatch-start of %s in state %s", r.AttemptID, r.State)
			}
			r.State = StateStarted
			return nil
		})
	case ExposureObserved:
		at, err := parseAt(e.At)
		if err != nil || (l.Rolling > 0 && e.Outcome == OutcomeApplied && e.At == "") {
			return fmt.Errorf("observation of %s has an invalid decision time", e.AttemptID)
		}
		var committed int64
		err = l.move(e.AttemptID, func(r *Receipt) error {
			if r.State != StateStarted && r.State != StateHeld {
				return fmt.Errorf("observation of %s in state %s", r.AttemptID, r.State)
			}
			if !e.Outcome.Valid() {
				return fmt.Errorf("observation of %s has invalid outcome %q", r.AttemptID, e.Outcome)
			}
			r.Last = e.Outcome
			switch e.Outcome {
			case OutcomeApplied:
				committed = r.Amount
				r.State = StateCommitted
			case OutcomeNotApplied:
				r.State = StateReleased
			default:
				r.State = StateHeld
			}
			return nil
		})
		if err == nil && l.Rolling > 0 && committed > 0 {
			// The amount joins the window at its decision time; what
			// left the window by then goes first.
			l.expire(at)
			l.commitAt(at, committed)
		}
		return err
	case ExposureClosed:
		return l.move(e.AttemptID, func(r *Receipt) error {
			if r.State != StateReserved {
				return fmt.Errorf("close of %s in state %s", r.AttemptID, r.State)
			}
			r.State = StateReleased
			return nil
		})
	case ExposureAbsenceAsserted:
		return l.move(e.AttemptID, func(r *Receipt) error {
			if r.State != StateHeld {
				return fmt.Errorf("absence assertion for %s in state %s", r.AttemptID, r.State)
			}
			r.State = StateReleased
			return nil
		})
	case ExposureTombstoned:
		if _, ok := l.index[e.AttemptID]; ok {
			return fmt.Errorf("tombstone of known attempt %s", e.AttemptID)
		}
		if _, ok := l.tombs[e.AttemptID]; !ok {
			l.tombs[e.AttemptID] = struct{}{}
			l.Tombstones = append(l.Tombstones, e.AttemptID)
		}
	case ExposureImported:
		return l.applyImported(e)
	case ExposureIncident:
		if _, ok := l.index[e.AttemptID]; !ok {
			return fmt.Errorf("incident for unknown attempt %s", e.AttemptID)
		}
	default:
		return fmt.Errorf("event %T does not belong to an exposure ledger", ev)
	}
	return nil
}

// move applies a receipt transition and keeps the balances equal to the sums
// of the receipts: a state change moves the amount between held, committed
// and nothing, and only these three places.
func (l *Ledger) move(attemptID string, f func(*Receipt) error) error {
	i, ok := l.index[attemptID]
	if !ok {
		return fmt.Errorf("event for unknown attempt %s", attemptID)
	}
	r := l.Receipts[i]
	before := r.State
	if err := f(&r); err != nil {
		return err
	}
	if before.Open() && !r.State.Open() {
		l.Held -= r.Amount
		l.openOp[r.OperationID]--
		if r.Action != "" {
			l.openAct[r.Action]--
			if l.openAct[r.Action] == 0 {
				delete(l.openAct, r.Action)
			}
		}
		l.open--
		if r.State == StateCommitted {
			l.Committed += r.Amount
		}
	}
	l.Receipts[i] = r
	return nil
}

// archive folds all but the newest RecentSealed sealed receipts into the
// summary, keeping the open ones and the order of what stays. It runs inside
// Apply, so every fold of the same events (live, snapshot plus tail, offline
// replay) archives the same receipts at the same event.
func (l *Ledger) archive() {
	sealed := len(l.Receipts) - l.open
	drop := sealed - RecentSealed
	kept := l.Receipts[:0]
	for _, r := range l.Receipts {
		if drop > 0 && !r.State.Open() {
			drop--
			if r.State == StateCommitted {
				l.Archived.Committed++
				l.Archived.CommittedAmount += r.Amount
			} else {
				l.Archived.Released++
			}
			delete(l.index, r.AttemptID)
			continue
		}
		l.index[r.AttemptID] = len(kept)
		kept = append(kept, r)
	}
	clear(l.Receipts[len(kept):])
	l.Receipts = kept
}

func init() {
	register[GuaranteePinned](TypeGuaranteePinned)
	register[ExposureReserved](TypeExposureReserved)
	register[ExposureDispatchStarted](TypeExposureDispatchStarted)
	register[ExposureObserved](TypeExposureObserved)
	register[ExposureClosed](TypeExposureClosed)
	register[ExposureTombstoned](TypeExposureTombstoned)
	register[ExposureAbsenceAsserted](TypeExposureAbsenceAsserted)
	register[ExposureIncident](TypeExposureIncident)
}

// Clone returns a deep copy of the ledger, for previews that must not touch
// the original.
func (l *Ledger) Clone() *Ledger {
	c := *l
	c.Receipts = append([]Receipt(nil), l.Receipts...)
	c.Tombstones = append([]string(nil), l.Tombstones...)
	c.Buckets = append([]Bucket(nil), l.Buckets...)
	c.Imports = append([]ImportRecord(nil), l.Imports...)
	c.index, c.tombs, c.openOp, c.openAct = nil, nil, nil, nil
	if err := c.Rebuild(); err != nil {
		// The original satisfied the same checks when it was built.
		panic("kernel: clone of a valid ledger does not rebuild: " + err.Error())
	}
	return &c
}
