package kernel

import (
	"testing"
	"time"
)

func TestDecideBreaker(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	rule := BreakerRule{Threshold: 3, Window: 10 * time.Second}
	for _, c := range []struct {
		name     string
		rule     BreakerRule
		window   []time.Time
		open     bool
		at       time.Time
		trip     bool
		wantLen  int
		wantFrom time.Time
	}{
		{"first failure", rule, nil, false, at(0), false, 1, at(0)},
		{"below threshold", rule, []time.Time{at(0)}, false, at(1), false, 2, at(0)},
		{"threshold within the window trips", rule, []time.Time{at(0), at(5)}, false, at(9), true, 3, at(0)},
		{"old failures drop out", rule, []time.Time{at(0), at(5)}, false, at(10), false, 2, at(5)},
		{"exactly the window's edge is out", rule, []time.Time{at(0), at(1), at(2)}, false, at(12), false, 1, at(12)},
		{"already open: no second trip", rule, []time.Time{at(0), at(1)}, true, at(2), false, 3, at(0)},
		{"never more than threshold kept", rule, []time.Time{at(0), at(1), at(2)}, true, at(3), false, 3, at(1)},
		{"threshold 1 trips at once", BreakerRule{Threshold: 1, Window: time.Second}, nil, false, at(0), true, 1, at(0)},
		{"disabled never trips", BreakerRule{}, []time.Time{at(0), at(1)}, false, at(2), false, 0, time.Time{}},
		{"a failure from the future is dropped", rule, []time.Time{at(20)}, false, at(5), false, 1, at(5)},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, trip := DecideBreaker(FailureWindow{Times: c.window}, c.rule, c.open, BreakerFailure{CapabilityID: "cap", At: c.at, Reason: "provider unreachable: x"})
			if (trip != nil) != c.trip {
				t.Fatalf("trip %+v, want %v", trip, c.trip)
			}
			if len(w.Times) != c.wantLen || (c.wantLen > 0 && !w.Times[0].Equal(c.wantFrom)) {
				t.Fatalf("window %v, want %d from %v", w.Times, c.wantLen, c.wantFrom)
			}
			if trip != nil {
				if trip.Failures != len(w.Times) || trip.Threshold != c.rule.Threshold || trip.WindowMillis != c.rule.Window.Milliseconds() ||
					trip.FirstFailure != w.Times[0].Format(time.RFC3339Nano) || trip.LastFailure != c.at.Format(time.RFC3339Nano) ||
					trip.LastReason != "provider unreachable: x" || trip.CapabilityID != "cap" {
					t.Fatalf("trip figures %+v", trip)
				}
			}
		})
	}
}

func TestBreakerState(t *testing.T) {
	var b Breaker
	if evs := DecideBreakerReset(&b, BreakerReset{CapabilityID: "cap", Operator: "ops"}); evs != nil {
		t.Fatalf("reset of a closed breaker: %v", evs)
	}
	if err := b.Apply(BreakerTripped{CapabilityID: "cap", Failures: 3}); err != nil || !b.Open || b.Trip.Failures != 3 {
		t.Fatalf("after trip: %+v %v", b, err)
	}
	evs := DecideBreakerReset(&b, BreakerReset{CapabilityID: "cap", Operator: "ops"})
	if len(evs) != 1 {
		t.Fatalf("reset of an open breaker: %v", evs)
	}
	if err := b.Apply(evs[0]); err != nil || b.Open || b.Trip != nil {
		t.Fatalf("after reset: %+v %v", b, err)
	}
	if err := b.Apply(KillSwitchSet{}); err == nil {
		t.Fatal("a kill switch event folded into a breaker")
	}
}

func TestDecideBreakerTrip(t *testing.T) {
	trip := BreakerTripped{CapabilityID: "c"}
	if evs := DecideBreakerTrip(&Breaker{}, trip); len(evs) != 1 {
		t.Fatalf("a closed breaker: %v", evs)
	}
	if evs := DecideBreakerTrip(&Breaker{Open: true}, trip); len(evs) != 0 {
		t.Fatalf("a breaker another replica tripped: %v", evs)
	}
}
