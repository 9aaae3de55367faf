package aggregates

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
)

// slowStore holds its first append until gate is closed and, once, lets a
// rival writer append to a subject of a batch of several items just before
// it is stored, so that the batch conflicts on that subject only.
type slowStore struct {
	events.Store
	gate    chan struct{}
	entered chan struct{} // closed when the first append reaches the store
	calls   atomic.Int32
	rivaled atomic.Bool
	rival   string // subject that was made to conflict
}

func (s *slowStore) delay() {
	if s.calls.Add(1) == 1 {
		close(s.entered)
		<-s.gate
	}
}

func (s *slowStore) Append(ctx context.Context, subject string, expected uint64, envs ...codec.Envelope) (uint64, error) {
	s.delay()
	return s.Store.Append(ctx, subject, expected, envs...)
}

func (s *slowStore) AppendBatch(ctx context.Context, items []events.AppendItem) ([]uint64, error) {
	s.delay()
	if len(items) > 1 && s.rivaled.CompareAndSwap(false, true) {
		it := items[len(items)/2]
		s.rival = it.Subject
		other, err := testSealer().Seal("acme", []kernel.Event{kernel.ExposureTombstoned{AttemptID: "rival", Reason: "rival"}})
		if err != nil {
			return nil, err
		}
		if _, err := s.Store.Append(ctx, it.Subject, it.ExpectedLastSeq, other...); err != nil {
			return nil, err
		}
	}
	return s.Store.AppendBatch(ctx, items)
}

// TestGroupCommitConflictRedecidesOnlyConflicting: transactions on 24
// resources queue behind a held first append, are all decided and sealed
// meanwhile, and go out as one batch when it returns; a
// rival writer moves one subject first. The batch stores nothing; the
// transaction on that subject is decided again on the refreshed ledger, the
// others are appended again as they were (decided once), none is lost, and
// a full replay gives every reservation exactly once.
func TestGroupCommitConflictRedecidesOnlyConflicting(t *testing.T) {
	mem := events.NewMemStore()
	store := &slowStore{Store: mem, gate: make(chan struct{}), entered: make(chan struct{})}
	eng := NewEngine(store, testSealer())
	eng.Appends = AppendBatches
	ctx := context.Background()
	const n = 24
	decisions := make([]atomic.Int32, n+1)
	do := func(i int) error {
		res := fmt.Sprint("ord_g", i)
		r, err := eng.Run(ctx, "acme", exposureStep(res, kernel.Reserve{GuaranteeID: testDef.ID, Resource: res, AttemptID: "a", OperationID: "o",
			Amount: 10, Limit: testDef.Limit, DefinitionDigest: testDef.Digest()}, func(*kernel.Ledger) { decisions[i].Add(1) }))
		if err == nil && r.Refusal != nil {
			err = fmt.Errorf("refused %s", r.Refusal.Code)
		}
		return err
	}
	var wg sync.WaitGroup
	errs := make(chan error, n+1)
	wg.Add(1)
	go func() { defer wg.Done(); errs <- do(n) }() // the slow first append
	select {
	case <-store.entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the first append did not reach the store")
	}
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) { defer wg.Done(); errs <- do(i) }(i)
	}
	waitStats(t, eng, func(s EngineStats) bool { return s.Sealed >= n+1 }) // all decided and sealed behind the held append
	close(store.gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if store.rival == "" {
		t.Fatal("no batch of several items was appended")
	}
	twice := 0
	for i := 0; i <= n; i++ {
		sub, _ := codec.ExposureSubject("acme", testDef.ID, fmt.Sprint("ord_g", i))
		switch d := decisions[i].Load(); {
		case sub == store.rival && d == 2:
			twice++
		case sub != store.rival && d != 1:
			t.Fatalf("ord_g%d decided %d times; only the conflicting one may be decided again", i, d)
		}
		if got := replayBalance(t, mem, fmt.Sprint("ord_g", i)); got.Held != 10 {
			t.Fatalf("ord_g%d: replay %+v", i, got)
		}
	}
	st := eng.Stats()
	if twice != 1 || st.Conflicts != 1 || st.BatchedTxs != n+1 {
		t.Fatalf("conflicting decided again: %d; stats %+v (want 1 conflict, every transaction stored once)", twice, st)
	}
}

// gateStore holds every append until released.
type gateStore struct {
	events.Store
	gate chan struct{}
}

func (g *gateStore) Append(ctx context.Context, subject string, expected uint64, envs ...codec.Envelope) (uint64, error) {
	<-g.gate
	return g.Store.Append(ctx, subject, expected, envs...)
}

func (g *gateStore) AppendBatch(ctx context.Context, items []events.AppendItem) ([]uint64, error) {
	<-g.gate
	return g.Store.AppendBatch(ctx, items)
}

// TestHotResourceFIFO: proposals on one resource are decided in the order
// they arrived, one on top of the other before any is stored, and appended
// together with one expected sequence: the 40 reservations that queue while
// the first append is held go out as one more append, their events in
// arrival order, and the ones that no longer fit are refused, never the
// earlier ones.
func TestHotResourceFIFO(t *testing.T) {
	t.Run("atomic batch", func(t *testing.T) { hotFIFO(t, false) })
	t.Run("chained single appends", func(t *testing.T) { hotFIFO(t, true) })
}

func hotFIFO(t *testing.T, singles bool) {
	mem := events.NewMemStore()
	store := &gateStore{Store: mem, gate: make(chan struct{})}
	eng := NewEngine(store, testSealer())
	eng.Appends = AppendBatches
	if singles {
		eng.Appends = AppendSingles
	}
	queued := queuedPacer(eng)
	ctx := context.Background()
	var mu sync.Mutex
	var order []int
	results := make([]string, 41)
	var wg sync.WaitGroup
	reserve := func(i int) {
		defer wg.Done()
		att := fmt.Sprintf("h%02d", i)
		r, err := eng.Run(tagged(ctx, i), "acme", exposureStep("ord_hot", kernel.Reserve{GuaranteeID: testDef.ID, Resource: "ord_hot", AttemptID: att,
			OperationID: "o" + att, Amount: 3000, Limit: testDef.Limit, DefinitionDigest: testDef.Digest()}, func(*kernel.Ledger) {
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
		}))
		switch {
		case err != nil:
			results[i] = err.Error()
		case r.Refusal != nil:
			results[i] = string(r.Refusal.Code)
		default:
			results[i] = "reserved"
		}
	}
	for i := 0; i <= 40; i++ {
		wg.Add(1)
		go reserve(i)
		queued.wait(t, i) // in line before the next one
		if i == 0 {
			waitStats(t, eng, func(s EngineStats) bool { return s.Sealed >= 1 }) // decided, its append held
		}
	}
	// The 33 that fit decided and sealed behind the held append.
	waitStats(t, eng, func(s EngineStats) bool { return s.Sealed >= 33 })
	close(store.gate)
	wg.Wait()
	// Decisions in arrival order; the refused ones (limit 100000 / 3000 =
	// 33 fit) are the last, and a refusal is verified and decided again.
	var firsts []int
	seen := map[int]bool{}
	for _, i := range order {
		if !seen[i] {
			seen[i] = true
			firsts = append(firsts, i)
		}
	}
	for k, i := range firsts {
		if k != i {
			t.Fatalf("decision order %v, want arrival order", firsts)
		}
	}
	for i, r := range results {
		want := "reserved"
		if i >= 33 {
			want = string(wire.CodeExceeded)
		}
		if r != want {
			t.Fatalf("proposal %d: %s, want %s (all: %v)", i, r, want, results)
		}
	}
	sub, _ := codec.ExposureSubject("acme", testDef.ID, "ord_hot")
	all, err := mem.Read(ctx, sub, 1)
	if err != nil {
		t.Fatal(err)
	}
	for k, st := range all {
		ev, _ := kernel.DecodeEvent(st.Envelope.Type, st.Envelope.V, st.Envelope.Body)
		if got, want := ev.(kernel.ExposureReserved).AttemptID, fmt.Sprintf("h%02d", k); got != want {
			t.Fatalf("event %d is %s, want %s", k, got, want)
		}
	}
	if st := eng.Stats(); !singles && st.BatchedEvents <= st.Batches {
		t.Fatalf("stats %+v: no append carried several reservations", st)
	}
}

// rivalStore lets a rival writer move one subject just before the first
// single append to it.
type rivalStore struct {
	events.Store
	subject string
	after   int32 // the rival moves before this append to subject (0: the first)
	n       atomic.Int32
	done    atomic.Bool
	gate    chan struct{}
}

func (s *rivalStore) Append(ctx context.Context, subject string, expected uint64, envs ...codec.Envelope) (uint64, error) {
	if s.gate != nil {
		<-s.gate
	}
	if subject == s.subject && s.n.Add(1) > s.after && s.done.CompareAndSwap(false, true) {
		other, _ := testSealer().Seal("acme", []kernel.Event{kernel.ExposureTombstoned{AttemptID: "rival", Reason: "rival"}})
		if _, err := s.Store.Append(ctx, subject, expected, other...); err != nil {
			return 0, err
		}
	}
	return s.Store.Append(ctx, subject, expected, envs...)
}

// TestSplitGroupConflict: a group sent as independent single appends (the
// cost model prefers them) where one conflicts: only that one is decided
// again, the others are stored once.
func TestSplitGroupConflict(t *testing.T) {
	mem := events.NewMemStore()
	rival, _ := codec.ExposureSubject("acme", testDef.ID, "ord_s3")
	store := &rivalStore{Store: mem, subject: rival, gate: make(chan struct{})}
	eng := NewEngine(store, testSealer())
	eng.Appends = AppendSingles
	ctx := context.Background()
	const n = 8
	decisions := make([]atomic.Int32, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			res := fmt.Sprint("ord_s", i)
			r, err := eng.Run(ctx, "acme", exposureStep(res, kernel.Reserve{GuaranteeID: testDef.ID, Resource: res, AttemptID: "a", OperationID: "o",
				Amount: 10, Limit: testDef.Limit, DefinitionDigest: testDef.Digest()}, func(*kernel.Ledger) { decisions[i].Add(1) }))
			if err != nil || r.Refusal != nil {
				t.Errorf("ord_s%d: %v %v", i, err, r.Refusal)
			}
		}(i)
	}
	waitStats(t, eng, func(s EngineStats) bool { return s.Sealed >= n }) // all decided behind the held first append
	close(store.gate)
	wg.Wait()
	for i := 0; i < n; i++ {
		want := int32(1)
		if i == 3 {
			want = 2
		}
		if d := decisions[i].Load(); d != want {
			t.Fatalf("ord_s%d decided %d times, want %d", i, d, want)
		}
		if got := replayBalance(t, mem, fmt.Sprint("ord_s", i)); got.Held != 10 {
			t.Fatalf("ord_s%d: replay %+v", i, got)
		}
	}
	if st := eng.Stats(); st.Conflicts != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestChainConflict: a hot resource's chain sent as single appends, one
// after the other; a rival moves the subject in the middle. The appends
// before it are stored once; the conflicting one and the ones chained after
// it are decided again on the refreshed ledger; all end up reserved once.
func TestChainConflict(t *testing.T) {
	mem := events.NewMemStore()
	sub, _ := codec.ExposureSubject("acme", testDef.ID, "ord_chain")
	store := &rivalStore{Store: mem, subject: sub, after: 4, gate: make(chan struct{})}
	eng := NewEngine(store, testSealer())
	eng.Appends = AppendSingles
	queued := queuedPacer(eng)
	ctx := context.Background()
	const n = 12
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			res, _, err := eng.Exposure(tagged(ctx, i), "acme", testDef.ID, "ord_chain", kernel.Reserve{GuaranteeID: testDef.ID, Resource: "ord_chain",
				AttemptID: fmt.Sprint("c", i), OperationID: fmt.Sprint("o", i), Amount: 10, Limit: testDef.Limit, DefinitionDigest: testDef.Digest()})
			if err != nil || res.Refusal != nil {
				t.Errorf("c%d: %v %v", i, err, res.Refusal)
			}
		}(i)
		queued.wait(t, i)
	}
	waitStats(t, eng, func(s EngineStats) bool { return s.Sealed >= n }) // the whole chain decided behind the held first append
	close(store.gate)
	wg.Wait()
	if got := replayBalance(t, mem, "ord_chain"); got.Held != 10*n {
		t.Fatalf("replay %+v, want %d held", got, 10*n)
	}
	if st := eng.Stats(); st.Conflicts != 1 || st.Redecided == 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestLingerPolicy: a ready group waits for the callers of the append that
// just returned only while it holds fewer transactions than that append
// delivered, is not full and would go as an atomic batch, for half of a
// batch's cost, at most Engine.Linger.
func TestLingerPolicy(t *testing.T) {
	cases := []struct {
		name       string
		n, lastTxs int
		costs      costs // seconds
		full       bool
		linger     time.Duration
		want       time.Duration
	}{
		{"fewer ready than delivered", 10, 40, costs{0.001, 0.008}, false, 0, 4 * time.Millisecond},
		{"as many as delivered", 40, 40, costs{0.001, 0.008}, false, 0, 0},
		{"more than delivered", 50, 40, costs{0.001, 0.008}, false, 0, 0},
		{"full", 10, 40, costs{0.001, 0.008}, true, 0, 0},
		{"would go as singles", 1, 4, costs{0.001, 0.008}, false, 0, 0},
		{"half the batch cost", 10, 40, costs{0.01, 0.2}, false, time.Second, 100 * time.Millisecond},
		{"default bound", 10, 40, costs{0.01, 0.100}, false, 0, DefaultLinger},
		{"own bound", 10, 40, costs{0.01, 0.2}, false, 20 * time.Millisecond, 20 * time.Millisecond},
		{"disabled", 10, 40, costs{0.001, 0.008}, false, -1, 0},
		{"no append yet", 10, 0, costs{0.001, 0.008}, false, 0, 0},
	}
	for _, c := range cases {
		if got := c.costs.lingerWait(c.n, c.lastTxs, c.full, c.linger); got != c.want {
			t.Errorf("%s: lingerWait = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestGroupNeverExceedsAppendLimit: whatever arrives at once, no append
// carries more events than the store accepts in one atomic batch. While the
// first append is held, transactions of six events each (a reservation with
// its dispatch-start on three ledgers) pile up: 167 of them are 1002
// events, so the group that forms behind the held append must be cut, and
// every transaction must be stored.
func TestGroupNeverExceedsAppendLimit(t *testing.T) {
	_, js := startStore(t, t.TempDir())
	gate := make(chan struct{})
	eng := NewEngine(&gateStore{Store: js, gate: gate}, testSealer())
	ctx := context.Background()
	do := func(i int) error {
		var reads kernel.Reads
		holds := map[kernel.Key]kernel.Reserve{}
		for j := 0; j < 3; j++ {
			res := fmt.Sprintf("ord_f%d_%d", i, j)
			reads = append(reads, kernel.Read{Key: ledgerKey(res), Access: kernel.Write})
			holds[ledgerKey(res)] = kernel.Reserve{GuaranteeID: testDef.ID, Resource: res, AttemptID: "a", OperationID: "o", Amount: 1,
				Limit: testDef.Limit, DefinitionDigest: testDef.Digest()}
		}
		r, err := eng.Run(ctx, "acme", funcStep{reads: reads, decide: func(l kernel.Loaded) (map[kernel.Key][]kernel.Event, *kernel.Refusal) {
			evs := map[kernel.Key][]kernel.Event{}
			for k, h := range holds {
				d := kernel.DecideExposure(l[k].(*kernel.Ledger), kernel.ReserveStarted{Reserve: h})
				if d.Refusal != nil {
					return nil, d.Refusal
				}
				evs[k] = d.Events
			}
			return evs, nil
		}})
		if err == nil && r.Refusal != nil {
			err = r.Refusal
		}
		return err
	}
	const n = 400
	errs := make(chan error, n)
	go func() { errs <- do(0) }()
	waitStats(t, eng, func(s EngineStats) bool { return s.Sealed >= 1 })
	for i := 1; i < n; i++ {
		go func(i int) { errs <- do(i) }(i)
	}
	// 167 transactions sealed behind the held append are more than one append may carry.
	waitStats(t, eng, func(s EngineStats) bool { return s.Sealed >= 168 })
	close(gate)
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Fatalf("transaction failed: %v", err)
		}
	}
	if st := eng.Stats(); st.BatchedTxs != n || st.BatchedEvents != 6*n {
		t.Fatalf("stats %+v, want %d transactions and %d events stored", st, n, 6*n)
	}
}

// parkPacer is the real pacer that also reports the tag (see tagged) of
// every caller queued on the committer, resubmissions included.
type parkPacer struct {
	Pacer
	parked chan int
}

func (p *parkPacer) Parked(ctx context.Context) {
	if i, ok := ctx.Value(tagKey{}).(int); ok {
		p.parked <- i
	}
}

// queuedPacer gives eng a parkPacer.
func queuedPacer(eng *Engine) *parkPacer {
	p := &parkPacer{Pacer: eng.Pacer, parked: make(chan int, 1024)}
	eng.Pacer = p
	return p
}

// wait returns once the caller tagged i is queued.
func (p *parkPacer) wait(t *testing.T, i int) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case got := <-p.parked:
			if got == i {
				return
			}
		case <-deadline:
			t.Fatalf("caller %d was not queued", i)
		}
	}
}

type tagKey struct{}

// tagged tags ctx with i, for parkPacer.
func tagged(ctx context.Context, i int) context.Context { return context.WithValue(ctx, tagKey{}, i) }

// waitStats polls the engine's counters until cond holds.
func waitStats(t *testing.T, eng *Engine, cond func(EngineStats) bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond(eng.Stats()) {
		if time.Now().After(deadline) {
			t.Fatalf("engine stats %+v: condition not reached", eng.Stats())
		}
		time.Sleep(time.Millisecond)
	}
}

// TestAppendChoice: a group goes the way measured cheaper, but a batch is
// tried once in 100 groups while singles win, and singles once in 10 while
// batches win, only for groups of at most 8. A group of one (a single
// append either way) leaves the single-append average alone.
func TestAppendChoice(t *testing.T) {
	k := costs{single: 0.001, batch: 0.006}
	count := func(n int) (singles int) {
		for sends := 1; sends <= 1000; sends++ {
			if k.choose(n, sends) {
				singles++
			}
		}
		return singles
	}
	for _, c := range []struct {
		n, want int
	}{
		{2, 990}, // singles cheaper: a batch once in 100
		{5, 990}, // still cheaper: 5 ms against 6
		{6, 100}, // a batch cheaper, a small group: singles once in 10
		{8, 100}, // the largest group that tries singles
		{9, 0},   // larger: never as singles
		{64, 0},  // a hot resource's chain or 64 agents: never
	} {
		if got := count(c.n); got != c.want {
			t.Errorf("groups of %d: %d of 1000 as singles, want %d", c.n, got, c.want)
		}
	}
	one := batchResult{items: []events.AppendItem{{Envs: make([]codec.Envelope, 1)}}, elapsed: 50 * time.Millisecond}
	if got := k.observe(one.sample(true)); got != k {
		t.Fatalf("a group of one moved the averages: %+v", got)
	}
	four := batchResult{split: []batchResult{{}}, events: 4, elapsed: 2 * time.Millisecond}
	if got, want := k.observe(four.sample(true)), 0.8*0.001+0.2*0.0005; math.Abs(got.single-want) > 1e-12 || got.batch != k.batch {
		t.Fatalf("after four singles in 2 ms: %+v, want single %v", got, want)
	}
	batch := batchResult{items: []events.AppendItem{{Envs: make([]codec.Envelope, 3)}}, elapsed: 10 * time.Millisecond}
	if got, want := k.observe(batch.sample(true)), 0.8*0.006+0.2*0.010; math.Abs(got.batch-want) > 1e-12 || got.single != k.single {
		t.Fatalf("after a batch in 10 ms: %+v, want batch %v", got, want)
	}
}

// TestPipelines: a group goes out beside single appends in flight only while
// single appends are the way for every transaction in the committer; only
// an append that had the store to itself moves the cost averages.
func TestPipelines(t *testing.T) {
	k := costs{single: 0.001, batch: 0.006}
	for _, c := range []struct {
		mode AppendMode
		n    int
		want bool
	}{
		{AppendMeasured, 1, true}, // judged as a pair: 2 ms against 6
		{AppendMeasured, 5, true},
		{AppendMeasured, 6, false}, // 6 ms: one batch carries them as cheaply
		{AppendMeasured, 64, false},
		{AppendSingles, 64, true},
		{AppendBatches, 1, false},
	} {
		if got := k.pipelines(c.mode, c.n); got != c.want {
			t.Errorf("mode %d, %d transactions: pipelines = %v, want %v", c.mode, c.n, got, c.want)
		}
	}

	four := func(overlapped bool) batchResult {
		return batchResult{split: []batchResult{}, groupDone: true, events: 4, elapsed: 2 * time.Millisecond, overlapped: overlapped, group: 2}
	}
	if got := k.observe(four(false).sample(false)); got != k {
		t.Fatalf("an append with another group sent after it moved the averages: %+v", got)
	}
	if got := k.observe(four(true).sample(true)); got != k {
		t.Fatalf("an append sent beside another moved the averages: %+v", got)
	}
	if got, want := k.observe(four(false).sample(true)), 0.8*0.001+0.2*0.0005; math.Abs(got.single-want) > 1e-12 {
		t.Fatalf("after an append alone: %+v, want single %v", got, want)
	}
}

// flightStore holds single appends to the subjects in held until their
// channel is closed, moves rival with a rival writer's event just before
// the first append to it, and notes a read of a held subject made while an
// append to it is still held.
type flightStore struct {
	events.Store
	rival   string
	rivaled atomic.Bool
	held    map[string]chan struct{}
	arrived chan string // each held append, when it reaches the store
	mu      sync.Mutex
	holding map[string]int
	early   atomic.Bool
}

func (s *flightStore) Append(ctx context.Context, subject string, expected uint64, envs ...codec.Envelope) (uint64, error) {
	if gate, ok := s.held[subject]; ok {
		s.mu.Lock()
		s.holding[subject]++
		s.mu.Unlock()
		s.arrived <- subject
		<-gate
		defer func() {
			s.mu.Lock()
			s.holding[subject]--
			s.mu.Unlock()
		}()
	}
	if subject == s.rival && s.rivaled.CompareAndSwap(false, true) {
		other, _ := testSealer().Seal("acme", []kernel.Event{kernel.ExposureTombstoned{AttemptID: "rival", Reason: "rival"}})
		if _, err := s.Store.Append(ctx, subject, expected, other...); err != nil {
			return 0, err
		}
	}
	return s.Store.Append(ctx, subject, expected, envs...)
}

func (s *flightStore) Read(ctx context.Context, subject string, fromSeq uint64) ([]events.Stored, error) {
	s.mu.Lock()
	if s.holding[subject] > 0 {
		s.early.Store(true)
	}
	s.mu.Unlock()
	return s.Store.Read(ctx, subject, fromSeq)
}

// TestPipelinedSinglesReloadAfterFlight: single appends on disjoint subjects
// go out while others are in flight, and a subject that a conflict drops
// while an append to it is in flight is read only once that append is
// stored. Here the reservation on A is in flight when the one on B goes
// out; a third transaction, decided on both, waits (it names subjects in
// flight); A conflicts, which drops A and B with it. Read before B's append
// landed, B would hold the state before it with the sequence after it, and
// the next reservation on B would be decided 10 short.
func TestPipelinedSinglesReloadAfterFlight(t *testing.T) {
	mem := events.NewMemStore()
	subA, _ := codec.ExposureSubject("acme", testDef.ID, "ord_a")
	subB, _ := codec.ExposureSubject("acme", testDef.ID, "ord_b")
	gateA, gateB := make(chan struct{}), make(chan struct{})
	store := &flightStore{Store: mem, rival: subA, held: map[string]chan struct{}{subA: gateA, subB: gateB},
		arrived: make(chan string, 8), holding: map[string]int{}}
	eng := NewEngine(store, testSealer())
	eng.Appends = AppendSingles
	ctx := context.Background()
	reserve := func(res, attempt string) kernel.Reserve {
		return kernel.Reserve{GuaranteeID: testDef.ID, Resource: res, AttemptID: attempt, OperationID: "o" + attempt,
			Amount: 10, Limit: testDef.Limit, DefinitionDigest: testDef.Digest()}
	}
	do := func(res, attempt string) <-chan error {
		done := make(chan error, 1)
		go func() {
			r, _, err := eng.Exposure(ctx, "acme", testDef.ID, res, reserve(res, attempt))
			if err == nil && r.Refusal != nil {
				err = fmt.Errorf("refused: %v", r.Refusal)
			}
			done <- err
		}()
		return done
	}
	arrival := func(want string) {
		select {
		case got := <-store.arrived:
			if got != want {
				t.Fatalf("held append on %s, want %s", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no append on %s reached the store while the one before it was held", want)
		}
	}
	doneA := do("ord_a", "a1")
	arrival(subA)
	doneB := do("ord_b", "b1")
	arrival(subB) // not behind A's append: it names none of its subjects
	// Decided on A and B as they will be once both appends land, appending
	// to A only.
	keyA, keyB := ledgerKey("ord_a"), ledgerKey("ord_b")
	doneAB := make(chan error, 1)
	var seenB []int64 // B's held amount at each decision of the third transaction
	go func() {
		r, err := eng.Run(ctx, "acme", funcStep{reads: kernel.Reads{{Key: keyA, Access: kernel.Write}, {Key: keyB, Access: kernel.Write}},
			decide: func(l kernel.Loaded) (map[kernel.Key][]kernel.Event, *kernel.Refusal) {
				seenB = append(seenB, l[keyB].(*kernel.Ledger).Balance().Held)
				d := kernel.DecideExposure(l[keyA].(*kernel.Ledger), reserve("ord_a", "ab1"))
				return map[kernel.Key][]kernel.Event{keyA: d.Events}, d.Refusal
			}})
		if err == nil && r.Refusal != nil {
			err = fmt.Errorf("refused: %v", r.Refusal)
		}
		doneAB <- err
	}()
	waitStats(t, eng, func(s EngineStats) bool { return s.Sealed >= 3 })
	close(gateA) // A conflicts: a1 and the third transaction are decided again
	if err := <-doneA; err != nil {
		t.Fatal(err)
	}
	close(gateB)
	for _, done := range []<-chan error{doneB, doneAB} {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if store.early.Load() {
		t.Fatal("a subject was read while an append to it was in flight")
	}
	for i, held := range seenB {
		if held != 10 {
			t.Fatalf("decision %d of the third transaction saw %d held on B, want 10", i+1, held)
		}
	}
	if err := <-do("ord_b", "b2"); err != nil {
		t.Fatal(err)
	}
	a, b := replayBalance(t, mem, "ord_a"), replayBalance(t, mem, "ord_b")
	if a.Held != 20 || b.Held != 20 {
		t.Fatalf("replay: A %+v, B %+v; want 20 held on each", a, b)
	}
	if _, err := eng.Run(ctx, "acme", funcStep{reads: kernel.Reads{{Key: keyB, Access: kernel.Write}},
		decide: func(l kernel.Loaded) (map[kernel.Key][]kernel.Event, *kernel.Refusal) {
			if got := l[keyB].(*kernel.Ledger).Balance().Held; got != 20 {
				t.Errorf("the engine's B holds %d, the store 20", got)
			}
			return nil, nil
		}}); err != nil {
		t.Fatal(err)
	}
}

// TestPipelinedSinglesAcrossReplicas: two engines (two replicas) send every
// reservation as single appends, so each keeps several in flight on disjoint
// subjects while the other moves the same three shared resources under it
// (conflicts, rollbacks, reloads with appends in flight). Every resource ends
// with exactly the reservations that were answered as stored, never over
// its limit, and a cold engine reads the same balances.
func TestPipelinedSinglesAcrossReplicas(t *testing.T) {
	_, store := startStore(t, t.TempDir())
	const workers, each, amount = 8, 30, 3000
	engines := []*Engine{NewEngine(store, testSealer()), NewEngine(store, testSealer())}
	var mu sync.Mutex
	reserved := map[string]int64{}
	var wg sync.WaitGroup
	for e, eng := range engines {
		eng.Appends = AppendSingles
		eng.MaxAttempts = 64
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(e, w int) {
				defer wg.Done()
				for i := 0; i < each; i++ {
					res := fmt.Sprint("ord_p", (w+i)%3) // shared by every worker of both replicas
					if i%2 == 1 {
						res = fmt.Sprintf("ord_own_%d_%d", e, w)
					}
					cmd := reserve(fmt.Sprintf("att_%d_%d_%d", e, w, i), amount)
					cmd.Resource = res
					r, _, err := engines[e].Exposure(context.Background(), "acme", testDef.ID, res, cmd)
					switch {
					case err != nil:
						t.Errorf("%s: %v", res, err)
						return
					case r.Refusal == nil:
						mu.Lock()
						reserved[res] += amount
						mu.Unlock()
					case r.Refusal.Code != wire.CodeExceeded && r.Refusal.Code != wire.CodeContention:
						t.Errorf("%s: refused %s", res, r.Refusal.Code)
					}
				}
			}(e, w)
		}
	}
	wg.Wait()
	if c := engines[0].Stats().Conflicts + engines[1].Stats().Conflicts; c == 0 {
		t.Fatal("the replicas never conflicted")
	}
	cold := NewEngine(store, testSealer())
	for res, held := range reserved {
		got := replayBalance(t, store, res)
		if got.Held != held || got.Held > testDef.Limit {
			t.Errorf("%s: replay holds %d, the answers %d (limit %d)", res, got.Held, held, testDef.Limit)
		}
		_, bal, err := cold.Exposure(context.Background(), "acme", testDef.ID, res, kernel.Observe{AttemptID: "none", Outcome: kernel.OutcomeApplied})
		if err != nil || bal != got {
			t.Errorf("%s: a cold engine reads %+v (%v), the replay %+v", res, bal, err, got)
		}
	}
	for p := 0; p < 3; p++ {
		if res := fmt.Sprint("ord_p", p); reserved[res] < testDef.Limit-amount {
			t.Errorf("%s: %d held, want the limit %d nearly full", res, reserved[res], testDef.Limit)
		}
	}
}

// pairPacer is the real pacer that holds sealed groups until two
// transactions form one (the second one's arrival wakes the committer).
type pairPacer struct{ Pacer }

func (p pairPacer) Send(n int, until time.Time, wake func()) bool {
	return n >= 2 && p.Pacer.Send(n, until, wake)
}

// TestSingleAppendsAnsweredOneByOne: two reservations on distinct resources
// go out as one group of single appends; the one stored first is answered
// while the other is still in flight, not when the group's slowest append
// returns.
func TestSingleAppendsAnsweredOneByOne(t *testing.T) {
	mem := events.NewMemStore()
	subA, _ := codec.ExposureSubject("acme", testDef.ID, "ord_a")
	gateA := make(chan struct{})
	store := &flightStore{Store: mem, held: map[string]chan struct{}{subA: gateA}, arrived: make(chan string, 8), holding: map[string]int{}}
	eng := NewEngine(store, testSealer())
	eng.Appends = AppendSingles
	eng.Pacer = pairPacer{eng.Pacer}
	ctx := context.Background()
	do := func(res string) <-chan error {
		done := make(chan error, 1)
		go func() {
			r, _, err := eng.Exposure(ctx, "acme", testDef.ID, res, kernel.Reserve{GuaranteeID: testDef.ID, Resource: res, AttemptID: res,
				OperationID: "o" + res, Amount: 10, Limit: testDef.Limit, DefinitionDigest: testDef.Digest()})
			if err == nil && r.Refusal != nil {
				err = fmt.Errorf("refused: %v", r.Refusal)
			}
			done <- err
		}()
		return done
	}
	doneA, doneB := do("ord_a"), do("ord_b")
	select {
	case <-store.arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the append on A did not reach the store")
	}
	select {
	case err := <-doneB:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("B was not answered while A's append was in flight")
	}
	if st := eng.Stats(); st.SingleGroups != 1 {
		t.Fatalf("%d groups of single appends, want the pair as one", st.SingleGroups)
	}
	close(gateA)
	if err := <-doneA; err != nil {
		t.Fatal(err)
	}
	if a, b := replayBalance(t, mem, "ord_a"), replayBalance(t, mem, "ord_b"); a.Held != 10 || b.Held != 10 {
		t.Fatalf("replay: A %+v, B %+v; want 10 held on each", a, b)
	}
}

// timedStore records how long each append spent in the store, and holds
// the appends while hold is set until release is closed.
type timedStore struct {
	events.Store
	hold    bool
	entered chan struct{}
	release chan struct{}

	mu    sync.Mutex
	spans []time.Duration
}

func (s *timedStore) timed(f func() error) error {
	start := time.Now()
	if s.hold {
		s.entered <- struct{}{}
		<-s.release
	}
	err := f()
	s.mu.Lock()
	s.spans = append(s.spans, time.Since(start))
	s.mu.Unlock()
	return err
}

func (s *timedStore) Append(ctx context.Context, subject string, expected uint64, envs ...codec.Envelope) (seq uint64, err error) {
	err = s.timed(func() error { seq, err = s.Store.Append(ctx, subject, expected, envs...); return err })
	return seq, err
}

func (s *timedStore) AppendBatch(ctx context.Context, items []events.AppendItem) (seqs []uint64, err error) {
	err = s.timed(func() error { seqs, err = s.Store.AppendBatch(ctx, items); return err })
	return seqs, err
}

func (s *timedStore) total() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var d time.Duration
	for _, sp := range s.spans {
		d += sp
	}
	return d
}

// TestAppendBusy: the engine's AppendBusy grows while an append is in
// flight and only then. It covers every append the store served (they go
// one after the other here, so their times add up) and no more than the
// time the transactions took.
func TestAppendBusy(t *testing.T) {
	store := &timedStore{Store: events.NewMemStore(), hold: true, entered: make(chan struct{}), release: make(chan struct{})}
	eng := NewEngine(store, testSealer())
	ctx := context.Background()
	reserve := func(i int) error {
		att := fmt.Sprintf("b%02d", i)
		r, err := eng.Run(ctx, "acme", exposureStep(fmt.Sprintf("ord_%d", i), kernel.Reserve{GuaranteeID: testDef.ID, Resource: fmt.Sprintf("ord_%d", i),
			AttemptID: att, OperationID: "o" + att, Amount: 100, Limit: testDef.Limit, DefinitionDigest: testDef.Digest()}, nil))
		if err == nil && r.Refusal != nil {
			err = fmt.Errorf("refused: %s", r.Refusal.Code)
		}
		return err
	}
	if b := eng.Stats().AppendBusy; b != 0 {
		t.Fatalf("busy %v before any append", b)
	}
	begin := time.Now()
	done := make(chan error, 1)
	go func() { done <- reserve(0) }()
	<-store.entered
	held1 := eng.Stats().AppendBusy
	held2 := eng.Stats().AppendBusy
	if held1 <= 0 || held2 < held1 {
		t.Fatalf("busy %v then %v while an append is held", held1, held2)
	}
	close(store.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	store.hold = false
	for i := 1; i <= 20; i++ {
		if err := reserve(i); err != nil {
			t.Fatal(err)
		}
	}
	wall := time.Since(begin)
	idle1 := eng.Stats().AppendBusy
	idle2 := eng.Stats().AppendBusy
	if idle2 != idle1 {
		t.Fatalf("busy grew from %v to %v with no append in flight", idle1, idle2)
	}
	if served := store.total(); idle1 < served || idle1 > wall {
		t.Fatalf("busy %v; the store served appends for %v in all, the transactions took %v", idle1, served, wall)
	}
	if st := eng.Stats(); st.Batches != 21 {
		t.Fatalf("stats %+v: want 21 appends", st)
	}
}
