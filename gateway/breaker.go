package gateway

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
	"github.com/nats-io/nats.go"
)

// breakers are the circuit breakers of every (tenant, capability) whose
// capability declares [capabilities.breaker]: the recent provider failures
// this replica saw, and which breakers are open. The rule (how many
// failures in what window trip) is kernel.DecideBreaker; a trip and a
// reset are signed events on the breaker subject
// ctx.ev.<tenant>.breaker.<capability>, which every replica follows.
type breakers struct {
	mu      sync.Mutex
	windows map[string]kernel.FailureWindow // tenant/capability -> recent failures seen here
	open    map[string]*kernel.BreakerTripped
}

func breakerKey(tenant, capabilityID string) string { return tenant + "/" + capabilityID }

// BreakerSubject is the subject of the breaker of capabilityID of tenant.
func BreakerSubject(tenant, capabilityID string) (string, error) {
	return codec.Subject(tenant, "breaker", capabilityID)
}

// breakerState is capabilityID's breaker for the tenant as this replica
// follows it; nil while closed or when its capability declares none.
func (g *Gateway) breakerState(tenant, capabilityID string) *kernel.Breaker {
	b := g.brk
	if b == nil {
		return nil
	}
	if cp, ok := g.cfg.Capability(capabilityID); !ok || cp.Breaker.Threshold == 0 {
		return nil // a breaker applies only while its capability declares one
	}
	b.mu.Lock()
	trip := b.open[breakerKey(tenant, capabilityID)]
	b.mu.Unlock()
	if trip == nil {
		return nil
	}
	return &kernel.Breaker{Open: true, Trip: trip}
}

// BreakerOpen reports whether capabilityID's circuit breaker is open for
// the tenant.
func (g *Gateway) BreakerOpen(tenant, capabilityID string) bool {
	return g.breakerState(tenant, capabilityID) != nil
}

func (b *breakers) set(tenant string, ev kernel.Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch e := ev.(type) {
	case kernel.BreakerTripped:
		b.open[breakerKey(tenant, e.CapabilityID)] = &e
	case kernel.BreakerReset:
		delete(b.open, breakerKey(tenant, e.CapabilityID))
		delete(b.windows, breakerKey(tenant, e.CapabilityID))
	}
}

// breakerFailure counts a provider failure of a tenant's dispatch
// (kernel.FailureInput.Step: the kernel's rule says whether the report is a
// failure and whether the breaker trips). The failure is counted into this
// replica's window at once, over the breaker as this replica follows it;
// when that trips it, the step runs on the breaker's subject, which appends
// the signed trip with the figures (once: a breaker another replica
// tripped first stays as it is) before the next proposal is decided here.
func (g *Gateway) breakerFailure(ctx context.Context, tenant, capabilityID string, obs Observation) {
	cp, ok := g.cfg.Capability(capabilityID)
	if g.brk == nil || !ok || cp.Breaker.Threshold == 0 {
		return
	}
	in := kernel.FailureInput{CapabilityID: capabilityID, Rule: kernel.BreakerRule{Threshold: cp.Breaker.Threshold, Window: cp.Breaker.Window.Duration},
		Outcome: obs.Outcome, Failure: obs.Failure, Reason: obs.Ref, At: g.clock.Now()}
	if !in.Failed() {
		return
	}
	key := breakerKey(tenant, capabilityID)
	b := g.brk
	b.mu.Lock()
	in.Window = b.windows[key]
	var followed *kernel.Breaker
	if trip := b.open[key]; trip != nil {
		followed = &kernel.Breaker{Open: true, Trip: trip}
	}
	counted := kernel.FailureStep(kernel.BreakerState{Breaker: followed}, in)
	b.windows[key] = *counted.Window
	b.mu.Unlock()
	if len(counted.Events(kernel.KeyBreaker(capabilityID))) == 0 {
		return
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	eff, err := g.engine.Run(actx, tenant, in.Step())
	if err != nil {
		// The failures are still counted: the next one tries again.
		g.log.Error("circuit breaker trip could not be recorded", "tenant", tenant, "capability", capabilityID, "err", err)
		return
	}
	var trip *kernel.BreakerTripped
	for _, ev := range eff.Events(kernel.KeyBreaker(capabilityID)) {
		if t, ok := ev.(kernel.BreakerTripped); ok {
			trip = &t
		}
	}
	if trip == nil {
		return // another replica tripped it first: its event reaches this one through the subscription
	}
	b.set(tenant, *trip)
	if g.tel != nil {
		g.tel.m.breakerTrips.WithLabelValues(tenant, capabilityID).Inc()
	}
	g.log.Warn("circuit breaker tripped", "tenant", tenant, "capability", capabilityID, "failures", trip.Failures, "threshold", trip.Threshold,
		"window_ms", trip.WindowMillis, "first_failure", trip.FirstFailure, "last_failure", trip.LastFailure, "last_reason", trip.LastReason)
}

// StartBreakers loads the open breakers of every tenant and capability and
// follows the trips and resets other replicas store.
func (g *Gateway) StartBreakers(ctx context.Context, nc *nats.Conn) error {
	g.brk = &breakers{windows: map[string]kernel.FailureWindow{}, open: map[string]*kernel.BreakerTripped{}}
	g.Mount(wire.VerbBreaker, g.opBreaker)
	if nc != nil {
		sub, err := nc.Subscribe(codec.SubjectPrefix+"*.breaker.*", func(m *nats.Msg) {
			env, err := codec.Decode(m.Data)
			if err != nil {
				return
			}
			if ev, err := kernel.DecodeEvent(env.Type, env.V, env.Body); err == nil {
				g.brk.set(env.Tenant, ev)
			}
		})
		if err != nil {
			return err
		}
		g.subs = append(g.subs, sub)
	}
	for _, t := range g.cfg.Tenants {
		for _, cp := range g.cfg.Capabilities {
			if cp.Breaker.Threshold == 0 {
				continue
			}
			subject, err := BreakerSubject(t.ID, cp.ID)
			if err != nil {
				return err
			}
			sts, err := g.store.Read(ctx, subject, 0)
			if err != nil {
				return fmt.Errorf("breaker %s/%s: %w", t.ID, cp.ID, err)
			}
			var st kernel.Breaker
			for _, s := range sts {
				if ev, err := kernel.DecodeEvent(s.Envelope.Type, s.Envelope.V, s.Envelope.Body); err == nil {
					_ = st.Apply(ev)
				}
			}
			if st.Open {
				g.brk.set(t.ID, *st.Trip)
			}
		}
	}
	return nil
}

// breakerState is one capability's circuit breaker as the metrics show it.
type breakerState struct {
	tenant, capability string
	open               bool
}

func (g *Gateway) breakerStates() []breakerState {
	if g.brk == nil {
		return nil
	}
	var out []breakerState
	for _, t := range g.cfg.Tenants {
		for _, cp := range g.cfg.Capabilities {
			if cp.Breaker.Threshold > 0 {
				out = append(out, breakerState{tenant: t.ID, capability: cp.ID, open: g.breakerState(t.ID, cp.ID) != nil})
			}
		}
	}
	return out
}

func (g *Gateway) opBreaker(ctx context.Context, tenant, operator string, body []byte) wire.OpReply {
	var req wire.BreakerRequest
	if len(bytes.TrimSpace(body)) > 0 {
		if err := kernel.DecodeRequest(body, &req); err != nil {
			return wire.OpReply{Code: wire.CodeRequestMalformed, Reason: "request: " + err.Error()}
		}
	}
	_, surfaced := g.cfg.Capability(req.CapabilityID)
	if r := kernel.CheckBreakerRequest(req, surfaced); r != nil {
		return wire.OpReply{Code: r.Code, Reason: r.Reason}
	}
	if req.Reset {
		if _, err := BreakerSubject(tenant, req.CapabilityID); err != nil {
			return wire.OpReply{Code: wire.CodeRequestMalformed, Reason: err.Error()}
		}
		reset := kernel.BreakerReset{CapabilityID: req.CapabilityID, Operator: operator, Reason: req.Reason}
		_, err := g.engine.Run(ctx, tenant, kernel.VerbStep(kernel.KeyBreaker(req.CapabilityID), func(st *kernel.Breaker) (kernel.Decision, any) {
			return kernel.Decision{Events: kernel.DecideBreakerReset(st, reset)}, nil
		}))
		if err != nil {
			return storeRefusal(err)
		}
		g.brk.set(tenant, reset)
	}
	reply := wire.OpReply{OK: true}
	for _, cp := range g.cfg.Capabilities {
		if cp.Breaker.Threshold == 0 {
			continue
		}
		row := wire.BreakerRow{CapabilityID: cp.ID, Threshold: cp.Breaker.Threshold, WindowMillis: cp.Breaker.Window.Milliseconds()}
		g.brk.mu.Lock()
		if trip := g.brk.open[breakerKey(tenant, cp.ID)]; trip != nil {
			t := wire.BreakerTrip(*trip)
			row.Open, row.Trip = true, &t
		}
		g.brk.mu.Unlock()
		reply.Breakers = append(reply.Breakers, row)
	}
	return reply
}
