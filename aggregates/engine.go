package aggregates

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
)

// State is a kernel aggregate folded from one subject's events.
type State interface {
	Apply(kernel.Event) error
}

// Snapshotter is a State that can be restored from a snapshot: its exported
// fields are its JSON form, and Rebuild restores what is private and checks
// the decoded state's internal consistency (kernel.Ledger is one).
type Snapshotter interface {
	State
	Rebuild() error
}

// Ref names one subject a transaction decides on and how to make its empty
// state.
type Ref struct {
	Subject string
	New     func() State
	// Check, when set, validates each stored event of the subject before it
	// is folded (for example that a reservation names the expected
	// resource, which guards the hashed long form of resource tokens).
	Check func(kernel.Event) error
	// Snapshot marks a subject whose state is worth snapshotting (a
	// resource ledger, which may hold thousands of events). It takes effect
	// when the engine has a SnapshotStore and New returns a Snapshotter.
	Snapshot bool
	// CheckState, when set, validates a state decoded from a snapshot
	// (for example that a ledger is the one of this resource); a snapshot
	// it refuses is ignored and the subject is folded in full.
	CheckState func(State) error
}

// Result is the outcome of a decision the engine ran: its refusal, if it
// refused.
type Result struct {
	Refusal *kernel.Refusal
}

// Engine runs transactions against a Store with optimistic concurrency.
//
// Its group commit sends the sealed decisions in arrival order while no
// atomic batch is in flight: as one atomic batch, or as single appends
// when every transaction appends one event and singles measured cheaper,
// or, for a lone transaction whose effects may be stored as a prefix (a
// provider's report, kernel.Effects.Prefix), as a chain of single appends;
// a group smaller than the last one delivered lingers a little for the
// callers that append released (Appends and Linger fix either part; the
// full policy is documented on the committer in commit.go, and `make bench`
// compares it with each fixed alternative in one run).
//
// It keeps warm state per subject, keyed by the subject's last stored
// sequence, and decides every transaction of this process on one committer
// goroutine, in arrival order per subject (FIFO: no transaction overtakes an
// earlier one on a subject it shares). Decisions are folded into the warm
// state at once, so the next transaction on a subject decides on top of the
// previous one even before it is stored; the decided events of many
// transactions are appended together as one atomic batch (group commit),
// with one expected last sequence per distinct subject, while the previous
// batch is in flight (natural batching: one batch at a time, as large as
// what arrived meanwhile). A batch that conflicts stores nothing: the
// transactions that rest on the conflicting subject are decided again on
// the refreshed state, the others are appended again as they were. Replicas
// therefore conflict only with each other.
//
// Cold loads read a snapshot of the subject's state (see SnapshotStore) and
// the events after it; a missing, stale or invalid snapshot falls back to
// folding the whole subject.
type Engine struct {
	Store  events.Store
	Sealer *Sealer
	// MaxAttempts bounds re-decisions after conflicts; exhausted contention
	// is refused with shared_guarantee_contention, never dispatched.
	MaxAttempts int
	// OnContention, when set, is told about exhausted contention (an
	// incident worth recording).
	OnContention func(tenant string, subjects []string)
	// Snapshots, when set, stores snapshots of the subjects whose Ref asks
	// for them. Set before first use.
	Snapshots SnapshotStore
	// SnapshotEvery is the number of events folded into a subject's state
	// after which a new snapshot is written (default DefaultSnapshotEvery).
	SnapshotEvery int
	// MaxBatchEvents bounds the events of one group commit (default and
	// maximum events.MaxBatch); MaxBatchTxs bounds its transactions
	// (default 256).
	MaxBatchEvents int
	MaxBatchTxs    int
	// Linger bounds how long a ready group may wait for the callers of the
	// append that just returned: 0 is DefaultLinger, a negative value never
	// waits.
	Linger time.Duration
	// Appends chooses how a group whose transactions each append one event
	// goes to the store: by the measured costs (the default), always as one
	// atomic batch, or always as single appends.
	Appends AppendMode
	// MaxWarm bounds the subjects whose state the engine keeps warm (0 is
	// DefaultMaxWarm, negative is unbounded). Past it, the committer drops
	// the least recently used idle ones; they load again (from their
	// snapshot) when next named.
	MaxWarm int
	// Pacer decides when the committer sends a ready group and where it
	// seals (see Pacer). NewEngine sets RealPacer; replace it, as a clock,
	// only before first use.
	Pacer Pacer

	mu      sync.Mutex
	entries map[string]*entry
	tick    uint64 // counts entriesFor calls: the entries' clock for MaxWarm
	queue   []*txn
	front   []*txn // verified transactions going back to their place in line
	running bool
	c       *committer
	snapw   snapWriter
	fresh   freshTails // the kept states of Fresh reads (Run)
	stats   engineStats
}

// Running reports whether the committer goroutine runs (it stops when it
// holds no work).
func (e *Engine) Running() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.running
}

// AppendMode is Engine.Appends.
type AppendMode uint8

// Append modes.
const (
	AppendMeasured AppendMode = iota // the cheaper way, as measured
	AppendBatches                    // always one atomic batch
	AppendSingles                    // single appends whenever every transaction appends one event
)

// DefaultMaxWarm is Engine.MaxWarm's default: with ledgers of a few
// receipts, some hundreds of megabytes at most.
const DefaultMaxWarm = 100_000

// DefaultSnapshotEvery is Engine.SnapshotEvery's default: a cold load folds
// at most this many events after the snapshot.
const DefaultSnapshotEvery = 16

// NewEngine returns an engine over store that signs with sealer.
func NewEngine(store events.Store, sealer *Sealer) *Engine {
	return &Engine{Store: store, Sealer: sealer, MaxAttempts: 16, Pacer: RealPacer(), entries: map[string]*entry{}}
}

// entry is the warm state of one subject. state, status, pending and
// sinceSnap belong to the committer goroutine; seq, minSeq and forget are
// also used by callers.
type entry struct {
	subject string
	seq     atomic.Uint64 // the subject's last sequence known stored
	minSeq  atomic.Uint64 // the store holds this sequence: refresh before deciding while seq < minSeq
	forget  atomic.Bool   // drop and reload before deciding

	state     State
	status    entryStatus
	pending   int // decided transactions on this subject not yet finished
	flying    int // groups in flight that name this subject
	sinceSnap int // events folded since the last snapshot
	delay     int // conflict count: back off before the next reload

	// Under Engine.mu: how many Run calls hold the entry, and when one
	// last took it (Engine.tick).
	users    int
	lastUsed uint64
}

type entryStatus uint8

const (
	entryUnloaded entryStatus = iota
	entryLoading
	entryReady
)

// run decides d over refs: decide on warm state (after the transactions
// before it on the same subjects), append with the sequences decided on,
// as part of a group commit; on conflict read the tails and decide again,
// bounded. Before a refusal or a no-op decided on warm state is appended or
// returned, the store's last sequences of every ref are read, and the
// decision is made again on the refreshed state if any subject moved. It
// returns the result with the decider's out of the decision that took
// effect (nil for exhausted contention).
func (e *Engine) run(ctx context.Context, tenant string, refs []Ref, d decider) (Result, any, error) {
	subjects := make([]string, len(refs))
	for i, r := range refs {
		if err := checkRef(tenant, r); err != nil {
			return Result{}, nil, err
		}
		subjects[i] = r.Subject
	}
	slices.Sort(subjects)
	for i := 1; i < len(subjects); i++ {
		if subjects[i] == subjects[i-1] {
			return Result{}, nil, fmt.Errorf("aggregates: subject %s appears twice in one transaction", subjects[i])
		}
	}
	if len(refs) == 0 {
		return Result{}, nil, errors.New("aggregates: a transaction needs at least one ref")
	}
	t := &txn{ctx: ctx, tenant: tenant, dec: d, refs: refs, ens: e.entriesFor(refs)}
	defer e.release(t.ens)
	for {
		r, err := e.submit(ctx, t)
		if err != nil {
			return Result{}, nil, err
		}
		if r.panicked != nil {
			panic(r.panicked)
		}
		if r.err != nil {
			return Result{}, nil, r.err
		}
		if r.verify {
			if err := e.verify(ctx, refs, t.ens, r.check); err != nil {
				return Result{}, nil, err
			}
			t = &txn{ctx: ctx, tenant: tenant, dec: d, refs: refs, ens: t.ens, attempts: t.attempts, verified: true}
			continue
		}
		return r.res, r.out, nil
	}
}

// verify reads, in parallel, the store's last sequence of every ref to
// check, and asks for a refresh of the subjects the store holds more of
// than the warm state. Parallel reads of several subjects are not one
// snapshot (an atomic batch may land between two of them), so the reads are
// repeated until a pass sees nothing move: then one instant between the two
// passes had exactly these sequences, and the decision rests on a
// consistent state of all its subjects.
func (e *Engine) verify(ctx context.Context, refs []Ref, ens []*entry, check []bool) error {
	checked := 0
	for i := range refs {
		if i >= len(check) || check[i] {
			checked++
		}
	}
	prev := make([]uint64, len(refs))
	for pass := 0; pass < 8; pass++ {
		cur := make([]uint64, len(refs))
		var wg sync.WaitGroup
		errs := make([]error, len(refs))
		for i, ref := range refs {
			if i < len(check) && !check[i] {
				continue
			}
			wg.Add(1)
			go func(i int, subject string) {
				defer wg.Done()
				cur[i], errs[i] = e.Store.LastSeq(ctx, subject)
			}(i, ref.Subject)
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return &UnavailableError{Err: err}
		}
		for i := range cur {
			storeMax(&ens[i].minSeq, cur[i]) // refresh first if the store is ahead
		}
		if checked <= 1 || pass > 0 && slices.Equal(prev, cur) {
			return nil
		}
		prev = cur
	}
	return nil
}

// checkRef refuses refs an append would refuse, before they can fail a
// whole group commit.
func checkRef(tenant string, r Ref) error {
	if r.New == nil {
		return fmt.Errorf("aggregates: ref %s has no New", r.Subject)
	}
	if err := codec.ValidSubject(r.Subject); err != nil {
		return fmt.Errorf("aggregates: %w", err)
	}
	if rest, ok := strings.CutPrefix(r.Subject, codec.SubjectPrefix); ok {
		if tok, _, _ := strings.Cut(rest, "."); tok != tenant {
			return fmt.Errorf("aggregates: subject %s is not of tenant %q", r.Subject, tenant)
		}
	}
	return nil
}

func storeMax(v *atomic.Uint64, x uint64) {
	for {
		cur := v.Load()
		if cur >= x || v.CompareAndSwap(cur, x) {
			return
		}
	}
}

func (e *Engine) entriesFor(refs []Ref) []*entry {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.entries == nil {
		e.entries = map[string]*entry{}
	}
	e.tick++
	out := make([]*entry, len(refs))
	for i, r := range refs {
		en, ok := e.entries[r.Subject]
		if !ok {
			en = &entry{subject: r.Subject}
			e.entries[r.Subject] = en
		}
		en.users++
		en.lastUsed = e.tick
		out[i] = en
	}
	return out
}

// release gives back entries taken by entriesFor.
func (e *Engine) release(ens []*entry) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, en := range ens {
		en.users--
	}
}

func (e *Engine) maxWarm() int {
	if e.MaxWarm == 0 {
		return DefaultMaxWarm
	}
	return e.MaxWarm
}

// submit queues t for the committer and waits for its outcome.
func (e *Engine) submit(ctx context.Context, t *txn) (txResult, error) {
	t.done = make(chan txResult, 1)
	e.Pacer.Submitting(ctx)
	e.mu.Lock()
	if t.verified {
		e.front = append(e.front, t)
	} else {
		e.queue = append(e.queue, t)
	}
	if e.c == nil {
		e.c = newCommitter(e)
	}
	if !e.running {
		e.running = true
		go e.c.run()
	} else {
		select {
		case e.c.kick <- struct{}{}:
		default:
		}
	}
	e.mu.Unlock()
	e.Pacer.Parked(ctx)
	select {
	case r := <-t.done:
		e.Pacer.Woken(ctx)
		return r, nil
	case <-ctx.Done():
		// The committer drops t if it has not decided it yet; otherwise
		// its outcome is unknown to this caller, as with any append whose
		// acknowledgement was not awaited.
		return txResult{}, &UnavailableError{Err: ctx.Err()}
	}
}

func countEvents(evs [][]kernel.Event) int {
	n := 0
	for _, l := range evs {
		n += len(l)
	}
	return n
}

// EngineStats are counters of an engine's work since it was made.
type EngineStats struct {
	Batches       uint64 // appends made (each one atomic batch or single append)
	SingleGroups  uint64 // groups sent as single appends rather than one atomic batch
	BatchedTxs    uint64 // transactions whose events those appends carried
	BatchedEvents uint64 // events appended
	Conflicts     uint64 // appends refused for a wrong expected sequence
	Redecided     uint64 // decisions made again after a conflict
	ColdLoads     uint64 // subjects loaded from the store
	SnapshotLoads uint64 // cold loads that started from a valid snapshot
	SnapshotMiss  uint64 // cold loads of snapshot subjects that found no usable snapshot
	SnapshotsPut  uint64 // snapshots handed to the SnapshotStore
	Evicted       uint64 // warm subjects dropped past MaxWarm
	Warm          int    // subjects held in memory now (MaxWarm bounds the idle ones)
	Sealed        uint64 // decisions sealed (signed) and ready to append
	// AppendBusy is the time during which at least one append was in
	// flight. Its rate is how busy the store's append pipeline keeps this
	// engine: near 1 (one second a second), the server's append cost bounds
	// the rate, whatever else is idle.
	AppendBusy time.Duration
}

type engineStats struct {
	batches, batchedTxs, batchedEvents, conflicts, redecided, singleGroups atomic.Uint64
	coldLoads, snapshotLoads, snapshotMiss, snapshotsPut                   atomic.Uint64
	evicted, sealed                                                        atomic.Uint64
	busy                                                                   busy
}

// busy accumulates the union of the intervals during which appends are in
// flight: the committer starts it when the first goes out and stops it when
// the last returns.
type busy struct {
	mu    sync.Mutex
	total time.Duration
	since time.Time // zero while no append is in flight
}

func (b *busy) start(now time.Time) {
	b.mu.Lock()
	b.since = now
	b.mu.Unlock()
}

func (b *busy) stop(now time.Time) {
	b.mu.Lock()
	if !b.since.IsZero() {
		b.total += now.Sub(b.since)
		b.since = time.Time{}
	}
	b.mu.Unlock()
}

func (b *busy) read(now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.since.IsZero() {
		return b.total
	}
	return b.total + now.Sub(b.since)
}

// Stats returns the engine's counters.
func (e *Engine) Stats() EngineStats {
	s := &e.stats
	e.mu.Lock()
	warm := len(e.entries)
	e.mu.Unlock()
	return EngineStats{Batches: s.batches.Load(), SingleGroups: s.singleGroups.Load(), BatchedTxs: s.batchedTxs.Load(), BatchedEvents: s.batchedEvents.Load(),
		Conflicts: s.conflicts.Load(), Redecided: s.redecided.Load(), ColdLoads: s.coldLoads.Load(),
		SnapshotLoads: s.snapshotLoads.Load(), SnapshotMiss: s.snapshotMiss.Load(), SnapshotsPut: s.snapshotsPut.Load(),
		Evicted: s.evicted.Load(), Sealed: s.sealed.Load(), Warm: warm, AppendBusy: s.busy.read(time.Now())}
}
