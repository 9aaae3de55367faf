package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/codec"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The storage shapes of a governed proposal: how its events could reach
// the stream (atomic batches as today, single appends one after the other
// or pipelined, fast batches), measured raw, without the runtime, on the
// events a real proposal appends. docs/performance.md (Running `make
// bench`) says how to run them and what they show.

// Role names a subject a proposal writes or guards.
type Role int

// Roles of a governed proposal over one guarantee.
const (
	RoleOp        Role = iota // the operation (ctx.ev.<t>.operation.<run>.<key>): new for each proposal
	RoleLedger                // the resource's exposure ledger
	RoleRun                   // the run's budget
	RoleControl               // the tenant's control subject (kill switch, enforcement domain): guarded, never written here
	RoleIntegrity             // the tenant's integrity subject: guarded, never written here
	RoleMarker                // a subject of the worker's whose messages carry a guard (Write.Guard)
)

// Mode is how one step's messages go to the server.
type Mode int

// Step modes.
const (
	// Atomic is one ADR-50 atomic batch (events.Store.AppendBatch): all or
	// nothing; guards ride on its events.
	Atomic Mode = iota
	// Fast is one fast batch in gap-fail mode (events.FastPublisher): each
	// message stored as it arrives, each with its own expectation; a refusal
	// ends the batch, leaving the messages before it stored. Only the last
	// message's sequence is acknowledged.
	Fast
	// Pipelined is one single append per message, all sent at once, each
	// acknowledged on its own (no order between their outcomes).
	Pipelined
	// Sequential is one single append per message, each waited for before
	// the next is sent.
	Sequential
)

func (m Mode) String() string {
	return [...]string{"atomic", "fast", "pipelined", "sequential"}[m]
}

// Write is one event of a step: the proposal's event of type Event (its
// bytes as the runtime stored them) on the subject of Role. A write with a
// Guard (fast batches only) is a marker: the server stores it only while the
// guarded subject is at the sequence the decision read
// (Nats-Expected-Last-Subject-Sequence-Subject), and in a gap-fail batch
// nothing after a refused marker is stored.
type Write struct {
	Role  Role
	Event string
	Guard Role
}

// Step is one durable round trip of a proposal (or, Sequential, one per
// message). Guards are the subjects the step's decision read and does not
// write: items of an atomic batch (unless GuardFirst); for the other modes,
// last-sequence reads (Direct Get), sent before the step when GuardFirst,
// else beside it.
type Step struct {
	Mode       Mode
	Writes     []Write
	Guards     []Role
	GuardFirst bool
}

// StorageShape is a proposal's writes, step by step.
type StorageShape struct {
	Name  string
	Steps []Step
}

// Appends counts the shape's messages and durable round trips (a
// sequential step counts one per message; reads are not round trips to
// the disk).
func (s StorageShape) Appends() (msgs, trips int) {
	for _, st := range s.Steps {
		msgs += len(st.Writes)
		switch {
		case st.Mode == Sequential:
			trips += len(st.Writes)
		case len(st.Writes) > 0:
			trips++
		}
	}
	return msgs, trips
}

// Event types of a governed proposal, as ProposalEvents reads them back.
const (
	EvOpOpened      = "operation.opened"
	EvOpReserved    = "operation.reserved"
	EvOpStarted     = "operation.dispatch_started"
	EvOpObserved    = "operation.observed"
	EvDecision      = "decision.recorded"
	EvLedgerReserve = "exposure.reserved"
	EvLedgerStarted = "exposure.dispatch_started"
	EvLedgerObserve = "exposure.observed"
	EvRunConsumed   = "run.consumed"
)

// TodaySingleAppends names the shape of ProposalShapes that appends
// today's events of a proposal one single append each, in order, each with
// its expected sequence: the floor make bench sets beside a proposal's
// latency.
const TodaySingleAppends = "today's 9 events, one single append each"

// TodayAlone names the shape of a lone proposal as the runtime stores it:
// the reservation with its dispatch-start as one atomic batch, then the
// provider's report as a chain of single appends (the ledger's
// observation, the operation's decision record and observation). Among
// other proposals the report rides a group's atomic batch instead (the
// third shape).
const TodayAlone = "today, alone: an atomic batch, then the report as single appends"

// ProposalShapes are the shapes measured, for a proposal over one
// guarantee; the first is the floor, the third what a proposal among
// others stores, TodayAlone what a lone one stores. The candidate shapes
// write one message per subject per step: where today a step
// appends several events to one subject (the operation's opened and
// reserved), a candidate stands for one event holding what they hold,
// stored as today's bytes of the first of them. The recommended shape
// (docs/performance.md, Storage shapes) is "C".
func ProposalShapes() []StorageShape {
	w := func(r Role, ev string) Write { return Write{Role: r, Event: ev} }
	guards := []Role{RoleControl, RoleIntegrity}
	claim := []Write{w(RoleOp, EvOpOpened), w(RoleLedger, EvLedgerReserve), w(RoleRun, EvRunConsumed)}
	start := []Write{w(RoleLedger, EvLedgerStarted)}
	settle := []Write{w(RoleLedger, EvLedgerObserve), w(RoleOp, EvDecision)}
	return []StorageShape{
		{Name: "floor: one single append", Steps: []Step{{Mode: Sequential, Writes: []Write{w(RoleLedger, EvLedgerReserve)}}}},
		{Name: "guard reads alone (2 Direct Gets)", Steps: []Step{{Mode: Sequential, Guards: guards, GuardFirst: true}}},
		{Name: "two atomic batches (a proposal among others)", Steps: []Step{
			{Mode: Atomic, Guards: guards, Writes: []Write{w(RoleOp, EvOpOpened), w(RoleOp, EvOpReserved), w(RoleOp, EvOpStarted),
				w(RoleLedger, EvLedgerReserve), w(RoleLedger, EvLedgerStarted), w(RoleRun, EvRunConsumed)}},
			{Mode: Atomic, Writes: []Write{w(RoleOp, EvOpObserved), w(RoleOp, EvDecision), w(RoleLedger, EvLedgerObserve)}},
		}},
		{Name: TodaySingleAppends, Steps: []Step{
			{Mode: Sequential, Guards: guards, Writes: []Write{w(RoleOp, EvOpOpened), w(RoleOp, EvOpReserved),
				w(RoleLedger, EvLedgerReserve), w(RoleRun, EvRunConsumed), w(RoleOp, EvOpStarted), w(RoleLedger, EvLedgerStarted)}},
			{Mode: Sequential, Writes: []Write{w(RoleLedger, EvLedgerObserve), w(RoleOp, EvOpObserved), w(RoleOp, EvDecision)}},
		}},
		{Name: "C: claim, start, settle as fast batches", Steps: []Step{
			{Mode: Fast, Guards: guards, Writes: claim},
			{Mode: Fast, Writes: start},
			{Mode: Fast, Writes: settle},
		}},
		{Name: "C as pipelined single appends", Steps: []Step{
			{Mode: Pipelined, Guards: guards, Writes: claim},
			{Mode: Pipelined, Writes: start},
			{Mode: Pipelined, Writes: settle},
		}},
		{Name: "C as sequential single appends", Steps: []Step{
			{Mode: Sequential, Guards: guards, Writes: claim},
			{Mode: Sequential, Writes: start},
			{Mode: Sequential, Writes: settle},
		}},
		{Name: "C as atomic batches (guards read)", Steps: []Step{
			// One event a subject leaves no event to carry a guard: read first.
			{Mode: Atomic, Guards: guards, GuardFirst: true, Writes: claim},
			{Mode: Atomic, Writes: start},
			{Mode: Atomic, Writes: settle},
		}},
		{Name: "C without a run event", Steps: []Step{
			{Mode: Fast, Guards: guards, Writes: claim[:2]},
			{Mode: Fast, Writes: start},
			{Mode: Fast, Writes: settle},
		}},
		{Name: "C with the operation's dispatch-start", Steps: []Step{
			{Mode: Fast, Guards: guards, Writes: claim},
			{Mode: Fast, Writes: []Write{w(RoleLedger, EvLedgerStarted), w(RoleOp, EvOpStarted)}},
			{Mode: Fast, Writes: settle},
		}},
		{Name: "C, guards as stored markers before the start", Steps: []Step{
			// The server checks the guards where today's batch does: with the
			// dispatch-start, which a refused marker keeps from being stored.
			{Mode: Fast, Writes: claim},
			{Mode: Fast, Writes: append([]Write{{Role: RoleMarker, Event: EvRunConsumed, Guard: RoleControl},
				{Role: RoleMarker, Event: EvRunConsumed, Guard: RoleIntegrity}}, start...)},
			{Mode: Fast, Writes: settle},
		}},
		{Name: "D: reservation and start as one event", Steps: []Step{
			{Mode: Fast, Guards: guards, GuardFirst: true, Writes: claim},
			{Mode: Fast, Writes: settle},
		}},
		{Name: TodayAlone, Steps: []Step{
			{Mode: Atomic, Guards: guards, Writes: []Write{w(RoleOp, EvOpOpened), w(RoleOp, EvOpReserved), w(RoleOp, EvOpStarted),
				w(RoleLedger, EvLedgerReserve), w(RoleLedger, EvLedgerStarted), w(RoleRun, EvRunConsumed)}},
			{Mode: Sequential, Writes: []Write{w(RoleLedger, EvLedgerObserve), w(RoleOp, EvDecision), w(RoleOp, EvOpObserved)}},
		}},
	}
}

// ProposalEvents sends one proposal as agent_00 on a resource of its own
// and returns what it appended, in stream order: the events whose bytes the
// raw shapes store (one per type; the last of a type wins).
func (g *Gateway) ProposalEvents(ctx context.Context) (map[string]codec.Envelope, error) {
	from, err := g.RT.Store.LastStreamSeq(ctx)
	if err != nil {
		return nil, err
	}
	if err := g.Proposals(func(w, i int) string { return fmt.Sprint("ord-events-", rand.Uint64()) })(ctx, 0, 0); err != nil {
		return nil, err
	}
	out := map[string]codec.Envelope{}
	err = g.RT.Store.Replay(ctx, from+1, func(st events.Stored) error {
		out[st.Envelope.Type] = st.Envelope
		return nil
	})
	for _, ev := range []string{EvOpOpened, EvOpReserved, EvOpStarted, EvOpObserved, EvDecision, EvLedgerReserve, EvLedgerStarted, EvLedgerObserve, EvRunConsumed} {
		if _, ok := out[ev]; !ok && err == nil {
			err = fmt.Errorf("a proposal appended no %s", ev)
		}
	}
	return out, err
}

// ShapeTarget is a stream the shapes append to: a store, a fast batch
// publisher on the same stream, and the proposal's events.
type ShapeTarget struct {
	Store  *events.JetStore
	Fast   *events.FastPublisher
	Events map[string]codec.Envelope
	IDs    interface{ New() string }
	// Ledgers is how many resources the workers share out (each worker
	// writes only its own: no conflicts between workers).
	Ledgers int
	// Tenant's guarded subjects, written once before the points.
	Control, Integrity string
	guardSeq           map[Role]uint64
	tag                uint64
}

// AllowFast makes the event stream of js accept fast batches (besides
// atomic ones): nats.go has no other way to set allow_batched than the
// stream's configuration.
func AllowFast(ctx context.Context, js jetstream.JetStream, replicas int) error {
	_, err := events.EnsureAppendOnly(ctx, js, jetstream.StreamConfig{Name: events.StreamName,
		Description: "ContextOS domain events (append-only)", Subjects: []string{codec.SubjectPrefix + ">"},
		Replicas: replicas, Duplicates: events.DefaultDuplicateWindow, AllowBatchPublish: true})
	return err
}

// NewShapeTarget prepares t on store (whose stream allows fast batches,
// see AllowFast) with evs as the proposal's events: it writes one event on
// each guarded subject, as a tenant's control and integrity subjects hold.
func NewShapeTarget(ctx context.Context, store *events.JetStore, nc *nats.Conn, evs map[string]codec.Envelope, ids interface{ New() string }) (*ShapeTarget, error) {
	t := &ShapeTarget{Store: store, Fast: events.NewFastPublisher(nc, events.StreamName), Events: evs, IDs: ids, Ledgers: Resources, tag: rand.Uint64()}
	var err error
	if t.Control, err = codec.Subject(Tenant, "shapecontrol", strconv.FormatUint(t.tag, 36)); err != nil {
		return nil, err
	}
	if t.Integrity, err = codec.Subject(Tenant, "shapeintegrity", strconv.FormatUint(t.tag, 36)); err != nil {
		return nil, err
	}
	t.guardSeq = map[Role]uint64{}
	for r, s := range map[Role]string{RoleControl: t.Control, RoleIntegrity: t.Integrity} {
		env := evs[EvRunConsumed]
		env.EventID = ids.New()
		if t.guardSeq[r], err = store.Append(ctx, s, 0, env); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// shapeWorker is one client's subjects and what it knows of them.
type shapeWorker struct {
	runs    []string // one per proposal of a group
	ledgers []string
	marker  string
	last    map[string]uint64 // known last sequences; absent = unknown (read before the next append)
	guards  map[Role]uint64
}

// ShapeOp returns the operation of shape for workers clients: worker w's
// operation i appends the shape's steps for group proposals (1: a
// proposal alone; more: the steps of that many proposals in one append
// each, as group commit merges them, atomic shapes only), each on a new
// operation subject, one of the worker's ledgers and a run of the
// worker's, with its expected last sequence, guarding the tenant's
// subjects. Reads counts the last-sequence reads (guards, and subjects a
// fast batch left unacknowledged).
func (t *ShapeTarget) ShapeOp(shape StorageShape, workers, group int, reads *atomic.Int64) Op {
	ws := make([]*shapeWorker, workers)
	per := max(t.Ledgers/workers, group)
	nonce := fmt.Sprintf("%x-%x", t.tag, rand.Uint64()%(1<<24)) // subjects of this operation's own
	for w := range ws {
		sw := &shapeWorker{last: map[string]uint64{}, guards: t.guardSeq}
		for j := 0; j < group; j++ {
			s, _ := codec.Subject(Tenant, "shaperun", fmt.Sprintf("%s-%d-%d", nonce, w, j))
			sw.runs = append(sw.runs, s)
		}
		for j := 0; j < per; j++ {
			s, _ := codec.Subject(Tenant, "shapeledger", fmt.Sprintf("%s-%d-%d", nonce, w, j))
			sw.ledgers = append(sw.ledgers, s)
		}
		sw.marker, _ = codec.Subject(Tenant, "shapemarker", fmt.Sprintf("%s-%d", nonce, w))
		ws[w] = sw
	}
	name := strings.NewReplacer(" ", "", ":", "", "'", "", ",", "", "(", "", ")", "", "+", "").Replace(shape.Name)
	return func(ctx context.Context, w, i int) error {
		sw := ws[w]
		subjs := make([]map[Role]string, group)
		first := rand.IntN(len(sw.ledgers))
		for j := range subjs {
			subj := map[Role]string{RoleRun: sw.runs[j], RoleLedger: sw.ledgers[(first+j)%len(sw.ledgers)],
				RoleControl: t.Control, RoleIntegrity: t.Integrity, RoleMarker: sw.marker}
			subj[RoleOp], _ = codec.Subject(Tenant, "shapeop", fmt.Sprintf("%s-%s-%d-%d-%d", name, nonce, w, i, j))
			sw.last[subj[RoleOp]] = 0
			subjs[j] = subj
		}
		for _, st := range shape.Steps {
			var err error
			if group > 1 {
				if st.Mode != Atomic {
					return fmt.Errorf("%s: only atomic steps merge across proposals", shape.Name)
				}
				err = t.atomic(ctx, sw, subjs, st)
			} else {
				err = t.step(ctx, sw, subjs[0], st, reads)
			}
			if err != nil {
				return fmt.Errorf("%s, %s step: %w", shape.Name, st.Mode, err)
			}
		}
		for _, subj := range subjs {
			delete(sw.last, subj[RoleOp])
		}
		return nil
	}
}

// env returns the proposal's event of type ev under a fresh id.
func (t *ShapeTarget) env(ev string) codec.Envelope {
	e := t.Events[ev]
	e.EventID = t.IDs.New()
	return e
}

func (t *ShapeTarget) step(ctx context.Context, sw *shapeWorker, subj map[Role]string, st Step, reads *atomic.Int64) error {
	// Subjects whose last sequence a fast batch left unknown are read
	// first (they are the worker's own, so the read is exact).
	var unknown []string
	for _, w := range st.Writes {
		s := subj[w.Role]
		if _, ok := sw.last[s]; !ok && w.Guard == 0 && !slices.Contains(unknown, s) {
			unknown = append(unknown, s)
		}
	}
	if err := t.readLasts(ctx, sw, unknown, reads); err != nil {
		return err
	}
	guardDone := make(chan error, 1)
	if (st.Mode == Atomic && !st.GuardFirst) || len(st.Guards) == 0 {
		guardDone <- nil
	} else {
		go func() { guardDone <- t.checkGuards(ctx, sw, subj, st.Guards, reads) }()
		if st.GuardFirst {
			if err := <-guardDone; err != nil {
				return err
			}
			guardDone <- nil
		}
	}
	var err error
	switch st.Mode {
	case Atomic:
		err = t.atomic(ctx, sw, []map[Role]string{subj}, st)
	case Fast:
		err = t.fast(ctx, sw, subj, st)
	case Pipelined:
		errs := make([]error, len(st.Writes))
		var wg sync.WaitGroup
		var mu sync.Mutex
		for k, w := range st.Writes {
			s := subj[w.Role]
			wg.Add(1)
			go func() {
				defer wg.Done()
				mu.Lock()
				exp := sw.last[s]
				mu.Unlock()
				seq, e := t.Store.Append(ctx, s, exp, t.env(w.Event))
				mu.Lock()
				sw.last[s] = seq
				mu.Unlock()
				errs[k] = e
			}()
		}
		wg.Wait()
		err = errors.Join(errs...)
	case Sequential:
		for _, w := range st.Writes {
			s := subj[w.Role]
			seq, e := t.Store.Append(ctx, s, sw.last[s], t.env(w.Event))
			if e != nil {
				err = e
				break
			}
			sw.last[s] = seq
		}
	}
	if gerr := <-guardDone; err == nil {
		err = gerr
	}
	return err
}

func (t *ShapeTarget) readLasts(ctx context.Context, sw *shapeWorker, subjects []string, reads *atomic.Int64) error {
	seqs := make([]uint64, len(subjects))
	errs := make([]error, len(subjects))
	var wg sync.WaitGroup
	for k, s := range subjects {
		wg.Add(1)
		go func() { defer wg.Done(); seqs[k], errs[k] = t.Store.LastSeq(ctx, s) }()
	}
	wg.Wait()
	reads.Add(int64(len(subjects)))
	for k, s := range subjects {
		sw.last[s] = seqs[k]
	}
	return errors.Join(errs...)
}

// checkGuards reads the guarded subjects' last sequences and fails if one
// moved from what the decision read.
func (t *ShapeTarget) checkGuards(ctx context.Context, sw *shapeWorker, subj map[Role]string, guards []Role, reads *atomic.Int64) error {
	errs := make([]error, len(guards))
	var wg sync.WaitGroup
	for k, g := range guards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seq, err := t.Store.LastSeq(ctx, subj[g])
			if err == nil && seq != sw.guards[g] {
				err = fmt.Errorf("guard %s moved to %d", subj[g], seq)
			}
			errs[k] = err
		}()
	}
	wg.Wait()
	reads.Add(int64(len(guards)))
	return errors.Join(errs...)
}

// atomic appends the step of every proposal of subjs as one atomic batch,
// guarding each guarded subject once.
func (t *ShapeTarget) atomic(ctx context.Context, sw *shapeWorker, subjs []map[Role]string, st Step) error {
	var items []events.AppendItem
	for _, subj := range subjs {
		for _, w := range st.Writes {
			s := subj[w.Role]
			k := slices.IndexFunc(items, func(it events.AppendItem) bool { return it.Subject == s })
			if k < 0 {
				items = append(items, events.AppendItem{Subject: s, ExpectedLastSeq: sw.last[s]})
				k = len(items) - 1
			}
			items[k].Envs = append(items[k].Envs, t.env(w.Event))
		}
	}
	for _, g := range st.Guards {
		if !st.GuardFirst {
			items = append(items, events.AppendItem{Subject: subjs[0][g], ExpectedLastSeq: sw.guards[g]})
		}
	}
	seqs, err := t.Store.AppendBatch(ctx, items)
	if err != nil {
		return err
	}
	for k, it := range items {
		if len(it.Envs) > 0 {
			sw.last[it.Subject] = seqs[k]
		}
	}
	return nil
}

func (t *ShapeTarget) fast(ctx context.Context, sw *shapeWorker, subj map[Role]string, st Step) error {
	msgs := make([]*nats.Msg, len(st.Writes))
	for k, w := range st.Writes {
		s := subj[w.Role]
		raw, err := codec.Encode(t.env(w.Event))
		if err != nil {
			return err
		}
		m := nats.NewMsg(s)
		m.Data = raw
		exp := strconv.FormatUint(sw.last[s], 10)
		if w.Guard != 0 {
			m.Header.Set("Nats-Expected-Last-Subject-Sequence", strconv.FormatUint(sw.guards[w.Guard], 10))
			m.Header.Set("Nats-Expected-Last-Subject-Sequence-Subject", subj[w.Guard])
		} else {
			m.Header.Set("Nats-Expected-Last-Subject-Sequence", exp)
			m.Header.Set("Ctx-Prev-Seq", exp)
		}
		msgs[k] = m
	}
	r, err := t.Fast.Publish(ctx, msgs)
	if err != nil {
		return err
	}
	if r.Stored != len(msgs) {
		return fmt.Errorf("fast batch stored %d of %d: %v", r.Stored, len(msgs), r.Refused)
	}
	for k, w := range st.Writes {
		switch {
		case w.Guard != 0:
			// a marker's subject is never expected
		case k == len(st.Writes)-1:
			sw.last[subj[w.Role]] = r.Seq
		default:
			delete(sw.last, subj[w.Role]) // not acknowledged: read before the next append
		}
	}
	return nil
}

// RunN runs n operations on workers workers (worker w numbers its
// operations from 0) and returns every latency, sorted, and the time from
// the first start to the last end.
func RunN(ctx context.Context, workers, n int, op Op) (lat []time.Duration, elapsed time.Duration, err error) {
	var next atomic.Int64
	lats := make([][]time.Duration, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	t0 := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				if next.Add(1) > int64(n) {
					return
				}
				s := time.Now()
				if err := op(ctx, w, i); err != nil {
					errs[w] = err
					next.Store(int64(n))
					return
				}
				lats[w] = append(lats[w], time.Since(s))
			}
		}(w)
	}
	wg.Wait()
	elapsed = time.Since(t0)
	for _, l := range lats {
		lat = append(lat, l...)
	}
	slices.Sort(lat)
	return lat, elapsed, errors.Join(errs...)
}

// Shape returns the shape of ProposalShapes named name.
func Shape(name string) (StorageShape, bool) {
	for _, s := range ProposalShapes() {
		if s.Name == name {
			return s, true
		}
	}
	return StorageShape{}, false
}

// Quantile is the q-quantile of sorted latencies.
func Quantile(sorted []time.Duration, q float64) time.Duration { return quantile(sorted, q) }
