package main

import (
	"strings"
	"testing"
	"time"

	"github.com/contextos/ledger/internal/bench"
)

// TestGovernedTable: the governed path's table has a row a measured point
// of ours, in order, with the peer's figures beside it (a dash where the
// peer or a CPU figure was not measured), the CPU a proposal of each, the
// failed proposals where there are any, and the floor at one agent; no
// point, no table.
func TestGovernedTable(t *testing.T) {
	if got := (&report{}).governedTable(); got != "" {
		t.Fatalf("a table without points:\n%s", got)
	}
	pt := func(group, name, d string, c, ops int, p50 time.Duration, cpu time.Duration) bench.Point {
		return bench.Point{Group: group, Name: name, Durability: d, Concurrency: c, Ops: ops, Elapsed: 2 * time.Second, P50: p50, CPU: cpu, Unit: "proposal"}
	}
	r := &report{points: []bench.Point{
		pt(gProposals, "ours", "durable", 1, 1000, 2*time.Millisecond, 500*time.Millisecond),
		pt(gProposals, "postgres", "durable", 1, 400, 5*time.Millisecond, 800*time.Millisecond),
		pt(gFloor, "jetstream", "durable", 1, 1300, 1600*time.Microsecond, 0),
		pt(gProposalsHot, "ours", "durable", 32, 6000, 10*time.Millisecond, 1500*time.Millisecond),
		{Group: gProposalsHot, Name: "postgres", Durability: "durable", Concurrency: 32, Ops: 2000, Errors: 3, Elapsed: 2 * time.Second, P50: 30 * time.Millisecond},
		pt(gProposals, "ours", "durable", 64, 8000, 15*time.Millisecond, 2*time.Second),
		pt(gProposals, "ours", "relaxed", 8, 4000, 4*time.Millisecond, time.Second),
		pt(gRawProposal, "jetstream", "durable", 1, 1500, time.Millisecond, 0),
	}}
	got := r.governedTable()
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	want := []string{
		"| point | ours proposals/s | PG peer proposals/s | ratio | ours p50 / PG p50 | CPU ms a proposal, ours | CPU ms a proposal, PG peer | floor |",
		"| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
		"| durable, 1 agent | 500 | 200 | 2.50 | 2.00 / 5.00 ms | 0.500 | 2.000 | p50 1.60 ms; ours 1.25x |",
		"| durable, 64 agents | 4000 | - | - | 15.00 / - ms | 0.250 | - |  |",
		"| durable, hot resource, 32 agents (failed: ours 0, peer 3) | 3000 | 1000 | 3.00 | 10.00 / 30.00 ms | 0.250 | - |  |",
		"| relaxed, 8 agents | 2000 | - | - | 4.00 / - ms | 0.250 | - |  |",
	}
	if len(lines) != len(want) {
		t.Fatalf("table:\n%s", got)
	}
	for k := range want {
		if lines[k] != want[k] {
			t.Errorf("line %d:\n got %s\nwant %s", k, lines[k], want[k])
		}
	}

	md, _ := r.markdown("chart.png")
	if !strings.Contains(string(md), "## The governed path: ours and the PostgreSQL governed peer\n\n"+governedCaption+"\n\n"+got) {
		t.Errorf("the report does not hold the table under its caption:\n%s", md)
	}
	panels := r.panels()
	cpu := panels[len(panels)-1]
	if cpu.Title != "CPU a governed proposal (durable)" || len(cpu.Series) != 3 {
		t.Fatalf("CPU panel %+v", cpu)
	}
	if s := cpu.Series[0]; s.Name != "ours, 10k resources" || len(s.X) != 2 || s.X[1] != 64 || s.Y[1] != 0.25 {
		t.Errorf("ours' CPU series %+v", s)
	}
	if s := cpu.Series[1]; s.Name != "PostgreSQL peer, 10k resources" || len(s.X) != 1 || s.Y[0] != 2 {
		t.Errorf("the peer's CPU series %+v", s)
	}
	if s := cpu.Series[2]; s.Name != "ours, hot resource" || len(s.X) != 1 || s.X[0] != 32 {
		t.Errorf("ours' hot CPU series %+v", s)
	}
}
