package aggregates

import (
	"context"
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/kernel"
)

// BenchmarkProposeStep: a governed proposal and its settlement, two
// transactions as the gateway makes them, through Run and the kernel's
// steps. On an in-memory store (the CPU of the engine and the kernel) and
// on an embedded JetStream that fsyncs, at 8 and 64 goroutines over 10k
// resources.
func BenchmarkProposeStep(b *testing.B) {
	m := runManifest()
	m.Capabilities["adp_payments.issue_refund"].Breaker = kernel.BreakerRule{}
	for _, store := range []string{"mem", "jetstream"} {
		var js events.Store
		if store == "jetstream" {
			_, js = startStore(b, b.TempDir())
		}
		for _, c := range []int{8, 64} {
			b.Run(fmt.Sprintf("%s/run/c%d", store, c), func(b *testing.B) {
				st := js
				if st == nil {
					st = events.NewMemStore() // each its own: a store that grew would cost the next its scans
				}
				eng := NewEngine(st, testSealer())
				tag := rand.Uint64()
				cpu := cpuNow()
				runParallel(b, c, "proposals", func(w, i int) error {
					in := proposal(m, fmt.Sprintf("%x-%d-%d", tag, w, i), fmt.Sprint("ord-", rand.IntN(10_000)), 1)
					return proposeRun(eng, in)
				})
				b.ReportMetric((cpuNow()-cpu).Seconds()*1000/float64(b.N), "cpu-ms/proposal")
			})
		}
	}
}

func cpuNow() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func proposeRun(eng *Engine, in kernel.ProposeInput) error {
	ctx := context.Background()
	eff, err := eng.Run(ctx, "acme", in.Step())
	if err != nil {
		return err
	}
	if eff.Dispatch == nil {
		return fmt.Errorf("refused: %v", eff.Refusal)
	}
	set, err := eng.Run(ctx, "acme", eff.Dispatch.Settle(kernel.OutcomeApplied, "rf", in.Now).Step())
	if err == nil && set.Refusal != nil {
		err = set.Refusal
	}
	return err
}
