package sim

import (
	"context"
	"encoding/json"
	"time"

	"github.com/contextos/ledger/gateway"
	"github.com/contextos/ledger/kernel"
)

// CallTimeout is the capability's HTTP timeout in the simulated
// configuration: a request still in flight after it is abandoned.
const CallTimeout = 500 * time.Millisecond

// Behaviour is what the simulated provider does with one dispatch.
type Behaviour uint8

// Provider behaviours.
const (
	Applies     Behaviour = iota // applies and says so
	Rejects                      // refuses: not applied
	Pending                      // accepts; applies (or fails) later, pending until then
	LostReply                    // applies (or not) slowly; the reply never arrives: unknown
	Unlisted                     // answers a state the recovery contract does not list: unknown
	CrashBefore                  // the caller crashes before the call reaches the provider
	CrashAfter                   // the provider applies; the caller crashes before the reply
)

var behaviourNames = [...]string{"applies", "rejects", "pending", "lost-reply", "unlisted", "crash-before", "crash-after"}

func (b Behaviour) String() string { return behaviourNames[b] }

// truth is what the provider did with one attempt.
type truth struct {
	resource  string
	amount    int64
	applied   bool
	pending   bool      // applied is what it becomes at resolveAt
	resolveAt time.Time // when a pending attempt resolves
}

// Provider is the simulated provider behind the gateway's adapter
// interface. It keeps the truth of every attempt (what it applied), which
// the checks compare with the ledgers, and answers queries from it; once
// an attempt is sealed it may contradict its earlier answer.
type Provider struct {
	s        *Sim
	attempts map[string]*truth
	order    []string // attempt ids in dispatch order
}

var _ gateway.Adapter = (*providerAdapter)(nil)

// providerAdapter is one replica's adapter onto the provider.
type providerAdapter struct {
	p       *Provider
	replica *replica
}

type refundArgs struct {
	OrderID string `json:"order_id"`
	Amount  int64  `json:"amount_minor"`
}

// Dispatch implements gateway.Adapter.
func (a *providerAdapter) Dispatch(ctx context.Context, attemptID string, args json.RawMessage) gateway.Observation {
	s := a.p.s
	var ra refundArgs
	_ = json.Unmarshal(args, &ra)
	b := a.p.behaviour()
	s.tracef("%s: provider call %s (%s %d): %s", a.replica.name, short(attemptID), ra.OrderID, ra.Amount, b)
	if b == CrashBefore && s.crash() {
		panic(crashed{})
	}
	if b == CrashBefore {
		b = Applies
	}
	t := &truth{resource: ra.OrderID, amount: ra.Amount}
	if _, dup := a.p.attempts[attemptID]; dup {
		s.fail("provider: attempt %s dispatched twice", attemptID)
	}
	a.p.attempts[attemptID] = t
	a.p.order = append(a.p.order, attemptID)
	// A request that applies may take effect at once or only when it
	// arrives, after the other replicas went on; one that arrives after
	// the caller's timeout is not applied and its reply is lost.
	late := false
	switch b {
	case Applies, CrashAfter, Unlisted:
		t.applied = true
		late = s.rnd.Chance(0.3)
	case Rejects:
	case Pending:
		t.pending, t.applied = true, s.rnd.Chance(0.7)
		t.resolveAt = s.clock.Now().Add(time.Duration(1+s.rnd.IntN(4)) * time.Second)
	case LostReply:
		t.applied = s.rnd.Chance(0.5)
		late = t.applied && s.rnd.Chance(0.5)
	}
	if late {
		t.applied = false
	}
	sent := s.clock.Now()
	// While this replica waits for the reply, the others go on.
	s.interleave(a.replica)
	if late {
		if s.clock.Now().Sub(sent) > CallTimeout {
			s.tracef("%s: provider call %s arrived after the timeout: not applied, reply lost", a.replica.name, short(attemptID))
			return s.mutateObservation(gateway.Observation{Outcome: kernel.OutcomeUnknown, Ref: "transport error"})
		}
		t.applied = true
		s.tracef("%s: provider call %s applied on arrival", a.replica.name, short(attemptID))
	}
	obs := gateway.Observation{}
	switch b {
	case Applies:
		obs = gateway.Observation{Outcome: kernel.OutcomeApplied, Ref: "succeeded"}
	case Rejects:
		obs = gateway.Observation{Outcome: kernel.OutcomeNotApplied, Ref: "failed"}
	case Pending:
		obs = gateway.Observation{Outcome: kernel.OutcomePending, Ref: "pending"}
	case LostReply:
		obs = gateway.Observation{Outcome: kernel.OutcomeUnknown, Ref: "transport error"}
	case Unlisted:
		obs = gateway.Observation{Outcome: kernel.OutcomeUnknown, Ref: "processing_review"}
	case CrashAfter:
		if s.crash() {
			panic(crashed{})
		}
		obs = gateway.Observation{Outcome: kernel.OutcomeApplied, Ref: "succeeded"}
	}
	return s.mutateObservation(obs)
}

// Query implements gateway.Adapter: the attempt's state by its idempotency
// key. An attempt the provider never saw was not applied.
func (a *providerAdapter) Query(ctx context.Context, attemptID string) gateway.Observation {
	s := a.p.s
	t, ok := a.p.attempts[attemptID]
	var obs gateway.Observation
	switch {
	case !ok:
		obs = gateway.Observation{Outcome: kernel.OutcomeNotApplied, Ref: "not_found"}
	case t.pending && s.clock.Now().Before(t.resolveAt):
		obs = gateway.Observation{Outcome: kernel.OutcomePending, Ref: "pending"}
	case s.sealed[attemptID] && s.rnd.Chance(0.3):
		// Later contradicts: the attempt is sealed, the provider now says
		// the opposite. The ledger must refuse it as an incident.
		if t.applied {
			obs = gateway.Observation{Outcome: kernel.OutcomeNotApplied, Ref: "failed"}
		} else {
			obs = gateway.Observation{Outcome: kernel.OutcomeApplied, Ref: "succeeded"}
		}
		s.tracef("%s: provider query %s contradicts itself: %s", a.replica.name, short(attemptID), obs.Outcome)
		return obs
	case t.applied:
		obs = gateway.Observation{Outcome: kernel.OutcomeApplied, Ref: "succeeded"}
	default:
		obs = gateway.Observation{Outcome: kernel.OutcomeNotApplied, Ref: "failed"}
	}
	if ok && t.pending && !s.clock.Now().Before(t.resolveAt) {
		t.pending = false
	}
	s.tracef("%s: provider query %s: %s", a.replica.name, short(attemptID), obs.Outcome)
	return s.mutateObservation(obs)
}

func (p *Provider) behaviour() Behaviour {
	w := p.s.opts.Behaviours
	total := 0
	for _, x := range w {
		total += x
	}
	n := p.s.rnd.IntN(total)
	for i, x := range w {
		if n < x {
			return Behaviour(i)
		}
		n -= x
	}
	return Applies
}

// appliedBy returns what the provider applied per resource (the truth).
func (p *Provider) appliedBy() map[string]int64 {
	out := map[string]int64{}
	for _, id := range p.order {
		t := p.attempts[id]
		if t.applied { // a pending attempt that will apply counts at once
			out[t.resource] += t.amount
		}
	}
	return out
}

func short(id string) string {
	if len(id) > 6 {
		return id[len(id)-6:]
	}
	return id
}
