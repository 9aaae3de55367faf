package projections

import (
	"strings"
	"sync"

	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/codec"
)

// feed hands a tenant's audit projector the tenant's events the read model
// has just folded, and wakes it. The model reads every event as it is
// stored; the projector, gathering for its linger after a wake, read the same
// events from the stream a second time (a Direct Get reply per event, whose
// headers the server builds anew), and its wake-up subscription was one more
// delivery of every event's payload. Together about a tenth of the
// runtime's CPU under proposals (docs/performance.md).
//
// What a feed holds was read from the stream by the model, in stream order,
// with nothing left out: it covers every sequence in [from, to] (none when
// from > to), and events are the tenant's among them, exactly what
// ReplayTenant returns for that range.
type feed struct {
	prefix string // the tenant's subjects begin with it
	max    int    // feedMax but in tests

	mu     sync.Mutex
	from   uint64
	to     uint64
	events []events.Stored
	wake   chan struct{}
}

// feedMax bounds the events a feed holds for a projector that does not take
// them (it is failing, or its appends are slow): past it the feed starts
// over and the projector reads what was dropped from the stream.
const feedMax = 4096

func newFeed(tenant string) *feed {
	return &feed{prefix: codec.TenantPrefix(tenant), max: feedMax, from: 1, wake: make(chan struct{}, 1)}
}

// owns reports whether subject is one of the feed's tenant's: the subjects
// ReplayTenant reads (the tenant's token and at least one more).
func (f *feed) owns(subject string) bool {
	return len(subject) > len(f.prefix) && strings.HasPrefix(subject, f.prefix)
}

// add records that the model folded every sequence in [from, to] and that
// evs, in order, are the tenant's among them. A range that does not follow
// the last one, or more events than f.max, starts the feed over; a range in
// which the model met more than f.max of the tenant's events (overflow) is
// covered by nothing, so the projector reads it from the stream.
func (f *feed) add(from, to uint64, evs []events.Stored, overflow bool) {
	if to < from {
		return
	}
	f.mu.Lock()
	if from != f.to+1 || len(f.events)+len(evs) > f.max {
		f.from, f.events = from, nil
	}
	if overflow {
		f.from, f.events = to+1, nil
	} else {
		f.events = append(f.events, evs...)
	}
	f.to = to
	f.mu.Unlock()
	if len(evs) > 0 {
		select {
		case f.wake <- struct{}{}:
		default:
		}
	}
}

// take returns the tenant's events from sequence next on and empties the
// feed. to is the last sequence the model has folded; ok is false when the
// feed does not cover next (it starts later, or it is behind next), and
// then the projector reads from the stream: a replay begun now reads every
// event up to to at least.
func (f *feed) take(next uint64) (evs []events.Stored, to uint64, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	evs, to, ok = f.events, f.to, f.from <= next && next <= f.to+1
	f.from, f.events = f.to+1, nil
	if !ok {
		return nil, to, false
	}
	for len(evs) > 0 && evs[0].Seq < next {
		evs = evs[1:]
	}
	return evs, to, true
}
