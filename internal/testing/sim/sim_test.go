package sim

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

var (
	flagSeeds = flag.Int("seeds", defaultSeeds, "number of seeds TestSimulation runs (from -seed-base)")
	flagSeed  = flag.Uint64("seed", 0, "replay one seed (with -v: its trace)")
	flagBase  = flag.Uint64("seed-base", 1, "first seed of TestSimulation")
)

// shortSeeds is the seed count under -short, unless -seeds says otherwise.
const shortSeeds = 500

// replayCommand is the command that replays seed under mutation m.
func replayCommand(seed uint64, m Mutation) string {
	cmd := fmt.Sprintf("go test ./internal/testing/sim -run 'TestSimulation$' -seed %d -v", seed)
	if m != MutNone {
		cmd = fmt.Sprintf("go test ./internal/testing/sim -run 'TestMutations/%s$' -seed %d -v", m, seed)
	}
	return cmd
}

// TestSimulation runs -seeds seeds (or the one -seed names) and fails on
// the first seed that breaks an invariant, with the command that replays
// it.
func TestSimulation(t *testing.T) {
	if *flagSeed != 0 {
		o := DefaultOptions(*flagSeed)
		if testing.Verbose() {
			o.Trace = traceOut()
		}
		r := Run(o)
		if r.Failure != nil {
			t.Fatalf("seed %d: %v", r.Seed, r.Failure)
		}
		t.Logf("seed %d: %d steps, %d proposals, %d restarts, %d events, store %+v", r.Seed, r.Steps, r.Proposals, r.Restarts, r.Events, r.Store)
		return
	}
	n := *flagSeeds
	if testing.Short() && n == defaultSeeds {
		n = shortSeeds
	}
	start := time.Now()
	results := RunSeeds(*flagBase, n, runtime.GOMAXPROCS(0), DefaultOptions, isKnown)
	var events, restarts, proposals int
	var faults StoreStats
	for _, r := range results {
		if r.Failure != nil && isKnown(r.Seed) {
			t.Logf("seed %d: known failure (%s): %v", r.Seed, knownFailures[r.Seed], firstLine(r.Failure.Error()))
			continue
		}
		if r.Failure != nil {
			t.Fatalf("seed %d: %v\nlast trace lines:\n%s\nreplay: %s", r.Seed, r.Failure, tail(r.Trace, 40), replayCommand(r.Seed, MutNone))
		}
		events += r.Events
		restarts += r.Restarts
		proposals += r.Proposals
		faults.Appends += r.Store.Appends
		faults.Conflicts += r.Store.Conflicts
		faults.FailedEarly += r.Store.FailedEarly
		faults.LostAcks += r.Store.LostAcks
		faults.Cuts += r.Store.Cuts
		faults.CutSettles += r.Store.CutSettles
		faults.CutLedgers += r.Store.CutLedgers
	}
	t.Logf("%d seeds in %s (GOMAXPROCS %d): %d proposals, %d events, %d restarts, store %+v",
		n, time.Since(start).Round(time.Millisecond), runtime.GOMAXPROCS(0), proposals, events, restarts, faults)
}

// TestDeterministic runs ten seeds twice and compares their traces: the same
// seed is the same run.
func TestDeterministic(t *testing.T) {
	for seed := uint64(1); seed <= 10; seed++ {
		a, b := Run(DefaultOptions(seed)), Run(DefaultOptions(seed))
		if strings.Join(a.Trace, "\n") != strings.Join(b.Trace, "\n") {
			for i := range min(len(a.Trace), len(b.Trace)) {
				if a.Trace[i] != b.Trace[i] {
					t.Fatalf("seed %d diverges at line %d:\n%s\n%s", seed, i, a.Trace[i], b.Trace[i])
				}
			}
			t.Fatalf("seed %d: traces of %d and %d lines", seed, len(a.Trace), len(b.Trace))
		}
	}
}

// traceOut is where a replayed seed's trace goes.
func traceOut() io.Writer { return os.Stdout }

func tail(lines []string, n int) string {
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
