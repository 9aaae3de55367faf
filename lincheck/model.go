package lincheck

import (
	"fmt"
	"hash/fnv"
	"sort"
	"strings"

	"github.com/anishathalye/porcupine"
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
	obs    string // last non-definitive observation of a held attempt
	amount int64
}

// state is one resource: its balances and each proposal's attempt. States
// are values: a step copies the map.
type state struct {
	c, h int64
	keys map[string]keyState
}

func (s state) with(key string, ks keyState, dc, dh int64) state {
	n := state{c: s.c + dc, h: s.h + dh, keys: make(map[string]keyState, len(s.keys)+1)}
	for k, v := range s.keys {
		n.keys[k] = v
	}
	n.keys[key] = ks
	return n
}

func statusOf(ks keyState) string {
	switch ks.phase {
	case phaseRefused:
		return StatusRefused
	case phaseHeld:
		if ks.obs == OutcomeUnknown || ks.obs == OutcomePartial {
			return StatusUnknown
		}
		return StatusPending
	case phaseCommitted:
		return StatusApplied
	case phaseReleased:
		return StatusNotApplied
	}
	return ""
}

func balanceMatches(out Output, in Input, s state) bool {
	if !out.HasBalance {
		return true
	}
	if out.Limit != 0 && out.Limit != in.Limit {
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
		if ks.obs == outcome {
			return s, true
		}
		return s.with(key, keyState{phase: phaseHeld, obs: outcome, amount: ks.amount}, 0, 0), true
	}
	return s, false
}

// anySettle is every state an unknown settlement of key may leave: none,
// or any observation.
func anySettle(s state, key string) []state {
	out := []state{s}
	for _, o := range []string{OutcomeApplied, OutcomeNotApplied, OutcomePending, OutcomeUnknown} {
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

func step(st any, input any, output any) []any {
	s := st.(state)
	in := input.(Input)
	out := output.(Output)
	ks := s.keys[in.Key]
	var next []state
	fits := s.c+s.h+in.Amount <= in.Limit
	switch in.Kind {
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
				next = append(next, s.with(in.Key, keyState{phase: phaseRefused, amount: in.Amount}, 0, 0))
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
		if n, ok := settleTo(s, in.Key, outcomeOfStatus(out.Status)); ok && ks.phase == phaseHeld && balanceMatches(out, in, n) {
			next = append(next, n)
		}
		if statusOf(ks) == out.Status && balanceMatches(out, in, s) {
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
			}
			if !(out.Outcome == OutcomeApplied || out.Outcome == OutcomeNotApplied) && ks.phase == phaseHeld {
				next = append(next, s) // the provider reports no change
			}
			if (out.Outcome == OutcomeApplied && ks.phase == phaseCommitted) || (out.Outcome == OutcomeNotApplied && ks.phase == phaseReleased) {
				next = append(next, s) // the same seal again
			}
			if ks.phase == phaseCommitted || ks.phase == phaseReleased {
				// A contradicting or non-definitive report after the seal
				// changes nothing.
				next = append(next, s)
			}
		case out.Code == "":
			// "already resolved": a read of the attempt's status.
			if out.Status == "" || statusOf(ks) == out.Status {
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
	res := make([]any, len(next))
	for i, n := range next {
		res[i] = n
	}
	return res
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

func equal(a, b any) bool {
	x, y := a.(state), b.(state)
	if x.c != y.c || x.h != y.h || len(x.keys) != len(y.keys) {
		return false
	}
	for k, v := range x.keys {
		if w, ok := y.keys[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func hash(a any) uint64 {
	s := a.(state)
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%d/%d", s.c, s.h, len(s.keys))
	var sum uint64
	for k, v := range s.keys {
		kh := fnv.New64a()
		fmt.Fprintf(kh, "%s=%d/%s/%d", k, v.phase, v.obs, v.amount)
		sum += kh.Sum64() // order-independent
	}
	return h.Sum64() ^ sum
}

func describeState(a any) string {
	s := a.(state)
	keys := make([]string, 0, len(s.keys))
	for k := range s.keys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "committed=%d held=%d", s.c, s.h)
	for _, k := range keys {
		v := s.keys[k]
		fmt.Fprintf(&b, " %s:%s", k, phaseNames[v.phase])
		if v.obs != "" {
			fmt.Fprintf(&b, "(%s)", v.obs)
		}
	}
	return b.String()
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
// to the model's.
func Model() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition:         partition,
		Init:              func() []any { return []any{state{keys: map[string]keyState{}}} },
		Step:              step,
		Equal:             equal,
		Hash:              hash,
		DescribeOperation: describeOperation,
		DescribeState: func(a any) string {
			return describeState(a)
		},
	}
	m := nm.ToModel()
	return m
}
