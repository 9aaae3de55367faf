package aggregates

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/contextos/ledger/kernel"
)

// Run runs one kernel step for tenant: it loads the subjects the step
// reads (step.Reads, each key mapped to its subject by RefOf), decides
// (step.Decide), appends the effects' events keyed by subject as part of a
// group commit, each subject on the sequence its state was read at and with
// the step's Guard reads checked in the same atomic batch, and on a
// conflict decides again on the refreshed states, at most MaxAttempts
// times; then it returns step.Contended. The effects returned are those of
// the decision that took effect: their events are stored when Run returns.
//
// How each read is loaded follows its kernel.Access: Write, Guard and Stale
// reads come from the engine's warm state (see Engine); Fresh reads are
// read from the store during the call, once, before the decision (the
// authority, pack catalog and breaker subjects, whose count the
// configuration bounds, from the changes since the engine last read them).
// A step that reads
// nothing is decided without the store.
//
// Errors are typed: *UnavailableError when the store did not answer (the
// outcome is unknown: ledger_unavailable), *StoredEventError for a stored
// event the kernel refuses (stored_event_refused, with its subject and
// sequence). Any other error is a bug: a step that appends to a subject it
// does not read for writing, an invalid key.
func (e *Engine) Run(ctx context.Context, tenant string, step kernel.Step) (kernel.Effects, error) {
	reads := step.Reads()
	if len(reads) == 0 {
		return step.Decide(kernel.Loaded{}), nil
	}
	d := &stepDecider{step: step, index: map[kernel.Key]int{}}
	var refs, freshRefs []Ref
	var fresh []kernel.Read
	for _, r := range reads {
		ref, err := RefOf(tenant, r.Key)
		if err != nil {
			return kernel.Effects{}, err
		}
		switch r.Access {
		case kernel.Write, kernel.Guard, kernel.Stale:
			if _, dup := d.index[r.Key]; dup {
				return kernel.Effects{}, fmt.Errorf("aggregates: the step reads %v twice", r.Key)
			}
			d.index[r.Key] = len(d.reads)
			d.reads = append(d.reads, r)
			refs = append(refs, ref)
		case kernel.Fresh:
			fresh, freshRefs = append(fresh, r), append(freshRefs, ref)
		default:
			return kernel.Effects{}, fmt.Errorf("aggregates: read of %v with invalid access %d", r.Key, r.Access)
		}
	}
	var err error
	if d.fresh, err = e.readFresh(ctx, fresh, freshRefs); err != nil {
		return kernel.Effects{}, err
	}
	if len(refs) == 0 {
		eff := step.Decide(d.fresh)
		for k, evs := range eff.Append {
			if len(evs) > 0 {
				return kernel.Effects{}, fmt.Errorf("aggregates: the step appends to %v, which it does not read for writing", k)
			}
		}
		return eff, nil
	}
	res, out, err := e.run(ctx, tenant, refs, d)
	if err != nil {
		return kernel.Effects{}, err
	}
	if eff, ok := out.(kernel.Effects); ok {
		return eff, nil
	}
	// Only exhausted contention ends without a decision.
	return step.Contended(res.Refusal), nil
}

// stepDecider decides a kernel step over the engine's states of its reads
// (in the order of the refs) and its fresh reads.
type stepDecider struct {
	step  kernel.Step
	reads []kernel.Read      // the reads the engine loads, in the order of the refs
	index map[kernel.Key]int // their positions
	fresh kernel.Loaded      // the Fresh reads, read for this call
}

func (d *stepDecider) decide(states []State) ([][]kernel.Event, *kernel.Refusal, any, error) {
	l := make(kernel.Loaded, len(d.reads)+len(d.fresh))
	maps.Copy(l, d.fresh)
	for i, r := range d.reads {
		l[r.Key] = states[i]
	}
	eff := d.step.Decide(l)
	evs := make([][]kernel.Event, len(d.reads))
	for k, list := range eff.Append {
		if len(list) == 0 {
			continue
		}
		i, ok := d.index[k]
		if !ok || d.reads[i].Access != kernel.Write {
			return nil, nil, nil, fmt.Errorf("aggregates: the step appends to %v, which it does not read for writing", k)
		}
		evs[i] = list
	}
	return evs, eff.Refusal, eff, nil
}

// order is the refs' order of a decision whose events may be stored as a
// prefix (kernel.Effects.Prefix), nil otherwise.
func (d *stepDecider) order(out any) []int {
	eff, ok := out.(kernel.Effects)
	if !ok || !eff.Prefix {
		return nil
	}
	order := make([]int, 0, len(eff.Order))
	for _, k := range eff.Order {
		i, ok := d.index[k]
		if !ok {
			return nil
		}
		order = append(order, i)
	}
	return order
}

func (d *stepDecider) guarded(i int) bool { return d.reads[i].Access == kernel.Guard }

func (d *stepDecider) folded() {}

// readFresh reads the subjects of fresh reads from the store, in parallel.
func (e *Engine) readFresh(ctx context.Context, reads []kernel.Read, refs []Ref) (kernel.Loaded, error) {
	l := make(kernel.Loaded, len(reads))
	if len(reads) == 0 {
		return l, nil
	}
	states := make([]State, len(reads))
	errs := make([]error, len(reads))
	if len(reads) == 1 {
		states[0], errs[0] = e.fresh.read(ctx, e, reads[0].Key, refs[0])
	} else {
		var wg sync.WaitGroup
		for i := range reads {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				states[i], errs[i] = e.fresh.read(ctx, e, reads[i].Key, refs[i])
			}(i)
		}
		wg.Wait()
	}
	for i, r := range reads {
		if errs[i] != nil {
			return nil, errs[i]
		}
		l[r.Key] = states[i]
	}
	return l, nil
}

// freshTails keeps the state of the fresh subjects whose number the
// configuration bounds (a tenant's authority and pack catalog, a
// capability's breaker) as last read, so that a call reads only the events
// stored since. The state
// is read fresh for each call all the same: from the sequence of the last
// event folded into it, which must come back as that very event (its id).
// If it does not, the subject is not the one the state was folded from (it
// was deleted and made again), and the state is folded from its start.
// Other fresh subjects (evidence, named by agents) are folded from their
// start for each call and never kept.
type freshTails struct {
	mu sync.Mutex
	m  map[string]*freshTail // by subject
}

// freshTail is one subject's state. st is never changed once shared: new
// events are folded into a copy, so a caller may keep reading the one it
// was handed.
type freshTail struct {
	mu  sync.Mutex
	st  State
	seq uint64 // of the last event folded into st (0: none)
	id  string // its event id
}

// kept reports whether fresh reads of k's kind are kept between calls, and
// how a kept state is copied before new events are folded into it.
func kept(k kernel.Key) (clone func(State) State, ok bool) {
	switch k.Kind {
	case kernel.KindAuthority:
		return func(s State) State {
			return &kernel.Authority{Overrides: maps.Clone(s.(*kernel.Authority).Overrides)}
		}, true
	case kernel.KindBreaker:
		return func(s State) State { c := *s.(*kernel.Breaker); return &c }, true
	case kernel.KindPacks:
		return func(s State) State {
			c := *s.(*kernel.PackCatalog)
			c.Versions, c.Promotions = slices.Clone(c.Versions), slices.Clone(c.Promotions)
			return &c
		}, true
	}
	return nil, false
}

func (f *freshTails) tail(subject string) *freshTail {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[string]*freshTail{}
	}
	t := f.m[subject]
	if t == nil {
		t = &freshTail{}
		f.m[subject] = t
	}
	return t
}

// read returns the state of ref's subject as of a read made during the
// call.
func (f *freshTails) read(ctx context.Context, e *Engine, k kernel.Key, ref Ref) (State, error) {
	clone, keep := kept(k)
	if !keep {
		st := ref.New()
		if _, _, _, err := e.fold(ctx, ref, st, 1, 0); err != nil {
			return nil, err
		}
		return st, nil
	}
	t := f.tail(ref.Subject)
	t.mu.Lock()
	st, seq, id := t.st, t.seq, t.id
	t.mu.Unlock()
	read, readID := seq, id
	stored, err := e.Store.Read(ctx, ref.Subject, max(seq, 1))
	if err != nil {
		return nil, readError(ref.Subject, err)
	}
	if seq > 0 {
		if len(stored) == 0 || stored[0].Seq != seq || stored[0].Envelope.EventID != id {
			// Not the subject st was folded from: start again.
			st, seq, id = nil, 0, ""
			if stored, err = e.Store.Read(ctx, ref.Subject, 1); err != nil {
				return nil, readError(ref.Subject, err)
			}
		} else {
			stored = stored[1:]
		}
	}
	if st == nil {
		st = ref.New()
	}
	if len(stored) > 0 {
		next := ref.New()
		if seq > 0 {
			next = clone(st)
		}
		for _, s := range stored {
			if err := foldOne(ref, next, s); err != nil {
				return nil, err
			}
		}
		last := stored[len(stored)-1]
		st, seq, id = next, last.Seq, last.Envelope.EventID
	}
	t.mu.Lock()
	if seq >= t.seq || t.seq == read && t.id == readID {
		// Fresher than the state kept, or that state was found stale. (A
		// call that read later may have left a fresher one; this read is
		// still current for this call.)
		t.st, t.seq, t.id = st, seq, id
	}
	t.mu.Unlock()
	return st, nil
}
