package bench

import (
	"context"
	"testing"
)

// TestClusterProposals: on the 3-node cluster with two replicas, proposals
// from agents spread over the servers are applied, and both replicas serve
// some of them (one queue group), so the scale-out point measures two
// runtimes, not one.
func TestClusterProposals(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node cluster")
	}
	dir, err := TempDir()
	if err != nil {
		t.Fatal(err)
	}
	defer Cleanup(dir)
	c, err := StartCluster(dir, 2, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
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
