package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextos/ledger/gateway"
	"github.com/contextos/ledger/wire"
	"github.com/nats-io/nats.go"
)

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

func ownership(t *testing.T, c *Cluster, r int) gateway.OwnershipStats {
	t.Helper()
	s, ok := c.RTs[r].Gateway.Ownership()
	if !ok {
		t.Fatalf("replica %d: ownership off", r)
	}
	return s
}

// TestClusterOwnership: two replicas with nats.ownership on a 3-node R3
// cluster split the partitions; in a storm from every tenant's agents each
// tenant's requests are handled by one replica (the other forwards what it
// receives), with conflicts between replicas under 1% of the proposals;
// when one replica dies without handing over, the other owns every
// partition within the TTL and a heartbeat, and the proposals sent across
// the hand-over never take a resource beyond its ceiling.
func TestClusterOwnership(t *testing.T) {
	const agents, ttl, beat = 4, 2 * time.Second, 500 * time.Millisecond
	tenants := []string{Tenant, "acme", "globex", "initech", "umbrella", "hooli"}
	c := testCluster(t, ClusterOptions{Replicas: 2, Agents: agents, Owning: true, TTL: ttl, Heartbeat: beat, Tenants: tenants[1:]})
	conns := map[string][]*nats.Conn{Tenant: c.agents}
	for _, tn := range tenants[1:] {
		for a := 0; a < agents; a++ {
			nc, err := c.Connect(tn, a)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			conns[tn] = append(conns[tn], nc)
		}
	}
	parts := 32
	waitFor(t, 30*time.Second, "the two replicas split the partitions and see each other's", func() bool {
		a, b := ownership(t, c, 0), ownership(t, c, 1)
		return len(a.Owned)+len(b.Owned) == parts && len(a.Owned) <= parts/2 && len(b.Owned) <= parts/2 && a.Known == parts && b.Known == parts
	})

	before := [2]gateway.OwnershipStats{ownership(t, c, 0), ownership(t, c, 1)}
	conflicts := c.Conflicts()
	audited := func(r int, tn string) uint64 { return c.RTs[r].Service.Projectors[tn].Status().LastEventSeq }
	auditedBefore := map[string][2]uint64{}
	for _, tn := range tenants {
		auditedBefore[tn] = [2]uint64{audited(0, tn), audited(1, tn)}
	}
	const each = 15
	var wg sync.WaitGroup
	errs := make(chan error, len(tenants)*agents)
	for _, tn := range tenants {
		op := proposals(conns[tn], func(a int) string { return wire.ProposeSubject(tn, fmt.Sprintf("agent_%02d", a)) }, Uniform("own-"+tn))
		for w := 0; w < agents; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < each; i++ {
					if err := op(context.Background(), w, i); err != nil {
						errs <- fmt.Errorf("%s agent %d proposal %d: %w", tn, w, i, err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	after := [2]gateway.OwnershipStats{ownership(t, c, 0), ownership(t, c, 1)}
	total := len(tenants) * agents * each
	for _, tn := range tenants {
		h0, h1 := after[0].Handled[tn]-before[0].Handled[tn], after[1].Handled[tn]-before[1].Handled[tn]
		if h0+h1 != agents*each || h0 != 0 && h1 != 0 {
			t.Errorf("tenant %s: replica 1 handled %d, replica 2 %d of %d: want all on one", tn, h0, h1, agents*each)
		}
	}
	// The audit of a tenant is recorded by the replica that serves it; the
	// other does not race it for the same appends.
	for _, tn := range tenants {
		owner := 0
		if after[1].Handled[tn] > before[1].Handled[tn] {
			owner = 1
		}
		waitFor(t, 30*time.Second, tn+"'s audit recorded by its owner", func() bool { return audited(owner, tn) > auditedBefore[tn][owner] })
		if other := 1 - owner; audited(other, tn) != auditedBefore[tn][other] {
			t.Errorf("%s: the replica that does not serve it recorded its audit too (%d to %d)", tn, auditedBefore[tn][other], audited(other, tn))
		}
	}
	fwd := after[0].Forwarded + after[1].Forwarded - before[0].Forwarded - before[1].Forwarded
	if fwd == 0 {
		t.Errorf("no request was forwarded: the queue group should have given some to the replica that does not own them")
	}
	n := c.Conflicts() - conflicts
	t.Logf("%d proposals, %d forwarded, %d conflicts", total, fwd, n)
	if n*100 >= uint64(total) {
		t.Errorf("%d conflicts in %d proposals: 1%% or more", n, total)
	}

	// Replica 2 dies without handing over: its connection to the store
	// goes first, so it renews and releases nothing, then it stops serving.
	// Proposals of 40,000,000 against a ceiling of 100,000,000 (two fit)
	// go out meanwhile, each resent with its own operation key until it is
	// answered.
	var replies sync.Map // tenant -> *[]wire.Reply
	var noResponders, lost atomic.Int64
	var mu sync.Mutex
	send := func(tn string, a, i int) {
		body, _ := json.Marshal(map[string]any{"run_id": fmt.Sprintf("ceil-%s-%d", tn, a), "operation_key": fmt.Sprint("k", i), "capability_id": "adp_payments.issue_refund",
			"arguments": map[string]any{"order_id": "ceil-" + tn, "amount_minor": 40_000_000, "currency": "INR", "reference": fmt.Sprintf("ceil-%d-%d", a, i)}})
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
			msg, err := conns[tn][a].Request(wire.ProposeSubject(tn, fmt.Sprintf("agent_%02d", a)), body, 5*time.Second)
			if err != nil {
				// No responder (the server had nobody to deliver it to:
				// nothing happened) or a request lost while the replica
				// died: resent.
				if errors.Is(err, nats.ErrNoResponders) {
					noResponders.Add(1)
				} else {
					lost.Add(1)
				}
				continue
			}
			var r wire.Reply
			if err := json.Unmarshal(msg.Data, &r); err != nil || r.Status == wire.StatusUnknown {
				continue
			}
			v, _ := replies.LoadOrStore(tn, new([]wire.Reply))
			mu.Lock()
			*v.(*[]wire.Reply) = append(*v.(*[]wire.Reply), r)
			mu.Unlock()
			return
		}
		t.Errorf("%s agent %d proposal %d: no answer", tn, a, i)
	}
	for _, tn := range tenants {
		for a := 0; a < agents; a++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 2; i++ {
					send(tn, a, i)
				}
			}()
		}
	}
	dead := c.RTs[1]
	had := len(ownership(t, c, 1).Owned)
	crash := time.Now()
	dead.NC.Close()
	dead.Close()
	c.RTs = c.RTs[:1]
	bound := ttl + beat
	waitFor(t, bound+3*time.Second, "the survivor owns every partition", func() bool { return len(ownership(t, c, 0).Owned) == parts })
	took := time.Since(crash)
	t.Logf("the survivor took the dead replica's %d partitions %s after the crash (bound: TTL %s + heartbeat %s, plus the survivor's own heartbeat phase)", had, took.Round(time.Millisecond), ttl, beat)
	if took > bound+beat+time.Second {
		t.Errorf("hand-over took %s, beyond %s", took, bound+beat+time.Second)
	}
	wg.Wait()
	t.Logf("across the crash: %d requests answered no responders, %d lost (resent)", noResponders.Load(), lost.Load())
	for _, tn := range tenants {
		v, _ := replies.Load(tn)
		if v == nil {
			t.Fatalf("%s: no replies", tn)
		}
		applied := 0
		for _, r := range *v.(*[]wire.Reply) {
			if r.Status == wire.StatusApplied {
				applied++
			}
			if r.Limit != nil && r.Committed != nil && r.Held != nil && *r.Committed+*r.Held > *r.Limit {
				t.Errorf("%s: committed %d and held %d beyond the limit %d", tn, *r.Committed, *r.Held, *r.Limit)
			}
		}
		if applied > 2 {
			t.Errorf("%s: %d refunds of 40,000,000 applied under a ceiling of 100,000,000", tn, applied)
		}
	}
}
