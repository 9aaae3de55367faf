package gateway

import (
	"fmt"
	"sync"

	"github.com/contextos/ledger/kernel"
)

// storeSpace is the runtime's last measurement of how many bytes its store
// may still grow by (SetStoreSpace).
type storeSpace struct {
	mu    sync.Mutex
	known bool
	free  uint64
	err   error
}

// SetStoreSpace reports how many bytes the store may still grow by (the
// least of its volume's free space and what the streams' and account's
// limits leave), or why it could not be measured: then the last measurement
// stands (with none yet, nothing is refused for want of space).
func (g *Gateway) SetStoreSpace(free uint64, err error) {
	g.space.mu.Lock()
	defer g.space.mu.Unlock()
	g.space.err = err
	if err == nil {
		g.space.known, g.space.free = true, free
	}
}

// StoreSpace returns the last measured free bytes of the store, whether
// there is one, and the last measurement's error.
func (g *Gateway) StoreSpace() (free uint64, known bool, err error) {
	g.space.mu.Lock()
	defer g.space.mu.Unlock()
	return g.space.free, g.space.known, g.space.err
}

// spaceRefusal is why a new proposal is refused for want of store space
// (kernel.CheckStoreSpace), or nil.
func (g *Gateway) spaceRefusal() *kernel.Refusal {
	free, known, _ := g.StoreSpace()
	if !known {
		return nil
	}
	return kernel.CheckStoreSpace(free, uint64(g.cfg.Runtime.MinFreeBytes))
}

// StoreSpaceErr is why the runtime takes no new proposal for want of store
// space, or nil: /readyz reports it.
func (g *Gateway) StoreSpaceErr() error {
	if r := g.spaceRefusal(); r != nil {
		return fmt.Errorf("%s", r.Reason)
	}
	return nil
}
