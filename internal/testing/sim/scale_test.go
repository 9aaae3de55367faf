package sim

import (
	"fmt"
	"strings"
	"testing"
)

// TestScaleTable runs the scaling model for 1, 2, 4 and 8 replicas with
// and without ownership, 16 tenants and 64 agents, and logs the table
// docs/replicas.md gives. It holds the model to what the loopback cluster
// showed: without ownership replicas conflict, with it no proposal does and
// the replicas serve at least as many proposals; and a second replica adds
// capacity where the replicas' CPU is the bound. Same seed, same table.
func TestScaleTable(t *testing.T) {
	run := func(r int, owning bool) ScaleResult {
		return Scale(ScaleOptions{Replicas: r, Tenants: 16, Agents: 64, Owning: owning, Millis: 4000, Seed: 1}, MeasuredCosts)
	}
	var b strings.Builder
	b.WriteString("| replicas | any request /s | conflicts | owning shares /s | conflicts |\n| ---: | ---: | ---: | ---: | ---: |\n")
	var own, anyReq []ScaleResult
	for _, r := range []int{1, 2, 4, 8} {
		a, o := run(r, false), run(r, true)
		if again := run(r, true); again != o {
			t.Fatalf("%d replicas: %+v then %+v from one seed", r, o, again)
		}
		anyReq, own = append(anyReq, a), append(own, o)
		fmt.Fprintf(&b, "| %d | %.0f | %.1f%% | %.0f | %.1f%% |\n", r, a.PerSecond, 100*float64(a.Conflicts)/float64(max(a.Proposals, 1)), o.PerSecond, 100*float64(o.Conflicts)/float64(max(o.Proposals, 1)))
	}
	t.Log("\n" + b.String())
	for i, o := range own {
		if o.Conflicts != 0 {
			t.Errorf("owning, row %d: %d conflicts", i, o.Conflicts)
		}
	}
	for i := 1; i < len(own); i++ {
		if anyReq[i].Conflicts == 0 || own[i].PerSecond < anyReq[i].PerSecond {
			t.Errorf("row %d: taking any request %+v, owning shares %+v: want conflicts without ownership and no loss with it", i, anyReq[i], own[i])
		}
	}
	if own[1].PerSecond <= own[0].PerSecond {
		t.Errorf("two replicas owning shares: %.0f/s, one: %.0f/s", own[1].PerSecond, own[0].PerSecond)
	}
}

// TestScaleServers runs the model with ownership for 1, 2, 4 and 8
// replicas on clusters of 1, 2, 4 and 8 servers, with the one event stream
// of the design as built and with the tenants' events split over as many
// streams as servers (a what-if), and logs the tables docs/replicas.md
// gives. One stream has one leader: servers beyond its three copies add
// nothing. Split streams put leaders on every server, and multiply the
// batches: each replica commits each stream's transactions apart.
func TestScaleServers(t *testing.T) {
	sizes := []int{1, 2, 4, 8}
	table := func(split bool) [][]ScaleResult {
		var b strings.Builder
		b.WriteString("| replicas \\ servers |")
		for _, s := range sizes {
			fmt.Fprintf(&b, " %d |", s)
		}
		b.WriteString("\n| ---: |" + strings.Repeat(" ---: |", len(sizes)) + "\n")
		var rows [][]ScaleResult
		for _, r := range sizes {
			fmt.Fprintf(&b, "| %d |", r)
			var row []ScaleResult
			for _, s := range sizes {
				o := ScaleOptions{Replicas: r, Tenants: 16, Agents: 64, Owning: true, Servers: s, Millis: 4000, Seed: 1}
				if split {
					o.Streams = s
				}
				res := Scale(o, MeasuredCosts)
				if res.Conflicts != 0 {
					t.Errorf("%+v: %d conflicts with ownership", o, res.Conflicts)
				}
				row = append(row, res)
				fmt.Fprintf(&b, " %.0f |", res.PerSecond)
			}
			rows = append(rows, row)
			b.WriteString("\n")
		}
		t.Logf("split streams %v, proposals a second:\n%s", split, b.String())
		return rows
	}
	one, split := table(false), table(true)
	for i, r := range sizes {
		// Servers 4 and 8 hold the one stream on the same three servers.
		if one[i][2] != one[i][3] {
			t.Errorf("%d replicas, one stream: 4 servers %+v, 8 servers %+v: want the same", r, one[i][2], one[i][3])
		}
		// One server holds one stream either way.
		if one[i][0] != split[i][0] {
			t.Errorf("%d replicas, one server: %+v and %+v", r, one[i][0], split[i][0])
		}
	}
	// A lone replica's committer sends one batch at a time a stream: more
	// streams, more batches in flight, on more leaders.
	for i := 1; i < len(sizes); i++ {
		if split[0][i].PerSecond < split[0][i-1].PerSecond {
			t.Errorf("1 replica, split streams: %d servers %.0f/s, %d servers %.0f/s", sizes[i], split[0][i].PerSecond, sizes[i-1], split[0][i-1].PerSecond)
		}
	}
}
