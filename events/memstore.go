package events

import (
	"bytes"
	"context"
	"sort"
	"strings"
	"sync"

	"github.com/contextos/ledger/events/codec"
)

// MemStore is an in-memory Store: the naive reference the JetStream store is
// checked against (same conformance suite) and a fast store for kernel-level
// tests and benchmarks. It is not durable.
type MemStore struct {
	mu        sync.RWMutex
	log       []Stored            // log[i].Seq == i+1
	bySubject map[string][]uint64 // subject -> its sequences, increasing
}

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore {
	return &MemStore{bySubject: make(map[string][]uint64)}
}

var _ Store = (*MemStore)(nil)

// Append implements Store.
func (m *MemStore) Append(ctx context.Context, subject string, expectedLastSeq uint64, envs ...codec.Envelope) (uint64, error) {
	seqs, err := m.AppendBatch(ctx, []AppendItem{{Subject: subject, ExpectedLastSeq: expectedLastSeq, Envs: envs}})
	if err != nil {
		return 0, err
	}
	return seqs[0], nil
}

// AppendBatch implements Store.
func (m *MemStore) AppendBatch(ctx context.Context, items []AppendItem) ([]uint64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	enc, err := prepareAppend(items)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var conflict *ConflictError
	for _, it := range enc {
		if last := m.lastLocked(it.subject); last != it.expected {
			if conflict == nil {
				conflict = &ConflictError{Subject: it.subject, Expected: it.expected, Actual: last}
			}
			conflict.Stale = append(conflict.Stale, it.subject)
		}
	}
	if conflict != nil {
		// An exact retry of an append that already happened is a success.
		seqs := make([]uint64, len(enc))
		for i, it := range enc {
			if len(it.raws) == 0 {
				seqs[i] = it.expected // a guard: it held when the batch was stored
				continue
			}
			s, ok := m.retriedLocked(it)
			if !ok {
				return nil, conflict
			}
			seqs[i] = s
		}
		return seqs, nil
	}
	seqs := make([]uint64, len(enc))
	for i, it := range enc {
		seqs[i] = it.expected
		for j, e := range it.envs {
			seq := uint64(len(m.log)) + 1
			m.log = append(m.log, Stored{Seq: seq, Subject: it.subject, Envelope: e, Raw: it.raws[j]})
			m.bySubject[it.subject] = append(m.bySubject[it.subject], seq)
			seqs[i] = seq
		}
	}
	return seqs, nil
}

func (m *MemStore) lastLocked(subject string) uint64 {
	s := m.bySubject[subject]
	if len(s) == 0 {
		return 0
	}
	return s[len(s)-1]
}

// retriedLocked reports whether the subject's events right after it.expected
// are exactly it.raws, and the sequence of the last one.
func (m *MemStore) retriedLocked(it encodedItem) (uint64, bool) {
	s := m.bySubject[it.subject]
	i := sort.Search(len(s), func(i int) bool { return s[i] > it.expected })
	if len(s)-i < len(it.raws) {
		return 0, false
	}
	for j, raw := range it.raws {
		if !bytes.Equal(m.log[s[i+j]-1].Raw, raw) {
			return 0, false
		}
	}
	return s[i+len(it.raws)-1], true
}

// Read implements Store.
func (m *MemStore) Read(ctx context.Context, subject string, fromSeq uint64) ([]Stored, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	s := m.bySubject[subject]
	i := sort.Search(len(s), func(i int) bool { return s[i] >= fromSeq })
	out := make([]Stored, 0, len(s)-i)
	for _, seq := range s[i:] {
		out = append(out, m.log[seq-1])
	}
	return out, nil
}

// LastSeq implements Store.
func (m *MemStore) LastSeq(ctx context.Context, subject string) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.lastLocked(subject), nil
}

// Replay implements Store. fn runs without the store's lock held, so it may
// call the store.
func (m *MemStore) Replay(ctx context.Context, fromSeq uint64, fn func(Stored) error) error {
	return m.replay(ctx, fromSeq, "", fn)
}

// ReplayTenant implements Store.
func (m *MemStore) ReplayTenant(ctx context.Context, tenant string, fromSeq uint64, fn func(Stored) error) error {
	if err := codec.ValidToken(tenant); err != nil {
		return err
	}
	return m.replay(ctx, fromSeq, codec.TenantPrefix(tenant), fn)
}

// ReplayKind implements Store.
func (m *MemStore) ReplayKind(ctx context.Context, tenant, kind string, fn func(Stored) error) error {
	if err := codec.ValidToken(tenant); err != nil {
		return err
	}
	if err := codec.ValidToken(kind); err != nil {
		return err
	}
	return m.replay(ctx, 1, codec.TenantPrefix(tenant)+kind+".", fn)
}

// replay calls fn for the events from fromSeq on whose subject starts with
// prefix.
func (m *MemStore) replay(ctx context.Context, fromSeq uint64, prefix string, fn func(Stored) error) error {
	if fromSeq == 0 {
		fromSeq = 1
	}
	for seq := fromSeq; ; seq++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		m.mu.RLock()
		if seq > uint64(len(m.log)) {
			m.mu.RUnlock()
			return nil
		}
		st := m.log[seq-1]
		m.mu.RUnlock()
		if !strings.HasPrefix(st.Subject, prefix) {
			continue
		}
		if err := fn(st); err != nil {
			return err
		}
	}
}
