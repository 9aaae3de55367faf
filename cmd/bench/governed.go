package main

import (
	"fmt"
	"image/color"
	"strings"
	"time"

	"github.com/contextos/ledger/internal/bench"
)

// governedPoints are the points of the governed path's table, in order.
var governedPoints = []struct {
	group string
	c     int
	label string
}{
	{gProposals, 1, "1 agent"},
	{gProposals, 8, "8 agents"},
	{gProposals, 64, "64 agents"},
	{gProposalsHot, 32, "hot resource, 32 agents"},
}

// governedCaption says what the governed path's table compares and what
// each of its CPU figures includes.
const governedCaption = `The governed path as users compare it: the same proposals, from the same client loop, through ours and through the PostgreSQL governed peer, each point of the peer measured right after ours (rows of ` + "`" + gProposals + "`" + ` and ` + "`" + gProposalsHot + "`" + ` below). *Ratio* is ours / the peer's proposals a second. *CPU ms a proposal* is the CPU time consumed during the point's measured window divided by the proposals applied in it (the warm-up excluded from both; a failed proposal's CPU counts, the proposal does not, and the point names how many failed): for **ours**, this process's user and system time (` + "`getrusage(RUSAGE_SELF)`" + `: the embedded nats-server, the runtime with its group commit, audit projector and read model, the loopback provider and the agents' clients; followers' work left behind at the window's end is not counted, see the followers' note); for the **PostgreSQL peer**, this process's (the peer's plain NATS server, its Go service with the Ed25519 signing, the provider and the agents' clients) plus the PostgreSQL server's processes' user and system time (` + "`/proc/<pid>/stat`" + ` of the postmaster the bench started and of its children: one backend per agent connection, the WAL writer, checkpointer and the others, with the children that exited in the window through the postmaster's reaped-children times). Both run on the same cores, so CPU a proposal is what each system costs the machine, whoever waits. *Floor*: the events one proposal of ours appends (read back from one), each a single append with its expected sequence, one after the other by one client, on an idle server of the same setting (row ` + "`" + gFloor + "`" + `, measured in the same run): its p50, and ours' 1-agent p50 divided by it.`

// governedTable is the governed path's table: one row a point of the
// governed proposals (a setting and a concurrency) with ours, the
// PostgreSQL governed peer and the floor, or "" when no point was measured.
func (r *report) governedTable() string {
	var rows strings.Builder
	for _, d := range []string{"durable", "relaxed"} {
		for _, gp := range governedPoints {
			ours, ok := r.find(gp.group, "ours", d, gp.c)
			if !ok {
				continue
			}
			pg, pok := r.find(gp.group, "postgres", d, gp.c)
			dash := func(ok bool, f func() string) string {
				if !ok {
					return "-"
				}
				return f()
			}
			ratio := dash(pok && pg.Rate() > 0, func() string { return fmt.Sprintf("%.2f", ours.Rate()/pg.Rate()) })
			peerRate := dash(pok, func() string { return fmt.Sprintf("%.0f", pg.Rate()) })
			peerP50 := dash(pok, func() string { return ms(pg.P50) })
			floor := ""
			if gp.group == gProposals && gp.c == 1 {
				if f, ok := r.find(gFloor, "jetstream", d, 1); ok && f.P50 > 0 {
					floor = fmt.Sprintf("p50 %s ms; ours %.2fx", ms(f.P50), float64(ours.P50)/float64(f.P50))
				}
			}
			label := d + ", " + gp.label
			if ours.Errors > 0 || pg.Errors > 0 {
				// Failed proposals are not counted, but their CPU is.
				label += fmt.Sprintf(" (failed: ours %d, peer %d)", ours.Errors, pg.Errors)
			}
			fmt.Fprintf(&rows, "| %s | %.0f | %s | %s | %s / %s ms | %s | %s | %s |\n", label, ours.Rate(), peerRate, ratio,
				ms(ours.P50), peerP50, cpuMS(ours.CPUPerOp()), dash(pok, func() string { return cpuMS(pg.CPUPerOp()) }), floor)
		}
	}
	if rows.Len() == 0 {
		return ""
	}
	return "| point | ours proposals/s | PG peer proposals/s | ratio | ours p50 / PG p50 | CPU ms a proposal, ours | CPU ms a proposal, PG peer | floor |\n" +
		"| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n" + rows.String()
}

// cpuMS is a CPU time in milliseconds, "-" when not measured.
func cpuMS(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f", float64(d)/1e6)
}

// cpuPanel is the chart of the governed path's CPU a proposal, ours and
// the PostgreSQL peer, durable; ok is false when none was measured.
func (r *report) cpuPanel() (bench.Panel, bool) {
	type line struct {
		group, name string
		c           color.RGBA
		dashed      bool
		label       string
	}
	green, purple := color.RGBA{44, 160, 44, 255}, color.RGBA{148, 103, 189, 255}
	lines := []line{
		{gProposals, "ours", green, false, "ours, 10k resources"},
		{gProposals, "postgres", green, true, "PostgreSQL peer, 10k resources"},
		{gProposalsHot, "ours", purple, false, "ours, hot resource"},
		{gProposalsHot, "postgres", purple, true, "PostgreSQL peer, hot resource"},
	}
	p := bench.Panel{Title: "CPU a governed proposal (durable)", YLabel: "ms"}
	for _, l := range lines {
		s := bench.Series{Name: l.label, Color: l.c, Dashed: l.dashed}
		for _, pt := range r.points {
			if pt.Group == l.group && pt.Name == l.name && pt.Durability == "durable" && pt.CPUPerOp() > 0 {
				s.X, s.Y = append(s.X, pt.Concurrency), append(s.Y, float64(pt.CPUPerOp())/1e6)
			}
		}
		if len(s.X) > 0 {
			p.Series = append(p.Series, s)
		}
	}
	return p, len(p.Series) > 0
}
