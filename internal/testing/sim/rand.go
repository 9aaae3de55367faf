package sim

import (
	"math/rand/v2"
	"sync"
)

// Rand is the simulation's one source of choices. It is locked because the
// engine calls the store from its committer goroutine; the driver waits
// for every call, so the order of draws is still the driver's.
type Rand struct {
	mu sync.Mutex
	r  *rand.Rand
}

// NewRand returns the source of seed.
func NewRand(seed uint64) *Rand {
	return &Rand{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// Chance reports true with probability p.
func (r *Rand) Chance(p float64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.r.Float64() < p
}

// IntN returns a number in [0, n).
func (r *Rand) IntN(n int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.r.IntN(n)
}

// Read fills p (the entropy of event and attempt ids).
func (r *Rand) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range p {
		p[i] = byte(r.r.Uint32())
	}
	return len(p), nil
}
