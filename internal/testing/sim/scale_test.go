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
