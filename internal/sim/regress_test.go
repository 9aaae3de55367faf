package sim

import (
	"runtime"
	"testing"
	"time"
)

// TestAbandonedEnginesExit replays seed 8, whose replicas restart four
// times: an engine's committer that finished its last transaction without
// waiting (a decision on warm state with nothing to append) parked for
// good, so every engine a restart abandoned kept its goroutine and warm
// state (6 GB after 10,000 seeds). Every committer must exit once idle.
func TestAbandonedEnginesExit(t *testing.T) {
	before := runtime.NumGoroutine()
	if r := Run(DefaultOptions(8)); r.Failure != nil {
		t.Fatalf("seed 8: %v", r.Failure)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := runtime.NumGoroutine()
		if n <= before {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines left after the run (%d before):\n%s", n, before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
