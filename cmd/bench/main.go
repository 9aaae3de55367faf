package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"image/color"
	"os"
	"regexp"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"time"

	"github.com/contextos/ledger/aggregates"
	"github.com/contextos/ledger/internal/bench"
	"github.com/nats-io/nats-server/v2/server"
)

func main() {
	var (
		duration   = flag.Duration("duration", 4*time.Second, "measured time per point")
		warmup     = flag.Duration("warmup", time.Second, "warm-up per point")
		out        = flag.String("out", "BENCHMARKS.md", "report to write")
		chart      = flag.String("chart", "docs/benchmarks.png", "chart to write")
		coldEvents = flag.Int("cold-events", 1_000_000, "events in the cold-load stream (0 skips)")
		skipPG     = flag.Bool("skip-postgres", false, "skip the PostgreSQL peer")
		relaxed    = flag.Bool("relaxed", true, "also measure the relaxed setting")
		cpuprof    = flag.String("cpuprofile", "", "write a CPU profile of the whole run")
		spread     = flag.Bool("cluster-tenants", false, "also measure the cluster with the agents spread over 32 tenants, one per ownership partition, on 1 replica and on 2 owning replicas (each point waits minutes for the 32 audit logs)")
		soak       = flag.Duration("soak", time.Minute, "length of the governed-proposals soak point at 64 agents, durable (0 skips)")
		onlyRe     = flag.String("only", "", "measure only the workloads whose name matches this regular expression (the report then holds only those)")
	)
	flag.Parse()
	if *onlyRe != "" {
		re, err := regexp.Compile(*onlyRe)
		if err != nil {
			fail(err)
		}
		only = re
	}
	if *cpuprof != "" {
		f, err := os.Create(*cpuprof)
		if err != nil {
			fail(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fail(err)
		}
		defer pprof.StopCPUProfile()
	}
	ctx := context.Background()
	start := time.Now()
	progress := func(format string, args ...any) {
		fmt.Printf("[%6.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	cfg := bench.Config{Warmup: *warmup, Duration: *duration}
	tmp, err := bench.TempDir()
	if err != nil {
		fail(err)
	}
	defer bench.Cleanup(tmp)
	onFail = append(onFail, func() { bench.Cleanup(tmp) })
	r := &report{cfg: cfg, started: start, load: loadavg()}

	modes := []bool{true}
	if *relaxed {
		modes = append(modes, false)
	}
	// The PostgreSQL peer runs beside the NATS server, and each of its
	// points is measured right after ours at the same concurrency, so that
	// the machine's load (it is shared) drifts as little as possible
	// between the two figures of a ratio.
	var pg *bench.Postgres
	if !*skipPG {
		progress("== starting the PostgreSQL peer")
		if pg, err = bench.StartPostgres(ctx, tmp); err != nil {
			progress("PostgreSQL peer skipped: %v", err)
			r.pgSkipped, pg = err.Error(), nil
		} else {
			r.pgVersion = pg.Version
			defer pg.Stop()
			onFail = append(onFail, pg.Stop)
		}
	}
	peer := func(group, d string, durable bool, c int, pick func(w, i int) string) {
		if pg == nil {
			return
		}
		if err := pg.SetSynchronousCommit(ctx, durable, c); err != nil {
			fail(err)
		}
		r.add(bench.Measure(ctx, cfg, bench.Point{Group: group, Name: "postgres", Durability: d, Concurrency: c, Unit: "reservation"},
			pg.Reservations(pick), progress))
	}
	// The governed peer serves the same proposals over its own NATS
	// server; it starts with the first proposals point.
	var gp *bench.GovernedPeer
	governedPeer := func(group, d string, durable bool, c int, pick func(w, i int) string) {
		if gp == nil {
			return
		}
		if err := pg.SetSynchronousCommit(ctx, durable, c); err != nil {
			fail(err)
		}
		// The peer's CPU is this process's (its NATS server, service,
		// provider and agents) and the PostgreSQL server's processes'.
		pcfg := cfg
		pcfg.CPU = bench.Sum(bench.ProcessCPU, pg.CPU)
		r.add(bench.Measure(ctx, pcfg, bench.Point{Group: group, Name: "postgres", Durability: d, Concurrency: c, Unit: "proposal"},
			gp.Proposals(pick), progress))
	}
	// Ours runs whole in this process: the embedded server, the runtime,
	// the provider and the agents.
	gcfg := cfg
	gcfg.CPU = bench.ProcessCPU
	for _, durable := range modes {
		d := bench.Durability(durable)
		if skip(gRawOne, gRawBatch, gUniform, gHot, gAltCeiling, gAltSingle, gAltSame, gSendPolicy) && skip(gProposals, gProposalsHot, gSoak, gAltProposal) {
			continue
		}
		progress("== JetStream (%s): raw appends and reservations", d)
		n, err := bench.StartNATS(tmp, durable)
		if err != nil {
			fail(err)
		}
		for _, c := range []int{1, 8, 64} {
			if skip(gRawOne) {
				break
			}
			r.add(bench.Measure(ctx, cfg, bench.Point{Group: gRawOne, Name: "jetstream", Durability: d, Concurrency: c, Unit: "append"},
				n.RawAppend(c), progress))
		}
		for _, c := range []int{1, 8} {
			if skip(gRawBatch) {
				break
			}
			p := bench.Measure(ctx, cfg, bench.Point{Group: gRawBatch, Name: "jetstream", Durability: d, Concurrency: c, Unit: "batch"},
				n.RawBatch(c, 100), progress)
			p.PerOp, p.Unit = 100, "event"
			r.add(p)
		}
		eng := n.Engine()
		if !skip(gUniform, gAltCeiling, gAltSingle, gAltSame) {
			// Every point of the group measures the same warm working set:
			// otherwise the first points would pay a cold load on most
			// reservations and the last on few (a cold load has its own
			// point).
			progress("  %s: one reservation on each resource first, ours and the peer's", gUniform)
			if err := bench.Fill(ctx, 64, bench.Resources, bench.Reservations(eng, bench.Every(d))); err != nil {
				fail(err)
			}
			if pg != nil {
				if err := pg.SetSynchronousCommit(ctx, durable, 64); err != nil {
					fail(err)
				}
				if err := bench.Fill(ctx, 64, bench.Resources, pg.Reservations(bench.Every(d))); err != nil {
					fail(err)
				}
			}
		}
		for _, c := range []int{1, 8, 64} {
			if skip(gUniform) {
				break
			}
			r.add(measureEngine(ctx, cfg, eng, bench.Point{Group: gUniform, Name: "ours", Durability: d, Concurrency: c, Unit: "reservation"},
				bench.Reservations(eng, bench.Uniform(d)), progress))
			peer(gUniform, d, durable, c, bench.Uniform(d))
		}
		for _, c := range []int{1, 8, 32, 64} {
			if skip(gHot) {
				break
			}
			r.add(measureEngine(ctx, cfg, eng, bench.Point{Group: gHot, Name: "ours", Durability: d, Concurrency: c, Unit: "reservation"},
				bench.Reservations(eng, bench.Hot(fmt.Sprint(d, c))), progress))
			peer(gHot, d, durable, c, bench.Hot(fmt.Sprint(d, c)))
		}
		if durable && !skip(gAltCeiling) {
			batch := bench.Point{Group: gAltCeiling, Name: "jetstream", Durability: d, Concurrency: 8, Unit: "event", PerOp: 100}
			alternate(ctx, cfg, r, bench.Leg{Point: bench.Point{Group: gAltCeiling, Name: "ours", Durability: d, Concurrency: 64, Unit: "reservation"},
				Op: bench.Reservations(eng, bench.Uniform(d))}, bench.Leg{Point: batch, Op: n.RawBatch(8, 100)}, progress)
		}
		if durable && !skip(gAltSingle) {
			alternate(ctx, cfg, r, bench.Leg{Point: bench.Point{Group: gAltSingle, Name: "ours", Durability: d, Concurrency: 8, Unit: "reservation"},
				Op: bench.Reservations(eng, bench.Uniform(d))}, bench.Leg{Point: bench.Point{Group: gAltSingle, Name: "jetstream", Durability: d, Concurrency: 8, Unit: "append"},
				Op: n.RawAppend(8)}, progress)
		}
		if durable && !skip(gAltSame) {
			progress("  %s: one event on each of the raw clients' %d subjects first", gAltSame, bench.Resources)
			fill, op := n.RawReservations(8)
			if err := bench.Fill(ctx, 64, bench.Resources, fill); err != nil {
				fail(err)
			}
			alternate(ctx, cfg, r, bench.Leg{Point: bench.Point{Group: gAltSame, Name: "ours", Durability: d, Concurrency: 8, Unit: "reservation"},
				Op: bench.Reservations(eng, bench.Uniform(d))}, bench.Leg{Point: bench.Point{Group: gAltSame, Name: "jetstream", Durability: d, Concurrency: 8, Unit: "append",
				Note: "one exposure.reserved event per append, over 10k subjects"}, Op: op}, progress)
		}
		if durable && !skip(gSendPolicy) {
			sendPolicy(ctx, r, n, d, progress)
		}
		n.Close()

		if skip(gProposals, gProposalsHot, gSoak, gAltProposal) {
			continue
		}
		progress("== governed proposals over NATS (%s)", d)
		g, err := bench.StartGateway(tmp, durable, 64)
		if err != nil {
			fail(err)
		}
		if pg != nil && gp == nil {
			if gp, err = bench.StartGovernedPeer(ctx, pg, 64); err != nil {
				fail(err)
			}
			defer gp.Close()
		}
		for _, c := range []int{1, 8, 64} {
			if skip(gProposals) {
				break
			}
			r.add(proposals(ctx, gcfg, g, bench.Point{Group: gProposals, Name: "ours", Durability: d, Concurrency: c, Unit: "proposal"},
				bench.Uniform("p"+d), progress))
			governedPeer(gProposals, d, durable, c, bench.Uniform("g"+d))
			if c == 1 {
				r.add(rawProposal(ctx, cfg, g, tmp, d, durable, progress))
				r.add(floor(ctx, cfg, g, tmp, d, durable, progress))
			}
		}
		if durable && !skip(gAltProposal) {
			raw, note, stop := rawProposalLeg(ctx, g, tmp, durable)
			raw.Point.Group, raw.Point.Durability, raw.Point.Note = gAltProposal, d, note
			alternate(ctx, cfg, r, bench.Leg{Point: bench.Point{Group: gAltProposal, Name: "ours", Durability: d, Concurrency: 1, Unit: "proposal"},
				Op: g.Proposals(bench.Uniform("a" + d))}, raw, progress)
			stop()
		}
		if !skip(gProposalsHot) {
			r.add(proposals(ctx, gcfg, g, bench.Point{Group: gProposalsHot, Name: "ours", Durability: d, Concurrency: 32, Unit: "proposal"},
				bench.Hot("p"+d), progress))
			governedPeer(gProposalsHot, d, durable, 32, bench.Hot("g"+d))
		}
		if durable && *soak > 0 && !skip(gSoak) {
			long := bench.Config{Warmup: cfg.Warmup, Duration: *soak}
			r.add(proposals(ctx, long, g, bench.Point{Group: gSoak, Name: "ours", Durability: d, Concurrency: 64, Unit: "proposal"},
				bench.Uniform("s"+d), progress))
		}
		g.Close()
	}

	if !skip(gCluster) {
		type variant struct {
			name string
			o    bench.ClusterOptions
		}
		variants := []variant{
			{"ours, 1 replica", bench.ClusterOptions{Replicas: 1, Agents: 64}},
			{"ours, 2 replicas", bench.ClusterOptions{Replicas: 2, Agents: 64}},
			{"ours, 2 replicas, owning shares", bench.ClusterOptions{Replicas: 2, Agents: 64, Owning: true}},
		}
		if *spread {
			variants = append(variants,
				variant{"ours, 1 replica, 32 tenants", bench.ClusterOptions{Replicas: 1, Agents: 64, Spread: true}},
				variant{"ours, 2 replicas, owning shares, 32 tenants", bench.ClusterOptions{Replicas: 2, Agents: 64, Owning: true, Spread: true}})
		}
		for _, v := range variants {
			progress("== governed proposals on a 3-node JetStream cluster (R3), %s", v.name)
			cl, err := bench.StartClusterWith(tmp, v.o)
			if err != nil {
				fail(err)
			}
			if v.o.Owning {
				if err := cl.WaitOwned(ctx, time.Minute); err != nil {
					fail(err)
				}
			}
			for _, c := range []int{1, 8, 64} {
				r.add(clusterPoint(ctx, cfg, cl, bench.Point{Group: gCluster, Name: v.name, Durability: "durable", Concurrency: c, Unit: "proposal"}, progress))
			}
			cl.Close()
		}
	}

	progress("== kernel decisions alone")
	for _, c := range []int{1, 2} {
		if skip(gKernel) {
			break
		}
		r.add(bench.Measure(ctx, cfg, bench.Point{Group: gKernel, Name: "kernel", Durability: "-", Concurrency: c, Unit: "decision"}, bench.KernelDecisions(c), progress))
	}

	if *coldEvents > 0 && !skip(gCold) {
		progress("== cold loads in a %d-event stream", *coldEvents)
		n, err := bench.StartNATS(tmp, false)
		if err != nil {
			fail(err)
		}
		refs, err := n.ColdLoads(ctx, *coldEvents, 20, 300, progress)
		if err != nil {
			fail(err)
		}
		r.coldEvents = *coldEvents
		r.add(bench.Measure(ctx, cfg, bench.Point{Group: gCold, Name: "snapshot+tail", Durability: "-", Concurrency: 1, Unit: "load"}, n.ColdLoad(refs, true), progress))
		long := bench.Config{Warmup: 0, Duration: 3 * cfg.Duration} // a full fold takes long: give it time for a few
		r.add(bench.Measure(ctx, long, bench.Point{Group: gCold, Name: "full fold", Durability: "-", Concurrency: 1, Unit: "load"}, n.ColdLoad(refs, false), progress))
		n.Close()
	}

	md, summary := r.markdown(*chart)
	if err := os.WriteFile(*out, md, 0o644); err != nil {
		fail(err)
	}
	var png bytes.Buffer
	if err := bench.WriteChart(&png, r.panels()); err != nil {
		fail(err)
	}
	if err := os.WriteFile(*chart, png.Bytes(), 0o644); err != nil {
		fail(err)
	}
	fmt.Println()
	if t := r.governedTable(); t != "" {
		fmt.Print(t, "\n")
	}
	if t := r.sendPolicyTable(); t != "" {
		fmt.Print(gSendPolicy, ":\n", t, "\n")
	}
	fmt.Print(summary)
	progress("wrote %s and %s", *out, *chart)
}

// measureEngine measures and notes the engine's average group commit and
// the share of the point (warm-up included, as for the group commit) during
// which an append was in flight.
func measureEngine(ctx context.Context, cfg bench.Config, eng *aggregates.Engine, p bench.Point, op bench.Op, progress bench.Progress) bench.Point {
	before, t0 := eng.Stats(), time.Now()
	p = bench.Measure(ctx, cfg, p, op, progress)
	after, wall := eng.Stats(), time.Since(t0)
	if b := after.Batches - before.Batches; b > 0 {
		p.Note = fmt.Sprintf("%.1f tx/append, appends in flight %.0f%% of the time", float64(after.BatchedTxs-before.BatchedTxs)/float64(b),
			100*(after.AppendBusy-before.AppendBusy).Seconds()/wall.Seconds())
		if g := after.SingleGroups - before.SingleGroups; g > 0 {
			p.Note += fmt.Sprintf(", %d groups as single appends", g)
		}
		if c := after.Conflicts - before.Conflicts; c > 0 {
			p.Note += fmt.Sprintf(", %d conflicts", c)
		}
	}
	return p
}

// rawProposal measures the appends of one governed proposal without the
// runtime (rawProposalLeg). A one-agent proposal's latency is judged
// against it.
func rawProposal(ctx context.Context, cfg bench.Config, g *bench.Gateway, tmp, d string, durable bool, progress bench.Progress) bench.Point {
	leg, note, stop := rawProposalLeg(ctx, g, tmp, durable)
	defer stop()
	leg.Point.Group, leg.Point.Durability = gRawProposal, d
	p := bench.Measure(ctx, cfg, leg.Point, leg.Op, progress)
	p.Note = note
	return p
}

// floor measures the floor of a governed proposal's latency: the events
// one proposal of g appends (read back from one), each as a single append
// with its expected sequence, one after the other, by one client, on an
// idle server of the same durability (bench.TodaySingleAppends). It runs
// a few seconds at most, whatever the points' duration.
func floor(ctx context.Context, cfg bench.Config, g *bench.Gateway, tmp, d string, durable bool, progress bench.Progress) bench.Point {
	shape, ok := bench.Shape(bench.TodaySingleAppends)
	if !ok {
		fail(fmt.Errorf("no storage shape %q", bench.TodaySingleAppends))
	}
	evs, err := g.ProposalEvents(ctx)
	if err != nil {
		fail(err)
	}
	n, err := bench.StartNATS(tmp, durable)
	if err != nil {
		fail(err)
	}
	defer n.Close()
	tgt, err := bench.NewShapeTarget(ctx, n.Store, n.NC, evs, n.Sealer.IDs)
	if err != nil {
		fail(err)
	}
	var reads atomic.Int64
	short := bench.Config{Warmup: min(cfg.Warmup, floorWarmup), Duration: min(cfg.Duration, floorDuration), CPU: bench.ProcessCPU}
	msgs, _ := shape.Appends()
	p := bench.Measure(ctx, short, bench.Point{Group: gFloor, Name: "jetstream", Durability: d, Concurrency: 1, Unit: "proposal"},
		tgt.ShapeOp(shape, 1, 1, &reads), progress)
	p.Note = fmt.Sprintf("the %d events of one proposal, each a single append with its expected sequence, one after the other, by one client (the tenant's two guarded subjects read beside the first), on an idle server of the same setting; %s measured", msgs, short.Duration)
	return p
}

// rawProposalLeg is the appends of one governed proposal without the
// runtime: the shape g's proposals append (ProposalShape), one batch after
// the other from one client, on an idle server of the same durability,
// which stop closes; note describes the shape.
func rawProposalLeg(ctx context.Context, g *bench.Gateway, tmp string, durable bool) (leg bench.Leg, note string, stop func()) {
	shape, err := g.ProposalShape(ctx)
	if err != nil {
		fail(err)
	}
	n, err := bench.StartNATS(tmp, durable)
	if err != nil {
		fail(err)
	}
	var sizes []string
	for _, b := range shape {
		var counts []string
		for _, c := range b {
			counts = append(counts, fmt.Sprint(c))
		}
		sizes = append(sizes, strings.Join(counts, "+"))
	}
	note = fmt.Sprintf("atomic batches of %s events per subject, one after the other", strings.Join(sizes, ", then "))
	return bench.Leg{Point: bench.Point{Name: "jetstream", Concurrency: 1, Unit: "pair"}, Op: n.RawBatches(1, shape...)}, note, n.Close
}

// alternate measures ours and its baseline in alternating slices
// (bench.Interleave) and adds both points.
func alternate(ctx context.Context, cfg bench.Config, r *report, ours, base bench.Leg, progress bench.Progress) {
	pts := bench.Interleave(ctx, bench.Config{Warmup: altWarmup, Duration: cfg.Duration}, altRounds, [2]bench.Leg{ours, base}, progress)
	for _, p := range pts {
		r.add(p)
	}
}

// only, when set, selects the workloads to measure (-only).
var only *regexp.Regexp

// skip reports whether none of the groups is selected.
func skip(groups ...string) bool {
	if only == nil {
		return false
	}
	for _, g := range groups {
		if only.MatchString(g) {
			return false
		}
	}
	return true
}

// proposals measures a governed-proposals point while reading the
// followers' lag every 100 ms, and notes the audit's and the read model's
// lag at the end of the point and whether either grew through it (not
// sustained: the rate is more than the followers keep up with). It then
// waits (up to two minutes) for both to catch up, so that the next point
// starts level.
func proposals(ctx context.Context, cfg bench.Config, g *bench.Gateway, p bench.Point, pick func(w, i int) string, progress bench.Progress) bench.Point {
	stop := g.SampleLag(ctx, 100*time.Millisecond)
	p = measureEngine(ctx, cfg, g.RT.Gateway.Engine(), p, g.Proposals(pick), progress)
	t := bench.TrendOf(stop(), cfg.Warmup, cfg.Warmup+p.Elapsed)
	p.Lag = &t
	if p.Note != "" {
		p.Note += ", "
	}
	p.Note += fmt.Sprintf("at the end audit %d and read model %d events behind (through the point %+.0f and %+.0f)",
		t.Audit.End, t.View.End, t.Audit.Growth, t.View.Growth)
	if !t.Sustained() {
		p.Note = "**not sustained**: " + p.Note
	}
	progress("  followers: %s", p.Note)
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		l, err := g.Lag(ctx)
		if err != nil {
			fail(err)
		}
		if l.Audit == 0 && l.View == 0 {
			break
		}
	}
	return p
}

// clusterPoint measures a governed-proposals point on the cluster and notes
// the optimistic conflicts of all its replicas' engines as a share of the
// proposals sent (warm-up included).
func clusterPoint(ctx context.Context, cfg bench.Config, cl *bench.Cluster, p bench.Point, progress bench.Progress) bench.Point {
	var sent atomic.Int64
	uniform := bench.Uniform("c")
	pick := func(w, i int) string { sent.Add(1); return uniform(w, i) }
	before := cl.Conflicts()
	p = proposals(ctx, cfg, cl.Gateway(), p, pick, progress)
	if n := sent.Load(); n > 0 {
		c := cl.Conflicts() - before
		p.Note += fmt.Sprintf("; conflicts on all replicas: %d, %.2f%% of %d proposals", c, 100*float64(c)/float64(n), n)
	}
	progress("  %s", p.Note)
	return p
}

// onFail is run before a failure exits: it stops the PostgreSQL server.
var onFail []func()

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	for _, f := range onFail {
		f()
	}
	os.Exit(1)
}

const (
	gRawOne       = "raw append, 1 event, expected seq"
	gRawBatch     = "raw atomic batch of 100 (ceiling)"
	gRawProposal  = "raw appends of one proposal (reserve, then settle)"
	gFloor        = "raw single appends of one proposal's events (floor)"
	gKernel       = "kernel decision + fold"
	gUniform      = "reservations, 10k resources"
	gHot          = "reservations, one hot resource"
	gProposals    = "governed proposals over NATS, 10k resources"
	gProposalsHot = "governed proposals over NATS, one hot resource"
	gSoak         = "governed proposals over NATS, 10k resources, soak"
	gCluster      = "governed proposals, 3-node cluster (R3)"
	gCold         = "cold load of one resource"

	// The three ratio goals measured again in alternating slices
	// (bench.Interleave): ours and its baseline, durable.
	gAltCeiling  = "reservations, 64 agents, alternating with raw atomic batches of 100"
	gAltSingle   = "reservations, 8 agents, alternating with raw single appends"
	gAltProposal = "governed proposals, 1 agent, alternating with the raw appends of one proposal"
	// Not a goal's baseline: the 8-agent reservations against raw single
	// appends of the very events they append, over as many subjects.
	gAltSame = "reservations, 8 agents, alternating with raw appends of the same events over 10k subjects"
)

// floorWarmup and floorDuration bound the floor's point (floor).
const (
	floorWarmup   = 500 * time.Millisecond
	floorDuration = 2 * time.Second
)

// altRounds and altWarmup shape the alternating measurements: each leg
// measures the point's duration in altRounds slices, each after altWarmup
// unmeasured.
const (
	altRounds = 8
	altWarmup = 250 * time.Millisecond
)

type report struct {
	cfg        bench.Config
	started    time.Time
	load       string
	points     []bench.Point
	pgVersion  string
	pgSkipped  string
	coldEvents int
}

// add records a point with the machine's 1-minute load average at its end
// (the machine is shared: a busy neighbour shows there).
func (r *report) add(p bench.Point) {
	l := strings.Fields(loadavg())
	if len(l) > 0 {
		if p.Note != "" {
			p.Note += "; "
		}
		p.Note += "load " + l[0]
	}
	r.points = append(r.points, p)
}

func (r *report) find(group, name, d string, c int) (bench.Point, bool) {
	for _, p := range r.points {
		if p.Group == group && p.Name == name && p.Durability == d && p.Concurrency == c {
			return p, true
		}
	}
	return bench.Point{}, false
}

func (r *report) rate(group, name, d string, c int) float64 {
	p, _ := r.find(group, name, d, c)
	return p.Rate()
}

// sustained returns the highest rate of a sustained governed-proposals
// point over 10k resources (the soak included) in setting d, and which.
func (r *report) sustained(d string) (rate float64, at string, ok bool) {
	for _, p := range r.points {
		if (p.Group != gProposals && p.Group != gSoak) || p.Name != "ours" || p.Durability != d || p.Lag == nil || !p.Lag.Sustained() {
			continue
		}
		if p.Rate() > rate {
			rate, at, ok = p.Rate(), fmt.Sprintf("%d agents", p.Concurrency), true
			if p.Group == gSoak {
				at += fmt.Sprintf(", %s soak", p.Elapsed.Round(time.Second))
			}
		}
	}
	return rate, at, ok
}

func ms(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	if d < 100*time.Microsecond {
		return fmt.Sprintf("%.3f", float64(d)/1e6)
	}
	return fmt.Sprintf("%.2f", float64(d)/1e6)
}

func (r *report) markdown(chart string) ([]byte, string) {
	var b strings.Builder
	fmt.Fprintf(&b, "# Benchmarks\n\nWritten by `make bench` (`go run ./cmd/bench`) on %s. Every figure below comes from this one run, on\nthis machine, so ratios between rows are meaningful; absolute numbers move with the machine and with\nwhatever else it runs (it is shared: load average %s at the start).\n\n", r.started.UTC().Format("2006-01-02 15:04 UTC"), r.load)
	fmt.Fprintf(&b, "## Machine and settings\n\n| | |\n| --- | --- |\n| CPUs (nproc) | %d |\n| CPU | %s |\n| Go | %s |\n| nats-server (embedded) | %s |\n| PostgreSQL | %s |\n",
		runtime.NumCPU(), cpuModel(), runtime.Version(), server.VERSION, or(r.pgVersion, "not measured: "+r.pgSkipped))
	fmt.Fprintf(&b, "| per point | %s warm-up, then %s measured; closed loop: each client starts its next operation when the previous returned |\n", r.cfg.Warmup, r.cfg.Duration)
	b.WriteString("| durable | JetStream `sync_interval: always` (fsync before every ack; the default); PostgreSQL `synchronous_commit = on`, `fsync = on` |\n")
	b.WriteString("| relaxed | JetStream flushes to the OS, periodic fsync; PostgreSQL `synchronous_commit = off` |\n")
	b.WriteString("| reservation | ours: `aggregates.Engine.Exposure` with `kernel.Reserve` (decide, Ed25519-sign the event, append with expected sequence, group commit); PostgreSQL: one transaction `SELECT ... FOR UPDATE` on the resource row, check `committed + held + amount <= limit`, `INSERT` receipt, `UPDATE` held (pgx v5, one connection per client) |\n")
	b.WriteString("| 10k resources | before the group's first point every resource takes one reservation, ours and the peer's, so each point measures the same warm working set (a cold load has its own point) |\n")
	b.WriteString("| hot resource | every client on one resource; a new one after 1,000 reservations (a ledger holds at most 1,024 receipts) |\n")
	b.WriteString("| proposal | an agent's request over NATS (own user and inbox) to the applied reply: reserve (operation + ledger), dispatch-start, loopback HTTP provider call (answers at once), settle; `daemon.Boot` with the embedded server |\n")
	b.WriteString("| raw appends of one proposal | the atomic batches one one-agent proposal appends (read back from the stream after a proposal: its reservation with dispatch-start, then its settlement, the same events per subject), appended one after the other by one client with their expected sequences on an idle server of the same setting: what a proposal's appends cost without the runtime |\n")
	b.WriteString("| governed peer | PostgreSQL: the same proposal from the same client loop over a NATS request (its own plain NATS server on loopback, one connection per agent) to a Go service in this process; transaction 1 inserts the operation key's row (locked), reads the agent's grant, upserts the run's row, locks the resource's row (`FOR UPDATE`), checks the limit, holds, marks the operation dispatching and inserts an Ed25519-signed audit row; the same loopback provider call; transaction 2 locks the operation, moves held to committed, marks it applied and inserts a signed audit row (one pgx connection per agent) |\n")
	b.WriteString("| group commit | every row of ours notes the engine's transactions per append (warm-up included) and the share of the point, warm-up included, during which at least one of its appends was in flight (`Engine.Stats().AppendBusy`, the runtime's `contextos_store_append_busy_seconds_total`): near 100%, the server's append cost bounds the row |\n")
	b.WriteString("| followers | every proposals row notes how many stream sequences the audit projector and the exposure view (the read model) are behind at its end, and their least-squares growth through the point (read every 100 ms); a row whose audit or read-model lag grew by more than 5% of the events appended in it (at least 256) is **not sustained** |\n")
	if r.coldEvents > 0 {
		fmt.Fprintf(&b, "| cold load | a fresh engine loads one of 20 resources, each with ~300 events spread through a %d-event stream (other subjects between them); snapshots every %d events |\n", r.coldEvents, aggregates.DefaultSnapshotEvery)
	}
	if t := r.governedTable(); t != "" {
		fmt.Fprintf(&b, "\n## The governed path: ours and the PostgreSQL governed peer\n\n%s\n\n%s", governedCaption, t)
	}
	if t := r.sendPolicyTable(); t != "" {
		fmt.Fprintf(&b, "\n## %s\n\n%s\n\n%s", gSendPolicy, sendPolicyCaption, t)
	}
	fmt.Fprintf(&b, "\n## Results\n\n![throughput and p99 against concurrency, CPU a governed proposal](%s)\n\n", chart)
	b.WriteString("| workload | system | setting | clients | throughput /s | p50 ms | p99 ms | errors | note |\n| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- |\n")
	row := func(p bench.Point) {
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %.0f %s | %s | %s | %d | %s |\n", p.Group, p.Name, p.Durability, p.Concurrency, p.Rate(), p.Unit+"s", ms(p.P50), ms(p.P99), p.Errors, p.Note)
	}
	var cluster, alt []bench.Point
	for _, p := range r.points {
		switch p.Group {
		case gCluster:
			cluster = append(cluster, p)
		case gAltCeiling, gAltSingle, gAltProposal, gAltSame:
			alt = append(alt, p)
		case gSendPolicy:
			// its own table
		default:
			row(p)
		}
	}
	if len(alt) > 0 {
		b.WriteString("\n## Ratios measured in alternating slices\n\n")
		fmt.Fprintf(&b, "The goals that compare ours with a raw JetStream figure, measured again, durable, with ours and its baseline taking turns: %d rounds, in each of which each leg runs alone for %s unmeasured and then %s measured, the order swapped every round. On this shared machine the same raw point moves 2x within minutes, so two points measured one after the other can differ by more than what is being compared; alternating slices put both legs under the same drift. These goals are judged on these rows (the figures measured one after the other are given beside them).\n\n",
			altRounds, altWarmup, r.cfg.Duration/altRounds)
		b.WriteString("| workload | system | setting | clients | throughput /s | p50 ms | p99 ms | errors | note |\n| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- |\n")
		for _, p := range alt {
			row(p)
		}
	}
	if len(cluster) > 0 {
		b.WriteString("\n## Scale-out: a 3-node JetStream cluster\n\n")
		fmt.Fprintf(&b, "Three nats-servers in one JetStream cluster on loopback (R3 event, snapshot and audit streams, `sync_interval: always`), runtimes booted against it as `contextosd` replicas are (one queue group, a shared runtime key, an executor each), agents' connections spread over the three servers; the same proposals as above, from one tenant. Three deployments: one replica; two replicas taking any request; two replicas with `nats.ownership` on (docs/replicas.md), where the replica that owns the tenant's partition handles every request and the other forwards what the queue group gives it. The conflicts are all replicas' optimistic conflicts as a share of the proposals sent. **Caveat:** the three servers, both replicas, the provider and the agents share this machine's %d cores, so this measures the replicated path's cost on one machine, not what three machines would do. The engine's figures and the followers' lag in the notes are the first replica's.\n\n", runtime.NumCPU())
		b.WriteString("| workload | system | setting | clients | throughput /s | p50 ms | p99 ms | errors | note |\n| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- |\n")
		for _, p := range cluster {
			row(p)
		}
	}
	var s strings.Builder
	s.WriteString("Ratios (same run):\n")
	ratio := func(what string, num, den float64) {
		if num > 0 && den > 0 {
			fmt.Fprintf(&s, "- %s: %.2f\n", what, num/den)
		}
	}
	for _, d := range []string{"durable", "relaxed"} {
		ceil := r.rate(gRawBatch, "jetstream", d, 1)
		one := r.rate(gRawOne, "jetstream", d, 64)
		for _, c := range []int{1, 8, 64} {
			ratio(fmt.Sprintf("%s, 10k resources, %d clients: ours / raw batch ceiling (events/s)", d, c), r.rate(gUniform, "ours", d, c), ceil)
		}
		ratio(d+", 10k resources, 64 clients: ours / raw one-at-a-time append (64 clients)", r.rate(gUniform, "ours", d, 64), one)
		for _, c := range []int{1, 8, 64} {
			ratio(fmt.Sprintf("%s, 10k resources, %d clients: ours / PostgreSQL", d, c), r.rate(gUniform, "ours", d, c), r.rate(gUniform, "postgres", d, c))
		}
		for _, c := range []int{1, 8, 32, 64} {
			ratio(fmt.Sprintf("%s, hot resource, %d clients: ours / PostgreSQL", d, c), r.rate(gHot, "ours", d, c), r.rate(gHot, "postgres", d, c))
		}
		ratio(d+": hot resource (32 clients) / 10k resources (64 clients)", r.rate(gHot, "ours", d, 32), r.rate(gUniform, "ours", d, 64))
		ratio(d+": proposals (64 clients) / reservations (64 clients)", r.rate(gProposals, "ours", d, 64), r.rate(gUniform, "ours", d, 64))
		for _, c := range []int{1, 8, 64} {
			ratio(fmt.Sprintf("%s, governed proposals, %d clients: ours / PostgreSQL governed peer", d, c), r.rate(gProposals, "ours", d, c), r.rate(gProposals, "postgres", d, c))
		}
		ratio(d+", governed proposals, hot resource, 32 clients: ours / PostgreSQL governed peer", r.rate(gProposalsHot, "ours", d, 32), r.rate(gProposalsHot, "postgres", d, 32))
		if rate, at, ok := r.sustained(d); ok {
			fmt.Fprintf(&s, "- %s: sustained governed proposals rate: %.0f/s (%s)\n", d, rate, at)
		} else if _, any := r.find(gProposals, "ours", d, 1); any {
			fmt.Fprintf(&s, "- %s: sustained governed proposals rate: none of the points was sustained\n", d)
		}
	}
	ratio("durable, reservations, 8 agents: ours / raw single appends of the same events over 10k subjects (alternating)", r.rate(gAltSame, "ours", "durable", 8), r.rate(gAltSame, "jetstream", "durable", 8))
	for _, c := range []int{1, 8, 64} {
		ratio(fmt.Sprintf("durable, governed proposals, %d clients: 3-node cluster with 2 replicas / one server", c), r.rate(gCluster, "ours, 2 replicas", "durable", c), r.rate(gProposals, "ours", "durable", c))
		ratio(fmt.Sprintf("durable, governed proposals, %d clients, 3-node cluster: 2 replicas / 1 replica", c), r.rate(gCluster, "ours, 2 replicas", "durable", c), r.rate(gCluster, "ours, 1 replica", "durable", c))
		ratio(fmt.Sprintf("durable, governed proposals, %d clients, 3-node cluster: 2 replicas owning shares / 1 replica", c), r.rate(gCluster, "ours, 2 replicas, owning shares", "durable", c), r.rate(gCluster, "ours, 1 replica", "durable", c))
		ratio(fmt.Sprintf("durable, governed proposals, %d clients of 32 tenants, 3-node cluster: 2 replicas owning shares / 1 replica", c), r.rate(gCluster, "ours, 2 replicas, owning shares, 32 tenants", "durable", c), r.rate(gCluster, "ours, 1 replica, 32 tenants", "durable", c))
	}
	s.WriteString("\nGoals (durable):\n")
	goal := func(name string, ok bool, got string) {
		mark := "met"
		if !ok {
			mark = "NOT met"
		}
		fmt.Fprintf(&s, "- %s: %s (%s)\n", name, mark, got)
	}
	u64, uok := r.find(gUniform, "ours", "durable", 64)
	if uok {
		goal(">= 10k reservations/s over 10k resources with 64 agents", u64.Rate() >= 10_000, fmt.Sprintf("%.0f/s", u64.Rate()))
	}
	if pg64 := r.rate(gUniform, "postgres", "durable", 64); uok && pg64 > 0 {
		goal(">= 2x the PostgreSQL peer on the same workload (64 clients)", u64.Rate() >= 2*pg64, fmt.Sprintf("%.2fx", u64.Rate()/pg64))
	}
	// A goal against a raw figure is judged on the alternating slices when
	// they were measured, and on the points one after the other otherwise.
	against := func(name string, limit float64, above bool, alt string, ours, base [2]string, c, cb int, val func(ours, base bench.Point) (float64, string)) {
		var got float64
		var what string
		sOurs, ok1 := r.find(ours[0], ours[1], "durable", c)
		sBase, ok2 := r.find(base[0], base[1], "durable", cb)
		seq := ok1 && ok2 && sOurs.Ops > 0 && sBase.Ops > 0
		if seq {
			got, what = val(sOurs, sBase)
		}
		aOurs, ok1 := r.find(alt, "ours", "durable", c)
		aBase, ok2 := r.find(alt, "jetstream", "durable", cb)
		switch {
		case ok1 && ok2 && aOurs.Ops > 0 && aBase.Ops > 0:
			seqWhat := what
			got, what = val(aOurs, aBase)
			what += " in alternating slices"
			if seq {
				what += "; " + seqWhat + " one after the other"
			}
		case !seq:
			return
		}
		goal(name, above && got >= limit || !above && got <= limit, what)
	}
	rateOf := func(unit string) func(o, b bench.Point) (float64, string) {
		return func(o, b bench.Point) (float64, string) {
			return o.Rate() / b.Rate(), fmt.Sprintf("%.3f of %.0f %s", o.Rate()/b.Rate(), b.Rate(), unit)
		}
	}
	against("reservations, 64 agents: >= 0.5 of the raw atomic-batch ceiling (8 clients)", 0.5, true, gAltCeiling,
		[2]string{gUniform, "ours"}, [2]string{gRawBatch, "jetstream"}, 64, 8, rateOf("events/s"))
	if pg64 := r.rate(gUniform, "postgres", "durable", 64); uok && pg64 > 0 {
		goal("reservations, 64 agents: >= 2.5x the PostgreSQL peer", u64.Rate() >= 2.5*pg64, fmt.Sprintf("%.2fx", u64.Rate()/pg64))
	}
	against("reservations, 8 agents: >= 0.9 of the raw single-append rate (8 clients)", 0.9, true, gAltSingle,
		[2]string{gUniform, "ours"}, [2]string{gRawOne, "jetstream"}, 8, 8, rateOf("appends/s"))
	against("governed proposals, 1 agent: p50 <= 1.3x the raw appends of one proposal", 1.3, false, gAltProposal,
		[2]string{gProposals, "ours"}, [2]string{gRawProposal, "jetstream"}, 1, 1, func(o, b bench.Point) (float64, string) {
			ratio := float64(o.P50) / float64(b.P50)
			return ratio, fmt.Sprintf("%.2fx: p50 %s ms against %s ms", ratio, ms(o.P50), ms(b.P50))
		})
	if p64, ok := r.find(gProposals, "ours", "durable", 64); ok {
		goal(">= 2.5k governed proposals/s with p99 < 20 ms (64 agents)", p64.Rate() >= 2500 && p64.P99 < 20*time.Millisecond,
			fmt.Sprintf("%.0f/s, p99 %s ms", p64.Rate(), ms(p64.P99)))
	}
	if sk, ok := r.find(gSoak, "ours", "durable", 64); ok {
		got := fmt.Sprintf("%.0f/s over %s, p99 %s ms", sk.Rate(), sk.Elapsed.Round(time.Second), ms(sk.P99))
		if !sk.Lag.Sustained() {
			got += ", not sustained"
		}
		goal(">= 2,500 governed proposals/s sustained through the soak (64 agents), p99 <= 60 ms", sk.Lag.Sustained() && sk.Rate() >= 2500 && sk.P99 <= 60*time.Millisecond, got)
	}
	if pg64 := r.rate(gProposals, "postgres", "durable", 64); pg64 > 0 {
		if rate, at, ok := r.sustained("durable"); ok {
			goal(">= 2x the PostgreSQL governed peer, sustained rate against its 64-client rate", rate >= 2*pg64, fmt.Sprintf("%.2fx: %.0f/s (%s) against %.0f/s", rate/pg64, rate, at, pg64))
		}
	}
	if h32, ok := r.find(gHot, "ours", "durable", 32); ok && uok {
		goal("hot resource, 32 agents: >= 50% of the uniform rate and p99 < 25 ms", h32.Rate() >= u64.Rate()/2 && h32.P99 < 25*time.Millisecond,
			fmt.Sprintf("%.0f%% of %.0f/s, p99 %s ms", 100*h32.Rate()/max(u64.Rate(), 1), u64.Rate(), ms(h32.P99)))
	}
	if cl, ok := r.find(gCold, "snapshot+tail", "-", 1); ok {
		goal(fmt.Sprintf("cold load of one resource in a %d-event stream: p99 < 5 ms", r.coldEvents), cl.P99 < 5*time.Millisecond, fmt.Sprintf("p99 %s ms", ms(cl.P99)))
	}
	b.WriteString("\n## Ratios and goals\n\n")
	b.WriteString(s.String())
	b.WriteString("\nSee docs/performance.md for the design behind these figures, the goals and what bounds the ones not met.\n")
	return []byte(b.String()), s.String()
}

func (r *report) panels() []bench.Panel {
	type line struct {
		group, name, d string
		c              color.RGBA
		dashed         bool
		label          string
	}
	lines := []line{
		{gUniform, "ours", "durable", color.RGBA{31, 119, 180, 255}, false, "ours, 10k resources"},
		{gHot, "ours", "durable", color.RGBA{255, 127, 14, 255}, false, "ours, hot resource"},
		{gProposals, "ours", "durable", color.RGBA{44, 160, 44, 255}, false, "ours, governed proposals"},
		{gUniform, "postgres", "durable", color.RGBA{31, 119, 180, 255}, true, "PostgreSQL, 10k resources"},
		{gHot, "postgres", "durable", color.RGBA{255, 127, 14, 255}, true, "PostgreSQL, hot resource"},
		{gProposals, "postgres", "durable", color.RGBA{44, 160, 44, 255}, true, "PostgreSQL, governed peer"},
		{gRawOne, "jetstream", "durable", color.RGBA{127, 127, 127, 255}, true, "raw JetStream append, 1 at a time"},
	}
	var tput, p99 []bench.Series
	for _, l := range lines {
		var ts, ps bench.Series
		ts.Name, ts.Color, ts.Dashed = l.label, l.c, l.dashed
		ps.Name, ps.Color, ps.Dashed = l.label, l.c, l.dashed
		for _, p := range r.points {
			if p.Group == l.group && p.Name == l.name && p.Durability == l.d {
				ts.X, ts.Y = append(ts.X, p.Concurrency), append(ts.Y, p.Rate())
				ps.X, ps.Y = append(ps.X, p.Concurrency), append(ps.Y, float64(p.P99)/1e6)
			}
		}
		if len(ts.X) > 0 {
			tput, p99 = append(tput, ts), append(p99, ps)
		}
	}
	panels := []bench.Panel{{Title: "Throughput (durable)", YLabel: "operations/s", Series: tput}, {Title: "p99 latency (durable)", YLabel: "ms", Series: p99}}
	if cpu, ok := r.cpuPanel(); ok {
		panels = append(panels, cpu)
	}
	return panels
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
