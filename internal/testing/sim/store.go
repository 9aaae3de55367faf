package sim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
)

// Faults are the probabilities of the store's injected faults, per append.
type Faults struct {
	Conflict  float64 // a conflict although nothing moved: the engine re-reads and decides again (never on an exact retry of a stored append, which the store contract makes a success)
	FailEarly float64 // the append fails before anything is stored
	LostAck   float64 // the append is stored but its acknowledgement is lost
	// Cut is the probability that the replica crashes right after a
	// single-event append is stored (one of a chain of single appends: a
	// provider's report is stored ledger by ledger, then on the
	// operation): its appends fail from there on, and the driver restarts
	// it when its call returns (Sim.on).
	Cut float64
}

// ErrFailedEarly and ErrLostAck are the store's injected unknown outcomes:
// both read as "retry the same append" to the engine; only the store knows
// whether it stored.
var (
	ErrFailedEarly = errors.New("sim: append failed before reaching the store")
	ErrLostAck     = errors.New("sim: append stored, acknowledgement lost")
)

// Store is the simulated event store: the in-memory store's semantics
// (expected last subject sequence, atomic batches, guards, idempotent exact
// retries) with faults drawn from the simulation's source. It outlives
// every replica: what it acknowledged survives their restarts.
type Store struct {
	inner  *events.MemStore
	rnd    *Rand
	faults Faults
	mut    Mutation
	trace  func(format string, args ...any)

	mu     sync.Mutex // serializes appends, so a mutation reads and appends atomically
	acked  map[string]uint64
	stored map[string]bool // every event id the inner store holds, acknowledged or not
	stats  StoreStats
	// cutOK says whether the replica appending may crash (Sim.crash);
	// cut, that it did after an append (see Faults.Cut).
	cutOK func() bool
	cut   bool
	// beforeLedger, when set, names (a part of) the subjects of the ledgers
	// whose observation a report's chain stores before another ledger's.
	beforeLedger string
}

// StoreStats counts what the store did.
type StoreStats struct {
	Appends, Conflicts, FailedEarly, LostAcks, Cuts int
	// CutSettles counts the cuts right after a ledger's observation: a
	// provider's report stored on its ledger, not on its operation.
	CutSettles int
	// CutLedgers counts the cuts between two ledgers' observations of one
	// report (Options.DayCeiling): the order's ledger sealed, the day's
	// and the operation not.
	CutLedgers int
	// Spared counts the exact retries of stored atomic batches that drew
	// a conflict, which the store answers as stored all the same.
	Spared int
}

var _ events.Store = (*Store)(nil)

// NewStore returns an empty simulated store.
func NewStore(rnd *Rand, f Faults, mut Mutation, trace func(string, ...any)) *Store {
	return &Store{inner: events.NewMemStore(), rnd: rnd, faults: f, mut: mut, trace: trace, acked: map[string]uint64{}, stored: map[string]bool{}}
}

// Append implements events.Store.
func (s *Store) Append(ctx context.Context, subject string, expectedLastSeq uint64, envs ...codec.Envelope) (uint64, error) {
	seqs, err := s.AppendBatch(ctx, []events.AppendItem{{Subject: subject, ExpectedLastSeq: expectedLastSeq, Envs: envs}})
	if err != nil {
		return 0, err
	}
	return seqs[0], nil
}

// AppendBatch implements events.Store, with the faults.
func (s *Store) AppendBatch(ctx context.Context, items []events.AppendItem) ([]uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Appends++
	switch {
	case s.cut:
		return nil, ErrFailedEarly // the replica crashed: nothing more of it reaches the store
	case s.rnd.Chance(s.faults.FailEarly):
		s.stats.FailedEarly++
		s.trace("store: append of %d items failed before storing", len(items))
		return nil, ErrFailedEarly
	case s.rnd.Chance(s.faults.Conflict) && !s.spared(items):
		// A conflict stands for another writer that appended first. An
		// exact retry of a stored append is not one: both real stores
		// (events.MemStore, events.JetStore) recognise it by the events
		// right after the expected sequence and answer it a success.
		s.stats.Conflicts++
		last, _ := s.inner.LastSeq(ctx, items[0].Subject)
		s.trace("store: injected conflict on %s", items[0].Subject)
		return nil, &events.ConflictError{Subject: items[0].Subject, Expected: items[0].ExpectedLastSeq, Actual: last}
	}
	items = s.mutate(ctx, items)
	seqs, err := s.inner.AppendBatch(ctx, items)
	if err != nil {
		if errors.Is(err, events.ErrConflict) {
			s.trace("store: conflict: %v", err)
		}
		return nil, err
	}
	for _, it := range items {
		for _, e := range it.Envs {
			s.stored[e.EventID] = true
		}
	}
	if s.rnd.Chance(s.faults.LostAck) {
		s.stats.LostAcks++
		s.trace("store: append of %d items stored, acknowledgement lost", len(items))
		return nil, ErrLostAck
	}
	for i, it := range items {
		for _, e := range it.Envs {
			s.acked[e.EventID] = seqs[i]
		}
	}
	if s.faults.Cut > 0 && len(items) == 1 && len(items[0].Envs) == 1 && s.cutOK != nil && s.cutOK() && s.rnd.Chance(s.faults.Cut) {
		s.stats.Cuts++
		if items[0].Envs[0].Type == kernel.TypeExposureObserved {
			s.stats.CutSettles++
			if s.beforeLedger != "" && strings.Contains(items[0].Subject, s.beforeLedger) {
				s.stats.CutLedgers++
			}
		}
		s.cut = true
		s.trace("store: %s stored on %s; its replica crashes before its next append", items[0].Envs[0].Type, items[0].Subject)
	}
	return seqs, nil
}

// takeCut reports whether the replica appending crashed after an append
// (Faults.Cut), and lets the store take appends again.
func (s *Store) takeCut() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	cut := s.cut
	s.cut = false
	return cut
}

// spared reports whether items, drawn a conflict, resend an append the
// store already holds, which it then answers as stored (counted).
func (s *Store) spared(items []events.AppendItem) bool {
	if !s.retry(items) {
		return false
	}
	if len(items) > 1 {
		s.stats.Spared++
		s.trace("store: exact retry of a stored atomic batch of %d items drew a conflict: answered as stored", len(items))
	}
	return true
}

// retry reports whether items resend an append the store already holds
// (an atomic batch is stored whole, so its first event says).
func (s *Store) retry(items []events.AppendItem) bool {
	for _, it := range items {
		if len(it.Envs) > 0 {
			return s.stored[it.Envs[0].EventID]
		}
	}
	return false
}

// mutate applies the store-side mutations (tests of the simulator itself).
func (s *Store) mutate(ctx context.Context, items []events.AppendItem) []events.AppendItem {
	if s.mut != MutBlindAppend && s.mut != MutSkipDispatchStart {
		return items
	}
	out := make([]events.AppendItem, 0, len(items))
	for _, it := range items {
		switch s.mut {
		case MutBlindAppend:
			it.ExpectedLastSeq, _ = s.inner.LastSeq(ctx, it.Subject)
		case MutSkipDispatchStart:
			var kept []codec.Envelope
			for _, e := range it.Envs {
				if e.Type != kernel.TypeOperationDispatchStarted && e.Type != kernel.TypeExposureDispatchStarted {
					kept = append(kept, e)
				}
			}
			if len(kept) == 0 && len(it.Envs) > 0 {
				continue
			}
			it.Envs = kept
		}
		out = append(out, it)
	}
	return out
}

// Read implements events.Store.
func (s *Store) Read(ctx context.Context, subject string, fromSeq uint64) ([]events.Stored, error) {
	return s.inner.Read(ctx, subject, fromSeq)
}

// LastSeq implements events.Store. Under MutStaleRefusal it answers 0, a
// sequence the subject had before its first append: in the simulation only
// the engine's check of a refusal reads it, which then finds nothing moved.
func (s *Store) LastSeq(ctx context.Context, subject string) (uint64, error) {
	if s.mut == MutStaleRefusal {
		return 0, nil
	}
	return s.inner.LastSeq(ctx, subject)
}

// Replay implements events.Store.
func (s *Store) Replay(ctx context.Context, fromSeq uint64, fn func(events.Stored) error) error {
	return s.inner.Replay(ctx, fromSeq, fn)
}

// ReplayTenant implements events.Store.
func (s *Store) ReplayTenant(ctx context.Context, tenant string, fromSeq uint64, fn func(events.Stored) error) error {
	return s.inner.ReplayTenant(ctx, tenant, fromSeq, fn)
}

// ReplayKind implements events.Store.
func (s *Store) ReplayKind(ctx context.Context, tenant, kind string, fn func(events.Stored) error) error {
	return s.inner.ReplayKind(ctx, tenant, kind, fn)
}

// CheckAcknowledged reports an acknowledged event the stream no longer
// holds at the sequence its append reported.
func (s *Store) CheckAcknowledged(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	found := map[string]uint64{}
	if err := s.inner.Replay(ctx, 1, func(st events.Stored) error {
		found[st.Envelope.EventID] = st.Seq
		return nil
	}); err != nil {
		return err
	}
	for id, last := range s.acked {
		seq, ok := found[id]
		if !ok || seq > last {
			return fmt.Errorf("acknowledged event %s (append ending at seq %d) is not in the stream", id, last)
		}
	}
	return nil
}

// SetFaults changes the fault probabilities from the next append on.
func (s *Store) SetFaults(f Faults) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = f
}

// Stats returns what the store did.
func (s *Store) Stats() StoreStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}
