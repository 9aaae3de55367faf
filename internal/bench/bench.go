// Package bench measures the ledger against its ceilings and a PostgreSQL
// peer: raw JetStream appends, kernel decisions, reservations through the
// aggregates engine, full governed proposals over NATS, and cold loads, each
// as throughput with p50/p99 latency at several concurrencies. cmd/bench
// runs them all in one process and writes BENCHMARKS.md; the Go benchmarks
// in aggregates/ measure the same reservation workloads under `go test`.
//
// Every figure is a closed loop: n workers each start the next operation as
// soon as the previous one returned, for a fixed time after a warm-up.
// Ratios are taken between figures of the same run, on the same machine.
package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Point is one measurement: a workload at one concurrency.
type Point struct {
	Group       string // table section, e.g. "reservations, 10k resources"
	Name        string // system or variant, e.g. "ours" or "postgres"
	Durability  string // "durable" or "relaxed"
	Concurrency int
	Ops         int           // operations completed in the measured window
	Errors      int           // operations that failed (not counted in Ops)
	Elapsed     time.Duration // measured window
	P50, P99    time.Duration
	Unit        string // what one operation is ("reservation", "event", ...)
	PerOp       int    // units per operation (0 means 1): a batch of 100 events
	Note        string
	Lag         *Trends // the runtime's followers through the point (proposals only)
}

// Rate is units per second.
func (p Point) Rate() float64 {
	if p.Elapsed <= 0 {
		return 0
	}
	return float64(p.Ops*max(p.PerOp, 1)) / p.Elapsed.Seconds()
}

// Op is one operation of a worker: i counts the worker's operations.
type Op func(ctx context.Context, worker, i int) error

// Config bounds one measurement.
type Config struct {
	Warmup   time.Duration
	Duration time.Duration
}

// Run runs op on n workers for cfg.Warmup, then measures for cfg.Duration.
// Each worker runs its own operations back to back. The operations that
// complete inside the measured window count, with their whole latency
// (throughput = completions in the window / the window).
func Run(ctx context.Context, cfg Config, n int, op Op) (ops, errs int, elapsed, p50, p99 time.Duration) {
	var measuring, stopping atomic.Bool
	lat := make([][]time.Duration, n)
	var errCount atomic.Int64
	var wg sync.WaitGroup
	var start time.Time
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; !stopping.Load() && ctx.Err() == nil; i++ {
				t0 := time.Now()
				err := op(ctx, w, i)
				d := time.Since(t0)
				if !measuring.Load() || stopping.Load() {
					continue
				}
				if err != nil {
					errCount.Add(1)
					continue
				}
				lat[w] = append(lat[w], d)
			}
		}(w)
	}
	time.Sleep(cfg.Warmup)
	start = time.Now()
	measuring.Store(true)
	time.Sleep(cfg.Duration)
	stopping.Store(true)
	elapsed = time.Since(start)
	wg.Wait()
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	return len(all), int(errCount.Load()), elapsed, quantile(all, 0.50), quantile(all, 0.99)
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted)-1) + 0.5)
	return sorted[i]
}

// Fill runs op once for each i in [0, n) on workers goroutines and returns
// the first error.
func Fill(ctx context.Context, workers, n int, op Op) error {
	var next atomic.Int64
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		go func(w int) {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					errs <- nil
					return
				}
				if err := op(ctx, w, i); err != nil {
					next.Store(int64(n)) // the others stop at their next operation
					errs <- err
					return
				}
			}
		}(w)
	}
	var first error
	for w := 0; w < workers; w++ {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Progress reports what a bench is doing.
type Progress func(format string, args ...any)

// Measure runs op as Run does and returns it as a Point.
func Measure(ctx context.Context, cfg Config, p Point, op Op, progress Progress) Point {
	if progress != nil {
		progress("  %-40s %-8s %-7s c=%-3d ...", p.Group, p.Name, p.Durability, p.Concurrency)
	}
	p.Ops, p.Errors, p.Elapsed, p.P50, p.P99 = Run(ctx, cfg, p.Concurrency, op)
	if progress != nil {
		progress("  %-40s %-8s %-7s c=%-3d %10.0f %s/s  p50 %-9s p99 %-9s errors %d", p.Group, p.Name, p.Durability, p.Concurrency,
			p.Rate(), p.Unit, fmtDur(p.P50), fmtDur(p.P99), p.Errors)
	}
	return p
}

func fmtDur(d time.Duration) string {
	switch {
	case d == 0:
		return "-"
	case d < 10*time.Microsecond:
		return fmt.Sprintf("%.2fµs", float64(d)/float64(time.Microsecond))
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond))
	case d < 100*time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.0fms", float64(d)/float64(time.Millisecond))
}
