package gateway

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
	"golang.org/x/time/rate"
)

// limiter holds each principal's request rate limit: one token bucket per
// configured agent or operator (an agent's proposals and an operator's
// verbs, whatever their door), and one per tenant shared by any other
// principal name
// (which the NATS permissions should never let through), so its memory is
// bounded by the configuration, not by what arrives.
type limiter struct {
	buckets map[string]*rate.Limiter // tenant/principal; tenant/ for the rest
}

func newLimiter(cfg *config.Config, l config.LimitsConfig) *limiter {
	x := &limiter{buckets: map[string]*rate.Limiter{}}
	for _, t := range cfg.Tenants {
		x.buckets[t.ID+"/"] = rate.NewLimiter(rate.Limit(l.ProposalsPerSecond), l.ProposalBurst)
		for _, p := range append(slices.Clone(t.Agents), t.Operators...) {
			x.buckets[t.ID+"/"+p.ID] = rate.NewLimiter(rate.Limit(l.ProposalsPerSecond), l.ProposalBurst)
		}
	}
	return x
}

// allow takes one token of the principal's bucket.
func (x *limiter) allow(tenant, principal string) bool {
	b := x.buckets[tenant+"/"+principal]
	if b == nil {
		b = x.buckets[tenant+"/"]
	}
	return b == nil || b.Allow()
}

// refusalSampler holds each tenant's kernel.RefusalTally: which refusals
// are recorded whole and which only counted into their window's aggregate
// is the kernel's rule; the sampler keeps the window's state and closes it
// on a timer. Its keys are mapped onto configured agents and capabilities,
// so its memory is bounded by the configuration, not by what arrives.
type refusalSampler struct {
	window       time.Duration
	known        map[string]bool // tenant/principal of configured agents
	capabilities map[string]bool // configured capabilities

	mu      sync.Mutex
	tallies map[string]*kernel.RefusalTally // by tenant
}

func newRefusalSampler(cfg *config.Config, window time.Duration) *refusalSampler {
	s := &refusalSampler{window: window, known: map[string]bool{}, capabilities: map[string]bool{}, tallies: map[string]*kernel.RefusalTally{}}
	for _, t := range cfg.Tenants {
		s.tallies[t.ID] = &kernel.RefusalTally{}
		for _, a := range t.Agents {
			s.known[t.ID+"/"+a.ID] = true
		}
	}
	for _, c := range cfg.Capabilities {
		s.capabilities[c.ID] = true
	}
	return s
}

// key is the tally key of a refusal, over configured names only.
func (s *refusalSampler) key(tenant, principal string, code wire.Code, capability string) kernel.RefusalKey {
	k := kernel.RefusalKey{Principal: principal, Code: code, CapabilityID: capability}
	if !s.known[tenant+"/"+principal] {
		k.Principal = ""
	}
	if !s.capabilities[capability] {
		k.CapabilityID = ""
	}
	return k
}

// whole reports whether a refusal of k in tenant is to be recorded whole.
func (s *refusalSampler) whole(tenant string, k kernel.RefusalKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tallies[tenant]
	return t == nil || t.Whole(k)
}

// view is the tenant's refusal window as a proposal step reads it.
func (s *refusalSampler) view(tenant string) kernel.RefusalWindow {
	return refusalWindow{s: s, tenant: tenant}
}

type refusalWindow struct {
	s      *refusalSampler
	tenant string
}

func (w refusalWindow) Whole(k kernel.RefusalKey) bool { return w.s.whole(w.tenant, k) }

// add records a refusal of k: recorded whole, or counted (described by ev).
func (s *refusalSampler) add(tenant string, k kernel.RefusalKey, ev kernel.ProposalRefused, whole bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.tallies[tenant]; t != nil {
		t.Add(k, ev, whole)
	}
}

// sample reports whether ev, a refusal that names no operation, is counted
// into its window's aggregate instead of being recorded now.
func (s *refusalSampler) sample(tenant string, ev kernel.ProposalRefused) bool {
	k := s.key(tenant, ev.Principal, ev.Code, "")
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tallies[tenant]
	if t == nil {
		return false // an unknown tenant: recorded whole, as its own refusal
	}
	whole := t.Whole(k)
	t.Add(k, ev, whole)
	return !whole
}

// drain returns the aggregates of the window that ends, and starts a new one.
func (s *refusalSampler) drain() map[string][]kernel.ProposalRefused {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]kernel.ProposalRefused{}
	for tenant, t := range s.tallies {
		if evs := t.Close(s.window.String()); len(evs) > 0 {
			out[tenant] = evs
		}
	}
	return out
}

// flushTimeout bounds the last flush of the refusal aggregates.
const flushTimeout = 5 * time.Second

// flushRefusals records the aggregates at the end of every window until
// ctx is done, and once more then.
func (g *Gateway) flushRefusals(ctx context.Context) {
	defer close(g.flushed)
	t := time.NewTicker(g.refusals.window)
	defer t.Stop()
	flush := func(ctx context.Context) {
		for tenant, evs := range g.refusals.drain() {
			for _, ev := range evs {
				g.recordRefusal(ctx, tenant, ev)
			}
		}
	}
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
			flush(fctx)
			cancel()
			return
		case <-t.C:
			flush(ctx)
		}
	}
}
