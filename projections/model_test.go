package projections

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/internal/testing/testenv"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/verifier"
	"github.com/contextos/ledger/wire"
)

// memSnaps is an in-memory events.SnapshotStore.
type memSnaps struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (s *memSnaps) Get(_ context.Context, subject string) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.m[subject]
	return bytes.Clone(b), ok, nil
}

func (s *memSnaps) Put(_ context.Context, snaps []events.Snapshot) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string][]byte{}
	}
	for _, sn := range snaps {
		s.m[sn.Subject] = bytes.Clone(sn.Data)
	}
	return nil
}

// countingStore counts the messages Replay delivers: what a boot folds.
type countingStore struct {
	events.Store
	replayed atomic.Int64
}

func (c *countingStore) Replay(ctx context.Context, from uint64, fn func(events.Stored) error) error {
	return c.Store.Replay(ctx, from, func(s events.Stored) error {
		c.replayed.Add(1)
		return fn(s)
	})
}

// TestModelStartsFromItsSnapshot: a model that finds its snapshot folds
// only the events stored after it, and equals a full fold; a damaged
// snapshot, or one signed by another key, is ignored and the whole stream
// is folded, to the same state.
func TestModelStartsFromItsSnapshot(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	acme := newDriver(e, "acme", 51, []string{"ord_1", "ord_2", "ord 3"})
	globex := newDriver(e, "globex", 52, []string{"ord_1"})
	acme.appendN(t, 300)
	globex.appendN(t, 60)
	snaps := &memSnaps{}
	first := NewModel(ModelConfig{Store: e.store, Snapshots: snaps, Signer: e.signer})
	first.partSize = 4096 // several parts
	if err := first.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := first.FlushSnapshot(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := snaps.m[ModelSnapshotKey+".p1"]; !ok {
		t.Fatal("the snapshot was written in one part; the test wants several")
	}
	acme.appendN(t, 40)
	var total int64
	if err := e.store.Replay(ctx, 1, func(events.Stored) error { total++; return nil }); err != nil {
		t.Fatal(err)
	}
	full := NewModel(ModelConfig{Store: e.store})
	if err := full.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	check := func(name string, snaps events.SnapshotStore, signer codec.Signer, wantLoaded bool) {
		t.Helper()
		cs := &countingStore{Store: e.store}
		m := NewModel(ModelConfig{Store: cs, Snapshots: snaps, Signer: signer})
		if err := m.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		st := m.Stats()
		if st.Snapshot.Loaded != wantLoaded {
			t.Fatalf("%s: loaded from a snapshot %v, want %v", name, st.Snapshot.Loaded, wantLoaded)
		}
		replayed := cs.replayed.Load()
		if wantLoaded && replayed >= total/2 {
			t.Fatalf("%s: folded %d of %d messages after a snapshot", name, replayed, total)
		}
		if !wantLoaded && replayed != total {
			t.Fatalf("%s: folded %d of %d messages without a snapshot", name, replayed, total)
		}
		for _, tenant := range []string{"acme", "globex"} {
			if d := verifier.Compare(m.View(tenant), full.View(tenant)); len(d) != 0 {
				t.Fatalf("%s: %s differs from a full fold: %v", name, tenant, d)
			}
		}
		if m.Seq() != full.Seq() {
			t.Fatalf("%s: seq %d, full fold %d", name, m.Seq(), full.Seq())
		}
	}
	check("snapshot", snaps, e.signer, true)

	damaged := &memSnaps{m: map[string][]byte{}}
	for k, v := range snaps.m {
		damaged.m[k] = bytes.Clone(v)
	}
	damaged.m[ModelSnapshotKey+".p1"][10] ^= 1
	check("damaged part", damaged, e.signer, false)

	other := codec.NewSigner(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{9}, 32)))
	check("other key", snaps, other, false)
}

// seal appends signed kernel events on one subject.
func (e *env) seal(t testing.TB, tenant, subject string, evs ...kernel.Event) {
	t.Helper()
	ctx := context.Background()
	last, err := e.store.LastSeq(ctx, subject)
	if err != nil {
		t.Fatal(err)
	}
	envs := make([]codec.Envelope, len(evs))
	for i, ev := range evs {
		if envs[i], err = e.signer.Seal(ev.EventType(), kernel.EventVersion, nextID(), tenant, codec.FormatTime(time.Unix(1_767_225_600, 0)), ev); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.store.Append(ctx, subject, last, envs...); err != nil {
		t.Fatal(err)
	}
}

// TestModelBounds: refused proposals leave nothing in memory; resolved
// operations, pending approvals and incidents are kept up to their caps
// (the newest); an event naming an operation the model let go of is read
// back from the store, not refused.
func TestModelBounds(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	opSubject := func(key string) string {
		s, err := codec.Subject("acme", "operation", "run_1", key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	opened := func(key string) kernel.OperationOpened {
		return kernel.OperationOpened{OperationID: nextID(), Principal: "agent", RunID: "run_1", OperationKey: key,
			CapabilityID: "cap", ActionDigest: fmt.Sprintf("%064x", len(key)*7919+int(key[len(key)-1])), Executor: "x", Generation: 1}
	}
	for i := 0; i < 500; i++ {
		key := fmt.Sprintf("r%d", i)
		e.seal(t, "acme", opSubject(key), opened(key), kernel.OperationRefused{Code: wire.CodeCapabilityNotSurfaced, Reason: "no"})
	}
	for i := 0; i < 30; i++ {
		key := fmt.Sprintf("a%d", i)
		o := opened(key)
		o.ActionDigest = fmt.Sprintf("%064x", 1000+i)
		e.seal(t, "acme", opSubject(key), o, kernel.OperationRefused{Code: wire.CodeApprovalRequired, Reason: "approve",
			Arguments: []byte(`{"n":` + fmt.Sprint(i) + `}`)})
	}
	for i := 0; i < 40; i++ {
		key := fmt.Sprintf("s%d", i)
		att := fmt.Sprintf("att%03d", i)
		e.seal(t, "acme", opSubject(key), opened(key), kernel.OperationReserved{AttemptID: att, Generation: 1},
			kernel.OperationDispatchStarted{AttemptID: att, Generation: 1},
			kernel.OperationObserved{AttemptID: att, Generation: 1, Outcome: kernel.OutcomeApplied, Source: "provider"})
		e.seal(t, "acme", opSubject(key), kernel.OperationRefused{Code: wire.CodeExecutorFenced, Reason: "fenced"})
	}
	m := NewModel(ModelConfig{Store: e.store, Limits: ModelLimits{Approvals: 10, ResolvedOperations: 5, Incidents: 8}})
	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	st := m.Stats()
	if st.OperationsKept != 5 {
		t.Fatalf("kept %d operations, want the 5 newest resolved ones", st.OperationsKept)
	}
	ap := m.Approvals("acme")
	if len(ap) != 10 || string(ap[0].Arguments) != `{"n":20}` || string(ap[9].Arguments) != `{"n":29}` {
		t.Fatalf("approvals: %d kept, first %s", len(ap), ap[0].Arguments)
	}
	in := m.Incidents("acme")
	if len(in) != 8 || in[7].Code != wire.CodeExecutorFenced || st.IncidentsDropped != 32 {
		t.Fatalf("incidents: %d kept (%+v), %d dropped", len(in), in, st.IncidentsDropped)
	}
	if _, ok := m.OperationOf("acme", "att000"); ok {
		t.Fatal("the oldest resolved operation is still kept")
	}
	if v, ok := m.OperationOf("acme", "att039"); !ok || v.Op.OperationKey != "s39" {
		t.Fatalf("the newest resolved operation: %+v %v", v, ok)
	}
	// A reconciliation claims the oldest one again: read back, not refused.
	e.seal(t, "acme", opSubject("s0"), kernel.OperationClaimed{Executor: "y", Generation: 2})
	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if n := m.RefusedEvents(""); n != 0 {
		t.Fatalf("refused %d events on an operation read back", n)
	}
	if v, ok := m.OperationOf("acme", "att000"); !ok || v.Op.Generation != 2 {
		t.Fatalf("operation read back: %+v %v", v, ok)
	}
}

// TestModelSnapshotsSpaced: a snapshot is due SnapshotEvery events after the
// last, and not before snapshotSpacing times the last one's encoding time has
// passed; the events folded meanwhile still count, so the first Sync after
// the spacing writes it.
func TestModelSnapshotsSpaced(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	acme := newDriver(e, "acme", 53, []string{"ord_1", "ord_2"})
	m := NewModel(ModelConfig{Store: e.store, Snapshots: &memSnaps{}, Signer: e.signer, SnapshotEvery: 5})
	written := func() (uint64, bool) {
		m.snapMu.Lock()
		defer m.snapMu.Unlock()
		return m.snapStats.Written, m.snapRunning
	}
	fold := func(n int) {
		t.Helper()
		acme.appendN(t, n)
		if err := m.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	fold(10)
	testenv.Eventually(t, func() bool { n, running := written(); return n == 1 && !running }, 10*time.Second, "the first snapshot")

	// The last encoding "took" an hour: none is due for 40 hours.
	m.syncMu.Lock()
	m.snapCost = time.Hour
	m.syncMu.Unlock()
	fold(10)
	fold(10)
	if n, running := written(); n != 1 || running {
		t.Fatalf("%d snapshots written (one running: %v) within the spacing, want 1", n, running)
	}

	// Spacing passed: the next Sync that folds anything writes one.
	m.syncMu.Lock()
	m.snapCost, m.snapAt = time.Millisecond, time.Now().Add(-time.Second)
	m.syncMu.Unlock()
	fold(1)
	testenv.Eventually(t, func() bool { n, running := written(); return n == 2 && !running }, 10*time.Second, "the snapshot after the spacing")
}
