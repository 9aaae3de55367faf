package kernel

import (
	"fmt"
	"slices"
	"testing"
)

func TestPartition(t *testing.T) {
	for _, n := range []int{0, 1} {
		if p := Partition("acme", n); p != 0 {
			t.Fatalf("Partition(acme, %d) = %d, want 0", n, p)
		}
	}
	seen := map[int]bool{}
	for i := 0; i < 200; i++ {
		tenant := fmt.Sprint("tenant-", i)
		p := Partition(tenant, 32)
		if p < 0 || p >= 32 || p != Partition(tenant, 32) {
			t.Fatalf("Partition(%s, 32) = %d: out of range or not stable", tenant, p)
		}
		seen[p] = true
	}
	if len(seen) < 24 {
		t.Fatalf("200 tenants fell in %d of 32 partitions", len(seen))
	}
}

func TestFairShare(t *testing.T) {
	for _, c := range []struct{ n, live, want int }{{32, 1, 32}, {32, 2, 16}, {32, 3, 11}, {32, 0, 32}, {4, 8, 1}, {0, 2, 0}} {
		if got := FairShare(c.n, c.live); got != c.want {
			t.Errorf("FairShare(%d, %d) = %d, want %d", c.n, c.live, got, c.want)
		}
	}
}

func owners(n int, f func(p int) string) []string {
	o := make([]string, n)
	for p := range o {
		o[p] = f(p)
	}
	return o
}

func TestPlanOwnership(t *testing.T) {
	cases := []struct {
		name                 string
		self                 string
		live                 []string
		owners               []string
		keep, claim, release int // counts
	}{
		{"alone on an empty table claims all", "a", nil, owners(8, func(int) string { return "" }), 0, 8, 0},
		{"two on an empty table claim half each", "a", []string{"a", "b"}, owners(8, func(int) string { return "" }), 0, 4, 0},
		{"a newcomer finds nothing free", "c", []string{"a", "b", "c"}, owners(8, func(p int) string { return "ab"[p%2 : p%2+1] }), 0, 0, 0},
		{"an owner beyond its share releases", "a", []string{"a", "b", "c"}, owners(8, func(p int) string { return "ab"[p%2 : p%2+1] }), 3, 0, 1},
		{"a dead owner's partitions are free", "a", []string{"a"}, owners(8, func(p int) string { return "ab"[p%2 : p%2+1] }), 4, 4, 0},
		{"an expired owner's partitions are free", "b", []string{"a", "b"}, owners(8, func(p int) string { return []string{"a", ""}[p%2] }), 0, 4, 0},
		{"within the share keeps all", "a", []string{"a", "b"}, owners(8, func(p int) string { return "ab"[p%2 : p%2+1] }), 4, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plan := PlanOwnership(c.self, c.live, c.owners)
			if len(plan.Keep) != c.keep || len(plan.Claim) != c.claim || len(plan.Release) != c.release {
				t.Fatalf("plan %+v: want keep %d, claim %d, release %d", plan, c.keep, c.claim, c.release)
			}
			for _, p := range plan.Keep {
				if c.owners[p] != c.self {
					t.Errorf("keeps %d owned by %q", p, c.owners[p])
				}
			}
			for _, p := range plan.Claim {
				if o := c.owners[p]; o == c.self || o != "" && slices.Contains(c.live, o) {
					t.Errorf("claims %d owned by live %q", p, o)
				}
			}
		})
	}
}

// TestPlanOwnershipConverges runs heartbeats of replicas joining and
// leaving over one table: every partition ends owned by a live replica and
// no replica owns more than its fair share.
func TestPlanOwnershipConverges(t *testing.T) {
	const n = 32
	table := make([]string, n)
	beat := func(live []string) {
		for round := 0; round < 4; round++ {
			for _, r := range live {
				plan := PlanOwnership(r, live, table)
				for _, p := range plan.Release {
					table[p] = ""
				}
				for _, p := range plan.Claim {
					table[p] = r
				}
			}
		}
	}
	check := func(live []string) {
		t.Helper()
		count := map[string]int{}
		for p, o := range table {
			if !slices.Contains(live, o) {
				t.Fatalf("live %v: partition %d owned by %q", live, p, o)
			}
			count[o]++
		}
		for r, c := range count {
			if c > FairShare(n, len(live)) {
				t.Fatalf("live %v: %s owns %d", live, r, c)
			}
		}
	}
	for _, live := range [][]string{{"a"}, {"a", "b"}, {"a", "b", "c"}, {"a", "c"}, {"c"}, {"c", "d", "e", "f", "g", "h", "i", "j"}} {
		beat(live)
		check(live)
	}
}
