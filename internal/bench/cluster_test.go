package bench

import (
	"context"
	"testing"
	"time"

	"github.com/contextos/ledger/kernel"
)

// testCluster starts a cluster shaped by o, stopped and removed when the
// test ends; a short run skips the test.
func testCluster(t *testing.T, o ClusterOptions) *Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a three-node cluster")
	}
	dir, err := TempDir()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Cleanup(dir) })
	c, err := StartClusterWith(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestClusterProposals: on the 3-node cluster with two replicas, proposals
// from agents spread over the servers are applied, and both replicas serve
// some of them (one queue group), so the scale-out point measures two
// runtimes, not one.
func TestClusterProposals(t *testing.T) {
	c := testCluster(t, ClusterOptions{Replicas: 2, Agents: 4})
	op := c.Gateway().Proposals(Uniform("cluster-test"))
	for i := 0; i < 40; i++ {
		if err := op(context.Background(), i%4, i); err != nil {
			t.Fatalf("proposal %d: %v", i, err)
		}
	}
	for r, rt := range c.RTs {
		if s := rt.Gateway.Engine().Stats(); s.Batches == 0 {
			t.Fatalf("replica %d appended nothing: %+v", r+1, s)
		}
	}
	l, err := c.Gateway().Lag(context.Background())
	if err != nil || l.Last == 0 {
		t.Fatalf("lag %+v, %v", l, err)
	}
}

// TestSpreadTenants: one tenant in each partition, Tenant among them.
func TestSpreadTenants(t *testing.T) {
	const n = 32
	ts := SpreadTenants(n)
	seen := map[string]bool{}
	for k, tenant := range ts {
		if p := kernel.Partition(tenant, n); p != k || seen[tenant] {
			t.Fatalf("tenant %d %q: partition %d, seen before %v", k, tenant, p, seen[tenant])
		}
		seen[tenant] = true
	}
	if !seen[Tenant] {
		t.Fatalf("%s is not among %v", Tenant, ts)
	}
}

// TestClusterSpreadOwning: with the agents spread over a tenant per
// partition and two owning replicas, each replica decides the proposals of
// the tenants it owns: both append, and no proposal conflicts.
func TestClusterSpreadOwning(t *testing.T) {
	c := testCluster(t, ClusterOptions{Replicas: 2, Agents: 64, Owning: true, Spread: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.WaitOwned(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	op := c.Gateway().Proposals(Uniform("spread-test"))
	for i := 0; i < 64; i++ {
		if err := op(ctx, i, i); err != nil {
			t.Fatalf("proposal %d: %v", i, err)
		}
	}
	for r, rt := range c.RTs {
		if s := rt.Gateway.Engine().Stats(); s.Batches == 0 {
			t.Fatalf("replica %d appended nothing: %+v", r+1, s)
		}
	}
	if n := c.Conflicts(); n != 0 {
		t.Fatalf("%d conflicts between owning replicas", n)
	}
}
