package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image/color"
	"image/png"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
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
	cpu := cpuTime()
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
	cpu = cpuTime() - cpu
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "proposals/s")
	b.ReportMetric(cpu.Seconds()*1000/float64(b.N), "cpu-ms/proposal")
}

// BenchmarkProposalAppends: the appends of governed proposals without the
// runtime. Each operation appends the reservations of k proposals as one
// atomic batch, then their settlements as a second, in the shape one
// proposal of the runtime appends (Gateway.ProposalShape), on a durable
// server with one batch in flight as the engine keeps. Its CPU a proposal,
// client and server, is what the appends of BenchmarkProposals cost when
// the engine's appends hold k proposals' transactions; k64 is the least
// they can cost at 64 agents.
func BenchmarkProposalAppends(b *testing.B) {
	g, err := StartGateway(b.TempDir(), true, 1)
	if err != nil {
		b.Fatal(err)
	}
	shape, err := g.ProposalShape(context.Background())
	g.Close()
	if err != nil {
		b.Fatal(err)
	}
	n, err := StartNATS(b.TempDir(), true)
	if err != nil {
		b.Fatal(err)
	}
	defer n.Close()
	for _, k := range []int{1, 8, 25, 64} {
		b.Run(fmt.Sprint("k", k), func(b *testing.B) {
			merged := make([][]int, len(shape))
			for j, batch := range shape {
				for range k {
					merged[j] = append(merged[j], batch...)
				}
			}
			op := n.RawBatches(1, merged...)
			cpu := cpuTime()
			for i := 0; b.Loop(); i++ {
				if err := op(context.Background(), 0, i); err != nil {
					b.Fatal(err)
				}
			}
			cpu = cpuTime() - cpu
			b.ReportMetric(float64(k*b.N)/b.Elapsed().Seconds(), "proposals/s")
			b.ReportMetric(cpu.Seconds()*1000/float64(k*b.N), "cpu-ms/proposal")
		})
	}
}

// cpuTime is the user and system CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestTrendOf: a lag that stays within a band is sustained whatever its
// level; one that grows by more than the slack is not; readings outside the
// window do not count.
func TestTrendOf(t *testing.T) {
	const perSec = 5000 // events appended per second
	readings := func(lag func(s float64) float64) []Lag {
		var out []Lag
		for i := 0; i <= 100; i++ {
			at := time.Duration(i) * 100 * time.Millisecond
			out = append(out, Lag{At: at, Last: uint64(perSec * at.Seconds()), Audit: uint64(max(0, lag(at.Seconds()))), View: 3})
		}
		return out
	}
	for _, tc := range []struct {
		name      string
		lag       func(s float64) float64
		from, to  time.Duration
		sustained bool
	}{
		{"zero", func(float64) float64 { return 0 }, 0, 10 * time.Second, true},
		{"high but flat, noisy", func(s float64) float64 { return 4000 + 600*float64(int(s*10)%3-1) }, 0, 10 * time.Second, true},
		{"grows 1% of the rate", func(s float64) float64 { return 0.01 * perSec * s }, 0, 10 * time.Second, true},
		{"grows 10% of the rate", func(s float64) float64 { return 0.1 * perSec * s }, 0, 10 * time.Second, false},
		{"grows after the window", func(s float64) float64 { return max(0, s-5) * perSec }, 0, 5 * time.Second, true},
		{"grows in the window", func(s float64) float64 { return max(0, s-5) * perSec }, 5 * time.Second, 10 * time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := TrendOf(readings(tc.lag), tc.from, tc.to)
			if tr.Sustained() != tc.sustained {
				t.Fatalf("sustained %v, want %v (%+v, slack %.0f)", tr.Sustained(), tc.sustained, tr, SustainSlack(tr.Appended))
			}
			if tr.View.End != 3 || math.Abs(tr.View.Growth) > 1e-6 {
				t.Fatalf("view %+v, want end 3 and no growth", tr.View)
			}
		})
	}
	if tr := TrendOf(nil, 0, time.Second); !tr.Sustained() || tr.Readings != 0 {
		t.Fatalf("no readings: %+v", tr)
	}
}

// TestFill: every index runs exactly once across the workers, and the first
// error stops the rest and is returned.
func TestFill(t *testing.T) {
	const n = 1000
	var seen [n]atomic.Int32
	if err := Fill(context.Background(), 7, n, func(_ context.Context, _, i int) error {
		seen[i].Add(1)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i := range seen {
		if got := seen[i].Load(); got != 1 {
			t.Fatalf("index %d ran %d times", i, got)
		}
	}
	boom := errors.New("boom")
	var ran atomic.Int32
	err := Fill(context.Background(), 1, n, func(_ context.Context, _, i int) error {
		ran.Add(1)
		if i == 10 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Fill returned %v, want the operation's error", err)
	}
	if got := ran.Load(); got != 11 {
		t.Fatalf("%d operations ran, want the 11 up to the failing one", got)
	}
}

// TestInterleave: the two legs never run at the same time and take turns
// as the rounds say (a b, b a, ...); each counts only its own measured
// operations and time; a worker's operations are numbered on across slices,
// so none repeats.
func TestInterleave(t *testing.T) {
	type call struct {
		leg, w, i  int
		start, end time.Time
	}
	var mu sync.Mutex
	var calls []call
	op := func(leg int) Op {
		return func(ctx context.Context, w, i int) error {
			c := call{leg: leg, w: w, i: i, start: time.Now()}
			time.Sleep(200 * time.Microsecond) // the operation's own work
			c.end = time.Now()
			mu.Lock()
			calls = append(calls, c)
			mu.Unlock()
			if leg == 1 && i%10 == 9 {
				return errors.New("every tenth fails")
			}
			return nil
		}
	}
	const rounds = 4
	cfg := Config{Warmup: 20 * time.Millisecond, Duration: 200 * time.Millisecond}
	pts := Interleave(context.Background(), cfg, rounds, [2]Leg{
		{Point: Point{Name: "a", Concurrency: 3}, Op: op(0)},
		{Point: Point{Name: "b", Concurrency: 2}, Op: op(1)},
	}, nil)

	slices.SortFunc(calls, func(x, y call) int { return x.start.Compare(y.start) })
	switches := 0
	for k := 1; k < len(calls); k++ {
		if calls[k].leg != calls[k-1].leg {
			switches++
		}
	}
	// a b | b a | a b | b a: one change of leg inside each round, none
	// between rounds.
	if switches != rounds {
		t.Errorf("the legs changed %d times, want %d", switches, rounds)
	}
	var ends [2]time.Time
	seen := map[[3]int]bool{}
	var ops, errs [2]int
	for _, c := range calls {
		if c.start.Before(ends[1-c.leg]) {
			t.Fatalf("leg %d started an operation at %v while the other leg's ran until %v", c.leg, c.start, ends[1-c.leg])
		}
		if c.end.After(ends[c.leg]) {
			ends[c.leg] = c.end
		}
		k := [3]int{c.leg, c.w, c.i}
		if seen[k] {
			t.Fatalf("leg %d worker %d ran operation %d twice", c.leg, c.w, c.i)
		}
		seen[k] = true
		if c.leg == 1 && c.i%10 == 9 {
			errs[1]++
		} else {
			ops[c.leg]++
		}
	}
	for k, p := range pts {
		if p.Ops == 0 || p.Ops >= ops[k] {
			t.Errorf("leg %d counted %d operations of the %d that succeeded (warm-ups included): want some, not all", k, p.Ops, ops[k])
		}
		if p.Elapsed < cfg.Duration || p.Elapsed > cfg.Duration+rounds*50*time.Millisecond {
			t.Errorf("leg %d measured %v, want the %v of its slices", k, p.Elapsed, cfg.Duration)
		}
		if p.P50 < 200*time.Microsecond || p.P99 < p.P50 {
			t.Errorf("leg %d: p50 %v p99 %v", k, p.P50, p.P99)
		}
	}
	if pts[0].Errors != 0 || pts[1].Errors == 0 || pts[1].Errors >= errs[1] {
		t.Errorf("errors counted %d and %d, of %d failed in all", pts[0].Errors, pts[1].Errors, errs[1])
	}
}

// TestInterleaveAllRotates: with three legs the order rotates every round
// (a b c, b c a, c a b), one leg running at a time, and each leg measures
// its share of every round.
func TestInterleaveAllRotates(t *testing.T) {
	var mu sync.Mutex
	var order []int // the leg of each operation, in the order they started
	op := func(leg int) Op {
		return func(ctx context.Context, w, i int) error {
			mu.Lock()
			order = append(order, leg)
			mu.Unlock()
			time.Sleep(100 * time.Microsecond) // the operation's own work
			return nil
		}
	}
	const rounds = 3
	cfg := Config{Warmup: 5 * time.Millisecond, Duration: 60 * time.Millisecond}
	var legs []Leg
	for k, name := range []string{"a", "b", "c"} {
		legs = append(legs, Leg{Point: Point{Name: name, Concurrency: 1}, Op: op(k)})
	}
	pts := InterleaveAll(context.Background(), cfg, rounds, legs, nil)
	var runs []int
	for k, leg := range order {
		if k == 0 || leg != order[k-1] {
			runs = append(runs, leg)
		}
	}
	// a b c | b c a | c a b: nine slices, each leg alone.
	want := []int{0, 1, 2, 1, 2, 0, 2, 0, 1}
	if !slices.Equal(runs, want) {
		t.Fatalf("legs ran in the order %v, want %v", runs, want)
	}
	for k, p := range pts {
		if p.Ops == 0 || p.Elapsed < cfg.Duration {
			t.Errorf("leg %d: %d operations in %v, want some in the %v of its slices", k, p.Ops, p.Elapsed, cfg.Duration)
		}
	}
}

// TestChartLegendFits: every series of a panel has its line in the legend
// under the plot, however many there are.
func TestChartLegendFits(t *testing.T) {
	last := color.RGBA{200, 0, 200, 255}
	var series []Series
	for k := 0; k < 9; k++ {
		s := Series{Name: fmt.Sprint("series ", k), Color: color.RGBA{0, 0, uint8(20 * k), 255}, X: []int{1, 8, 64}, Y: []float64{1, 2, 3}}
		if k == 8 {
			s.Color, s.Y = last, []float64{100, 100, 100} // its line at the top of the plot
		}
		series = append(series, s)
	}
	var buf bytes.Buffer
	if err := WriteChart(&buf, []Panel{{Title: "t", YLabel: "y", Series: series}}); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	b := img.Bounds()
	for y := b.Max.Y - 1; y > b.Max.Y-3*b.Dy()/10; y-- {
		for x := b.Min.X; x < b.Max.X; x++ {
			if color.RGBAModel.Convert(img.At(x, y)) == last {
				return
			}
		}
	}
	t.Fatalf("no legend line of the last series in the bottom of the %dx%d chart", b.Dx(), b.Dy())
}
