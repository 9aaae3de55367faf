package sim

import (
	"sync"
	"time"
)

// Clock is the simulated clock every replica reads: it moves only when the
// driver advances it.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// Epoch is the time a simulation starts at.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// NewClock returns a clock at Epoch.
func NewClock() *Clock { return &Clock{t: Epoch} }

// Now implements aggregates.Clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
