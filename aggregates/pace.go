package aggregates

import (
	"context"
	"time"
)

// Pacer decides when the engine's committer acts, and is told where the
// goroutines around it stand: the engine's seam for time and scheduling,
// injected the way a clock is. NewEngine gives every engine the real one
// (RealPacer); a deterministic simulation (internal/testing/sim) replaces
// it before first use with one that lets the goroutines run one at a time
// and holds a group until the transactions it chose have formed it.
//
// Its methods run on the engine's goroutines (the caller's or the
// committer's, as each says) and must not call the engine; wake may be
// called from any goroutine.
type Pacer interface {
	// Submitting is told, on the caller's goroutine, that the transaction
	// of ctx is about to be queued; Parked that it is queued and its
	// caller is about to wait; Woken that the caller has its outcome (it
	// may block until the pacer lets the caller go on).
	Submitting(ctx context.Context)
	Parked(ctx context.Context)
	Woken(ctx context.Context)
	// Finished is told, on the committer, that the outcome of the
	// transaction of ctx was handed to its caller.
	Finished(ctx context.Context)
	// Idle is told that the committer waits with nothing in flight (no
	// load, seal or append) and held sealed transactions forming (0
	// when it stops).
	Idle(held int)
	// Send reports, on the committer, whether a ready group of n sealed
	// transactions goes out now. until is when the linger policy lets it
	// go at the latest (zero or past: now). When Send says no, it calls
	// wake once the group may go; the committer asks again then, and
	// whenever anything else wakes it.
	Send(n int, until time.Time, wake func()) bool
	// Seal runs sign, the signing of one decision's events (the costly
	// part of the committer's work). sign never blocks; the committer
	// takes its result when it next waits.
	Seal(sign func())
}

// RealPacer returns the production pacer of one engine: the linger timer
// (a held group goes at its deadline, one timer armed per later deadline)
// and sealing on a goroutine per decision, so that signing runs on every
// core while the committer decides the next transactions.
func RealPacer() Pacer { return &realPacer{} }

type realPacer struct {
	armed time.Time // the latest linger deadline a timer is armed for (committer only)
}

func (*realPacer) Submitting(context.Context) {}
func (*realPacer) Parked(context.Context)     {}
func (*realPacer) Woken(context.Context)      {}
func (*realPacer) Finished(context.Context)   {}
func (*realPacer) Idle(int)                   {}

func (p *realPacer) Send(n int, until time.Time, wake func()) bool {
	left := time.Until(until)
	if until.IsZero() || left <= 0 {
		return true
	}
	if p.armed.Before(until) {
		p.armed = until
		time.AfterFunc(left, wake)
	}
	return false
}

func (*realPacer) Seal(sign func()) { go sign() }
