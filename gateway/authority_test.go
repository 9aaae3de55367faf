package gateway

import (
	"context"
	"crypto/rand"
	"reflect"
	"sync/atomic"
	"testing"

	"github.com/contextos/ledger/aggregates"
	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
)

// readCount counts the events Read returns from the store under it.
type readCount struct {
	events.Store
	n atomic.Int64
}

func (r *readCount) Read(ctx context.Context, subject string, from uint64) ([]events.Stored, error) {
	s, err := r.Store.Read(ctx, subject, from)
	r.n.Add(int64(len(s)))
	return s, err
}

type authorityStore struct {
	*readCount
	t      *testing.T
	sealer *aggregates.Sealer
	subj   string
	last   map[string]uint64 // last sequence by subject
}

func newAuthorityStore(t *testing.T) *authorityStore {
	key, err := codec.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := authorityRef("acme")
	if err != nil {
		t.Fatal(err)
	}
	return &authorityStore{readCount: &readCount{Store: events.NewMemStore()}, t: t, subj: ref.Subject,
		last:   map[string]uint64{},
		sealer: &aggregates.Sealer{Signer: codec.NewSigner(key), Clock: aggregates.SystemClock{}, IDs: aggregates.NewIDs(aggregates.SystemClock{}, nil)}}
}

// change appends one grant or revocation to the tenant's authority subject,
// and an event of another subject before it, so sequences are not dense.
func (s *authorityStore) change(principal string, grant bool) {
	s.t.Helper()
	ctx := context.Background()
	other, err := s.sealer.Seal("acme", []kernel.Event{kernel.AuthorityChanged{Principal: "p", CapabilityID: "c", Granted: true, Operator: "o"}})
	if err != nil {
		s.t.Fatal(err)
	}
	s.append(ctx, "ctx.ev.acme.noise", other)
	envs, err := s.sealer.Seal("acme", []kernel.Event{kernel.AuthorityChanged{Principal: principal, CapabilityID: "refund", Granted: grant, Operator: "ops_alice"}})
	if err != nil {
		s.t.Fatal(err)
	}
	s.append(ctx, s.subj, envs)
}

func (s *authorityStore) append(ctx context.Context, subject string, envs []codec.Envelope) {
	s.t.Helper()
	seq, err := s.Store.Append(ctx, subject, s.last[subject], envs...)
	if err != nil {
		s.t.Fatal(err)
	}
	s.last[subject] = seq
}

// full folds the whole subject, as every proposal did before.
func (s *authorityStore) full() *kernel.Authority {
	s.t.Helper()
	stored, err := s.Store.Read(context.Background(), s.subj, 1)
	if err != nil {
		s.t.Fatal(err)
	}
	a := &kernel.Authority{}
	for _, st := range stored {
		ev, err := kernel.DecodeEvent(st.Envelope.Type, st.Envelope.V, st.Envelope.Body)
		if err != nil {
			s.t.Fatal(err)
		}
		if err := a.Apply(ev); err != nil {
			s.t.Fatal(err)
		}
	}
	return a
}

// TestAuthoritiesReadTheChangesSince: a proposal reads the tenant's
// authority changes made since the last read (and the last one it folded,
// which proves the subject is the same), not the whole history; the state
// is always the whole subject's fold. On another stream holding other
// events at the same sequences, the state is folded again from the start.
func TestAuthoritiesReadTheChangesSince(t *testing.T) {
	ctx := context.Background()
	s := newAuthorityStore(t)
	var a authorities
	ref, err := authorityRef("acme")
	if err != nil {
		t.Fatal(err)
	}
	read := func(st *authorityStore, want int64) {
		t.Helper()
		before := st.n.Load()
		got, err := a.read(ctx, st.readCount, "acme", ref)
		if err != nil {
			t.Fatal(err)
		}
		if n := st.n.Load() - before; n != want {
			t.Fatalf("read %d events, want %d", n, want)
		}
		if full := st.full(); !reflect.DeepEqual(got.Overrides, full.Overrides) && len(got.Overrides)+len(full.Overrides) > 0 {
			t.Fatalf("state %+v, want %+v", got.Overrides, full.Overrides)
		}
	}
	read(s, 0) // no change yet
	for i := range 200 {
		s.change("agent_chat", i%2 == 0)
	}
	read(s, 200)
	read(s, 1) // nothing new: the last change, which anchors the state
	read(s, 1)
	s.change("agent_chat", true)
	s.change("agent_email", false)
	read(s, 3)

	// The same sequences on another stream: what is there, not what was.
	other := newAuthorityStore(t)
	for range 203 {
		other.change("agent_email", true)
	}
	read(other, 2+203) // the anchor's sequence holds another event (two from there): folded again
	read(other, 1)
	empty := newAuthorityStore(t)
	read(empty, 0)
	if got, err := a.read(ctx, empty.readCount, "acme", ref); err != nil || len(got.Overrides) != 0 {
		t.Fatalf("a stream without changes: %+v, %v", got, err)
	}
}
