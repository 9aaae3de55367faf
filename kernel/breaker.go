package kernel

import (
	"fmt"
	"time"
)

// Types of the circuit breaker events, stored on a tenant's breaker
// subject of one capability.
const (
	TypeBreakerTripped = "control.breaker_tripped"
	TypeBreakerReset   = "control.breaker_reset"
)

// BreakerRule is a capability's circuit breaker: Threshold provider
// failures within Window open it. A zero Threshold never opens.
type BreakerRule struct {
	Threshold int
	Window    time.Duration
}

// FailureWindow is what a breaker remembers between failures: the times
// of the most recent ones, oldest first, at most the rule's Threshold.
type FailureWindow struct {
	Times []time.Time
}

// BreakerFailure is one provider failure of a capability: an unknown
// outcome, a transport error, a timeout or a 5xx. At is its time (an
// input: the kernel reads no clock); Reason is what the provider said.
type BreakerFailure struct {
	CapabilityID string
	At           time.Time
	Reason       string
}

// DecideBreaker is the breaker rule: the failure joins the window, failures
// older than the rule's window drop out, and when the window then holds at
// least Threshold failures a breaker that is not yet open trips, with the
// figures that tripped it. The window returned replaces w; it never holds
// more than Threshold times.
func DecideBreaker(w FailureWindow, rule BreakerRule, open bool, f BreakerFailure) (FailureWindow, *BreakerTripped) {
	if rule.Threshold <= 0 {
		return FailureWindow{}, nil
	}
	from := f.At.Add(-rule.Window)
	times := make([]time.Time, 0, rule.Threshold)
	for _, t := range w.Times {
		if t.After(from) && !t.After(f.At) {
			times = append(times, t)
		}
	}
	times = append(times, f.At)
	if len(times) > rule.Threshold {
		times = times[len(times)-rule.Threshold:]
	}
	out := FailureWindow{Times: times}
	if open || len(times) < rule.Threshold {
		return out, nil
	}
	return out, &BreakerTripped{CapabilityID: f.CapabilityID, Failures: len(times), Threshold: rule.Threshold,
		WindowMillis: rule.Window.Milliseconds(), FirstFailure: times[0].UTC().Format(time.RFC3339Nano),
		LastFailure: f.At.UTC().Format(time.RFC3339Nano), LastReason: f.Reason}
}

// BreakerTripped records that a capability's circuit breaker opened, with
// the figures that opened it. Until an operator resets it, the tenant's
// proposals of the capability are refused circuit_breaker_open.
type BreakerTripped struct {
	CapabilityID string `json:"capability_id"`
	Failures     int    `json:"failures"`      // failures within the window when it tripped
	Threshold    int    `json:"threshold"`     // the rule's threshold
	WindowMillis int64  `json:"window_ms"`     // the rule's window
	FirstFailure string `json:"first_failure"` // the oldest failure counted (RFC 3339)
	LastFailure  string `json:"last_failure"`  // the failure that tripped it (RFC 3339)
	LastReason   string `json:"last_reason"`   // what the provider said then
}

// BreakerReset records an operator closing a tripped breaker.
type BreakerReset struct {
	CapabilityID string `json:"capability_id"`
	Operator     string `json:"operator"`
	Reason       string `json:"reason,omitempty"`
}

// EventType implements Event.
func (BreakerTripped) EventType() string { return TypeBreakerTripped }

// EventType implements Event.
func (BreakerReset) EventType() string { return TypeBreakerReset }

// Breaker is the state of one capability's breaker subject: open from a
// trip until a reset.
type Breaker struct {
	Open bool
	// Trip is the event that opened it, while open.
	Trip *BreakerTripped
}

// Apply folds a breaker event.
func (b *Breaker) Apply(ev Event) error {
	switch e := ev.(type) {
	case BreakerTripped:
		b.Open, b.Trip = true, &e
	case BreakerReset:
		b.Open, b.Trip = false, nil
	default:
		return fmt.Errorf("event %T does not belong to a breaker subject", ev)
	}
	return nil
}

// DecideBreakerReset is an operator's reset: it closes an open breaker and
// is a no-op on a closed one.
func DecideBreakerReset(b *Breaker, r BreakerReset) []Event {
	if !b.Open {
		return nil
	}
	return []Event{r}
}

// DecideBreakerTrip records a trip on the breaker's subject: a breaker
// another replica already tripped stays as it is, recorded once.
func DecideBreakerTrip(b *Breaker, t BreakerTripped) []Event {
	if b.Open {
		return nil
	}
	return []Event{t}
}

func init() {
	register[BreakerTripped](TypeBreakerTripped)
	register[BreakerReset](TypeBreakerReset)
}

// FailureInput is what a dispatch of a capability reported, as its
// breaker counts it: the outcome and the adapter's failure kind (a
// transport error, a timeout, a 5xx; "" for none), with the capability's
// rule and the failures this runtime saw before (the runtime keeps its
// window between calls; it is not in the stream).
type FailureInput struct {
	CapabilityID string
	Rule         BreakerRule
	Window       FailureWindow
	Outcome      Outcome
	Failure      string
	Reason       string    // what the provider said
	At           time.Time // when the dispatch returned
}

// BreakerState is what a failure reads: the capability's breaker subject.
type BreakerState struct {
	Breaker *Breaker
}

// Failed reports whether the dispatch failed as a breaker counts it: an
// unknown outcome or any failure the adapter met.
func (in FailureInput) Failed() bool {
	return in.Rule.Threshold > 0 && (in.Failure != "" || in.Outcome == OutcomeUnknown)
}

// FailureReads names what a failure reads: the capability's breaker, when
// the dispatch failed and the capability declares a breaker; nothing
// otherwise (the step then decides nothing).
func FailureReads(in FailureInput) Reads {
	if !in.Failed() {
		return nil
	}
	return Reads{{Key: KeyBreaker(in.CapabilityID), Access: Write}}
}

// FailureStep counts a failed dispatch against its capability's breaker
// (DecideBreaker) and, when the rule says so, trips it: the trip, with the
// figures, is appended to the breaker's subject, which every replica reads
// before it decides a proposal of the capability. A breaker already open
// stays as it is. Effects.Window is the window the runtime keeps.
func FailureStep(s BreakerState, in FailureInput) Effects {
	if !in.Failed() {
		return Effects{}
	}
	b := orNew(s.Breaker)
	w, trip := DecideBreaker(in.Window, in.Rule, b.Open, BreakerFailure{CapabilityID: in.CapabilityID, At: in.At, Reason: in.Reason})
	eff := Effects{Window: &w}
	if trip != nil {
		eff.put(KeyBreaker(in.CapabilityID), DecideBreakerTrip(b, *trip)...)
	}
	return eff
}

// Step returns the failure as a runtime drives it.
func (in FailureInput) Step() Step { return failureStep(in) }

type failureStep FailureInput

func (s failureStep) Reads() Reads { return FailureReads(FailureInput(s)) }

func (s failureStep) Decide(l Loaded) Effects {
	return FailureStep(BreakerState{Breaker: loaded[Breaker](l, KeyBreaker(s.CapabilityID))}, FailureInput(s))
}

func (s failureStep) Contended(r *Refusal) Effects { return Effects{Refusal: r} }
