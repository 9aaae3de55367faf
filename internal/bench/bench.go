package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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
	// CPU is what Config.CPU read as consumed during the measured window
	// (0: not measured).
	CPU time.Duration
}

// CPUPerOp is the CPU time of one operation of the measured window (0 when
// not measured).
func (p Point) CPUPerOp() time.Duration {
	if p.Ops == 0 {
		return 0
	}
	return p.CPU / time.Duration(p.Ops)
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
	// CPU, when set, is read as the measured window starts and as it ends;
	// the point's CPU is the difference. A failed reading leaves it 0.
	CPU CPUMeter
}

// Run runs op on n workers for cfg.Warmup, then measures for cfg.Duration.
// Each worker runs its own operations back to back. The operations that
// complete inside the measured window count, with their whole latency
// (throughput = completions in the window / the window).
func Run(ctx context.Context, cfg Config, n int, op Op) (ops, errs int, elapsed, p50, p99 time.Duration) {
	lat, errs, elapsed, _ := run(ctx, cfg, make([]int, n), op)
	slices.Sort(lat)
	return len(lat), errs, elapsed, quantile(lat, 0.50), quantile(lat, 0.99)
}

// run is Run's loop over len(next) workers. Worker w numbers its operations
// from next[w] on and leaves next[w] past the last it started, so a workload
// measured in several slices never repeats an operation (a proposal's key is
// its worker's count). It returns the latencies of the operations completed
// in the measured window, and only once every worker has stopped, and the
// CPU cfg.CPU read as consumed in the window.
func run(ctx context.Context, cfg Config, next []int, op Op) (lat []time.Duration, errs int, elapsed, cpu time.Duration) {
	var measuring, stopping atomic.Bool
	lats := make([][]time.Duration, len(next))
	var errCount atomic.Int64
	var wg sync.WaitGroup
	for w := range next {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for ; !stopping.Load() && ctx.Err() == nil; next[w]++ {
				t0 := time.Now()
				err := op(ctx, w, next[w])
				d := time.Since(t0)
				if !measuring.Load() || stopping.Load() {
					continue
				}
				if err != nil {
					errCount.Add(1)
					continue
				}
				lats[w] = append(lats[w], d)
			}
		}(w)
	}
	time.Sleep(cfg.Warmup)
	cpu0, cpuErr := readCPU(cfg.CPU)
	start := time.Now()
	measuring.Store(true)
	time.Sleep(cfg.Duration)
	stopping.Store(true)
	elapsed = time.Since(start)
	cpu1, err := readCPU(cfg.CPU)
	if cpuErr == nil && err == nil && cpu1 > cpu0 {
		cpu = cpu1 - cpu0
	}
	wg.Wait()
	for _, l := range lats {
		lat = append(lat, l...)
	}
	return lat, int(errCount.Load()), elapsed, cpu
}

func readCPU(m CPUMeter) (time.Duration, error) {
	if m == nil {
		return 0, errors.New("no CPU meter")
	}
	return m()
}

// Leg is one side of an interleaved measurement: its point (Concurrency is
// its number of workers) and its operation.
type Leg struct {
	Point Point
	Op    Op
}

// Interleave measures two legs in alternating slices (see InterleaveAll).
func Interleave(ctx context.Context, cfg Config, rounds int, legs [2]Leg, progress Progress) [2]Point {
	pts := InterleaveAll(ctx, cfg, rounds, legs[:], progress)
	return [2]Point{pts[0], pts[1]}
}

// InterleaveAll measures legs in alternating slices. In each of rounds
// rounds, each leg runs alone: cfg.Warmup unmeasured, then
// cfg.Duration/rounds measured; the order rotates every round (a b c,
// b c a, c a b, ...; with two legs a b, b a) so that no leg always runs
// right after the same one. A ratio of two points measured one after the
// other moves with whatever the machine does between them (on a shared
// disk the same raw append moves 2x within minutes); alternating slices
// expose every leg to the same drift. Each point sums its slices:
// operations, errors, measured time, and the quantiles of all its
// latencies.
func InterleaveAll(ctx context.Context, cfg Config, rounds int, legs []Leg, progress Progress) []Point {
	rounds = max(rounds, 1)
	slice := Config{Warmup: cfg.Warmup, Duration: cfg.Duration / time.Duration(rounds)}
	lat := make([][]time.Duration, len(legs))
	next := make([][]int, len(legs))
	pts := make([]Point, len(legs))
	names := make([]string, len(legs))
	for k, l := range legs {
		next[k] = make([]int, l.Point.Concurrency)
		pts[k] = l.Point
		names[k] = fmt.Sprintf("%s c=%d", l.Point.Name, l.Point.Concurrency)
	}
	if progress != nil {
		progress("  %s alternating, %d rounds ...", strings.Join(names, " and "), rounds)
	}
	for r := 0; r < rounds; r++ {
		for j := range legs {
			k := (j + r) % len(legs)
			l, errs, elapsed, cpu := run(ctx, slice, next[k], legs[k].Op)
			lat[k] = append(lat[k], l...)
			pts[k].Errors += errs
			pts[k].Elapsed += elapsed
			pts[k].CPU += cpu
		}
	}
	for k := range pts {
		slices.Sort(lat[k])
		pts[k].Ops, pts[k].P50, pts[k].P99 = len(lat[k]), quantile(lat[k], 0.50), quantile(lat[k], 0.99)
		measured(progress, pts[k])
	}
	return pts
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
	lat, errs, elapsed, cpu := run(ctx, cfg, make([]int, p.Concurrency), op)
	slices.Sort(lat)
	p.Ops, p.Errors, p.Elapsed, p.P50, p.P99, p.CPU = len(lat), errs, elapsed, quantile(lat, 0.50), quantile(lat, 0.99), cpu
	measured(progress, p)
	return p
}

// measured reports a measured point's figures.
func measured(progress Progress, p Point) {
	if progress == nil {
		return
	}
	cpu := ""
	if c := p.CPUPerOp(); c > 0 {
		cpu = fmt.Sprintf("  CPU %s/%s", fmtDur(c), p.Unit)
	}
	progress("  %-40s %-8s %-7s c=%-3d %10.0f %s/s  p50 %-9s p99 %-9s errors %d%s", p.Group, p.Name, p.Durability, p.Concurrency,
		p.Rate(), p.Unit, fmtDur(p.P50), fmtDur(p.P99), p.Errors, cpu)
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
