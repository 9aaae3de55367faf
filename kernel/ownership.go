package kernel

import (
	"hash/fnv"
	"slices"
	"strconv"
)

// Replica ownership is a throughput device, never a guard: the ledger's
// correctness rests on each append's expected last subject sequence, so two
// replicas that both believe they own a partition cost conflicts, never a
// wrong balance (docs/replicas.md). These are its two rules.

// Partition is the partition of n that a tenant's requests belong to.
// Every request of a tenant (its agents' proposals and compile requests,
// its operators' verbs) lands in one partition, so one replica keeps the
// tenant's warm state and groups its appends.
func Partition(tenant string, n int) int {
	if n <= 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(tenant))
	return int(h.Sum32() % uint32(n))
}

// FairShare is how many of n partitions one of live replicas may own: the
// ceiling of n/live, so that the shares always cover every partition.
func FairShare(n, live int) int {
	if live < 1 {
		live = 1
	}
	return (n + live - 1) / live
}

// OwnershipPlan is what a replica does on one heartbeat.
type OwnershipPlan struct {
	Keep    []int // owned and within the share: renew
	Claim   []int // free (no live owner): take
	Release []int // owned beyond the share: give back, so a new replica gets its share
}

// PlanOwnership decides self's heartbeat. live are the replicas whose
// membership is current (self among them or not: self is added); owners[p]
// is partition p's current owner ("" when none or expired). A partition
// whose owner is not live is free. Self keeps what it owns up to its fair
// share and claims free partitions up to it, preferring those it ranks
// highest (rendezvous hashing, so replicas claiming at once mostly want
// different partitions and a replica that comes back wants the ones it had);
// beyond its share it releases those it ranks lowest.
func PlanOwnership(self string, live []string, owners []string) OwnershipPlan {
	if !slices.Contains(live, self) {
		live = append(slices.Clone(live), self)
	}
	share := FairShare(len(owners), len(live))
	var mine, free []int
	for p, o := range owners {
		switch {
		case o == self:
			mine = append(mine, p)
		case o == "" || !slices.Contains(live, o):
			free = append(free, p)
		}
	}
	byRank := func(ps []int) {
		slices.SortStableFunc(ps, func(a, b int) int {
			ra, rb := rank(self, a), rank(self, b)
			switch {
			case ra > rb:
				return -1
			case ra < rb:
				return 1
			}
			return a - b
		})
	}
	byRank(mine)
	byRank(free)
	var plan OwnershipPlan
	if len(mine) > share {
		plan.Keep, plan.Release = mine[:share], mine[share:]
	} else {
		plan.Keep = mine
	}
	if room := share - len(plan.Keep); room > 0 {
		plan.Claim = free[:min(room, len(free))]
	}
	slices.Sort(plan.Keep)
	slices.Sort(plan.Claim)
	slices.Sort(plan.Release)
	return plan
}

// rank is replica's rendezvous weight for partition p.
func rank(replica string, p int) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(replica))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(strconv.Itoa(p)))
	return h.Sum32()
}
