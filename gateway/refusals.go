package gateway

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
	"golang.org/x/time/rate"
)

// limiter holds each agent's proposal rate limit: one token bucket per
// configured agent, and one per tenant shared by any other principal name
// (which the NATS permissions should never let through), so its memory is
// bounded by the configuration, not by what arrives.
type limiter struct {
	buckets map[string]*rate.Limiter // tenant/principal; tenant/ for the rest
}

func newLimiter(cfg *config.Config, l config.LimitsConfig) *limiter {
	x := &limiter{buckets: map[string]*rate.Limiter{}}
	for _, t := range cfg.Tenants {
		x.buckets[t.ID+"/"] = rate.NewLimiter(rate.Limit(l.ProposalsPerSecond), l.ProposalBurst)
		for _, a := range t.Agents {
			x.buckets[t.ID+"/"+a.ID] = rate.NewLimiter(rate.Limit(l.ProposalsPerSecond), l.ProposalBurst)
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

// sampledCodes are the refusals that are sampled rather than recorded one
// durable event each: they name no operation and change nothing, and an
// agent can send them as fast as its rate limit allows.
var sampledCodes = map[wire.Code]bool{wire.CodeRequestMalformed: true, wire.CodeCapabilityNotSurfaced: true}

// refusalSampler aggregates sampled refusals per (tenant, principal, code)
// and window: the first is recorded at once (with its body digest), the
// others only counted; at the window's end one signed aggregate records
// how many followed and the last one's digest. Memory is bounded by the
// configured agents times the sampled codes.
type refusalSampler struct {
	window time.Duration
	known  map[string]bool // tenant/principal of configured agents

	mu   sync.Mutex
	open map[sampleKey]*sampled
}

type sampleKey struct {
	tenant, principal string
	code              wire.Code
}

type sampled struct {
	count int                    // refusals after the first of the window
	last  kernel.ProposalRefused // the latest of them
}

func newRefusalSampler(cfg *config.Config, window time.Duration) *refusalSampler {
	s := &refusalSampler{window: window, known: map[string]bool{}, open: map[sampleKey]*sampled{}}
	for _, t := range cfg.Tenants {
		for _, a := range t.Agents {
			s.known[t.ID+"/"+a.ID] = true
		}
	}
	return s
}

// sample reports whether ev is counted into its window's aggregate instead
// of being recorded now.
func (s *refusalSampler) sample(tenant string, ev kernel.ProposalRefused) bool {
	if !sampledCodes[ev.Code] {
		return false
	}
	k := sampleKey{tenant: tenant, principal: ev.Principal, code: ev.Code}
	if !s.known[tenant+"/"+ev.Principal] {
		k.principal = ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.open[k]
	if w == nil {
		s.open[k] = &sampled{}
		return false // the first of the window: recorded at once
	}
	w.count++
	w.last = ev
	return true
}

// drain returns the aggregates of the window that ends, and starts a new one.
func (s *refusalSampler) drain() map[string][]kernel.ProposalRefused {
	s.mu.Lock()
	open := s.open
	s.open = map[sampleKey]*sampled{}
	s.mu.Unlock()
	out := map[string][]kernel.ProposalRefused{}
	for k, w := range open {
		if w.count == 0 {
			continue
		}
		ev := w.last
		ev.Count = w.count
		ev.Reason = fmt.Sprintf("%d more proposals refused %s within %s; the last: %s", w.count, k.code, s.window, ev.Reason)
		out[k.tenant] = append(out[k.tenant], ev)
	}
	return out
}

// flushRefusals records the aggregates at the end of every window until
// ctx is done, and once more then.
func (g *Gateway) flushRefusals(ctx context.Context) {
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
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			flush(fctx)
			cancel()
			return
		case <-t.C:
			flush(ctx)
		}
	}
}
