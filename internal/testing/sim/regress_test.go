package sim

import (
	"runtime"
	"strings"
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

// knownFailures are seeds that find a defect not fixed yet, each with what
// it finds: TestSimulation reports them without failing, and
// TestKnownFailures fails once one passes, so the list only holds open
// defects. It is empty: every seed of the CI count passes.
var knownFailures = map[uint64]string{}

func isKnown(seed uint64) bool { _, ok := knownFailures[seed]; return ok }

// TestKnownFailures replays every known failing seed and fails if one no
// longer fails: its defect is fixed, and its seed belongs in a regression
// test of its own.
func TestKnownFailures(t *testing.T) {
	if len(knownFailures) == 0 {
		t.Skip("no known failing seed")
	}
	for seed, what := range knownFailures {
		if r := Run(DefaultOptions(seed)); r.Failure == nil {
			t.Errorf("seed %d passes now (%s): remove it from knownFailures and keep it as a regression test", seed, what)
		} else {
			t.Logf("seed %d still fails (%s): %v", seed, what, firstLine(r.Failure.Error()))
		}
	}
}

// TestRetryOfAStoredGroupIsNoConflict replays seed 78 (6314 until the
// settlement's appends changed the draws): a group commit's batch is stored
// and its acknowledgement lost, and the exact retry draws an injected
// conflict. Both real stores answer such a retry a success (they find its
// events right after the expected sequence), so the engine never
// re-decides a stored batch; the simulator's conflict had broken that
// contract, and the re-decided settlements then reported the balance after
// the whole batch, which lincheck refused. The store's injected conflicts
// now spare exact retries (StoreStats.Spared).
func TestRetryOfAStoredGroupIsNoConflict(t *testing.T) {
	r := Run(oneCeiling(78))
	if r.Failure != nil {
		t.Fatalf("seed 78: %v", r.Failure)
	}
	if r.Store.Spared == 0 {
		t.Fatalf("seed 78 no longer retries a stored batch whose acknowledgement was lost into a drawn conflict: %+v", r.Store)
	}
	var grouped bool
	for _, line := range r.Trace {
		grouped = grouped || strings.Contains(line, "group commit of 3")
	}
	if !grouped {
		t.Fatal("seed 78 no longer makes a group commit")
	}
}

// TestSettlementCutBetweenLedgerAndOperation replays seeds whose replica
// crashes after a provider's report is stored on the ledger and before the
// operation's part (Faults.Cut). Seed 91: the same proposal again, asked
// meanwhile, answered the operation's status (pending) beside the ledger's
// committed balance, which lincheck refused; it answers the ledger's seal
// now. Seed 2721: the provider's later answers to the reconciler
// contradicted the rejection the ledger held, so no report completed the
// operation and it stayed unresolved after the drain; the operation now
// records the ledger's outcome on any report (the contradiction as an
// incident).
func TestSettlementCutBetweenLedgerAndOperation(t *testing.T) {
	for _, seed := range []uint64{91, 2721} {
		r := Run(oneCeiling(seed))
		if r.Failure != nil {
			t.Fatalf("seed %d: %v", seed, r.Failure)
		}
		if r.Store.CutSettles == 0 {
			t.Fatalf("seed %d no longer cuts a settlement between its ledger and its operation: %+v", seed, r.Store)
		}
	}
}

// TestSettlementCutBetweenTwoLedgers replays seed 12, whose proposals hold
// on two ceilings (Options.DayCeiling): a replica crashes after a
// provider's report is stored on the order's ledger and before the day's.
// The same proposal again, and reconciliation, read the order's ledger
// sealed, the day's holding and the operation dispatching. Completion had
// asked every ledger to be sealed, so the reply answered pending beside the
// order's committed balance, which lincheck refused; the first sealed
// ledger now says the report's outcome and the rest records it.
func TestSettlementCutBetweenTwoLedgers(t *testing.T) {
	r := Run(DefaultOptions(12))
	if r.Failure != nil {
		t.Fatalf("seed 12: %v", r.Failure)
	}
	if r.Store.CutLedgers == 0 {
		t.Fatalf("seed 12 no longer cuts a settlement between its two ledgers: %+v", r.Store)
	}
}

// oneCeiling are the options of seed with one ceiling per proposal: the
// seeds of the tests above found their stories before the day ceiling.
func oneCeiling(seed uint64) Options {
	o := DefaultOptions(seed)
	o.DayCeiling = false
	return o
}
