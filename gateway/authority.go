package gateway

import (
	"context"
	"maps"
	"sync"

	"github.com/contextos/ledger/aggregates"
	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/kernel"
)

// authorities keeps each tenant's authority state as last read, so that a
// proposal reads only the changes made since, not every grant and
// revocation the tenant ever had: the subject grows with each change and is
// read for every proposal.
//
// The state is read fresh for each proposal all the same: from the
// sequence of the last change folded into it, which must come back as that
// very change (its event id). If it does not, the subject is not the one
// the state was folded from (the stream refuses purges and deletes, so it
// was deleted and made again), and the state is folded again from the
// subject's start.
type authorities struct {
	mu sync.Mutex
	m  map[string]*authorityTail // by tenant: configured tenants only
}

// authorityTail is one tenant's state. st is never changed once shared:
// new changes are folded into a copy, so a caller may keep reading the one
// it was handed.
type authorityTail struct {
	mu  sync.Mutex
	st  *kernel.Authority
	seq uint64 // of the last change folded into st (0: none)
	id  string // its event id
}

func (a *authorities) tail(tenant string) *authorityTail {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[string]*authorityTail{}
	}
	t := a.m[tenant]
	if t == nil {
		t = &authorityTail{st: &kernel.Authority{}}
		a.m[tenant] = t
	}
	return t
}

// read returns the tenant's authority state, ref its subject, as of a read
// of the subject made during the call.
func (a *authorities) read(ctx context.Context, store events.Store, tenant string, ref aggregates.Ref) (*kernel.Authority, error) {
	t := a.tail(tenant)
	t.mu.Lock()
	st, seq, id := t.st, t.seq, t.id
	t.mu.Unlock()
	read, readID := seq, id
	stored, err := store.Read(ctx, ref.Subject, max(seq, 1))
	if err != nil {
		return nil, err
	}
	if seq > 0 {
		if len(stored) == 0 || stored[0].Seq != seq || stored[0].Envelope.EventID != id {
			// Not the subject st was folded from: start again.
			st, seq, id = &kernel.Authority{}, 0, ""
			if stored, err = store.Read(ctx, ref.Subject, 1); err != nil {
				return nil, err
			}
		} else {
			stored = stored[1:]
		}
	}
	if len(stored) > 0 {
		next := &kernel.Authority{Overrides: maps.Clone(st.Overrides)}
		if err := fold(ref, next, stored); err != nil {
			return nil, err
		}
		last := stored[len(stored)-1]
		st, seq, id = next, last.Seq, last.Envelope.EventID
	}
	t.mu.Lock()
	if seq >= t.seq || t.seq == read && t.id == readID {
		// Fresher than the state kept, or that state was found stale. (A
		// proposal that read later may have left a fresher one; this read
		// is still current for this call.)
		t.st, t.seq, t.id = st, seq, id
	}
	t.mu.Unlock()
	return st, nil
}
