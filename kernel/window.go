package kernel

import (
	"fmt"
	"time"

	"github.com/contextos/ledger/wire"
)

// Guarantee windows. A calendar window (day, week, month in the
// guarantee's time zone) gives every period its own resource ledger: a
// reservation goes to the ledger of the window its decision time falls in,
// and its hold stays there until it settles. A rolling window keeps one
// ledger whose committed effects leave it once the window's duration has
// passed since they were committed. Holds never expire by time.
const (
	WindowDay     = "day"
	WindowWeek    = "week"
	WindowMonth   = "month"
	WindowRolling = "rolling"
)

// RollingBuckets is how many buckets a rolling window's committed amounts
// are kept in: an effect leaves the window at the end of its bucket plus the
// duration, never earlier than the duration after it was committed.
const RollingBuckets = 24

// Window is the period of a calendar window a decision falls in.
type Window struct {
	Key   string    // the ledger's window, e.g. 2026-12-01, 2026-W49, 2026-12
	Start time.Time // inclusive, in the guarantee's time zone
	End   time.Time // exclusive: when the window's capacity returns
}

// validateWindow checks the window fields of a definition.
func (d Definition) validateWindow() *Refusal {
	switch d.Window {
	case "":
		if d.TimeZone != "" || d.Duration != "" {
			return refuse(wire.CodeDefinitionInvalid, "guarantee %s sets time_zone or duration without a window", d.ID)
		}
	case WindowDay, WindowWeek, WindowMonth:
		if d.Duration != "" {
			return refuse(wire.CodeDefinitionInvalid, "guarantee %s: duration is for rolling windows", d.ID)
		}
	case WindowRolling:
		if _, r := d.RollingSeconds(); r != nil {
			return r
		}
		if d.TimeZone != "" {
			return refuse(wire.CodeDefinitionInvalid, "guarantee %s: a rolling window has no time zone", d.ID)
		}
	default:
		return refuse(wire.CodeDefinitionInvalid, "guarantee %s window %q must be day, week, month or rolling", d.ID, d.Window)
	}
	return nil
}

// Calendar reports whether the definition has a calendar window.
func (d Definition) Calendar() bool {
	return d.Window == WindowDay || d.Window == WindowWeek || d.Window == WindowMonth
}

// RollingSeconds is a rolling window's duration in whole seconds (at least
// one minute, at most 400 days).
func (d Definition) RollingSeconds() (int64, *Refusal) {
	if d.Window != WindowRolling {
		return 0, nil
	}
	dur, err := time.ParseDuration(d.Duration)
	if err != nil || dur < time.Minute || dur > 400*24*time.Hour || dur%time.Second != 0 {
		return 0, refuse(wire.CodeDefinitionInvalid, "guarantee %s duration %q must be whole seconds from 1m to 9600h", d.ID, d.Duration)
	}
	return int64(dur / time.Second), nil
}

// WindowAt is the calendar window that the decision time now falls in, in
// loc (the guarantee's time zone, which the caller loads: the kernel reads
// no time zone database).
func (d Definition) WindowAt(loc *time.Location, now time.Time) Window {
	t := now.In(loc)
	switch d.Window {
	case WindowDay:
		s := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc)
		return Window{Key: s.Format("2006-01-02"), Start: s, End: s.AddDate(0, 0, 1)}
	case WindowWeek:
		y, w := t.ISOWeek()
		back := (int(t.Weekday()) + 6) % 7 // days since Monday
		s := time.Date(t.Year(), t.Month(), t.Day()-back, 0, 0, 0, 0, loc)
		return Window{Key: fmt.Sprintf("%04d-W%02d", y, w), Start: s, End: s.AddDate(0, 0, 7)}
	case WindowMonth:
		s := time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, loc)
		return Window{Key: s.Format("2006-01"), Start: s, End: s.AddDate(0, 1, 0)}
	}
	return Window{}
}

// Bucket is committed amount of a rolling window by when it was committed.
type Bucket struct {
	Start  int64 `json:"start"` // unix seconds, a multiple of the bucket width
	Amount int64 `json:"amount"`
}

func (l *Ledger) bucketWidth() int64 {
	if w := l.Rolling / RollingBuckets; w > 0 {
		return w
	}
	return 1
}

// expired is the committed amount of a rolling window that has left it by
// unix time now.
func (l *Ledger) expired(now int64) (amount int64, buckets int) {
	w := l.bucketWidth()
	for _, b := range l.Buckets {
		if b.Start+w+l.Rolling > now {
			break
		}
		amount += b.Amount
		buckets++
	}
	return amount, buckets
}

// CommittedAt is what counts as committed at a decision time: for a rolling
// window, what was committed within its duration.
func (l *Ledger) CommittedAt(now time.Time) int64 {
	if l.Rolling == 0 {
		return l.Committed
	}
	gone, _ := l.expired(now.Unix())
	return l.Committed - gone
}

// BalanceAt is the ledger's balances at a time: for a rolling window,
// counting only what was committed within its duration.
func (l *Ledger) BalanceAt(now time.Time) Balance {
	return l.BalanceUnder(l.Limit).withCommitted(l.CommittedAt(now))
}

func (b Balance) withCommitted(c int64) Balance {
	b.Committed, b.Available = c, b.Limit-c-b.Held
	return b
}

// NextReturn is when, after now, a rolling window's oldest committed amount
// still in it leaves it, and how much returns then; ok is false when
// nothing will.
func (l *Ledger) NextReturn(now time.Time) (at time.Time, amount int64, ok bool) {
	if l.Rolling == 0 {
		return time.Time{}, 0, false
	}
	_, gone := l.expired(now.Unix())
	if gone >= len(l.Buckets) {
		return time.Time{}, 0, false
	}
	b := l.Buckets[gone]
	return time.Unix(b.Start+l.bucketWidth()+l.Rolling, 0).UTC(), b.Amount, true
}

// expire drops what left a rolling window by now.
func (l *Ledger) expire(now int64) {
	if l.Rolling == 0 {
		return
	}
	gone, n := l.expired(now)
	l.Committed -= gone
	l.Buckets = append(l.Buckets[:0], l.Buckets[n:]...)
}

// commitAt adds a committed amount to its bucket.
func (l *Ledger) commitAt(now, amount int64) {
	w := l.bucketWidth()
	start := now - now%w
	if n := len(l.Buckets); n > 0 && l.Buckets[n-1].Start >= start {
		l.Buckets[n-1].Amount += amount // reports arrive in stream order; a late clock joins the last bucket
		return
	}
	l.Buckets = append(l.Buckets, Bucket{Start: start, Amount: amount})
}

// parseAt reads an event's decision time; "" is no time (an event decided
// before windows existed, or for a ledger without a rolling window).
func parseAt(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, fmt.Errorf("decision time %q: %w", s, err)
	}
	return t.Unix(), nil
}

// formatAt writes a decision time as events carry it.
func formatAt(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}
