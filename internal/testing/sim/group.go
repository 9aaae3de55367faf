package sim

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/contextos/ledger/aggregates"
	"github.com/contextos/ledger/wire"
)

// scheduler is one replica's aggregates.Pacer: while the driver runs a
// group of concurrent proposals on the replica (group), it lets exactly one
// of their goroutines run at a time, the one the seed chose, and holds the
// engine's group commit until every live proposal waits on the engine;
// then the whole group goes out as one append. Outside a group it holds
// nothing.
type scheduler struct {
	s   *Sim
	eng *aggregates.Engine

	mu     sync.Mutex
	cond   *sync.Cond
	active bool
	run    int          // the goroutine allowed to run; -1 none
	ready  map[int]bool // goroutines woken by the engine, waiting for their turn
	wakes  int          // outcomes handed out by the committer, not yet Woken
	idle   bool         // the committer waits with nothing in flight
	held   int          // the sealed transactions it holds
	let    bool         // let the held group go at the next Send
	wake   func()       // the committer's wake-up, given by the last held Send
	live   int          // goroutines not yet returned
	groups []int        // the size of every group let go
}

type gid struct{}

func newScheduler(s *Sim, eng *aggregates.Engine) *scheduler {
	d := &scheduler{s: s, eng: eng, run: -1, ready: map[int]bool{}}
	d.cond = sync.NewCond(&d.mu)
	return d
}

var _ aggregates.Pacer = (*scheduler)(nil)

func idOf(ctx context.Context) (int, bool) {
	id, ok := ctx.Value(gid{}).(int)
	return id, ok
}

// Submitting implements aggregates.Pacer.
func (d *scheduler) Submitting(ctx context.Context) {
	if _, ok := idOf(ctx); ok {
		d.mu.Lock()
		d.idle = false // wait for the committer to take this one up
		d.mu.Unlock()
	}
}

// Parked implements aggregates.Pacer.
func (d *scheduler) Parked(ctx context.Context) {
	if _, ok := idOf(ctx); ok {
		d.mu.Lock()
		d.run = -1
		d.cond.Broadcast()
		d.mu.Unlock()
	}
}

// Woken implements aggregates.Pacer: the goroutine waits for its turn.
func (d *scheduler) Woken(ctx context.Context) {
	id, ok := idOf(ctx)
	if !ok {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.wakes--
	d.ready[id] = true
	d.cond.Broadcast()
	for d.run != id {
		d.cond.Wait()
	}
}

// Finished implements aggregates.Pacer.
func (d *scheduler) Finished(ctx context.Context) {
	if _, ok := idOf(ctx); ok {
		d.mu.Lock()
		d.wakes++
		d.mu.Unlock()
	}
}

// Idle implements aggregates.Pacer.
func (d *scheduler) Idle(held int) {
	d.mu.Lock()
	d.idle, d.held = true, held
	d.cond.Broadcast()
	d.mu.Unlock()
}

// Send implements aggregates.Pacer: outside a group a ready group goes at
// once (never after a wall-clock linger); inside one it is held until the
// driver lets it go.
func (d *scheduler) Send(n int, _ time.Time, wake func()) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.active {
		return true
	}
	if d.let {
		d.let = false
		d.groups = append(d.groups, n)
		return true
	}
	d.wake = wake
	return false
}

// Seal implements aggregates.Pacer: on the committer, so ids are drawn in
// decision order.
func (d *scheduler) Seal(sign func()) { sign() }

// group runs proposals ps on replica r at once: each on its own goroutine,
// one at a time in an order drawn from the seed, their engine transactions
// sealed into shared group commits. The history records each over the
// whole group's interval.
func (s *Sim) group(r *replica, ps []*proposal) {
	d := r.sched
	// The committer ends what the last call left; it holds nothing, so it
	// stops within its own steps, and a committer that does not is a
	// defect of the engine the simulation must report, not wait out.
	for deadline := time.Now().Add(10 * time.Second); d.eng.Running(); time.Sleep(10 * time.Microsecond) {
		if time.Now().After(deadline) {
			panic(fmt.Sprintf("%s: the committer did not stop within 10s of its last group", r.name))
		}
	}
	call := s.now()
	for _, p := range ps {
		s.tracef("%s: group propose %s by %s: %s %d", r.name, p.key, p.principal, p.resource, p.amount)
	}
	replies := make([]wire.Reply, len(ps))
	s.depth += 2 // no crash and no nested requests inside a group
	d.mu.Lock()
	d.active, d.idle, d.held, d.let, d.groups, d.live = true, true, 0, false, nil, len(ps)
	for i := range ps {
		d.ready[i] = true
	}
	d.mu.Unlock()
	for i, p := range ps {
		ctx := context.WithValue(s.ctx, gid{}, i)
		go func() {
			d.mu.Lock()
			for d.run != i {
				d.cond.Wait()
			}
			d.mu.Unlock()
			replies[i] = r.g.Propose(ctx, Tenant, p.principal, p.body)
			d.mu.Lock()
			d.live--
			d.run = -1
			d.cond.Broadcast()
			d.mu.Unlock()
		}()
	}
	d.mu.Lock()
	for d.live > 0 {
		// Choose only when nothing moves: no goroutine runs, every
		// outcome handed out was taken, the committer waits.
		if d.run != -1 || d.wakes > 0 || !d.idle {
			d.cond.Wait()
			continue
		}
		if len(d.ready) > 0 {
			ids := make([]int, 0, len(d.ready))
			for i := range ps {
				if d.ready[i] {
					ids = append(ids, i)
				}
			}
			next := ids[s.rnd.IntN(len(ids))]
			delete(d.ready, next)
			d.run = next
			d.cond.Broadcast()
			continue
		}
		if d.held == 0 {
			d.mu.Unlock()
			panic("sim: a group waits on an engine that holds nothing")
		}
		d.let, d.idle = true, false
		s.tracef("%s: group commit of %d transactions", r.name, d.held)
		wake := d.wake
		d.mu.Unlock()
		wake()
		d.mu.Lock()
	}
	d.active = false
	d.mu.Unlock()
	s.depth -= 2
	ret := s.now()
	for i, p := range ps {
		s.reply(r, p, replies[i], call, ret, false)
	}
}
