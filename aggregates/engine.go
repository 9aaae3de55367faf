package aggregates

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/kernel"
)

// State is a kernel aggregate folded from one subject's events.
type State interface {
	Apply(kernel.Event) error
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
}

// Tx is one load-decide-append transaction over one or more subjects.
type Tx struct {
	Tenant string
	Refs   []Ref
	// Decide is called with the current state of every ref, in Refs order,
	// while the refs are locked. It returns the events to append per ref
	// (nil for none) and an optional refusal; events are appended even with
	// a refusal (an incident is recorded). It must be a pure function of
	// the states: it may run several times.
	Decide func(states []State) ([][]kernel.Event, *kernel.Refusal)
	// Done, when set, is called once with the states after the decision
	// took effect (events folded), still under the lock: read balances here.
	Done func(states []State)
}

// Result is the outcome of Engine.Do.
type Result struct {
	Refusal   *kernel.Refusal
	Envelopes [][]events.Envelope // per ref, what was appended
	Seqs      []uint64            // per ref, the subject's last sequence after the decision
}

// Engine runs transactions against a Store with optimistic concurrency. It
// keeps warm state per subject, keyed by the subject's last sequence, and
// serializes transactions on one subject inside this process, so that
// replicas conflict only with each other.
type Engine struct {
	Store  events.Store
	Sealer *Sealer
	// MaxAttempts bounds re-decisions after conflicts; exhausted contention
	// is refused with shared_guarantee_contention, never dispatched.
	MaxAttempts int
	// OnContention, when set, is told about exhausted contention (an
	// incident worth recording).
	OnContention func(tenant string, subjects []string)

	mu      sync.Mutex
	entries map[string]*entry
}

type entry struct {
	mu     sync.Mutex
	state  State
	seq    uint64
	loaded bool
}

// NewEngine returns an engine over store that signs with sealer.
func NewEngine(store events.Store, sealer *Sealer) *Engine {
	return &Engine{Store: store, Sealer: sealer, MaxAttempts: 16, entries: map[string]*entry{}}
}

func (e *Engine) entry(subject string) *entry {
	e.mu.Lock()
	defer e.mu.Unlock()
	en, ok := e.entries[subject]
	if !ok {
		en = &entry{}
		e.entries[subject] = en
	}
	return en
}

// Forget drops warm state (used by tests and after errors that leave the
// cache in doubt).
func (e *Engine) Forget(subject string) {
	e.mu.Lock()
	delete(e.entries, subject)
	e.mu.Unlock()
}

// Do runs tx: lock the refs in subject order, decide on warm state, append
// with the sequences decided on; on conflict read the tails and decide again.
func (e *Engine) Do(ctx context.Context, tx Tx) (Result, error) {
	order := make([]int, len(tx.Refs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		switch {
		case tx.Refs[a].Subject < tx.Refs[b].Subject:
			return -1
		case tx.Refs[a].Subject > tx.Refs[b].Subject:
			return 1
		}
		return 0
	})
	ens := make([]*entry, len(tx.Refs))
	for i := 1; i < len(order); i++ {
		if tx.Refs[order[i]].Subject == tx.Refs[order[i-1]].Subject {
			return Result{}, fmt.Errorf("aggregates: subject %s appears twice in one transaction", tx.Refs[order[i]].Subject)
		}
	}
	for _, i := range order {
		ens[i] = e.entry(tx.Refs[i].Subject)
		ens[i].mu.Lock()
		defer ens[i].mu.Unlock()
	}
	for i, en := range ens {
		if !en.loaded {
			if err := e.refresh(ctx, tx.Refs[i], en); err != nil {
				return Result{}, err
			}
		}
	}
	states := make([]State, len(ens))
	verified := false
	for attempt := 0; attempt < max(e.MaxAttempts, 1); attempt++ {
		for i, en := range ens {
			states[i] = en.state
		}
		evs, refusal := tx.Decide(states)
		if len(evs) != len(tx.Refs) && evs != nil {
			return Result{}, fmt.Errorf("aggregates: Decide returned %d event lists for %d refs", len(evs), len(tx.Refs))
		}
		if countEvents(evs) == 0 {
			// A refusal or a no-op decided on warm state must not rest on
			// a stale cache: another replica may have changed the subject.
			if !verified {
				stale, err := e.stale(ctx, tx.Refs, ens)
				if err != nil {
					return Result{}, err
				}
				verified = true
				if stale {
					continue
				}
			}
			if tx.Done != nil {
				tx.Done(states)
			}
			return Result{Refusal: refusal, Seqs: seqs(ens)}, nil
		}
		res, err := e.append(ctx, tx, ens, evs)
		var conflict *events.ConflictError
		if errors.As(err, &conflict) {
			for i, en := range ens {
				if err := e.refresh(ctx, tx.Refs[i], en); err != nil {
					return Result{}, err
				}
			}
			backoff(ctx, attempt)
			continue
		}
		if err != nil {
			return Result{}, err
		}
		res.Refusal = refusal
		if tx.Done != nil {
			tx.Done(states)
		}
		return res, nil
	}
	if e.OnContention != nil {
		subs := make([]string, len(tx.Refs))
		for i, r := range tx.Refs {
			subs[i] = r.Subject
		}
		e.OnContention(tx.Tenant, subs)
	}
	return Result{Refusal: &kernel.Refusal{Code: kernel.CodeContention,
		Reason: fmt.Sprintf("gave up after %d conflicting attempts; nothing was reserved or dispatched", e.MaxAttempts)}, Seqs: seqs(ens)}, nil
}

func countEvents(evs [][]kernel.Event) int {
	n := 0
	for _, l := range evs {
		n += len(l)
	}
	return n
}

func seqs(ens []*entry) []uint64 {
	out := make([]uint64, len(ens))
	for i, en := range ens {
		out[i] = en.seq
	}
	return out
}

// append seals and stores the decided events, retrying the very same
// envelopes after an unknown outcome (the store de-duplicates exact
// retries), then folds them into the warm state.
func (e *Engine) append(ctx context.Context, tx Tx, ens []*entry, evs [][]kernel.Event) (Result, error) {
	res := Result{Envelopes: make([][]events.Envelope, len(ens)), Seqs: make([]uint64, len(ens))}
	var items []events.AppendItem
	var idx []int
	for i, l := range evs {
		if len(l) == 0 {
			continue
		}
		envs, err := e.Sealer.Seal(tx.Tenant, l)
		if err != nil {
			return Result{}, err
		}
		res.Envelopes[i] = envs
		items = append(items, events.AppendItem{Subject: tx.Refs[i].Subject, ExpectedLastSeq: ens[i].seq, Envs: envs})
		idx = append(idx, i)
	}
	var got []uint64
	var err error
	for try := 0; try < 5; try++ {
		if len(items) == 1 {
			var s uint64
			s, err = e.Store.Append(ctx, items[0].Subject, items[0].ExpectedLastSeq, items[0].Envs...)
			got = []uint64{s}
		} else {
			got, err = e.Store.AppendBatch(ctx, items)
		}
		if err == nil || errors.Is(err, events.ErrConflict) || errors.Is(err, events.ErrInvalidAppend) || ctx.Err() != nil {
			break
		}
		backoff(ctx, try)
	}
	if err != nil {
		if !errors.Is(err, events.ErrConflict) {
			// The outcome is unknown: drop the warm state so the next
			// transaction reads what the store really holds.
			for _, i := range idx {
				ens[i].loaded = false
			}
		}
		return Result{}, err
	}
	for k, i := range idx {
		for _, ev := range evs[i] {
			if err := ens[i].state.Apply(ev); err != nil {
				ens[i].loaded = false
				return Result{}, fmt.Errorf("aggregates: decided event does not fold on %s: %w", tx.Refs[i].Subject, err)
			}
		}
		ens[i].seq = got[k]
	}
	for i := range ens {
		res.Seqs[i] = ens[i].seq
	}
	return res, nil
}

// refresh brings a subject's warm state up to the store: the tail after the
// known sequence, or the whole subject on a cold load.
func (e *Engine) refresh(ctx context.Context, ref Ref, en *entry) error {
	if !en.loaded {
		en.state, en.seq = ref.New(), 0
	}
	tail, err := e.Store.Read(ctx, ref.Subject, en.seq+1)
	if err != nil {
		en.loaded = false
		return err
	}
	for _, st := range tail {
		ev, err := kernel.DecodeEvent(st.Envelope.Type, st.Envelope.V, st.Envelope.Body)
		if err == nil && ref.Check != nil {
			err = ref.Check(ev)
		}
		if err == nil {
			err = en.state.Apply(ev)
		}
		if err != nil {
			en.loaded = false
			return fmt.Errorf("aggregates: %s seq %d: %w", ref.Subject, st.Seq, err)
		}
		en.seq = st.Seq
	}
	en.loaded = true
	return nil
}

// stale reports whether any ref's subject moved past the warm state, and
// refreshes those that did.
func (e *Engine) stale(ctx context.Context, refs []Ref, ens []*entry) (bool, error) {
	moved := false
	for i, en := range ens {
		last, err := e.Store.LastSeq(ctx, refs[i].Subject)
		if err != nil {
			return false, err
		}
		if last != en.seq {
			moved = true
			if err := e.refresh(ctx, refs[i], en); err != nil {
				return false, err
			}
		}
	}
	return moved, nil
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
