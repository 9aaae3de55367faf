package sim

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/contextos/ledger/aggregates"
	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/gateway"
	"github.com/contextos/ledger/internal/testing/lincheck"
	"github.com/contextos/ledger/internal/testing/refundcfg"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/projections"
	"github.com/contextos/ledger/verifier"
	"github.com/contextos/ledger/wire"
)

// Mutation is a deliberately broken variant of the runtime, used to prove
// that the simulator catches what it claims to catch. Production code has
// no such switch: each mutation is applied at the simulator's seams (the
// adapter's reply, the store's appends and reads).
type Mutation uint8

// Mutations.
const (
	MutNone              Mutation = iota
	MutReleaseOnUnknown           // an unknown provider reply is recorded as not applied: the hold is released
	MutSkipDispatchStart          // the dispatch-start never reaches the store: the attempt looks unstarted
	MutBlindAppend                // appends ignore the expected last subject sequence: decisions on stale state are stored
	// MutStaleRefusal is a refusal not re-verified: the engine decides on
	// its warm (cached) state of a subject and, before answering a
	// refusal, reads the store's last sequences and decides again if
	// another replica moved one (aggregates.Engine.Run, verify). Under
	// this variant the store answers those reads with a stale sequence
	// (0, the empty subject's), so nothing seems to have moved and the
	// refusal is answered on the cache. Its balances and its verdict then
	// belong to no instant of the call, which lincheck sees.
	MutStaleRefusal
)

var mutationNames = [...]string{"none", "release-on-unknown", "skip-dispatch-start", "blind-append", "stale-refusal"}

func (m Mutation) String() string { return mutationNames[m] }

// The simulated deployment: one tenant, two agents and an operator,
// the refund capability bound by its per-order ceiling over a few
// resources. The refund and the ceiling are the tests' one refund
// configuration (package refundcfg) with the ceiling at Limit; the
// provider's URL is never dialled. With Options.DayCeiling (as
// DefaultOptions has it) a second ceiling, per order per day, derived from
// the first, binds every refund too.
const (
	Tenant     = "acme"
	Capability = refundcfg.Capability
	Limit      = 1000
	// OrderCeiling is the guarantee the history's balances are of (a
	// reply's first).
	OrderCeiling = refundcfg.Guarantee
	simConfig    = `
[nats]
data_dir = "/nonexistent"
listen = "127.0.0.1:0"

[runtime]
executor = "sim"
reconcile_interval = "0s"

[[tenants]]
id = "acme"
unadmitted_runs = "unlimited"

  [[tenants.agents]]
  id = "agent_a"
  password = "a-secret-passphrase"
  capabilities = ["adp_payments.issue_refund"]

  [[tenants.agents]]
  id = "agent_b"
  password = "b-secret-passphrase"
  capabilities = ["adp_payments.issue_refund"]

  [[tenants.operators]]
  id = "ops_sim"
  password = "ops-secret-passphrase"

`
)

var (
	principals = []string{"agent_a", "agent_b"}
	resources  = []string{"ord-1", "ord-2"}
)

// SignEvery is how often (in seeds) the audit verifies signatures.
const SignEvery = 10

// Options configure one run.
type Options struct {
	Seed     uint64
	Steps    int // driver steps (default 40)
	Replicas int // runtime replicas sharing the store (default 3)
	Faults   Faults
	// Behaviours weighs the provider's behaviours, indexed by Behaviour.
	Behaviours [7]int
	Mutation   Mutation
	// DayCeiling adds a second ceiling on every refund, per order per
	// day: each proposal then holds on two ledgers, and a provider's
	// report stored as a chain may be cut between them.
	DayCeiling bool
	// BreakerThreshold, when positive, gives the capability a circuit
	// breaker that trips after this many provider failures within an hour.
	BreakerThreshold int
	// Trace, when set, receives the run's trace as it goes.
	Trace io.Writer
	// LinDir is where a history found not linearizable is visualized
	// (a temporary directory when empty).
	LinDir string
}

// DefaultOptions are the options of the CI runs for seed.
func DefaultOptions(seed uint64) Options {
	return Options{Seed: seed, Steps: 40, Replicas: 3, DayCeiling: true,
		Faults:     Faults{Conflict: 0.03, FailEarly: 0.03, LostAck: 0.04, Cut: 0.05},
		Behaviours: [7]int{Applies: 45, Rejects: 10, Pending: 10, LostReply: 12, Unlisted: 5, CrashBefore: 8, CrashAfter: 10}}
}

// Result is what one run did and found.
type Result struct {
	Seed      uint64
	Failure   error // the first invariant violated; nil when every check held
	Steps     int
	Proposals int
	Restarts  int
	Store     StoreStats
	Events    int
	Trace     []string
}

// Sim is one run.
type Sim struct {
	opts     Options
	ctx      context.Context
	rnd      *Rand
	clock    *Clock
	store    *Store
	prov     *Provider
	cfg      *config.Config
	signer   codec.Signer
	keys     codec.Keyring
	view     *projections.ExposureView
	reps     []*replica
	depth    int
	tick     int64
	ops      []porcupine.Operation
	props    []*proposal
	byAtt    map[string]string // attempt id -> proposal key, as replies named them
	attempts []string          // the attempts replies named, in order
	sealed   map[string]bool   // attempts a reply reported sealed
	applied  []string          // attempts whose reply said applied
	res      Result
	failure  error
}

type replica struct {
	name  string
	g     *gateway.Gateway
	sched *scheduler
}

type proposal struct {
	key       string // run/operation key, as lincheck.Audit names it
	principal string
	resource  string
	amount    int64
	body      []byte
}

// crashed is the panic that unwinds a replica at a crash point.
type crashed struct{}

// Run runs one seed.
func Run(o Options) Result {
	if o.Steps == 0 {
		o.Steps = 40
	}
	if o.Replicas == 0 {
		o.Replicas = 3
	}
	s := &Sim{opts: o, ctx: context.Background(), rnd: NewRand(o.Seed), clock: NewClock(), byAtt: map[string]string{}, sealed: map[string]bool{}}
	s.res.Seed = o.Seed
	s.store = NewStore(s.rnd, o.Faults, o.Mutation, s.tracef)
	s.store.cutOK = s.crash
	if o.DayCeiling {
		// Ledger key order: the order's ledger, then the day's.
		s.store.beforeLedger = ".exposure." + OrderCeiling + ".r"
	}
	s.prov = &Provider{s: s, attempts: map[string]*truth{}}
	text := simConfig + refundcfg.Replace(refundcfg.Refund("http://127.0.0.1:9"),
		fmt.Sprintf("limit = %d\n", refundcfg.Limit), fmt.Sprintf("limit = %d\n", Limit))
	if o.BreakerThreshold > 0 {
		text = refundcfg.AppendToBlock(text, "capabilities", Capability, fmt.Sprintf("  [capabilities.breaker]\n  threshold = %d\n  window = \"1h\"", o.BreakerThreshold))
	}
	if o.DayCeiling {
		// Never the binding one: twice the order's limit.
		text = refundcfg.Derive(text, "guarantees", OrderCeiling, OrderCeiling+"-day",
			fmt.Sprintf("limit = %d\n", Limit), fmt.Sprintf("limit = %d\nwindow = \"day\"\n", 2*Limit))
	}
	cfg, err := config.Parse([]byte(text))
	if err != nil {
		panic(err)
	}
	s.cfg = cfg
	seed := make([]byte, ed25519.SeedSize)
	copy(seed, "contextos deterministic simulation")
	key := ed25519.NewKeyFromSeed(seed)
	s.signer = codec.NewSigner(key)
	s.keys = codec.Keyring{}
	s.keys.Add(key.Public().(ed25519.PublicKey))
	s.view = projections.NewModel(projections.ModelConfig{Store: s.store})
	s.tracef("seed %d: %d replicas, %d steps, mutation %s", o.Seed, o.Replicas, o.Steps, o.Mutation)
	for i := 0; i < o.Replicas; i++ {
		r := &replica{name: fmt.Sprintf("r%d", i)}
		s.boot(r)
		s.reps = append(s.reps, r)
	}
	for step := 0; step < o.Steps && s.failure == nil; step++ {
		s.res.Steps++
		s.step()
		s.check()
	}
	if s.failure == nil {
		s.drain()
	}
	if s.failure == nil {
		s.final()
	}
	s.res.Failure = s.failure
	s.res.Store = s.store.Stats()
	return s.res
}

func (s *Sim) tracef(format string, args ...any) {
	line := fmt.Sprintf("%8.3fs ", s.clock.Now().Sub(Epoch).Seconds()) + fmt.Sprintf(format, args...)
	s.res.Trace = append(s.res.Trace, line)
	if s.opts.Trace != nil {
		fmt.Fprintln(s.opts.Trace, line)
	}
}

func (s *Sim) fail(format string, args ...any) {
	if s.failure == nil {
		s.failure = fmt.Errorf(format, args...)
		s.tracef("FAIL: %v", s.failure)
	}
}

// boot starts (or restarts) a replica from nothing but the store: a new
// engine, warm state, index and pins.
func (s *Sim) boot(r *replica) {
	sealer := &aggregates.Sealer{Signer: s.signer, Clock: s.clock, IDs: aggregates.NewIDs(s.clock, s.rnd)}
	g := gateway.New(gateway.Options{Config: s.cfg, Store: s.store, Sealer: sealer, Executor: "sim-" + r.name,
		Logger:   slog.New(slog.DiscardHandler),
		Adapters: map[string]gateway.Adapter{Capability: &providerAdapter{p: s.prov, replica: r}}})
	g.Engine().Linger = -1 // never wait on the wall clock for a group to fill
	// One atomic batch per group, never parallel single appends, whose
	// order the Go scheduler would choose.
	g.Engine().Appends = aggregates.AppendBatches
	r.sched = newScheduler(s, g.Engine())
	g.Engine().Pacer = r.sched
	for i := 0; ; i++ {
		err := g.PinAll(s.ctx)
		if err == nil {
			break
		}
		if i == 50 {
			s.fail("%s: boot: %v", r.name, err)
			break
		}
	}
	if s.opts.BreakerThreshold > 0 {
		// As the composition root does: the open breakers are loaded from
		// the store (no subscription: replicas share the store, not a bus).
		for i := 0; ; i++ {
			err := g.StartBreakers(s.ctx, nil)
			if err == nil {
				break
			}
			if i == 50 {
				s.fail("%s: boot: breakers: %v", r.name, err)
				break
			}
		}
	}
	r.g = g
	s.tracef("%s: booted", r.name)
}

// crash reports whether the replica may crash here: only the outermost
// call of the driver, never one nested in another replica's provider call.
func (s *Sim) crash() bool { return s.depth == 1 }

// on runs fn on replica r; a crash point reached inside restarts r.
func (s *Sim) on(r *replica, fn func()) (crash bool) {
	s.depth++
	defer func() { s.depth-- }()
	defer func() {
		if v := recover(); v != nil {
			if _, ok := v.(crashed); !ok {
				panic(v)
			}
			s.tracef("%s: CRASH: every in-memory state lost", r.name)
			s.res.Restarts++
			s.boot(r)
			crash = true
		}
	}()
	fn()
	if s.depth == 1 && s.store.takeCut() {
		// The replica crashed between two appends (Faults.Cut): what it
		// stored before stays, the rest of the chain never left it.
		s.tracef("%s: CRASH between two appends: every in-memory state lost", r.name)
		s.res.Restarts++
		s.boot(r)
		return true
	}
	return false
}

func (s *Sim) now() int64 { s.tick++; return s.tick }

// step does one thing chosen from the seed.
func (s *Sim) step() {
	n := s.rnd.IntN(100)
	r := s.reps[s.rnd.IntN(len(s.reps))]
	switch {
	case n < 30:
		s.propose(r, s.newProposal())
	case n < 40:
		ps := make([]*proposal, 2+s.rnd.IntN(3))
		for i := range ps {
			ps[i] = s.newProposal()
		}
		s.group(r, ps)
	case n < 52 && len(s.props) > 0:
		s.propose(r, s.props[s.rnd.IntN(len(s.props))])
	case n < 67:
		s.reconcile(r)
	case n < 82:
		d := time.Duration(100+s.rnd.IntN(2900)) * time.Millisecond
		s.clock.Advance(d)
		s.tracef("clock +%s", d)
	case n < 88:
		s.tracef("%s: RESTART: every in-memory state lost", r.name)
		s.res.Restarts++
		s.boot(r)
	case n < 94 && len(s.attempts) > 0:
		s.operator(r, s.attempts[s.rnd.IntN(len(s.attempts))])
	default:
		s.read(resources[s.rnd.IntN(len(resources))])
	}
}

// interleave runs other requests while replica r waits for the provider:
// the concurrency of the deployment, in an order the seed chose.
func (s *Sim) interleave(r *replica) {
	if s.depth > 1 || !s.rnd.Chance(0.4) {
		return
	}
	for k := 1 + s.rnd.IntN(2); k > 0; k-- {
		o := s.reps[s.rnd.IntN(len(s.reps))]
		switch n := s.rnd.IntN(10); {
		case n < 5:
			s.propose(o, s.newProposal())
		case n < 7:
			s.reconcile(o)
		case n < 9:
			d := time.Duration(100+s.rnd.IntN(1500)) * time.Millisecond
			s.clock.Advance(d)
			s.tracef("clock +%s (during %s's provider call)", d, r.name)
		default:
			s.read(resources[s.rnd.IntN(len(resources))])
		}
	}
}

func (s *Sim) newProposal() *proposal {
	i := len(s.props)
	p := &proposal{principal: principals[s.rnd.IntN(len(principals))], resource: resources[s.rnd.IntN(len(resources))],
		amount: int64(100 * (1 + s.rnd.IntN(5)))}
	run, key := fmt.Sprintf("run-%d", i%4), fmt.Sprintf("op-%d", i)
	p.key = run + "/" + key
	p.body, _ = json.Marshal(map[string]any{"run_id": run, "operation_key": key, "capability_id": Capability,
		"arguments": map[string]any{"order_id": p.resource, "amount_minor": p.amount, "currency": "INR"}})
	s.props = append(s.props, p)
	s.res.Proposals++
	return p
}

// propose sends p to replica r and records the reply as the chaos driver
// does: a reservation and, unless refused, a settlement over the window.
func (s *Sim) propose(r *replica, p *proposal) {
	call := s.now()
	s.tracef("%s: propose %s by %s: %s %d", r.name, p.key, p.principal, p.resource, p.amount)
	var reply wire.Reply
	crash := s.on(r, func() { reply = r.g.Propose(s.ctx, Tenant, p.principal, p.body) })
	s.reply(r, p, reply, call, s.now(), crash)
}

// reply records the reply to p, a call of the history from call to ret.
func (s *Sim) reply(r *replica, p *proposal, reply wire.Reply, call, ret int64, crash bool) {
	in := lincheck.Input{Resource: p.resource, Limit: Limit, Key: p.key, Amount: p.amount}
	if crash || (reply.Status == wire.StatusUnknown && reply.OperationID == "") {
		s.tracef("%s: propose %s: no reply (%s)", r.name, p.key, reply.Reason)
		s.record(call, ret, in, lincheck.Output{Unknown: true}, true)
		return
	}
	s.tracef("%s: propose %s: %s %s attempt %s", r.name, p.key, reply.Status, reply.Code, short(reply.AttemptID))
	if _, seen := s.byAtt[reply.AttemptID]; reply.AttemptID != "" && !seen {
		s.byAtt[reply.AttemptID] = p.key
		s.attempts = append(s.attempts, reply.AttemptID)
	}
	if reply.Code == "" && reply.AttemptID != "" {
		switch reply.Status {
		case wire.StatusApplied:
			s.applied = append(s.applied, reply.AttemptID)
			s.sealed[reply.AttemptID] = true
		case wire.StatusNotApplied:
			s.sealed[reply.AttemptID] = true
		}
	}
	s.record(call, ret, in, lincheck.ProposalOutput(reply), reply.Status != wire.StatusRefused)
}

func (s *Sim) record(call, ret int64, in lincheck.Input, out lincheck.Output, settle bool) {
	in.Kind = lincheck.KindReserve
	res := out
	if out.Status != lincheck.StatusRefused {
		res.HasBalance = false // the reservation's own balances are not reported
	}
	s.add(call, ret, in, res)
	if settle {
		in.Kind = lincheck.KindSettle
		s.add(call, ret, in, out)
	}
}

func (s *Sim) add(call, ret int64, in lincheck.Input, out lincheck.Output) {
	s.ops = append(s.ops, porcupine.Operation{ClientId: len(s.ops), Input: in, Call: call, Output: out, Return: ret})
}

// reconcile runs one background reconciler pass on r and records every
// row it settled or closed.
func (s *Sim) reconcile(r *replica) {
	call := s.now()
	var rows []wire.SettleRow
	s.on(r, func() { rows = r.g.ReconcileOnce(s.ctx) })
	ret := s.now()
	for _, row := range rows {
		s.tracef("%s: reconciled %s: status %s outcome %s %s", r.name, short(row.AttemptID), row.Status, row.Outcome, row.Code)
		in := lincheck.Input{Kind: lincheck.KindReconcile, Limit: Limit, Key: "attempt:" + row.AttemptID, Resource: "attempt:" + row.AttemptID}
		out := lincheck.Output{OK: row.Code == "", Status: string(row.Status), Code: string(row.Code), Outcome: string(row.Outcome)}
		if row.Outcome == "" && row.Status == wire.StatusNotApplied {
			in.Kind = lincheck.KindClose // the sweep closed an unstarted attempt
		}
		if row.Code == "" && kernel.Outcome(row.Outcome).Definitive() {
			s.sealed[row.AttemptID] = true
		}
		s.add(call, ret, in, out)
	}
}

// operator has an operator close (close-attempt) or reconcile (reconcile,
// which queries the provider even for a sealed attempt) one attempt on r.
func (s *Sim) operator(r *replica, attemptID string) {
	verb := "close-attempt"
	if s.rnd.Chance(0.5) {
		verb = "reconcile"
	}
	key := s.byAtt[attemptID]
	resource := ""
	for _, p := range s.props {
		if p.key == key {
			resource = p.resource
		}
	}
	body, _ := json.Marshal(wire.OpRequest{AttemptID: attemptID, Reason: "operator in the simulation"})
	call := s.now()
	var reply any
	s.on(r, func() { reply = r.g.Op(s.ctx, Tenant, verb, "ops_sim", body) })
	ret := s.now()
	or, ok := reply.(wire.OpReply)
	if !ok {
		s.fail("%s: %s replied %T", r.name, verb, reply)
		return
	}
	s.tracef("%s: operator %s %s: ok %v %s", r.name, verb, short(attemptID), or.OK, or.Code)
	in := lincheck.Input{Kind: lincheck.KindClose, Resource: resource, Limit: Limit, Key: key}
	if verb == "close-attempt" {
		if or.OK {
			s.sealed[attemptID] = true
		}
		s.add(call, ret, in, lincheck.Output{OK: or.OK, Code: string(or.Code)})
		return
	}
	in.Kind = lincheck.KindReconcile
	for _, row := range or.Settled {
		s.tracef("%s: operator reconciled %s: status %s outcome %s %s", r.name, short(row.AttemptID), row.Status, row.Outcome, row.Code)
		if row.Code == "" && kernel.Outcome(row.Outcome).Definitive() {
			s.sealed[row.AttemptID] = true
		}
		s.add(call, ret, in, lincheck.Output{OK: row.Code == "", Status: string(row.Status), Code: string(row.Code), Outcome: string(row.Outcome)})
	}
}

// read reads a resource's balances from the read model, synced to the end
// of the stream: a linearizable read at this point.
func (s *Sim) read(resource string) {
	call := s.now()
	if err := s.view.Sync(s.ctx); err != nil {
		s.fail("read model: %v", err)
		return
	}
	out := lincheck.Output{HasBalance: true, Limit: Limit}
	for _, rv := range s.view.View(Tenant).Resources {
		if rv.Resource == resource && rv.GuaranteeID == OrderCeiling {
			out.Limit, out.Committed, out.Held = rv.Limit, rv.Committed, rv.Held
		}
	}
	s.tracef("read %s: committed %d held %d", resource, out.Committed, out.Held)
	s.add(call, s.now(), lincheck.Input{Kind: lincheck.KindRead, Resource: resource, Limit: Limit}, out)
}

// drain stops the faults and lets the reconciler resolve what it can, as a
// deployment does once the faults end.
func (s *Sim) drain() {
	s.store.SetFaults(Faults{})
	s.tracef("drain: faults off")
	for i := 0; i < 4 && s.failure == nil; i++ {
		s.clock.Advance(5 * time.Second)
		s.reconcile(s.reps[0])
		s.check()
	}
}

// check runs the checks that hold after every step.
func (s *Sim) check() {
	if s.failure != nil {
		return
	}
	if err := s.view.Sync(s.ctx); err != nil {
		s.fail("read model: %v", err)
		return
	}
	if n := s.view.RefusedEvents(Tenant); n > 0 {
		// The kernel refused to fold a stored event: the runtime stored
		// something its own rules do not allow.
		s.fail("read model refused %d stored events: %v", n, s.view.Incidents(Tenant))
		return
	}
	for _, rv := range s.view.View(Tenant).Resources {
		if rv.Committed < 0 || rv.Held < 0 || rv.Committed+rv.Held > rv.Limit {
			s.fail("ledger %s: committed %d + held %d > limit %d", rv.Subject, rv.Committed, rv.Held, rv.Limit)
			return
		}
	}
	for res, amt := range s.prov.appliedBy() {
		if amt > Limit {
			s.fail("provider applied %d on %s, over the limit %d", amt, res, Limit)
			return
		}
	}
}

// final runs the checks over the whole run.
func (s *Sim) final() {
	if err := s.store.CheckAcknowledged(s.ctx); err != nil {
		s.fail("%v", err)
		return
	}
	// One run in SignEvery verifies every signature: the simulation signs
	// with one key and cannot forge, and verifying is a quarter of a run.
	keys := codec.Keyring{}
	if s.opts.Seed%SignEvery == 0 || s.opts.Trace != nil {
		keys = s.keys
	}
	rep, err := lincheck.Audit(s.ctx, s.store, keys)
	if err != nil {
		s.fail("audit: %v", err)
		return
	}
	s.res.Events = rep.Events
	switch {
	case len(keys) > 0 && len(rep.BadSignatures) > 0:
		s.fail("audit: bad signatures %v", rep.BadSignatures)
	case len(rep.FoldErrors) > 0:
		s.fail("audit: fold errors %v", rep.FoldErrors)
	case len(rep.CeilingViolations) > 0:
		s.fail("audit: ceiling violations %v", rep.CeilingViolations)
	}
	if s.failure != nil {
		return
	}
	for _, id := range s.applied {
		if a := rep.Attempts[id]; a == nil || a.State != kernel.StateCommitted {
			s.fail("attempt %s was replied applied but its receipt is not committed", id)
			return
		}
	}
	for id, a := range rep.Attempts {
		t := s.prov.attempts[id]
		switch a.State {
		case kernel.StateReleased:
			if !a.Asserted && !(a.Closed && !a.Started) && a.Outcome != kernel.OutcomeNotApplied {
				s.fail("attempt %s released without a definitive observation or a close of an unstarted attempt", id)
			}
			if t != nil && t.applied {
				s.fail("attempt %s released, but the provider applied it", id)
			}
			if !a.Asserted && !a.Closed && a.Outcome != kernel.OutcomeNotApplied {
				s.fail("attempt %s released on its ledger by an observation, but its operation records %q", id, a.Outcome)
			}
		case kernel.StateCommitted:
			if t == nil || !t.applied {
				s.fail("attempt %s committed, but the provider never applied it", id)
			}
			if a.Outcome != kernel.OutcomeApplied {
				// A report stored on the ledger but not on the operation
				// (a chain of appends cut between them) that the drain's
				// reconciliation did not complete.
				s.fail("attempt %s committed on its ledger, but its operation records %q", id, a.Outcome)
			}
		case kernel.StateReserved, kernel.StateStarted, kernel.StateHeld:
			s.fail("attempt %s still %s after the drain", id, a.State)
		}
		if s.failure != nil {
			return
		}
	}
	// The offline replay of the stream (the verifier's fold, from the
	// first event, in one pass) equals the read model, which followed the
	// stream step by step.
	fold := verifier.NewFold(Tenant)
	if err := s.store.Replay(s.ctx, 1, func(st events.Stored) error {
		if !strings.HasPrefix(st.Subject, "ctx.ev."+Tenant+".") {
			return nil
		}
		return fold.Apply(st.Seq, st.Subject, st.Envelope)
	}); err != nil {
		s.fail("offline replay: %v", err)
		return
	}
	if d := verifier.Compare(fold.View(), s.view.View(Tenant)); len(d) > 0 {
		s.fail("offline replay differs from the read model: %v", d)
		return
	}
	// Linearizability of what the clients saw.
	ops := s.resolve(rep.Attempts)
	if res := lincheck.Check(ops, 20*time.Second, s.opts.LinDir); !res.OK {
		s.fail("history not linearizable: %s\n%s", res, lincheck.Describe(ops))
	}
}

// resolve names every reconciled attempt by its proposal, from the
// stream, and gives operations left without a reply a return after all.
func (s *Sim) resolve(attempts map[string]*lincheck.Attempt) []porcupine.Operation {
	ops := make([]porcupine.Operation, len(s.ops))
	end := s.tick + 1
	for i, op := range s.ops {
		in := op.Input.(lincheck.Input)
		if id, ok := strings.CutPrefix(in.Key, "attempt:"); ok {
			if a, ok := attempts[id]; ok && a.RunID != "" {
				in.Key, in.Resource = a.RunID+"/"+a.OperationKey, a.Resource
			}
			op.Input = in
		}
		if op.Output.(lincheck.Output).Unknown {
			op.Return = end
		}
		ops[i] = op
	}
	return ops
}

// mutateObservation applies MutReleaseOnUnknown to an adapter's reply.
func (s *Sim) mutateObservation(o gateway.Observation) gateway.Observation {
	if s.opts.Mutation == MutReleaseOnUnknown && o.Outcome == kernel.OutcomeUnknown {
		o.Outcome = kernel.OutcomeNotApplied
	}
	return o
}
