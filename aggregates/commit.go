package aggregates

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
)

// Group commit. One committer goroutine per engine (started on demand, gone
// when idle) owns the warm states and every decision:
//
//	waiting  transactions not decided yet, in arrival order
//	forming  decided (folded into the warm states), being sealed or sealed,
//	         not sent: the next batch
//	flights  the groups sent and not answered yet: one atomic batch, or
//	         groups of single appends on disjoint subjects
//
// A transaction is decided as soon as every subject it names is loaded and no
// earlier waiting transaction names one of them (FIFO per subject). Its
// events are sealed on their own goroutine (signing is the costly part), and
// whenever nothing is in flight the sealed prefix of forming is sent as one
// append. While only single appends are in flight, a group that goes as
// single appends too and names none of their subjects goes without waiting
// (see maybeSend). A transaction's result is delivered when the append
// holding it is stored, never before: a later decision may rest on it only
// inside this process, and if it fails the later one is made again.

// txn is one Run call inside the committer.
type txn struct {
	ctx    context.Context
	tenant string
	dec    decider
	refs   []Ref // the subjects it decides on, in the order of the decider's states and ens
	ens    []*entry

	// set by the committer
	evs      [][]kernel.Event
	refusal  *kernel.Refusal
	out      any // what the last decision gave its caller besides its events
	nevents  int
	decision int // bumped on each decision; stale seal results are ignored
	envs     [][]codec.Envelope
	sealed   bool
	sealErr  error
	snaps    []snapCandidate
	read     []guardRead // the guarded reads of the last decision, at the sequences read
	attempts int
	verified bool // a refusal or no-op may be acted on: the caller checked the store's last sequences
	dirty    bool
	done     chan txResult
	// order, when not nil, says the last decision's events may be stored
	// as any prefix of its refs in this order (kernel.Effects.Prefix).
	order []int
}

// guardRead is a subject a decision read without appending to it, at the
// sequence it read (see Guard).
type guardRead struct {
	en  *entry
	seq uint64
}

func (t *txn) guarded(i int) bool { return t.dec.guarded(i) }

// decider is what the committer decides: a kernel step (Engine.Run).
type decider interface {
	// decide decides on the states of the refs, in their order: the
	// events per ref, the refusal, what the caller gets besides, or an
	// error that fails the transaction. It may be called again after a
	// conflict, and runs on the committer goroutine.
	decide(states []State) (evs [][]kernel.Event, refusal *kernel.Refusal, out any, err error)
	// guarded reports whether ref i is read only and guarded (Guard).
	guarded(i int) bool
	// folded is called once the decision is folded into the states.
	folded()
}

// prefixer is a decider whose decision may say its events can be stored as
// any prefix of an order of its refs (kernel.Effects.Prefix): order returns
// it from the decision's out, nil when the events go all or nothing.
type prefixer interface {
	order(out any) []int
}

type txResult struct {
	res      Result
	out      any // the decider's out of the decision that took effect
	err      error
	panicked any
	// verify asks the caller to check the store's last sequences of the
	// refs before a refusal or no-op decided on warm state is acted on:
	// those of the refs the decision reads without appending to (check).
	verify bool
	check  []bool
}

type snapCandidate struct {
	ref  int
	data []byte // the state right after this transaction's events on the ref
}

// committer runs the group commit. Its send policy, in full:
//
//   - What goes: the sealed prefix of forming, in arrival order, cut at
//     MaxBatchEvents events or MaxBatchTxs transactions, while no atomic
//     batch is in flight.
//   - As singles: when every transaction of the group appends one event
//     and n single appends measured cheaper than one atomic batch (moving
//     averages of appends that had the store to themselves; the other way
//     is tried now and then, see preferSingles). Such a group may go
//     beside single appends in flight when it names none of their
//     subjects and singles are the way for everything in the committer
//     (costs.pipelines).
//   - As a batch: otherwise, one atomic batch with one expected sequence
//     per subject and the guards of its reads.
//   - Linger: with nothing in flight, a group smaller than the last append
//     delivered, not full and not going as singles waits for the callers
//     that append released, at most half an atomic batch's measured cost
//     and Engine.Linger (costs.lingerWait); the Pacer holds it until then.
//
// Engine.Appends fixes the way (AppendBatches, AppendSingles) and a
// negative Engine.Linger turns the linger off: `make bench` measures each
// fixed policy against this one in its table "Group commit: the adaptive
// send policy and fixed ones, same run".
type committer struct {
	e             *Engine
	kick          chan struct{}
	sealDone      chan sealResult
	batchDone     chan batchResult
	loadDone      chan loadResult
	waiting       []*txn
	forming       []*txn
	formingEvents int
	flights       int    // appends in flight: an atomic batch, or a chain of a group of single appends
	sent          uint64 // groups sent so far
	flyingTxs     int    // transactions in the groups in flight
	batchFlying   bool   // one of them is an atomic batch: nothing else goes
	loads, seals  int
	costs         costs // of the two ways to append a group; see preferSingles
	sends         int
	// Linger (see lingerUntil): how many transactions the last append
	// delivered, and when it returned.
	lastTxs  int
	lastDone time.Time
	evictAt  int // entries above which evict scans again
}

type sealResult struct {
	t        *txn
	decision int
	envs     [][]codec.Envelope
	err      error
}

type batchResult struct {
	txs   []*txn
	items []events.AppendItem
	ens   []*entry // per item
	seqs  []uint64
	err   error
	// split holds the results of one chain of a group sent as independent
	// single appends (see maybeSend), one per transaction.
	split []batchResult
	// prefix marks the chain of single appends of one transaction whose
	// events may be stored as a prefix (see sendPrefix): items and seqs
	// are per subject, seqs the last sequence stored on each.
	prefix bool
	// groupDone marks the chain of such a group answered last: only it
	// carries the group's transactions (events) and time (elapsed). An
	// atomic batch carries its own elapsed.
	groupDone bool
	events    int
	elapsed   time.Duration
	flew      []*entry // every subject the append named, appended to or guarded (a chain: its one)
	// sent numbers the group among those sent (committer.sent); overlapped:
	// others were in flight when it was sent.
	sent       uint64
	overlapped bool
	group      int // transactions sent in the group
}

type loadResult struct {
	en    *entry
	state State
	seq   uint64
	since int // events folded since the state's last snapshot
	err   error
}

func newCommitter(e *Engine) *committer {
	return &committer{e: e, kick: make(chan struct{}, 1), sealDone: make(chan sealResult, 64),
		batchDone: make(chan batchResult, 1), loadDone: make(chan loadResult, 64), costs: costs{single: 0.001, batch: 0.003}}
}

func (c *committer) maxEvents() int {
	if n := c.e.MaxBatchEvents; n > 0 && n <= events.MaxBatch {
		return n
	}
	return events.MaxBatch
}

func (c *committer) maxTxs() int {
	if n := c.e.MaxBatchTxs; n > 0 {
		return n
	}
	return 256
}

func (c *committer) maxAttempts() int { return max(c.e.MaxAttempts, 1) }

// idle reports whether the committer holds no work: nothing waiting,
// forming, in flight, loading or sealing.
func (c *committer) idle() bool {
	return len(c.waiting) == 0 && len(c.forming) == 0 && c.flights == 0 && c.loads == 0 && c.seals == 0
}

func (c *committer) run() {
	e := c.e
	for {
		e.mu.Lock()
		if len(e.front) > 0 {
			// Verified transactions take back their place in line.
			c.waiting = append(e.front, c.waiting...)
			e.front = nil
		}
		c.waiting = append(c.waiting, e.queue...)
		e.queue = nil
		if c.idle() {
			// (e.front and e.queue were just emptied under the lock)
			e.running = false
			e.Pacer.Idle(0)
			e.mu.Unlock()
			return
		}
		c.evict()
		e.mu.Unlock()
		c.decideReady()
		c.maybeSend()
		if c.idle() {
			// Everything finished without waiting (decided on warm
			// state, nothing to append): exit at the top, under the
			// lock, rather than park with nothing that would wake the
			// committer but the next Run, which kept an abandoned
			// engine's goroutine and warm state alive for good.
			continue
		}
		if c.loads == 0 && c.seals == 0 && c.flights == 0 {
			e.Pacer.Idle(len(c.forming))
		}
		select {
		case <-c.kick:
		case r := <-c.sealDone:
			c.onSeal(r)
		case r := <-c.batchDone:
			c.onBatch(r)
		case r := <-c.loadDone:
			c.onLoad(r)
		}
	}
}

// evict drops the least recently used idle entries once the engine holds
// more than MaxWarm, down to nine tenths of it. Idle: no Run holds the entry
// (so no transaction waiting, decided or in flight names it, but one whose
// caller gave up, which pending and status cover), nothing decided on it is
// unfinished, and no load is in flight. It runs on the committer, which
// owns pending and status, with e.mu held. A scan that cannot free enough
// waits until a tenth more entries exist before the next.
func (c *committer) evict() {
	e := c.e
	limit := e.maxWarm()
	if limit < 0 || len(e.entries) <= max(limit, c.evictAt) {
		return
	}
	var idle []*entry
	for _, en := range e.entries {
		if en.users == 0 && en.pending == 0 && en.status != entryLoading {
			idle = append(idle, en)
		}
	}
	slices.SortFunc(idle, func(a, b *entry) int { return cmp.Compare(a.lastUsed, b.lastUsed) })
	target := limit - limit/10
	for _, en := range idle {
		if len(e.entries) <= target {
			break
		}
		delete(e.entries, en.subject)
		e.stats.evicted.Add(1)
	}
	c.evictAt = len(e.entries) + max(limit/10, 1)
}

func (c *committer) finish(t *txn, r txResult) {
	c.e.Pacer.Finished(t.ctx)
	t.done <- r
}

// decideReady decides the waiting transactions that can be, in order.
func (c *committer) decideReady() {
	if len(c.waiting) == 0 {
		return
	}
	// FIFO per subject: a transaction waits behind an earlier waiting one
	// that appends to a subject it names. A guarded read (Guard) takes no
	// part in that order: the subject a whole tenant reads (its kill
	// switch) would otherwise queue every proposal behind any cold load,
	// and its guard already refuses an append whose read went stale.
	var blocked map[*entry]bool
	block := func(t *txn) {
		if blocked == nil {
			blocked = map[*entry]bool{}
		}
		for i, en := range t.ens {
			if !t.guarded(i) {
				blocked[en] = true
			}
		}
	}
	keep := make([]*txn, 0, len(c.waiting))
	for _, t := range c.waiting {
		if c.formingEvents >= c.maxEvents() || len(c.forming) >= c.maxTxs() {
			keep = append(keep, t)
			continue
		}
		if err := t.ctx.Err(); err != nil {
			c.finish(t, txResult{err: &UnavailableError{Err: err}})
			continue
		}
		ready := true
		for i, en := range t.ens {
			if blocked[en] && !t.guarded(i) {
				ready = false
			} else if !c.usable(en, t.refs[i]) {
				ready = false
			}
		}
		if !ready {
			block(t)
			keep = append(keep, t)
			continue
		}
		c.decide(t)
	}
	c.waiting = keep
}

// usable reports whether en can be decided on now, starting a load when
// it needs one.
func (c *committer) usable(en *entry, ref Ref) bool {
	switch en.status {
	case entryLoading:
		return false
	case entryUnloaded:
		if en.flying == 0 {
			// (A subject dropped while a group of single appends
			// carrying it is in flight is read once that group is
			// answered: read before, it would hold the state before the
			// group with the sequence after it.)
			c.startLoad(en, ref, true)
		}
		return false
	}
	forget := en.forget.Load()
	if forget || en.minSeq.Load() > en.seq.Load() {
		if en.pending == 0 {
			en.forget.Store(false)
			c.startLoad(en, ref, forget)
		}
		return false
	}
	return true
}

// decide makes t's decision on the warm states and folds it in.
func (c *committer) decide(t *txn) {
	states := make([]State, len(t.ens))
	for i, en := range t.ens {
		states[i] = en.state
	}
	evs, refusal, out, panicked, err := callDecide(t.dec, states)
	if panicked != nil {
		c.finish(t, txResult{panicked: panicked})
		return
	}
	if err != nil {
		c.finish(t, txResult{err: err})
		return
	}
	if evs != nil && len(evs) != len(t.ens) {
		c.finish(t, txResult{err: fmt.Errorf("aggregates: Decide returned %d event lists for %d refs", len(evs), len(t.ens))})
		return
	}
	if !t.verified && (refusal != nil || countEvents(evs) == 0) {
		// A refusal (often appended only to the operation subject, where
		// no expected sequence guards the ledger it read) or a no-op must
		// not rest on a stale cache: another replica may have changed a
		// subject. The caller checks, then it is decided again.
		check := make([]bool, len(t.ens))
		for i := range check {
			check[i] = i >= len(evs) || len(evs[i]) == 0 // an append is guarded by its own expected sequence
		}
		c.finish(t, txResult{verify: true, check: check})
		return
	}
	for i, l := range evs {
		for _, ev := range l {
			if err := t.ens[i].state.Apply(ev); err != nil {
				// A kernel bug: the warm states may hold part of this
				// decision. Reload them once the decisions before are done.
				for j := 0; j <= i; j++ {
					t.ens[j].forget.Store(true)
				}
				c.finish(t, txResult{err: fmt.Errorf("aggregates: decided event does not fold on %s: %w", t.refs[i].Subject, err)})
				return
			}
		}
	}
	if p := callFolded(t.dec); p != nil {
		for _, en := range t.ens {
			en.forget.Store(true)
		}
		c.finish(t, txResult{panicked: p})
		return
	}
	t.evs, t.refusal, t.out, t.nevents = evs, refusal, out, countEvents(evs)
	t.order = nil
	if p, ok := t.dec.(prefixer); ok {
		t.order = prefixOrder(p.order(out), evs)
	}
	t.read = t.read[:0]
	for i, en := range t.ens {
		if t.guarded(i) {
			t.read = append(t.read, guardRead{en: en, seq: en.seq.Load()})
		}
	}
	idle := true
	for _, en := range t.ens {
		if en.pending > 0 {
			idle = false
		}
	}
	if t.nevents == 0 && idle {
		// Nothing to append and nothing undecided under it: done now.
		c.finish(t, txResult{res: Result{Refusal: refusal}, out: out})
		return
	}
	t.decision++
	t.snaps = nil
	for i, en := range t.ens {
		en.pending++
		if len(evs) > 0 && len(evs[i]) > 0 && c.e.snapshots(t.refs[i], en.state) {
			en.sinceSnap += len(evs[i])
			if en.sinceSnap >= c.e.snapshotEvery() {
				if data, err := marshalState(en.state); err == nil {
					t.snaps = append(t.snaps, snapCandidate{ref: i, data: data})
					en.sinceSnap = 0
				}
			}
		}
	}
	c.forming = append(c.forming, t)
	c.formingEvents += t.nevents
	if t.nevents == 0 {
		t.sealed = true
		return
	}
	t.sealed = false
	c.seals++
	d := t.decision
	c.e.Pacer.Seal(func() {
		envs, err := c.e.Sealer.SealBySubject(t.tenant, evs)
		r := sealResult{t: t, decision: d, envs: envs, err: err}
		select {
		case c.sealDone <- r:
		default:
			// A pacer that seals on the committer itself (in decision
			// order) must not block it on a full channel.
			go func() { c.sealDone <- r }()
		}
	})
}

func callDecide(d decider, s []State) (evs [][]kernel.Event, r *kernel.Refusal, out any, panicked any, err error) {
	defer func() {
		if p := recover(); p != nil {
			panicked = p
		}
	}()
	evs, r, out, err = d.decide(s)
	return evs, r, out, nil, err
}

func callFolded(d decider) (panicked any) {
	defer func() { panicked = recover() }()
	d.folded()
	return nil
}

func (c *committer) onSeal(r sealResult) {
	c.seals--
	t := r.t
	if t.decision != r.decision || t.sealed {
		return // decided again since
	}
	// A failed seal is handled when the batch is cut (maybeSend), when no
	// batch is in flight that could rest on the same subjects.
	t.envs, t.sealErr, t.sealed = r.envs, r.err, true
	c.e.stats.sealed.Add(1)
}

// maybeSend sends the sealed prefix of forming when nothing is in flight,
// and, while only groups of single appends are, the part of it that names
// none of their subjects if it goes as single appends too: such a group
// does not rest on what is in flight (its subjects' transactions before it
// are stored or in it), so the store answers it independently, and
// callers each wait one append, not the group before theirs.
func (c *committer) maybeSend() {
	if len(c.forming) == 0 || c.batchFlying || c.flights > 0 && c.e.Appends == AppendBatches {
		return
	}
	// The sealed prefix, cut to what one append may carry: a transaction
	// decided while the group was nearly full can push the forming events
	// past the limit, and the store refuses an append over it.
	n, evs := 0, 0
	for n < len(c.forming) && c.forming[n].sealed && n < c.maxTxs() {
		if evs+c.forming[n].nevents > c.maxEvents() && n > 0 {
			break
		}
		if c.flights > 0 && c.flying(c.forming[n]) {
			break
		}
		evs += c.forming[n].nevents
		n++
	}
	if n == 0 || !c.e.Pacer.Send(n, c.lingerUntil(n), c.wake) {
		return
	}
	var bad []*txn
	for _, t := range c.forming[:n] {
		if t.sealErr != nil {
			bad = append(bad, t)
		}
	}
	if len(bad) > 0 {
		fail := map[*txn]error{}
		for _, t := range bad {
			fail[t] = t.sealErr
		}
		c.rollback(nil, bad, fail, false)
		c.maybeSend()
		return
	}
	batch := c.forming[:n:n]
	idx := map[*entry]int{}
	var items []events.AppendItem
	var ens []*entry
	for _, t := range batch {
		for i, envs := range t.envs {
			if len(envs) == 0 {
				continue
			}
			en := t.ens[i]
			k, ok := idx[en]
			if !ok {
				k = len(items)
				idx[en] = k
				items = append(items, events.AppendItem{Subject: en.subject, ExpectedLastSeq: en.seq.Load()})
				ens = append(ens, en)
			}
			items[k].Envs = append(items[k].Envs, envs...)
		}
	}
	guards := false
	written := len(items)
	for _, t := range batch {
		if t.nevents == 0 {
			continue
		}
		for _, g := range t.read {
			// A subject the decision read and does not append to: the
			// batch is stored only if it has not moved since (Guard), at
			// the sequence the decision read. One the batch appends to is
			// guarded by that append's own expected sequence.
			k, ok := idx[g.en]
			switch {
			case !ok:
				idx[g.en] = len(items)
				items = append(items, events.AppendItem{Subject: g.en.subject, ExpectedLastSeq: g.seq})
				ens = append(ens, g.en)
				guards = true
			case k >= written && g.seq < items[k].ExpectedLastSeq:
				items[k].ExpectedLastSeq = g.seq // two reads of one subject: the older one must hold
			}
		}
	}
	var chains [][]*txn
	single := len(items) == 1 && len(items[0].Envs) == 1 && !guards && c.e.Appends != AppendBatches
	// A lone transaction whose events may be stored as a prefix goes as a
	// chain of single appends, in every mode, as an atomic batch would: with
	// nothing else in flight, and nothing else goes while it does. (Sent
	// beside other groups of single appends, 64 agents in cmd/bench saw
	// same-action refusals that the batches never gave; not pipelined until
	// that is understood.)
	prefix := !single && n == 1 && batch[0].order != nil && !guards && c.flights == 0
	switch {
	case prefix:
	case c.flights == 0:
		if !guards {
			chains = c.preferSingles(batch, items, ens)
		}
	case guards || !c.costs.pipelines(c.e.Appends, len(c.waiting)+len(c.forming)+c.flyingTxs):
		return // it waits for the single appends in flight
	case !single:
		if chains = singleChains(batch, items, ens); chains == nil {
			return
		}
	}
	c.forming = append([]*txn(nil), c.forming[n:]...)
	c.formingEvents = 0
	for _, t := range c.forming {
		c.formingEvents += t.nevents
	}
	overlapped := c.flights > 0
	if !overlapped {
		c.e.stats.busy.start(time.Now())
	}
	c.flights++
	c.flyingTxs += n
	c.sent++
	c.batchFlying = chains == nil && !single
	sent := c.sent
	for _, en := range ens {
		en.flying++
	}
	if len(items) == 0 {
		c.onBatch(batchResult{txs: batch, group: n})
		return
	}
	if prefix {
		go func() {
			t0 := time.Now()
			r := c.e.sendPrefix(batch[0], items, ens)
			r.elapsed, r.flew, r.sent, r.overlapped, r.group = time.Since(t0), ens, sent, overlapped, 1
			c.batchDone <- r
		}()
		return
	}
	if chains != nil {
		// Each chain is a flight of its own and is answered when its
		// appends are: a caller waits for its own append, not for the
		// slowest of the group. The chain answered last carries the
		// group's time and size, for the cost model and linger.
		c.e.stats.singleGroups.Add(1)
		c.flights += len(chains) - 1
		t0 := time.Now()
		var left atomic.Int32
		left.Store(int32(len(chains)))
		for k := range items {
			go func(k int) {
				var split []batchResult
				expected := items[k].ExpectedLastSeq
				for j, env := range items[k].Envs {
					it := []events.AppendItem{{Subject: items[k].Subject, ExpectedLastSeq: expected, Envs: []codec.Envelope{env}}}
					seqs, err := c.e.appendItems(it)
					r := batchResult{txs: chains[k][j : j+1], items: it, ens: ens[k : k+1], seqs: seqs, err: err}
					if err != nil {
						r.txs = chains[k][j:] // not stored: this one and the ones chained after it
						split = append(split, r)
						break
					}
					split = append(split, r)
					expected = seqs[0]
				}
				r := batchResult{split: split, flew: ens[k : k+1], sent: sent, overlapped: overlapped, group: len(chains[k])}
				if left.Add(-1) == 0 {
					r.groupDone, r.elapsed, r.events = true, time.Since(t0), n
				}
				c.batchDone <- r
			}(k)
		}
		return
	}
	go func() {
		t0 := time.Now()
		seqs, err := c.e.appendItems(items)
		c.batchDone <- batchResult{txs: batch, items: items, ens: ens, seqs: seqs, err: err, elapsed: time.Since(t0), flew: ens, sent: sent, overlapped: overlapped, group: n}
	}()
}

// DefaultLinger is Engine.Linger's default.
const DefaultLinger = 5 * time.Millisecond

// lingerUntil is when a ready group of n transactions goes out at the
// latest (see costs.lingerWait): zero, at once, while anything is in
// flight, before any append returned, or under AppendSingles.
func (c *committer) lingerUntil(n int) time.Time {
	if c.flights > 0 || c.lastDone.IsZero() || c.e.Appends == AppendSingles {
		return time.Time{}
	}
	full := n >= c.maxTxs() || c.formingEvents >= c.maxEvents()
	wait := c.costs.lingerWait(n, c.lastTxs, full, c.e.Linger)
	if wait <= 0 {
		return time.Time{}
	}
	return c.lastDone.Add(wait)
}

// wake makes the committer look again, as a new transaction does.
func (c *committer) wake() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// costs are the measured costs, in seconds, of the two ways to append a
// group: one single-event append (pipelined with others) and one atomic
// batch (moving averages, see observe).
type costs struct{ single, batch float64 }

// singles reports whether n single appends cost less than one atomic batch.
func (k costs) singles(n int) bool { return float64(n)*k.single < k.batch }

// choose reports whether the sends-th group that may go either way, of n
// transactions, goes as single appends: the cheaper way, but the other way
// now and then (see preferSingles).
func (k costs) choose(n, sends int) bool {
	singles := k.singles(n)
	switch {
	case singles && sends%100 == 0:
		return false
	case !singles && n <= 8 && sends%10 == 0:
		return true
	}
	return singles
}

// pipelines reports whether a group may go out as single appends while
// groups of single appends are in flight, given the n transactions in the
// committer (waiting, forming and in flight): when single appends are the
// way (mode), or when the model would send all n as single appends rather
// than as one atomic batch (without its occasional tries of the other way,
// made when nothing is in flight). So a few callers each keep an append in
// flight, and many wait for the flights to end and go out together, where
// one atomic batch carries them for less.
func (k costs) pipelines(mode AppendMode, n int) bool {
	switch mode {
	case AppendBatches:
		return false
	case AppendSingles:
		return true
	}
	return k.singles(max(n, 2))
}

// sample is one finished append as the cost model sees it.
type sample struct {
	// alone: no other append was in flight while it was, before or after
	// it was sent. Only such an append measures what its way costs; one
	// that overlapped others measures their contention too.
	alone   bool
	singles bool // a group of single appends, or else one append
	one     bool // an append of one event
	events  int  // the events of a group of single appends
	elapsed time.Duration
}

// sample is r for the cost model; last: no group was sent after r's. A
// prefix chain is neither way of appending a group: it measures neither.
func (r batchResult) sample(last bool) sample {
	return sample{alone: last && !r.overlapped && !r.prefix, singles: r.split != nil, events: r.events, elapsed: r.elapsed,
		one: r.split == nil && len(r.items) == 1 && len(r.items[0].Envs) == 1}
}

// observe returns the model after s (moving averages).
func (k costs) observe(s sample) costs {
	const a = 0.2
	switch {
	case !s.alone || s.elapsed <= 0:
	case s.singles:
		k.single = (1-a)*k.single + a*s.elapsed.Seconds()/float64(max(s.events, 1))
	case s.one:
		// A group of one: a single append either way. Its round trip is
		// not what a single append adds to a group of several (those are
		// pipelined), so the average it would move is left alone.
	default:
		k.batch = (1-a)*k.batch + a*s.elapsed.Seconds()
	}
	return k
}

// lingerWait is how long after the last append returned a ready group of n
// transactions may wait for more (0: send it now). The callers of the
// append that just returned usually come back at once with their next
// transaction (a closed loop: agents, the gateway's next step); sending the
// n that are ready now would leave those to wait behind a whole append, and
// with a fixed cost per atomic batch, concurrent callers would split into
// two half-size groups that alternate. So a group smaller than the last one
// (lastTxs) waits, for at most half of an atomic batch's cost and limit
// (Engine.Linger: 0 is DefaultLinger, negative never). Never when the group
// is full or would go as single appends (they are cheap one by one).
func (k costs) lingerWait(n, lastTxs int, full bool, limit time.Duration) time.Duration {
	if limit == 0 {
		limit = DefaultLinger
	}
	if limit < 0 || full || n >= lastTxs || k.singles(lastTxs) {
		return 0
	}
	return min(time.Duration(k.batch*float64(time.Second)/2), limit)
}

// preferSingles decides whether a group is better appended as single-event
// appends than as one atomic batch, and returns then, per item, the
// transactions whose events it carries, in order. That is possible when
// every transaction of the group appends exactly one event: each append is
// then the whole of its transaction and needs no atomicity with the others.
// Appends to distinct subjects are pipelined on the connection; the events
// of one subject (a hot resource's chain) go one after the other, each
// expecting the sequence the previous one got. It pays when the server's
// fixed cost of an atomic batch (on a single server it stages every batch
// in a store of its own, created and removed on disk) exceeds that many
// single appends, which the moving averages of both, measured here, decide.
// Now and then a group that could go either way goes the other way, to keep
// both averages current: a model that only ever sent batches would never
// learn that singles got cheaper (relaxed sync, a quieter disk, fewer
// callers), nor the reverse. Every 100th group tries a batch; every 10th
// tries singles, but only when it holds at most 8 transactions (a large
// group, a hot resource's chain above all, would pay one round trip per
// event and put its transactions in the p99). Small groups try more often:
// at a few callers the two ways cost about the same, a single sample moves
// the average a fifth of the way, and one try in 100 left the committer on
// atomic batches for most of a 5 s point after the disk slowed for a moment
// (measured: 8 agents at a third of the raw single-append rate, where
// single appends made 0.8-1.1 of it).
func (c *committer) preferSingles(batch []*txn, items []events.AppendItem, ens []*entry) [][]*txn {
	if len(batch) < 2 {
		return nil
	}
	chains := singleChains(batch, items, ens)
	if chains == nil {
		return nil
	}
	switch c.e.Appends {
	case AppendBatches:
		return nil
	case AppendSingles:
		return chains
	}
	c.sends++
	if !c.costs.choose(len(batch), c.sends) {
		return nil
	}
	return chains
}

// singleChains returns, per item, the transactions whose events it carries,
// in order, when every transaction of the group appends exactly one event
// (nil otherwise).
func singleChains(batch []*txn, items []events.AppendItem, ens []*entry) [][]*txn {
	idx := make(map[*entry]int, len(ens))
	for k, en := range ens {
		idx[en] = k
	}
	chains := make([][]*txn, len(items))
	for _, t := range batch {
		if t.nevents != 1 {
			return nil
		}
		for i, envs := range t.envs {
			if len(envs) == 1 {
				k := idx[t.ens[i]]
				chains[k] = append(chains[k], t)
			}
		}
	}
	return chains
}

// appendItems stores one batch, retrying the very same envelopes after an
// unknown outcome (the store recognises an exact retry).
func (e *Engine) appendItems(items []events.AppendItem) ([]uint64, error) {
	var got []uint64
	var err error
	ctx := context.Background()
	for try := 0; try < 5; try++ {
		if len(items) == 1 {
			var s uint64
			s, err = e.Store.Append(ctx, items[0].Subject, items[0].ExpectedLastSeq, items[0].Envs...)
			got = []uint64{s}
		} else {
			got, err = e.Store.AppendBatch(ctx, items)
		}
		if err == nil || errors.Is(err, events.ErrConflict) || errors.Is(err, events.ErrInvalidAppend) {
			break
		}
		backoff(ctx, try)
	}
	e.stats.batches.Add(1)
	if err != nil {
		if !errors.Is(err, events.ErrConflict) && !errors.Is(err, events.ErrInvalidAppend) && !errors.Is(err, events.ErrEventIDReused) {
			// Not answered after the retries: the outcome is unknown.
			err = &UnavailableError{Err: err}
		}
		return nil, err
	}
	if len(got) != len(items) {
		return nil, fmt.Errorf("aggregates: store returned %d sequences for %d items", len(got), len(items))
	}
	return got, nil
}

// prefixOrder checks a decision's prefix order against its events: every
// ref with events named once; nil (all or nothing) otherwise.
func prefixOrder(order []int, evs [][]kernel.Event) []int {
	if order == nil {
		return nil
	}
	seen := make([]bool, len(evs))
	for _, i := range order {
		if i < 0 || i >= len(evs) || seen[i] {
			return nil
		}
		seen[i] = true
	}
	for i, l := range evs {
		if len(l) > 0 && !seen[i] {
			return nil
		}
	}
	return order
}

// sendPrefix appends a transaction whose events may be stored as any
// prefix of its order (kernel.Effects.Prefix) as a chain of single
// appends, one event at a time in that order, each expecting the sequence
// its subject had before it: what a lone settlement costs is then a few
// single appends, not the staging of an atomic batch. items and ens are
// the transaction's subjects, as maybeSend built them; the result's seqs
// are the last sequence stored on each. On an error the events stored
// before it stay: the transaction's subjects are reloaded and it is
// decided again (a conflict), or failed, and its step completes what is
// stored when it is decided next (see kernel.SettleStep).
func (e *Engine) sendPrefix(t *txn, items []events.AppendItem, ens []*entry) batchResult {
	at := make(map[*entry]int, len(ens))
	seqs := make([]uint64, len(items))
	for k, en := range ens {
		at[en] = k
		seqs[k] = items[k].ExpectedLastSeq
	}
	r := batchResult{txs: []*txn{t}, items: items, ens: ens, prefix: true}
	for _, i := range t.order {
		k := at[t.ens[i]]
		for _, env := range envsAt(t.envs, i) {
			got, err := e.appendItems([]events.AppendItem{{Subject: items[k].Subject, ExpectedLastSeq: seqs[k], Envs: []codec.Envelope{env}}})
			if err != nil {
				r.err = err
				return r
			}
			seqs[k] = got[0]
		}
	}
	r.seqs = seqs
	return r
}

// flying reports whether t names a subject of a group in flight.
func (c *committer) flying(t *txn) bool {
	for _, en := range t.ens {
		if en.flying > 0 {
			return true
		}
	}
	return false
}

func (c *committer) onBatch(r batchResult) {
	c.flights--
	if c.flights == 0 {
		c.e.stats.busy.stop(time.Now())
	}
	c.flyingTxs -= r.group
	c.batchFlying = false
	for _, en := range r.flew {
		en.flying--
	}
	c.costs = c.costs.observe(r.sample(r.sent == c.sent))
	if r.split != nil {
		if r.groupDone {
			c.lastTxs, c.lastDone = r.events, time.Now() // the group's transactions, however its chains ended
		}
		c.onSplit(r.split)
		return
	}
	c.lastTxs, c.lastDone = len(r.txs), time.Now()
	var conflict *events.ConflictError
	switch {
	case r.err == nil:
		c.committed(r)
	case r.prefix:
		// Part of the chain may be stored: every subject it names is
		// reloaded, and the transaction decided again (a conflict) or
		// failed.
		var fail map[*txn]error
		if !errors.As(r.err, &conflict) {
			fail = map[*txn]error{r.txs[0]: r.err}
		} else {
			c.e.stats.conflicts.Add(1)
		}
		c.rollback(r.ens, r.txs, fail, fail == nil)
	case errors.As(r.err, &conflict):
		c.e.stats.conflicts.Add(1)
		var bad []*entry
		for k, it := range r.items {
			if conflict.Subject == "" || conflict.Names(it.Subject) {
				bad = append(bad, r.ens[k])
			}
		}
		if len(bad) == 0 {
			bad = r.ens
		}
		c.rollback(bad, r.txs, nil, true)
	default:
		// Invalid, or unknown after retries: fail the batch, reload its
		// subjects and decide again whatever rested on them.
		fail := map[*txn]error{}
		for _, t := range r.txs {
			fail[t] = r.err
		}
		c.rollback(r.ens, r.txs, fail, false)
	}
}

// onSplit handles a group appended as independent single appends: each
// transaction succeeded, conflicted (decided again, with the ones chained
// after it on its subject) or failed on its own (the ones chained after it
// were not sent: decided again).
func (c *committer) onSplit(split []batchResult) {
	var bad []*entry
	var conflicted, involved []*txn
	fail := map[*txn]error{}
	for _, r := range split {
		var conflict *events.ConflictError
		switch {
		case r.err == nil:
			c.committed(r)
		case errors.As(r.err, &conflict):
			c.e.stats.conflicts.Add(1)
			bad = append(bad, r.ens...)
			conflicted = append(conflicted, r.txs...)
		default:
			fail[r.txs[0]] = r.err
			involved = append(involved, r.txs...)
		}
	}
	if len(involved) > 0 {
		c.rollback(nil, involved, fail, false)
	}
	if len(conflicted) > 0 {
		c.rollback(bad, conflicted, nil, true)
	}
}

// committed delivers the results of a stored batch.
func (c *committer) committed(r batchResult) {
	e := c.e
	next := map[*entry]uint64{} // sequence of the next event of the batch per subject
	cur := map[*entry]uint64{}  // last sequence per subject so far in batch order
	for k, it := range r.items {
		en := r.ens[k]
		next[en] = r.seqs[k] - uint64(len(it.Envs)) + 1
		cur[en] = it.ExpectedLastSeq
		en.seq.Store(r.seqs[k])
	}
	e.stats.batchedTxs.Add(uint64(len(r.txs)))
	for _, it := range r.items {
		e.stats.batchedEvents.Add(uint64(len(it.Envs)))
	}
	for _, t := range r.txs {
		seqs := make([]uint64, len(t.ens))
		for i, en := range t.ens {
			en.pending--
			if _, in := next[en]; !in {
				seqs[i] = en.seq.Load()
				continue
			}
			if n := len(envsAt(t.envs, i)); n > 0 {
				cur[en] = next[en] + uint64(n) - 1
				next[en] += uint64(n)
			}
			seqs[i] = cur[en]
		}
		for _, s := range t.snaps {
			envs := t.envs[s.ref]
			e.putSnapshot(t.ens[s.ref].subject, seqs[s.ref], envs[len(envs)-1].EventID, s.data)
		}
		c.finish(t, txResult{res: Result{Refusal: t.refusal}, out: t.out})
	}
}

// rollback undoes the decisions that rest on the subjects in bad, or on
// the transactions in fail: every involved (sent) or forming transaction
// that names such a subject is taken out, and so, transitively, is every
// one that names a subject one of those names. Their subjects are reloaded
// from the store. Transactions in fail are finished with their error; the
// others go back to the front of the waiting line, in order (conflict:
// counted against MaxAttempts). Transactions not affected stay as they are,
// sealed or being sealed, and are sent again.
func (c *committer) rollback(bad []*entry, involved []*txn, fail map[*txn]error, conflict bool) {
	in := map[*txn]bool{}
	all := append([]*txn(nil), involved...)
	for _, t := range involved {
		in[t] = true
	}
	for _, t := range c.forming {
		if !in[t] {
			all = append(all, t)
		}
	}
	dirty := map[*entry]bool{}
	for _, en := range bad {
		dirty[en] = true
	}
	for t := range fail {
		t.dirty = true
		for i, en := range t.ens {
			if !t.guarded(i) {
				dirty[en] = true
			}
		}
	}
	for changed := true; changed; {
		changed = false
		for _, t := range all {
			if !t.dirty {
				for _, en := range t.ens {
					if dirty[en] {
						t.dirty = true
						break
					}
				}
			}
			if t.dirty {
				// What a dirty transaction appended is undone on its
				// subjects; a subject it only read is as it was.
				for i, en := range t.ens {
					if !dirty[en] && !t.guarded(i) {
						dirty[en] = true
						changed = true
					}
				}
			}
		}
	}
	for en := range dirty {
		en.status = entryUnloaded
		en.state = nil
		en.sinceSnap = 0
	}
	var again, keep []*txn
	delay := 0
	for _, t := range all {
		if !t.dirty {
			keep = append(keep, t)
			continue
		}
		t.dirty = false
		t.decision++
		t.sealed, t.sealErr, t.envs, t.snaps, t.evs, t.out = false, nil, nil, nil, nil, nil
		for _, en := range t.ens {
			en.pending--
		}
		switch {
		case fail[t] != nil:
			c.finish(t, txResult{err: fail[t]})
		case conflict:
			t.attempts++
			c.e.stats.redecided.Add(1)
			if t.attempts >= c.maxAttempts() {
				c.contention(t)
				continue
			}
			delay = max(delay, t.attempts)
			again = append(again, t)
		default:
			again = append(again, t)
		}
	}
	for _, en := range bad {
		en.delay = delay // back off before reading the competing writer's tail
	}
	c.forming = keep
	c.formingEvents = 0
	for _, t := range keep {
		c.formingEvents += t.nevents
	}
	c.waiting = append(again, c.waiting...)
}

func envsAt(envs [][]codec.Envelope, i int) []codec.Envelope {
	if i < len(envs) {
		return envs[i]
	}
	return nil
}

func (c *committer) contention(t *txn) {
	subs := make([]string, len(t.refs))
	for i, r := range t.refs {
		subs[i] = r.Subject
	}
	if c.e.OnContention != nil {
		c.e.OnContention(t.tenant, subs)
	}
	c.finish(t, txResult{res: Result{Refusal: &kernel.Refusal{Code: wire.CodeContention,
		Reason: fmt.Sprintf("gave up after %d conflicting attempts; nothing was reserved or dispatched", c.maxAttempts())}}})
}

// startLoad loads en from the store on its own goroutine: the whole subject
// (from a snapshot when there is one), or only its tail when full is false.
func (c *committer) startLoad(en *entry, ref Ref, full bool) {
	en.status = entryLoading
	c.loads++
	var base State
	var from uint64
	since := 0
	if !full && en.state != nil {
		base, from, since = en.state, en.seq.Load(), en.sinceSnap
	}
	en.state = nil
	delay := en.delay
	en.delay = 0
	go func() {
		if delay > 0 {
			backoff(context.Background(), delay-1)
		}
		st, seq, since, err := c.e.load(context.Background(), ref, base, from, since)
		c.loadDone <- loadResult{en: en, state: st, seq: seq, since: since, err: err}
	}()
}

func (c *committer) onLoad(r loadResult) {
	c.loads--
	en := r.en
	if r.err != nil {
		en.status = entryUnloaded
		keep := c.waiting[:0]
		for _, t := range c.waiting {
			if names(t, en) {
				c.finish(t, txResult{err: r.err})
				continue
			}
			keep = append(keep, t)
		}
		c.waiting = keep
		return
	}
	en.state, en.status, en.sinceSnap = r.state, entryReady, r.since
	en.seq.Store(r.seq)
}

func names(t *txn, en *entry) bool {
	for _, x := range t.ens {
		if x == en {
			return true
		}
	}
	return false
}

// load folds a subject from the store: on top of base from sequence from
// (a refresh; since is the number of events base holds after its last
// snapshot), or cold (base nil) from its snapshot or from the start. It
// returns the state, its last sequence and the events it holds after its
// last snapshot, writing a snapshot when those reach SnapshotEvery.
func (e *Engine) load(ctx context.Context, ref Ref, base State, from uint64, since int) (State, uint64, int, error) {
	if base != nil {
		seq, n, last, err := e.fold(ctx, ref, base, from+1, from)
		if err != nil {
			return nil, 0, 0, err
		}
		return base, seq, e.snapshotLoaded(ref, base, seq, last, since+n, n), nil
	}
	e.stats.coldLoads.Add(1)
	st := ref.New()
	if e.snapshots(ref, st) {
		if s, seq, n, last, ok := e.fromSnapshot(ctx, ref); ok {
			e.stats.snapshotLoads.Add(1)
			return s, seq, e.snapshotLoaded(ref, s, seq, last, n, n), nil
		}
		e.stats.snapshotMiss.Add(1)
	}
	seq, n, last, err := e.fold(ctx, ref, st, 1, 0)
	if err != nil {
		return nil, 0, 0, err
	}
	return st, seq, e.snapshotLoaded(ref, st, seq, last, n, n), nil
}

// fold applies the subject's events with seq >= fromSeq to st and returns
// the last sequence (seq when there are none), the number folded and the
// last one's event id.
func (e *Engine) fold(ctx context.Context, ref Ref, st State, fromSeq, seq uint64) (uint64, int, string, error) {
	tail, err := e.Store.Read(ctx, ref.Subject, fromSeq)
	if err != nil {
		return 0, 0, "", readError(ref.Subject, err)
	}
	last := ""
	for _, s := range tail {
		if err := foldOne(ref, st, s); err != nil {
			return 0, 0, "", err
		}
		seq, last = s.Seq, s.Envelope.EventID
	}
	return seq, len(tail), last, nil
}

func foldOne(ref Ref, st State, s events.Stored) error {
	// A stored envelope passed the codec's canonical check.
	ev, err := kernel.DecodeCanonicalEvent(s.Envelope.Type, s.Envelope.V, s.Envelope.Body)
	if err == nil && ref.Check != nil {
		err = ref.Check(ev)
	}
	if err == nil {
		err = st.Apply(ev)
	}
	if err != nil {
		return &StoredEventError{Subject: ref.Subject, Seq: s.Seq, Err: err}
	}
	return nil
}

// backoff sleeps a jittered, growing interval (capped at ~20 ms): enough to
// let a competing replica's append land, short enough to keep p99 low.
func backoff(ctx context.Context, attempt int) {
	base := time.Duration(1<<min(attempt, 5)) * 300 * time.Microsecond
	d := base/2 + time.Duration(rand.Int64N(int64(base)))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
