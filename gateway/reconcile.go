package gateway

import (
	"context"
	"sync"
	"time"

	"github.com/contextos/ledger/wire"
	"github.com/nats-io/nats.go"
)

// inflight tracks the attempts this process is dispatching, which its own
// reconciler must leave alone.
type inflight struct{ m sync.Map }

func (f *inflight) add(id string)      { f.m.Store(id, struct{}{}) }
func (f *inflight) done(id string)     { f.m.Delete(id) }
func (f *inflight) has(id string) bool { _, ok := f.m.Load(id); return ok }

// sightings remembers when this replica first saw each attempt it
// reconciles, on its own clock: the grace period of an attempt is measured
// from there, never from a timestamp another replica wrote (its clock may
// be skewed, or the attempt may be older than the crash that stranded it).
// It holds only attempts still unresolved: each sweep drops the others.
type sightings struct {
	mu sync.Mutex
	at map[string]time.Time
}

// since returns how long ago the attempt was first seen, recording now as
// its first sighting if it had none.
func (s *sightings) since(id string, now time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.at == nil {
		s.at = map[string]time.Time{}
	}
	first, ok := s.at[id]
	if !ok {
		s.at[id] = now
		return 0
	}
	return now.Sub(first)
}

func (s *sightings) forget(id string) {
	s.mu.Lock()
	delete(s.at, id)
	s.mu.Unlock()
}

// keep drops every sighting but those of live.
func (s *sightings) keep(live map[string]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.at {
		if !live[id] {
			delete(s.at, id)
		}
	}
}

// Start pins every guarantee, loads the index and starts the background
// reconciler. It returns once the gateway can serve. The kill switch needs
// no following: every reserve decision reads it, guarded like the subjects
// it appends to.
func (g *Gateway) Start(ctx context.Context, nc *nats.Conn) error {
	if err := g.PinAll(ctx); err != nil {
		return err
	}
	if err := g.index.catchUp(ctx, g.store); err != nil {
		return err
	}
	if nc != nil {
		if err := g.Serve(ctx, nc); err != nil {
			return err
		}
	}
	g.flushed = make(chan struct{})
	go g.flushRefusals(ctx)
	if iv := g.cfg.Runtime.ReconcileInterval.Duration; iv > 0 {
		go g.reconcileLoop(ctx, iv)
	}
	return nil
}

func (g *Gateway) reconcileLoop(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			g.reconcileObserved(ctx)
		}
	}
}

// ReconcileOnce makes one pass over every unresolved operation of the
// tenants this replica serves: started attempts are queried by their
// idempotency key and a definitive answer settles them; attempts reserved
// but never started by an executor that is gone (older than the grace
// period, not in flight here) are closed, which also fences that executor.
// A tenant another replica owns is its owner's to reconcile: only the owner
// knows which of its attempts are in flight, and two replicas would ask the
// provider twice.
func (g *Gateway) ReconcileOnce(ctx context.Context) []wire.SettleRow {
	if err := g.index.catchUp(ctx, g.store); err != nil {
		g.log.Warn("reconciler could not read the ledger", "err", err)
		return nil
	}
	var rows []wire.SettleRow
	live := map[string]bool{}
	for _, oe := range g.index.unresolved() {
		if !g.Serves(oe.tenant) {
			continue
		}
		a, _ := oe.op.Current()
		live[a.AttemptID] = true
		row := g.reconcileOne(ctx, oe.tenant, a.AttemptID, "reconciler", true)
		if row.Code != wire.CodeDispatchActive {
			rows = append(rows, row)
		}
	}
	g.seen.keep(live)
	return rows
}
