package gateway

import (
	"context"
	"sync/atomic"
)

// lane is one bounded share of the request path: a fixed set of workers fed
// by a bounded queue. Each tenant has one lane for its agents' proposals
// and another for its operators' verbs, so no tenant can occupy another's
// workers, nor its own agents its operators'. A message that finds its
// lane's queue full is refused at once (overloaded) rather than waited on:
// a waiting subscription callback would stall every message behind it and
// let the client library drop them as a slow consumer, with no reply.
type lane struct {
	queue chan func()
	open  atomic.Int64    // jobs queued or running
	done  <-chan struct{} // the workers' context's: no job runs after it
}

// tenantLane is one tenant's lane: the share its agents' proposals take
// and the share kept for its operators' verbs. Both are fed only by the
// admission path (admission.go), whatever the request's door.
type tenantLane struct {
	agents, operators *lane
}

// share is the operators' share for an operator verb, else the agents'.
func (t *tenantLane) share(operator bool) *lane {
	if operator {
		return t.operators
	}
	return t.agents
}

// newLane starts workers goroutines that run each queued job until ctx is
// done.
func newLane(ctx context.Context, workers, queue int) *lane {
	l := &lane{queue: make(chan func(), queue), done: ctx.Done()}
	for i := 0; i < workers; i++ {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case job := <-l.queue:
					job()
					l.open.Add(-1)
				}
			}
		}()
	}
	return l
}

// offer queues job, or reports false when the lane is full.
func (l *lane) offer(job func()) bool {
	l.open.Add(1)
	select {
	case l.queue <- job:
		return true
	default:
		l.open.Add(-1)
		return false
	}
}

// idle reports whether no job is queued or running, or none will run again.
func (l *lane) idle() bool {
	select {
	case <-l.done:
		return true
	default:
		return l.open.Load() == 0
	}
}
