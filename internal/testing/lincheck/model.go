package lincheck

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"sort"
	"strings"

	"github.com/anishathalye/porcupine"
	"github.com/contextos/ledger/wire"
)

// Kind names an operation of the model.
type Kind string

// Kinds of operations.
const (
	// KindReserve is the first half of a proposal: the reservation (or
	// the refusal, whose balances the reply reports).
	KindReserve Kind = "reserve"
	// KindSettle is the second half of a proposal that was not refused:
	// the observation and the balances the reply reports.
	KindSettle Kind = "settle"
	// KindRead is an exposure read of the resource.
	KindRead Kind = "read"
	// KindReconcile is an operator's reconciliation of one attempt.
	KindReconcile Kind = "reconcile"
	// KindClose is an operator's close-attempt.
	KindClose Kind = "close"
	// KindAssert is an operator's absence assertion.
	KindAssert Kind = "assert"
	// KindSetLimit is an operator's new version of the guarantee's limit
	// (Input.Limit) for the resource: reservations linearized after it
	// decide against it, and no balance moves.
	KindSetLimit Kind = "set-limit"
)

// Statuses and outcomes as the wire spells them.
const (
	StatusRefused    = "refused"
	StatusApplied    = "applied"
	StatusNotApplied = "not_applied"
	StatusPending    = "pending"
	StatusUnknown    = "unknown"

	OutcomeApplied    = "applied"
	OutcomeNotApplied = "not_applied"
	OutcomePending    = "pending"
	OutcomeUnknown    = "unknown"
	OutcomePartial    = "partial"

	CodeExceeded = "shared_guarantee_exceeded"
)

// Input is one operation's input. Resource partitions the history; Key
// identifies the proposal (run and operation key) whose attempt the
// operation is about.
type Input struct {
	Kind     Kind
	Resource string
	Limit    int64
	Key      string
	Amount   int64
}

// Output is what the client saw. Unknown means no reply arrived (timeout,
// broken connection): the operation may or may not have happened.
type Output struct {
	Unknown bool
	OK      bool   // operator verbs: the reply's ok
	Status  string // proposals: the reply's status; reconcile: the row's status
	Code    string
	Outcome string // reconcile: the row's outcome
	// Counted says a refusal was counted in its window's aggregate rather
	// than recorded whole (its reply names no operation): it claims no key,
	// so a resend decides again.
	Counted bool
	// HasBalance says the reply carried balances of the resource.
	HasBalance bool
	Limit      int64
	Committed  int64
	Held       int64
}

type phase uint8

const (
	phaseNone phase = iota
	phaseRefused
	phaseHeld
	phaseCommitted
	phaseReleased
)

var phaseNames = [...]string{"none", "refused", "held", "committed", "released"}

type keyState struct {
	phase  phase
	amount int64
}

// state is one resource: its balances and each proposal's attempt. States
// are values: a step copies the map. canon is the state's canonical
// spelling, which identifies it.
type state struct {
	c, h  int64
	limit int64 // the latest version's limit once one was set, else 0 (the input's)
	keys  map[string]keyState
	canon string
}

func newState(c, h int64, keys map[string]keyState) state {
	return newStateLimit(c, h, 0, keys)
}

func newStateLimit(c, h, limit int64, keys map[string]keyState) state {
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	fmt.Fprintf(&b, "%d/%d/%d", c, h, limit)
	for _, k := range names {
		fmt.Fprintf(&b, "|%s=%d", k, keys[k].phase)
	}
	return state{c: c, h: h, limit: limit, keys: keys, canon: b.String()}
}

func (s state) with(key string, ks keyState, dc, dh int64) state {
	keys := make(map[string]keyState, len(s.keys)+1)
	for k, v := range s.keys {
		keys[k] = v
	}
	keys[key] = ks
	return newStateLimit(s.c+dc, s.h+dh, s.limit, keys)
}

// statusMatches says whether a reply status describes the attempt's state.
// Pending and unknown both describe a hold that stays.
func statusMatches(ks keyState, status string) bool {
	switch ks.phase {
	case phaseRefused:
		return status == StatusRefused
	case phaseHeld:
		return status == StatusPending || status == StatusUnknown
	case phaseCommitted:
		return status == StatusApplied
	case phaseReleased:
		return status == StatusNotApplied
	}
	return false
}

func balanceMatches(out Output, in Input, s state) bool {
	if !out.HasBalance {
		return true
	}
	if out.Limit != 0 && out.Limit != s.limitFor(in) {
		return false
	}
	return out.Committed == s.c && out.Held == s.h
}

// settleTo moves a held attempt to the state an outcome leaves it in.
func settleTo(s state, key string, outcome string) (state, bool) {
	ks := s.keys[key]
	if ks.phase != phaseHeld {
		return s, false
	}
	switch outcome {
	case OutcomeApplied:
		return s.with(key, keyState{phase: phaseCommitted, amount: ks.amount}, ks.amount, -ks.amount), true
	case OutcomeNotApplied:
		return s.with(key, keyState{phase: phaseReleased, amount: ks.amount}, 0, -ks.amount), true
	case OutcomePending, OutcomeUnknown, OutcomePartial:
		return s, true
	}
	return s, false
}

// anySettle is every state an unknown settlement of key may leave: none,
// or any observation.
func anySettle(s state, key string) []state {
	out := []state{s}
	for _, o := range []string{OutcomeApplied, OutcomeNotApplied} {
		if n, ok := settleTo(s, key, o); ok {
			out = append(out, n)
		}
	}
	return out
}

func outcomeOfStatus(status string) string {
	switch status {
	case StatusApplied:
		return OutcomeApplied
	case StatusNotApplied:
		return OutcomeNotApplied
	case StatusPending:
		return OutcomePending
	case StatusUnknown:
		return OutcomeUnknown
	}
	return ""
}

// limitFor is the limit an operation decides against: the latest version
// set in the history, else the one the client configured.
func (s state) limitFor(in Input) int64 {
	if s.limit != 0 {
		return s.limit
	}
	return in.Limit
}

func step(s state, in Input, out Output) []state {
	ks := s.keys[in.Key]
	var next []state
	fits := s.c+s.h+in.Amount <= s.limitFor(in)
	switch in.Kind {
	case KindSetLimit:
		changed := newStateLimit(s.c, s.h, in.Limit, s.keys)
		switch {
		case out.Unknown:
			next = append(next, s, changed)
		case out.OK:
			next = append(next, changed)
		default:
			next = append(next, s)
		}
	case KindReserve:
		switch {
		case out.Unknown:
			next = append(next, s) // never arrived, contended, or an existing operation
			if ks.phase == phaseNone {
				if fits {
					next = append(next, s.with(in.Key, keyState{phase: phaseHeld, amount: in.Amount}, 0, in.Amount))
				} else {
					next = append(next, s.with(in.Key, keyState{phase: phaseRefused, amount: in.Amount}, 0, 0))
				}
			}
		case out.Status == StatusRefused && out.Code == CodeExceeded:
			if !balanceMatches(out, in, s) {
				break
			}
			if ks.phase == phaseNone && !fits {
				if out.Counted {
					next = append(next, s)
				} else {
					next = append(next, s.with(in.Key, keyState{phase: phaseRefused, amount: in.Amount}, 0, 0))
				}
			}
			if ks.phase == phaseRefused {
				next = append(next, s) // the recorded refusal, returned again
			}
		case out.Status == StatusRefused:
			// Refused for another reason: nothing reserved (contention), or
			// reserved and then refused at dispatch-start (fenced, closed).
			next = append(next, s)
			if ks.phase == phaseNone && fits {
				next = append(next, s.with(in.Key, keyState{phase: phaseHeld, amount: in.Amount}, 0, in.Amount))
			}
		default:
			if ks.phase == phaseNone {
				if fits {
					next = append(next, s.with(in.Key, keyState{phase: phaseHeld, amount: in.Amount}, 0, in.Amount))
				}
			} else if ks.phase != phaseRefused {
				next = append(next, s) // the same operation again
			}
		}
	case KindSettle:
		if out.Unknown {
			next = anySettle(s, in.Key)
			break
		}
		if n, ok := settleTo(s, in.Key, outcomeOfStatus(out.Status)); ok && balanceMatches(out, in, n) {
			next = append(next, n)
		} else if statusMatches(ks, out.Status) && balanceMatches(out, in, s) {
			next = append(next, s) // a resend or a fenced settlement reads the state
		}
	case KindRead:
		if out.Unknown || balanceMatches(out, in, s) {
			next = append(next, s)
		}
	case KindReconcile:
		switch {
		case out.Unknown:
			next = anySettle(s, in.Key)
		case out.Code == "" && out.Outcome != "":
			if n, ok := settleTo(s, in.Key, out.Outcome); ok {
				next = append(next, n)
			} else if ks.phase == phaseCommitted || ks.phase == phaseReleased {
				// The same seal again, or a report after the seal (a
				// contradiction is refused): nothing changes.
				next = append(next, s)
			}
		case out.Code == "":
			// "already resolved": a read of the attempt's status.
			if out.Status == "" || statusMatches(ks, out.Status) {
				next = append(next, s)
			}
		case knownNoChange(out.Code):
			next = append(next, s)
		default:
			next = anySettle(s, in.Key) // an error: the outcome is unknown
		}
	case KindClose, KindAssert:
		switch {
		case out.Unknown:
			next = append(next, s)
			if n, ok := settleTo(s, in.Key, OutcomeNotApplied); ok {
				next = append(next, n)
			}
		case out.OK:
			if n, ok := settleTo(s, in.Key, OutcomeNotApplied); ok {
				next = append(next, n)
			}
		default:
			next = append(next, s)
		}
	}
	return next
}

// knownNoChange are refusal codes of reconciliation that change nothing.
func knownNoChange(code string) bool {
	switch code {
	case "shared_guarantee_dispatch_active", "shared_guarantee_not_started", "shared_guarantee_attempt_unknown",
		"capability_not_surfaced", "observation_contradicts_seal", "shared_guarantee_absence_unproven", "request_malformed":
		return true
	}
	return false
}

// stateSet is the model's state: every state the resource may be in after
// the operations linearized so far (unknown outcomes branch). fp
// identifies the set.
type stateSet struct {
	states []state
	fp     [sha256.Size]byte
}

func newSet(states map[string]state) stateSet {
	keys := make([]string, 0, len(states))
	for k := range states {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := stateSet{states: make([]state, len(keys))}
	h := sha256.New()
	for i, k := range keys {
		out.states[i] = states[k]
		h.Write([]byte(k))
		h.Write([]byte{0})
	}
	copy(out.fp[:], h.Sum(nil))
	return out
}

func setStep(st, input, output any) (bool, any) {
	next := map[string]state{}
	for _, s := range st.(stateSet).states {
		for _, n := range step(s, input.(Input), output.(Output)) {
			next[n.canon] = n
		}
	}
	if len(next) == 0 {
		return false, st
	}
	return true, newSet(next)
}

func describeState(a any) string {
	set := a.(stateSet)
	var parts []string
	for _, s := range set.states {
		keys := make([]string, 0, len(s.keys))
		for k := range s.keys {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var b strings.Builder
		fmt.Fprintf(&b, "committed=%d held=%d", s.c, s.h)
		for _, k := range keys {
			fmt.Fprintf(&b, " %s:%s", k, phaseNames[s.keys[k].phase])
		}
		parts = append(parts, b.String())
	}
	return "{" + strings.Join(parts, " | ") + "}"
}

func describeOperation(input, output any) string {
	in, out := input.(Input), output.(Output)
	var b strings.Builder
	fmt.Fprintf(&b, "%s", in.Kind)
	if in.Key != "" {
		fmt.Fprintf(&b, " %s", in.Key)
	}
	if in.Amount != 0 {
		fmt.Fprintf(&b, " %d", in.Amount)
	}
	b.WriteString(" -> ")
	if out.Unknown {
		b.WriteString("?")
		return b.String()
	}
	for _, f := range []string{out.Status, out.Code, out.Outcome} {
		if f != "" {
			b.WriteString(f + " ")
		}
	}
	if in.Kind == KindClose || in.Kind == KindAssert {
		fmt.Fprintf(&b, "ok=%v ", out.OK)
	}
	if out.HasBalance {
		fmt.Fprintf(&b, "c=%d h=%d", out.Committed, out.Held)
	}
	return strings.TrimSpace(b.String())
}

// partition splits a history by resource: ledgers of different resources
// share nothing, so each is checked on its own.
func partition(history []porcupine.Operation) [][]porcupine.Operation {
	by := map[string][]porcupine.Operation{}
	var order []string
	for _, op := range history {
		r := op.Input.(Input).Resource
		if _, ok := by[r]; !ok {
			order = append(order, r)
		}
		by[r] = append(by[r], op)
	}
	sort.Strings(order)
	out := make([][]porcupine.Operation, len(order))
	for i, r := range order {
		out[i] = by[r]
	}
	return out
}

// Model is the sequential specification of the exposure ledgers: per
// resource, committed and held and each proposal's attempt, with the
// ceiling checked on every reservation and every reported balance compared
// to the model's. It is nondeterministic (an unknown outcome branches); its
// state is the set of states the resource may be in, deduplicated by each
// state's canonical spelling.
func Model() porcupine.Model {
	return porcupine.Model{
		Partition: partition,
		Init: func() any {
			s := newState(0, 0, map[string]keyState{})
			return newSet(map[string]state{s.canon: s})
		},
		Step:              setStep,
		Equal:             func(a, b any) bool { return a.(stateSet).fp == b.(stateSet).fp },
		Hash:              func(a any) uint64 { fp := a.(stateSet).fp; return binary.LittleEndian.Uint64(fp[:8]) },
		DescribeOperation: describeOperation,
		DescribeState:     describeState,
	}
}

// ProposalOutput is what a proposal's reply tells the model: its status and
// code, the balances it carries, and whether a refusal was counted (it names
// no operation) rather than recorded whole.
func ProposalOutput(r wire.Reply) Output {
	out := Output{Status: string(r.Status), Code: string(r.Code), Counted: r.Status == wire.StatusRefused && r.OperationID == ""}
	if r.Committed != nil && r.Held != nil && r.Limit != nil {
		out.HasBalance, out.Limit, out.Committed, out.Held = true, *r.Limit, *r.Committed, *r.Held
	}
	return out
}
