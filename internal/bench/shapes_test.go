package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkStorageShapes measures a governed proposal's writes in every
// storage shape of ProposalShapes (and today's atomic batches merged
// across proposals, as group commit sends them), raw, on a durable
// embedded server, at 1, 8 and 64 clients (and relaxed, at 1, to show what
// the syncs cost): the events are those a real
// proposal of the runtime appends (read back from one). Each shape runs
// b.N proposals per client count, in 8 rounds with the shapes taking
// turns, so that every shape meets the same drift of the shared disk. It
// reports each shape's proposals/s, p50 and p99, and both as ratios to the
// floor (one single append with an expected sequence) of the same rounds.
//
//	go test ./internal/bench -run '^$' -bench StorageShapes -benchtime 400x
func BenchmarkStorageShapes(b *testing.B) {
	ctx := context.Background()
	g, err := StartGateway(b.TempDir(), true, 1)
	if err != nil {
		b.Fatal(err)
	}
	evs, err := g.ProposalEvents(ctx)
	if err == nil {
		err = checkToday(ctx, g)
	}
	g.Close()
	if err != nil {
		b.Fatal(err)
	}
	for _, durable := range []bool{true, false} {
		n, err := StartNATS(b.TempDir(), durable)
		if err != nil {
			b.Fatal(err)
		}
		defer n.Close()
		if err := AllowFast(ctx, n.JS, 1); err != nil {
			b.Fatal(err)
		}
		tgt, err := NewShapeTarget(ctx, n.Store, n.NC, evs, n.Sealer.IDs)
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range []int{1, 8, 64} {
			if !durable && c > 1 {
				break // relaxed: only to show what the syncs cost a lone writer
			}
			prefix := ""
			if !durable {
				prefix = "relaxed-"
			}
			b.Run(fmt.Sprint(prefix, "c", c), func(b *testing.B) { measureShapes(b, tgt, c, Durability(durable)) })
		}
	}
}

// checkToday fails when a proposal of the runtime no longer appends what
// the "today" shape of ProposalShapes writes: its subjects' event counts,
// append by append, as Gateway.ProposalShape reads them back.
func checkToday(ctx context.Context, g *Gateway) error {
	got, err := g.ProposalShape(ctx)
	if err != nil {
		return err
	}
	var want [][]int
	i := slices.IndexFunc(ProposalShapes(), func(s StorageShape) bool { return s.Name == TodayAlone })
	for _, st := range ProposalShapes()[i].Steps {
		var counts []int
		var roles []Role
		for _, w := range st.Writes {
			if k := slices.Index(roles, w.Role); k >= 0 {
				counts[k]++
			} else {
				roles, counts = append(roles, w.Role), append(counts, 1)
			}
		}
		want = append(want, counts)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		return fmt.Errorf("a proposal appends %v events per subject, append by append; the shape %q writes %v", got, TodayAlone, want)
	}
	return nil
}

// shapeLeg is one shape measured at one client count.
type shapeLeg struct {
	name         string
	shape        StorageShape
	workers, per int // per: proposals per operation
	lat          []time.Duration
	elapsed, cpu time.Duration
	reads        atomic.Int64
}

func measureShapes(b *testing.B, tgt *ShapeTarget, c int, setting string) {
	var legs []*shapeLeg
	for _, s := range ProposalShapes() {
		legs = append(legs, &shapeLeg{name: s.Name, shape: s, workers: c, per: 1})
	}
	if c > 1 {
		today := ProposalShapes()[2]
		legs = append(legs, &shapeLeg{name: fmt.Sprintf("today, %d proposals an atomic batch", c), shape: today, workers: 1, per: c})
	}
	const rounds = 8
	ctx := context.Background()
	for r := 0; r < rounds; r++ {
		for k := range legs {
			l := legs[(k+r)%len(legs)]
			if r == 0 {
				l.lat = nil
			}
			ops := max(b.N/rounds/l.per, 1)
			if r > 0 && b.N < rounds {
				continue // -benchtime 1x: one proposal a shape
			}
			op := tgt.ShapeOp(l.shape, l.workers, l.per, &l.reads)
			cpu := cpuTime()
			lat, el, err := RunN(ctx, l.workers, ops, op)
			l.cpu += cpuTime() - cpu
			if err != nil {
				b.Fatal(err)
			}
			l.lat = append(l.lat, lat...)
			l.elapsed += el
		}
	}
	floor := legs[0]
	rate := func(l *shapeLeg) float64 { return float64(len(l.lat)*l.per) / l.elapsed.Seconds() }
	var tab strings.Builder
	fmt.Fprintf(&tab, "\n%s, %d clients | proposals/s | p50 ms | p99 ms | rate / floor | p50 / floor p50 | messages, durable trips | reads a proposal | CPU ms a proposal (server and client)\n", setting, c)
	for _, l := range legs {
		sortDurations(l.lat)
		msgs, trips := l.shape.Appends()
		p50, p99 := Quantile(l.lat, 0.5), Quantile(l.lat, 0.99)
		done := float64(len(l.lat) * l.per)
		fmt.Fprintf(&tab, "%s | %.0f | %.2f | %.2f | %.3f | %.2f | %d, %d | %.1f | %.3f\n", l.name, rate(l), ms(p50), ms(p99),
			rate(l)/rate(floor), float64(p50)/float64(Quantile(floor.lat, 0.5)), msgs, trips, float64(l.reads.Load())/done, ms(l.cpu)/done)
		key := strings.NewReplacer(" ", "_", ":", "", ",", "", "'", "p", "(", "", ")", "", "+", "-").Replace(l.name)
		b.ReportMetric(rate(l), key+"/s")
		b.ReportMetric(ms(p50), key+"-p50-ms")
	}
	if b.N >= rounds {
		// b.Log keeps only the first lines of a benchmark's output.
		fmt.Print(tab.String())
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func sortDurations(d []time.Duration) {
	// RunN sorts each run; the rounds' latencies are merged here.
	for i := 1; i < len(d); i++ {
		for j := i; j > 0 && d[j] < d[j-1]; j-- {
			d[j], d[j-1] = d[j-1], d[j]
		}
	}
}

// BenchmarkClusterShapes measures the shapes that matter for scale-out on
// a 3-node R3 cluster on loopback: 64 clients on one writer connection (one
// replica), then split over two writers on two servers (two replicas), each
// writer on subjects of its own (the ownership a partition gives) but
// guarding the same tenant subjects. It reports each shape's proposals/s
// with one and two writers and their ratio.
//
//	go test ./internal/bench -run '^$' -bench ClusterShapes -benchtime 1280x
func BenchmarkClusterShapes(b *testing.B) {
	ctx := context.Background()
	g, err := StartGateway(b.TempDir(), true, 1)
	if err != nil {
		b.Fatal(err)
	}
	evs, err := g.ProposalEvents(ctx)
	g.Close()
	if err != nil {
		b.Fatal(err)
	}
	c, err := StartRawCluster(b.TempDir(), 2)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	first, err := NewShapeTarget(ctx, c.Stores[0], c.Conns[0], evs, NewSealer().IDs)
	if err != nil {
		b.Fatal(err)
	}
	tgts := []*ShapeTarget{first, first.Beside(c.Stores[1], c.Conns[1])}
	all := ProposalShapes()
	today := all[2]
	readGuards := StorageShape{Name: "today, guards read instead of guarded", Steps: slices.Clone(today.Steps)}
	readGuards.Steps[0].GuardFirst = true
	const clients, rounds = 64, 4
	type leg struct {
		name    string
		shape   StorageShape
		group   int // proposals an operation: a writer's clients in one atomic batch, as its engine sends them
		writers int
		n       int
		errs    atomic.Int64
		elapsed time.Duration
		lat     []time.Duration
		reads   atomic.Int64
	}
	var legs []*leg
	for _, w := range []int{1, 2} {
		for _, s := range []StorageShape{all[0], all[4], all[5]} {
			legs = append(legs, &leg{name: s.Name, shape: s, group: 1, writers: w})
		}
		legs = append(legs, &leg{name: "today, a writer's proposals in one atomic batch, guarded", shape: today, group: clients / w, writers: w},
			&leg{name: "today, a writer's proposals in one atomic batch, guards read", shape: readGuards, group: clients / w, writers: w})
	}
	for r := 0; r < rounds; r++ {
		if r > 0 && b.N < rounds {
			break
		}
		for k := range legs {
			l := legs[(k+r)%len(legs)]
			per := clients / l.writers / l.group
			ops := max(b.N/rounds/l.group/l.writers, 1)
			lats := make([][]time.Duration, l.writers)
			els := make([]time.Duration, l.writers)
			errs := make([]error, l.writers)
			var wg sync.WaitGroup
			for wr := 0; wr < l.writers; wr++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					op := tgts[wr].ShapeOp(l.shape, per, l.group, &l.reads)
					// A refused or timed-out append is counted, not fatal: on a
					// replicated stream guarded batches may time out retrying.
					lats[wr], els[wr], errs[wr] = RunN(ctx, per, ops, func(ctx context.Context, w, i int) error {
						if err := op(ctx, w, i); err != nil {
							l.errs.Add(1)
						}
						return nil
					})
				}()
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				b.Fatalf("%s, %d writers: %v", l.name, l.writers, err)
			}
			for wr := range lats {
				l.lat = append(l.lat, lats[wr]...)
				l.n += len(lats[wr]) * l.group
			}
			l.elapsed += slices.Max(els)
		}
	}
	var tab strings.Builder
	fmt.Fprintf(&tab, "\n3-node R3, %d clients | writers | proposals/s | p50 ms | p99 ms | failed | two writers / one\n", clients)
	one := map[string]float64{}
	for _, l := range legs {
		slices.Sort(l.lat)
		rate := float64(l.n-int(l.errs.Load())*l.group) / l.elapsed.Seconds()
		ratio := ""
		if l.writers == 1 {
			one[l.name] = rate
		} else {
			ratio = fmt.Sprintf("%.2f", rate/one[l.name])
		}
		fmt.Fprintf(&tab, "%s | %d | %.0f | %.2f | %.2f | %d | %s\n", l.name, l.writers, rate, ms(Quantile(l.lat, 0.5)), ms(Quantile(l.lat, 0.99)), l.errs.Load()*int64(l.group), ratio)
		key := strings.NewReplacer(" ", "_", ":", "", ",", "", "'", "p", "(", "", ")", "", "+", "-").Replace(l.name)
		b.ReportMetric(rate, fmt.Sprintf("%s-w%d/s", key, l.writers))
	}
	if b.N >= rounds {
		fmt.Print(tab.String())
	}
}
