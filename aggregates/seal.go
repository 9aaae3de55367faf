package aggregates

import (
	"crypto/rand"
	"io"
	"sync"
	"time"

	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
	"github.com/oklog/ulid/v2"
)

// Clock gives the shell's time; the kernel never reads one.
type Clock interface{ Now() time.Time }

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns the current time.
func (SystemClock) Now() time.Time { return time.Now() }

// IDs makes ULIDs from a clock and an entropy source. It is safe for
// concurrent use and monotonic within a millisecond.
type IDs struct {
	mu      sync.Mutex
	clock   Clock
	entropy *ulid.MonotonicEntropy
}

// NewIDs returns an id source; entropy nil means crypto/rand.
func NewIDs(clock Clock, entropy io.Reader) *IDs {
	if entropy == nil {
		entropy = rand.Reader
	}
	return &IDs{clock: clock, entropy: ulid.Monotonic(entropy, 0)}
}

// New returns a new ULID string.
func (g *IDs) New() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return ulid.MustNew(ulid.Timestamp(g.clock.Now()), g.entropy).String()
}

// Sealer turns kernel events into signed envelopes: it adds an event id,
// the tenant, the time and the runtime's signature. A reservation is thus
// signed before it is appended, and before any provider call.
type Sealer struct {
	Signer codec.Signer
	Clock  Clock
	IDs    *IDs
}

// Seal signs evs for tenant, in order, under one signature
// (codec.SealAll): they are the events of one decision, appended together.
// A governed proposal's reserve is six events and one signature, where
// signing each was the largest share of the engine's own CPU.
func (s *Sealer) Seal(tenant string, evs []kernel.Event) ([]codec.Envelope, error) {
	now := codec.FormatTime(s.Clock.Now())
	drafts := make([]codec.Draft, len(evs))
	for i, ev := range evs {
		drafts[i] = codec.Draft{Type: ev.EventType(), V: kernel.EventVersion, EventID: s.IDs.New(), Tenant: tenant, Time: now, Body: ev}
	}
	return s.Signer.SealAll(drafts)
}

// SealBySubject is Seal of a decision's events held by subject: the result
// has evs' shape.
func (s *Sealer) SealBySubject(tenant string, evs [][]kernel.Event) ([][]codec.Envelope, error) {
	var all []kernel.Event
	for _, l := range evs {
		all = append(all, l...)
	}
	sealed, err := s.Seal(tenant, all)
	if err != nil {
		return nil, err
	}
	out := make([][]codec.Envelope, len(evs))
	for i, l := range evs {
		if len(l) > 0 {
			out[i], sealed = sealed[:len(l):len(l)], sealed[len(l):]
		}
	}
	return out, nil
}
