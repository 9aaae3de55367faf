package gateway

import (
	"context"

	"github.com/nats-io/nats.go"
)

// lane is one bounded share of the request path: a fixed set of workers fed
// by a bounded queue. Each tenant has one lane for its agents' proposals
// and another for its operators' verbs, so no tenant can occupy another's
// workers, nor its own agents its operators'. A message that finds its
// lane's queue full is refused at once (overloaded) rather than waited on:
// a waiting subscription callback would stall every message behind it and
// let the client library drop them as a slow consumer, with no reply.
type lane struct {
	queue chan *nats.Msg
}

// newLane starts workers goroutines that call handle for each queued
// message until ctx is done.
func newLane(ctx context.Context, workers, queue int, handle func(*nats.Msg)) *lane {
	l := &lane{queue: make(chan *nats.Msg, queue)}
	for i := 0; i < workers; i++ {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case m := <-l.queue:
					handle(m)
				}
			}
		}()
	}
	return l
}

// offer queues m, or reports false when the lane is full.
func (l *lane) offer(m *nats.Msg) bool {
	select {
	case l.queue <- m:
		return true
	default:
		return false
	}
}
