package sim

import "testing"

// mutationBudget is how many seeds each mutation may take to be caught:
// well inside the CI seed count.
const mutationBudget = 500

// TestMutations runs each deliberately broken variant until a seed catches
// it, and fails if none within mutationBudget does: a simulator that
// cannot see these bugs would pass anything. With -seed it replays one
// seed of the mutation (with -v, its trace).
func TestMutations(t *testing.T) {
	for _, m := range []Mutation{MutReleaseOnUnknown, MutSkipDispatchStart, MutBlindAppend, MutStaleRefusal} {
		t.Run(m.String(), func(t *testing.T) {
			dir := t.TempDir()
			opts := func(seed uint64) Options { o := DefaultOptions(seed); o.Mutation, o.LinDir = m, dir; return o }
			if *flagSeed != 0 {
				o := opts(*flagSeed)
				if testing.Verbose() {
					o.Trace = traceOut()
				}
				r := Run(o)
				t.Logf("seed %d under %s: %v", r.Seed, m, r.Failure)
				return
			}
			for seed := uint64(1); seed <= mutationBudget; seed++ {
				r := Run(opts(seed))
				if r.Failure != nil {
					t.Logf("%s caught at seed %d (%d seeds): %v\nreplay: %s", m, seed, seed, firstLine(r.Failure.Error()), replayCommand(seed, m))
					return
				}
			}
			t.Fatalf("%s not caught in %d seeds", m, mutationBudget)
		})
	}
}

func firstLine(s string) string {
	for i, c := range s {
		if c == '\n' {
			return s[:i]
		}
	}
	return s
}
