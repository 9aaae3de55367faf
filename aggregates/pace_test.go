package aggregates

import (
	"testing"
	"time"
)

// TestRealPacerSend: the real pacer lets a group go at once when its
// linger deadline is zero or past; otherwise it holds it and wakes the
// committer once, at the deadline, however often it is asked before.
func TestRealPacerSend(t *testing.T) {
	p := RealPacer()
	woken := make(chan time.Time, 4)
	wake := func() { woken <- time.Now() }
	if !p.Send(3, time.Time{}, wake) || !p.Send(3, time.Now().Add(-time.Millisecond), wake) {
		t.Fatal("a group without a deadline ahead was held")
	}
	until := time.Now().Add(20 * time.Millisecond)
	if p.Send(3, until, wake) || p.Send(4, until, wake) {
		t.Fatal("a group was sent before its linger deadline")
	}
	select {
	case at := <-woken:
		if at.Before(until) {
			t.Fatalf("woken %v before the deadline", until.Sub(at))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("never woken")
	}
	select {
	case <-woken:
		t.Fatal("woken twice for one deadline")
	case <-time.After(50 * time.Millisecond):
	}
	if !p.Send(4, until, wake) {
		t.Fatal("the group was held past its deadline")
	}
}
