package sim

import (
	"container/heap"
	"fmt"
	"math/rand/v2"

	"github.com/contextos/ledger/kernel"
)

// The scaling model: how governed proposals a second grow with replicas,
// in virtual time, from a cost model of measured CPU (docs/replicas.md,
// "Scaling model"). It is not the correctness simulation above: it runs no
// gateway, only the costs and the queues a proposal passes through, so that
// what two shared cores cannot show (replicas on machines of their own) can
// be reasoned about. Ownership uses the kernel's own rules
// (kernel.Partition, kernel.PlanOwnership).

// CostModel is what one proposal costs, in milliseconds of one core.
type CostModel struct {
	Proposal float64 // a replica's CPU a proposal (admission, decision, sealing, its share of the read model), split over its two steps
	Forward  float64 // a non-owner's CPU to forward one request
	Batch    float64 // the stream leader's CPU an atomic batch, whatever its size
	Event    float64 // the leader's CPU each transaction in a batch adds
	Follower float64 // each follower's CPU an atomic batch
	RTT      float64 // one network round trip
	// Audit is the leader's CPU each proposal's audit records add (appended
	// by one replica a tenant with ownership, raced by all without).
	Audit float64
}

// MeasuredCosts are the figures of docs/performance.md ("Where a lone
// agent's proposal spends its CPU"): the runtime's own code about 2 ms a
// proposal, an atomic batch 1.5-4.5 ms of the server's CPU (3 taken), a
// single append 0.25 ms (a transaction's share of a batch taken as that),
// the audit's records about a tenth of a proposal's server CPU.
var MeasuredCosts = CostModel{Proposal: 2.0, Forward: 0.1, Batch: 3.0, Event: 0.25, Follower: 1.0, RTT: 0.2, Audit: 0.3}

// ScaleOptions shape one run of the model.
type ScaleOptions struct {
	Replicas, Tenants, Agents int
	Owning                    bool
	// Servers is the JetStream cluster's size (0: 3). A stream has
	// min(3, Servers) copies: its leader and its followers, each on a
	// server of its own, each server one core.
	Servers int
	// Streams splits the tenants' events over this many streams by their
	// partition (0: one, the design as built); stream k is led by server
	// k mod Servers. More than one is a what-if, not built.
	Streams int
	Millis  float64 // virtual time simulated
	Seed    uint64
}

// ScaleResult is one run's outcome.
type ScaleResult struct {
	Proposals, Conflicts int
	PerSecond            float64
}

type scaleEvent struct {
	at float64
	fn func()
	n  int // insertion order: ties run in it
}

type scaleQueue []scaleEvent

func (q scaleQueue) Len() int { return len(q) }
func (q scaleQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].n < q[j].n
}
func (q scaleQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *scaleQueue) Push(x any)   { *q = append(*q, x.(scaleEvent)) }
func (q *scaleQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// core is one CPU serving work in arrival order.
type core struct{ free float64 }

// run returns when work of cost ms, arriving at now, is done.
func (c *core) run(now, ms float64) float64 {
	c.free = max(c.free, now) + ms
	return c.free
}

type scaleReplica struct {
	cpu   core
	lanes []scaleLane // a committer per stream: an atomic batch is one stream's
}

type scaleLane struct {
	inFlight bool
	pending  []scaleTx
}

// scaleTx is a transaction waiting in a lane: its run, and what follows
// its acknowledgement.
type scaleTx struct {
	run  int
	then func(at float64, conflict bool)
}

type scaleStream struct {
	leader    int
	followers []int
}

// Scale runs the model: Agents closed-loop agents, agent a of tenant
// a%Tenants with a run of its own, each proposal a decision, an atomic
// batch, a second step and a second batch, each batch through its
// replica's committer of the tenant's stream (one batch in flight, every
// waiting transaction in the next) to that stream's leader, acknowledged
// once a quorum of its copies has it (the leader alone at one copy). Without
// ownership a proposal lands on a random replica, and a replica whose warm
// copy of the run is behind (another replica wrote it last) has its
// transaction refused: it reloads, decides again and waits for the next
// batch. With it the tenant's owner handles it, forwarded by whichever
// replica received it.
func Scale(o ScaleOptions, c CostModel) ScaleResult {
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0x5ca1e))
	var q scaleQueue
	n := 0
	at := func(t float64, fn func()) {
		n++
		heap.Push(&q, scaleEvent{at: t, fn: fn, n: n})
	}
	servers, streams := o.Servers, max(o.Streams, 1)
	if servers == 0 {
		servers = 3
	}
	cpus := make([]core, servers)
	ss := make([]scaleStream, streams)
	for k := range ss {
		ss[k].leader = k % servers
		for f := 1; f < min(3, servers); f++ {
			ss[k].followers = append(ss[k].followers, (k+f)%servers)
		}
	}
	tenantOf := func(a int) string { return fmt.Sprint("t", a%o.Tenants) }
	streamOf := func(a int) int { return kernel.Partition(tenantOf(a), 32) % streams }
	replicas := make([]*scaleReplica, o.Replicas)
	for i := range replicas {
		replicas[i] = &scaleReplica{lanes: make([]scaleLane, streams)}
	}
	owner := map[int]int{} // partition -> replica
	if o.Owning {
		const parts = 32
		ids := make([]string, o.Replicas)
		for i := range ids {
			ids[i] = fmt.Sprint("r", i)
		}
		table := make([]string, parts)
		for range 4 {
			for _, id := range ids {
				plan := kernel.PlanOwnership(id, ids, table)
				for _, p := range plan.Release {
					table[p] = ""
				}
				for _, p := range plan.Claim {
					table[p] = id
				}
			}
		}
		for p, id := range table {
			var r int
			_, _ = fmt.Sscanf(id, "r%d", &r)
			owner[p] = r
		}
	}
	lastWriter := make([]int, o.Agents) // each run's last writing replica, -1: none
	for i := range lastWriter {
		lastWriter[i] = -1
	}
	var res ScaleResult
	var commit func(r, k int, now float64)
	commit = func(r, k int, now float64) {
		lane := &replicas[r].lanes[k]
		if lane.inFlight || len(lane.pending) == 0 {
			return
		}
		txs := lane.pending
		lane.pending, lane.inFlight = nil, true
		audit := c.Audit * float64(len(txs)) / 2
		if !o.Owning {
			audit *= float64(o.Replicas) // every replica's projector appends the same records
		}
		st := ss[k]
		done := cpus[st.leader].run(now+c.RTT/2, c.Batch+c.Event*float64(len(txs))+audit)
		quorum := done
		for i, f := range st.followers {
			if t := cpus[f].run(done, c.Follower); i == 0 || t < quorum {
				quorum = t
			}
		}
		ack := quorum + c.RTT/2
		at(ack, func() {
			lane.inFlight = false
			for _, tx := range txs {
				conflict := lastWriter[tx.run] >= 0 && lastWriter[tx.run] != r
				lastWriter[tx.run] = r
				tx.then(ack, conflict)
			}
			commit(r, k, ack)
		})
	}
	// append queues a transaction of run on replica r; then runs after its
	// batch is acknowledged, after a decision again when it conflicted.
	var appendTx func(r, run int, now float64, then func(at float64))
	appendTx = func(r, run int, now float64, then func(at float64)) {
		rep, k := replicas[r], streamOf(run)
		lane := &rep.lanes[k]
		lane.pending = append(lane.pending, scaleTx{run: run, then: func(ack float64, conflict bool) {
			if conflict {
				res.Conflicts++
				appendTx(r, run, rep.cpu.run(ack, c.Proposal/2), then)
				return
			}
			then(ack)
		}})
		commit(r, k, now)
	}
	var propose func(a int, now float64)
	propose = func(a int, now float64) {
		if now > o.Millis {
			return
		}
		r := rng.IntN(o.Replicas)
		t := now + c.RTT/2
		if o.Owning {
			if own := owner[kernel.Partition(tenantOf(a), 32)]; own != r {
				t = replicas[r].cpu.run(t, c.Forward) + c.RTT/2
				r = own
			}
		}
		rep := replicas[r]
		appendTx(r, a, rep.cpu.run(t, c.Proposal/2), func(ack float64) {
			appendTx(r, a, rep.cpu.run(ack, c.Proposal/2), func(ack float64) {
				end := ack + c.RTT/2
				if end <= o.Millis {
					res.Proposals++
				}
				at(end, func() { propose(a, end) })
			})
		})
	}
	for a := 0; a < o.Agents; a++ {
		at(0, func() { propose(a, 0) })
	}
	for q.Len() > 0 {
		e := heap.Pop(&q).(scaleEvent)
		e.fn()
	}
	res.PerSecond = float64(res.Proposals) / (o.Millis / 1000)
	return res
}
