package bench

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
)

// BenchmarkProposals: governed proposals over NATS through a booted runtime
// (durable embedded server, loopback provider), from 64 agents on 10k
// resources; the profile target for the proposal path
// (go test -bench Proposals -cpuprofile).
func BenchmarkProposals(b *testing.B) {
	g, err := StartGateway(b.TempDir(), true, 64)
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	op := g.Proposals(Uniform("bench"))
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	b.ResetTimer()
	for w := 0; w < 64; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				if err := op(context.Background(), w, i); err != nil {
					failed.CompareAndSwap(nil, err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "proposals/s")
}
