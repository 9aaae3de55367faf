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

// Seal signs evs for tenant, in order.
func (s *Sealer) Seal(tenant string, evs []kernel.Event) ([]codec.Envelope, error) {
	out := make([]codec.Envelope, len(evs))
	now := codec.FormatTime(s.Clock.Now())
	for i, ev := range evs {
		env, err := s.Signer.Seal(ev.EventType(), kernel.EventVersion, s.IDs.New(), tenant, now, ev)
		if err != nil {
			return nil, err
		}
		out[i] = env
	}
	return out, nil
}
