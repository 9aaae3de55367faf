package aggregates

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
)

// runManifest is one tenant (acme) with one agent granted the refund
// capability, the order's refund guarantee pinned as testDef, and runs
// that need no admission.
func runManifest() *kernel.Manifest {
	cp := &kernel.Capability{ID: "adp_payments.issue_refund", Version: "1", Risk: "low", Effectful: true, RunAmount: "/amount_minor",
		Breaker: kernel.BreakerRule{Threshold: 2, Window: time.Minute}}
	pin := &kernel.Pin{Tenant: "acme", Definition: testDef, Digest: testDef.Digest()}
	return &kernel.Manifest{
		Capabilities: map[string]*kernel.Capability{cp.ID: cp},
		Guarantees:   []kernel.Guarantee{{Definition: testDef}},
		Tenants: map[string]*kernel.Tenant{"acme": {ID: "acme", AllowUnadmitted: true,
			Agents: map[string]*kernel.Agent{"agent_a": {ID: "agent_a", Capabilities: []string{cp.ID}}},
			Pins:   map[string]kernel.PinnedGuarantee{testDef.ID: {Pin: pin}}}},
		MaxProposalBytes: 1 << 16,
	}
}

var runIDs struct {
	mu sync.Mutex
	n  int
}

// proposal is a refund proposal of agent_a on order of amount, under key.
func proposal(m *kernel.Manifest, key, order string, amount int64) kernel.ProposeInput {
	runIDs.mu.Lock()
	runIDs.n++
	n := runIDs.n
	runIDs.mu.Unlock()
	body := fmt.Sprintf(`{"run_id":"run_1","operation_key":%q,"capability_id":"adp_payments.issue_refund","arguments":{"order_id":%q,"amount_minor":%d}}`,
		key, order, amount)
	return kernel.ProposeInput{Manifest: m, Tenant: "acme", Principal: "agent_a", Body: []byte(body), Now: time.Now(),
		OperationID: fmt.Sprintf("op_%d", n), AttemptID: fmt.Sprintf("att_%d", n), Executor: "replica-a"}
}

// subjectTypes returns the types of the events stored on key's subject.
func subjectTypes(t *testing.T, store events.Store, k kernel.Key) []string {
	t.Helper()
	ref, err := RefOf("acme", k)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := store.Read(context.Background(), ref.Subject, 1)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range stored {
		out = append(out, s.Envelope.Type)
	}
	return out
}

func sameTypes(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: stored %v, want %v", what, got, want)
	}
}

// TestRunProposeThenSettle: a proposal run through the engine stores, in
// one append, its operation's opening, reservation and dispatch-start, the
// ledger's hold and the run's charge, keyed by subject, and asks for the
// dispatch; its settlement commits the hold. The stream replayed agrees.
func TestRunProposeThenSettle(t *testing.T) {
	_, store := startStore(t, t.TempDir())
	eng := NewEngine(store, testSealer())
	ctx := context.Background()
	m := runManifest()
	in := proposal(m, "k1", "ord_881", 80000)
	eff, err := eng.Run(ctx, "acme", in.Step())
	if err != nil || eff.Refusal != nil || eff.Dispatch == nil {
		t.Fatalf("propose: %v %v %+v", err, eff.Refusal, eff.Dispatch)
	}
	op := kernel.KeyOperation("run_1", "k1")
	ledger := kernel.LedgerKey{GuaranteeID: testDef.ID, Resource: "ord_881"}.Key()
	sameTypes(t, "operation", subjectTypes(t, store, op), kernel.TypeOperationOpened, kernel.TypeOperationReserved, kernel.TypeOperationDispatchStarted)
	sameTypes(t, "ledger", subjectTypes(t, store, ledger), kernel.TypeExposureReserved, kernel.TypeExposureDispatchStarted)
	sameTypes(t, "run", subjectTypes(t, store, kernel.KeyRun("run_1")), kernel.TypeRunConsumed)
	if got := replayBalance(t, store, "ord_881"); got.Held != 80000 {
		t.Fatalf("replayed balance %+v", got)
	}
	if eff.Reply.Status != wire.StatusPending || len(eff.Reply.Guarantees) != 1 || eff.Reply.Guarantees[0].Held != 80000 {
		t.Fatalf("reply %+v", eff.Reply)
	}

	set, err := eng.Run(ctx, "acme", eff.Dispatch.Settle(kernel.OutcomeApplied, "rf_1", time.Now()).Step())
	if err != nil || set.Refusal != nil {
		t.Fatalf("settle: %v %v", err, set.Refusal)
	}
	if set.Reply.Status != wire.StatusApplied || set.Reply.Guarantees[0].Committed != 80000 {
		t.Fatalf("settle reply %+v", set.Reply)
	}
	if got := replayBalance(t, store, "ord_881"); got.Committed != 80000 || got.Held != 0 {
		t.Fatalf("replayed balance after settle %+v", got)
	}

	// The same proposal again is the same operation: nothing appended.
	again, err := eng.Run(ctx, "acme", proposal(m, "k1", "ord_881", 80000).Step())
	if err != nil || again.Refusal != nil || again.Dispatch != nil || again.Reply.Status != wire.StatusApplied {
		t.Fatalf("again: %v %+v", err, again)
	}
	sameTypes(t, "operation after the same proposal", subjectTypes(t, store, op), kernel.TypeOperationOpened, kernel.TypeOperationReserved,
		kernel.TypeOperationDispatchStarted, kernel.TypeDecisionRecorded, kernel.TypeOperationObserved)
}

// TestRunScopedKey: a proposal whose key of the run another principal's
// operation holds appends nothing there and says so (Effects.Scoped);
// decided again as Scoped, its operation is on the principal's own subject
// of the key (ScopedOperationRef), and the same proposal again is that
// operation.
func TestRunScopedKey(t *testing.T) {
	_, store := startStore(t, t.TempDir())
	eng := NewEngine(store, testSealer())
	ctx := context.Background()
	m := runManifest()
	m.Tenants["acme"].Agents["agent_b"] = &kernel.Agent{ID: "agent_b", Capabilities: []string{"adp_payments.issue_refund"}}
	if eff, err := eng.Run(ctx, "acme", proposal(m, "k1", "ord_1", 100).Step()); err != nil || eff.Dispatch == nil {
		t.Fatalf("agent_a: %v %+v", err, eff)
	}
	in := proposal(m, "k1", "ord_2", 200)
	in.Principal = "agent_b"
	eff, err := eng.Run(ctx, "acme", in.Step())
	if err != nil || !eff.Scoped || eff.Refusal != nil || len(eff.Append) != 0 {
		t.Fatalf("agent_b on agent_a's key: %v %+v", err, eff)
	}
	in.Scoped = true
	if eff, err = eng.Run(ctx, "acme", in.Step()); err != nil || eff.Dispatch == nil || eff.Dispatch.Operation != kernel.KeyScopedOperation("run_1", "k1", "agent_b") {
		t.Fatalf("agent_b on its own subject: %v %+v", err, eff)
	}
	ref, err := ScopedOperationRef("acme", "run_1", "k1", "agent_b")
	if err != nil {
		t.Fatal(err)
	}
	stored, err := store.Read(ctx, ref.Subject, 1)
	if err != nil || len(stored) != 3 || stored[0].Envelope.Type != kernel.TypeOperationOpened {
		t.Fatalf("agent_b's operation subject %s: %v %d events", ref.Subject, err, len(stored))
	}
	sameTypes(t, "agent_a's operation", subjectTypes(t, store, kernel.KeyOperation("run_1", "k1")), kernel.TypeOperationOpened, kernel.TypeOperationReserved,
		kernel.TypeOperationDispatchStarted)
	again, err := eng.Run(ctx, "acme", in.Step())
	if err != nil || again.Scoped || len(again.Append) != 0 || again.Reply.OperationID != eff.Dispatch.OperationID {
		t.Fatalf("again: %v %+v", err, again)
	}
}

// TestRunRace: sixteen proposals of 80,000 race on one order whose ceiling
// is 100,000, through two engines (replicas) on one store: exactly one
// holds, every other is refused and recorded on its operation.
func TestRunRace(t *testing.T) {
	srv, store := startStore(t, t.TempDir())
	engs := []*Engine{NewEngine(store, testSealer()), NewEngine(connectStore(t, srv.ClientURL()), testSealer())}
	m := runManifest()
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[wire.Code]int{}
	accepted := 0
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			eff, err := engs[i%2].Run(context.Background(), "acme", proposal(m, fmt.Sprint("race_", i), "ord_race", 80000).Step())
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Errorf("proposal %d: %v", i, err)
			case eff.Refusal != nil:
				codes[eff.Refusal.Code]++
			default:
				accepted++
			}
		}(i)
	}
	wg.Wait()
	if accepted != 1 || codes[wire.CodeExceeded]+codes[wire.CodeContention] != 15 {
		t.Fatalf("accepted %d, refused %v", accepted, codes)
	}
	if got := replayBalance(t, store, "ord_race"); got.Held != 80000 {
		t.Fatalf("replayed balance %+v", got)
	}
}

// TestRunStoredEventRefused: a stored event the kernel refuses (a run
// event of another run on this run's subject) is a *StoredEventError that
// names the subject and the sequence, not the store being unavailable.
func TestRunStoredEventRefused(t *testing.T) {
	_, store := startStore(t, t.TempDir())
	eng := NewEngine(store, testSealer())
	ref, _ := RefOf("acme", kernel.KeyRun("run_1"))
	envs, err := testSealer().Seal("acme", []kernel.Event{kernel.RunConsumed{RunID: "run_other", Calls: 1}})
	if err != nil {
		t.Fatal(err)
	}
	seq, err := store.Append(context.Background(), ref.Subject, 0, envs...)
	if err != nil {
		t.Fatal(err)
	}
	_, err = eng.Run(context.Background(), "acme", proposal(runManifest(), "k1", "ord_881", 1).Step())
	var se *StoredEventError
	if !errors.As(err, &se) || se.Subject != ref.Subject || se.Seq != seq || CodeOf(err) != wire.CodeStoredEventRefused {
		t.Fatalf("want a stored event refused on %s seq %d, got %v", ref.Subject, seq, err)
	}
}

// failingReads is a store whose reads fail, as a store that does not
// answer.
type failingReads struct{ events.Store }

func (failingReads) Read(context.Context, string, uint64) ([]events.Stored, error) {
	return nil, errors.New("nats: timeout")
}

// TestRunUnavailable: a store that does not answer is an
// *UnavailableError: ledger_unavailable.
func TestRunUnavailable(t *testing.T) {
	_, store := startStore(t, t.TempDir())
	eng := NewEngine(failingReads{store}, testSealer())
	_, err := eng.Run(context.Background(), "acme", proposal(runManifest(), "k1", "ord_881", 1).Step())
	var ue *UnavailableError
	if !errors.As(err, &ue) || CodeOf(err) != wire.CodeLedgerUnavailable {
		t.Fatalf("want unavailable, got %T %v", err, err)
	}
}

// TestRunReadsAuthorityFresh: an operator's revocation stored by another
// replica takes effect for the next proposal here, and a grant after it
// too: the authority subject is read during each call, from the changes
// since the last.
func TestRunReadsAuthorityFresh(t *testing.T) {
	srv, store := startStore(t, t.TempDir())
	eng := NewEngine(store, testSealer())
	other := NewEngine(connectStore(t, srv.ClientURL()), testSealer())
	ctx := context.Background()
	m := runManifest()
	change := func(grant bool) {
		t.Helper()
		if _, err := other.Run(ctx, "acme", kernel.VerbStep(kernel.KeyAuthority, func(a *kernel.Authority) (kernel.Decision, any) {
			return kernel.DecideAuthorityChange(a, kernel.ChangeAuthority{Principal: "agent_a", CapabilityID: "adp_payments.issue_refund", Grant: grant, Operator: "op"}), nil
		})); err != nil {
			t.Fatal(err)
		}
	}
	propose := func(key string) *kernel.Refusal {
		t.Helper()
		eff, err := eng.Run(ctx, "acme", proposal(m, key, "ord_"+key, 1).Step())
		if err != nil {
			t.Fatal(err)
		}
		return eff.Refusal
	}
	if r := propose("a"); r != nil {
		t.Fatalf("configured grant: %v", r)
	}
	change(false)
	if r := propose("b"); r == nil || r.Code != wire.CodeAuthorityDenied {
		t.Fatalf("after the revocation: %v", r)
	}
	change(true)
	if r := propose("c"); r != nil {
		t.Fatalf("after the grant: %v", r)
	}
}

// TestRunBreakerTrips: two failed dispatches within the rule's window trip
// the capability's breaker (a signed event on its subject); the next
// proposal is refused circuit_breaker_open, on this replica and another.
func TestRunBreakerTrips(t *testing.T) {
	srv, store := startStore(t, t.TempDir())
	eng := NewEngine(store, testSealer())
	ctx := context.Background()
	m := runManifest()
	cp := m.Capabilities["adp_payments.issue_refund"]
	var w kernel.FailureWindow
	at := time.Date(2026, 10, 26, 9, 0, 0, 0, time.UTC)
	for i := 0; i < 2; i++ {
		eff, err := eng.Run(ctx, "acme", kernel.FailureInput{CapabilityID: cp.ID, Rule: cp.Breaker, Window: w, Outcome: kernel.OutcomeUnknown,
			Failure: "timeout", Reason: "provider timed out", At: at.Add(time.Duration(i) * time.Second)}.Step())
		if err != nil || eff.Window == nil {
			t.Fatalf("failure %d: %v %+v", i, err, eff)
		}
		w = *eff.Window
	}
	sameTypes(t, "breaker", subjectTypes(t, store, kernel.KeyBreaker(cp.ID)), kernel.TypeBreakerTripped)
	// A successful dispatch counts nothing and reads nothing.
	if eff, err := eng.Run(ctx, "acme", kernel.FailureInput{CapabilityID: cp.ID, Rule: cp.Breaker, Window: w, Outcome: kernel.OutcomeApplied}.Step()); err != nil || eff.Window != nil {
		t.Fatalf("success: %v %+v", err, eff)
	}
	for _, e := range []*Engine{eng, NewEngine(connectStore(t, srv.ClientURL()), testSealer())} {
		eff, err := e.Run(ctx, "acme", proposal(m, fmt.Sprintf("k_%p", e), "ord_881", 1).Step())
		if err != nil || eff.Refusal == nil || eff.Refusal.Code != wire.CodeBreakerOpen {
			t.Fatalf("proposal with the breaker open: %v %v", err, eff.Refusal)
		}
	}
}

// oneEventStep appends one tombstone to one ledger: a step whose single
// append goes to the store as a single append.
type oneEventStep struct{ key kernel.Key }

func (s oneEventStep) Reads() kernel.Reads { return kernel.Reads{{Key: s.key, Access: kernel.Write}} }

func (s oneEventStep) Decide(kernel.Loaded) kernel.Effects {
	return kernel.Effects{Append: map[kernel.Key][]kernel.Event{s.key: {kernel.ExposureTombstoned{AttemptID: "t", Reason: "test"}}}}
}

func (s oneEventStep) Contended(r *kernel.Refusal) kernel.Effects {
	return kernel.Effects{Refusal: r, Reply: kernel.Reply{Status: wire.StatusRefused, Code: r.Code, Reason: "contended: " + r.Reason}}
}

// TestRunContended: a step whose every append conflicts gets its own
// answer to exhausted contention, and nothing of it is stored.
func TestRunContended(t *testing.T) {
	_, store := startStore(t, t.TempDir())
	eng := NewEngine(&conflictingStore{Store: store}, testSealer())
	eng.MaxAttempts = 3
	key := kernel.LedgerKey{GuaranteeID: testDef.ID, Resource: "ord_881"}.Key()
	eff, err := eng.Run(context.Background(), "acme", oneEventStep{key: key})
	if err != nil || eff.Refusal == nil || eff.Refusal.Code != wire.CodeContention || eff.Reply.Reason[:10] != "contended:" {
		t.Fatalf("want the step's contention answer, got %v %+v", err, eff)
	}
	for _, typ := range subjectTypes(t, store, key) {
		if typ != kernel.TypeExposureTombstoned {
			t.Fatalf("stored %s", typ)
		}
	}
}

// guardAppendStep appends to a subject it reads only guarded: a bug the
// runner refuses rather than store.
type guardAppendStep struct{ oneEventStep }

func (s guardAppendStep) Reads() kernel.Reads {
	return kernel.Reads{{Key: s.key, Access: kernel.Guard}}
}

// TestRunRefusesAnAppendItDoesNotRead: effects that append to a key the
// step does not read for writing are an error, and nothing is stored.
func TestRunRefusesAnAppendItDoesNotRead(t *testing.T) {
	_, store := startStore(t, t.TempDir())
	eng := NewEngine(store, testSealer())
	key := kernel.KeyControl
	if _, err := eng.Run(context.Background(), "acme", guardAppendStep{oneEventStep{key: key}}); err == nil {
		t.Fatal("an append to a guarded read was accepted")
	}
	if got := subjectTypes(t, store, key); len(got) != 0 {
		t.Fatalf("stored %v", got)
	}
}

// TestRefOfSubjects: every key maps to the subject its kind was always
// stored under.
func TestRefOfSubjects(t *testing.T) {
	for _, c := range []struct {
		key  kernel.Key
		want string
	}{
		{kernel.KeyOperation("run_1", "k 1"), "ctx.ev.acme.operation.rrun_5F1.rk_201"},
		{kernel.KeyRun("run_1"), "ctx.ev.acme.run.rrun_5F1"},
		{kernel.KeyApproval("ap_1"), "ctx.ev.acme.approval.rap_5F1"},
		{kernel.KeyEvidence("kg:o#1"), "ctx.ev.acme.evidence.rkg_3Ao_231"},
		{kernel.LedgerKey{GuaranteeID: "g", Resource: "ord.1", Window: "2026-12"}.Key(), "ctx.ev.acme.exposure.g.rord_2E1.2026-12"},
		{kernel.KeyControl, "ctx.ev.acme.control"},
		{kernel.KeyIntegrity, "ctx.ev.acme.integrity"},
		{kernel.KeyAuthority, "ctx.ev.acme.authority"},
		{kernel.KeyBreaker("cap.x"), "ctx.ev.acme.breaker.rcap_2Ex"},
		{kernel.KeyRefusals("agent_a"), "ctx.ev.acme.refusal.ragent_5Fa"},
		{kernel.KeyPin("g"), "ctx.ev.acme.guarantee.rg"},
		{kernel.KeyScopedOperation("run_1", "k1", "agent_a"), "ctx.ev.acme.operation.rrun_5F1.rk1.ragent_5Fa"},
		{kernel.KeyPacks, "ctx.ev.acme.pack"},
		{kernel.KeyOperatorRequest("rq_1"), "ctx.ev.acme.oprequest.rrq_5F1"},
	} {
		ref, err := RefOf("acme", c.key)
		if err != nil || ref.Subject != c.want {
			t.Errorf("%v: %q %v, want %q", c.key, ref.Subject, err, c.want)
		}
		if ref.New() == nil {
			t.Errorf("%v: no state", c.key)
		}
	}
	// The subjects the gateway's own references name.
	for _, c := range []struct {
		key  kernel.Key
		kind string
		keys []string
	}{
		{kernel.KeyOperation("r", "k"), "operation", []string{"r", "k"}},
		{kernel.KeyBreaker("c"), "breaker", []string{"c"}},
		{kernel.KeyScopedOperation("r", "k", "p"), "operation", []string{"r", "k", "p"}},
		{kernel.KeyPacks, "pack", nil},
		{kernel.KeyOperatorRequest("q"), "oprequest", []string{"q"}},
	} {
		want, _ := codec.Subject("acme", c.kind, c.keys...)
		if ref, _ := RefOf("acme", c.key); ref.Subject != want {
			t.Errorf("%v: %s, want %s", c.key, ref.Subject, want)
		}
	}
}

// cutStore lets a test act between the appends of a chain: after an
// append of one event of type after is stored, cut runs once (another
// writer's append, or a failure to hand back in the append's place). It
// counts the appends of more than one event, which are atomic batches.
type cutStore struct {
	events.Store
	after   string
	cut     func(ctx context.Context) error
	fired   atomic.Bool
	batches atomic.Int32
}

func (s *cutStore) Append(ctx context.Context, subject string, expected uint64, envs ...codec.Envelope) (uint64, error) {
	if len(envs) > 1 {
		s.batches.Add(1)
	}
	seq, err := s.Store.Append(ctx, subject, expected, envs...)
	if err == nil && len(envs) == 1 && envs[0].Type == s.after && s.fired.CompareAndSwap(false, true) {
		if err := s.cut(ctx); err != nil {
			return 0, err
		}
	}
	return seq, err
}

func (s *cutStore) AppendBatch(ctx context.Context, items []events.AppendItem) ([]uint64, error) {
	if len(items) > 1 || len(items) == 1 && len(items[0].Envs) > 1 {
		s.batches.Add(1)
	}
	return s.Store.AppendBatch(ctx, items)
}

// TestRunSettlePrefix: a provider's report goes as a chain of single
// appends (the ledger's observation, then the operation's record and
// observation), no atomic batch. When another writer appends to the
// operation between the ledger's append and the operation's, the chain
// conflicts with the ledger's observation stored; the report, decided again
// on the reloaded subjects, appends the operation's part only and the
// attempt ends applied, observed once on the ledger. When the chain fails
// there instead, the caller gets the error and the same report again
// completes it.
func TestRunSettlePrefix(t *testing.T) {
	for _, conflict := range []bool{true, false} {
		t.Run(fmt.Sprintf("conflict=%t", conflict), func(t *testing.T) {
			_, js := startStore(t, t.TempDir())
			store := &cutStore{Store: js, after: kernel.TypeExposureObserved}
			eng := NewEngine(store, testSealer())
			ctx := context.Background()
			m := runManifest()
			eff, err := eng.Run(ctx, "acme", proposal(m, "k1", "ord_881", 80000).Step())
			if err != nil || eff.Dispatch == nil {
				t.Fatalf("propose: %v %+v", err, eff)
			}
			op := kernel.KeyOperation("run_1", "k1")
			opRef, _ := RefOf("acme", op)
			store.cut = func(ctx context.Context) error {
				if !conflict {
					return events.ErrInvalidAppend
				}
				stored, err := js.Read(ctx, opRef.Subject, 1)
				if err != nil {
					return err
				}
				rival, err := testSealer().Seal("acme", []kernel.Event{kernel.OperationIncident{AttemptID: eff.Dispatch.AttemptID,
					Kind: wire.CodeObservationContradictsSeal, Sealed: kernel.OutcomeApplied, Observed: kernel.OutcomeNotApplied, Source: "rival"}})
				if err != nil {
					return err
				}
				_, err = js.Append(ctx, opRef.Subject, stored[len(stored)-1].Seq, rival...)
				return err
			}
			before := store.batches.Load()
			settle := eff.Dispatch.Settle(kernel.OutcomeApplied, "rf_1", time.Now())
			set, err := eng.Run(ctx, "acme", settle.Step())
			if conflict {
				if err != nil || set.Reply.Status != wire.StatusApplied {
					t.Fatalf("settle: %v %+v", err, set.Reply)
				}
				if st := eng.Stats(); st.Conflicts != 1 || st.Redecided != 1 {
					t.Fatalf("stats %+v", st)
				}
			} else {
				if err == nil {
					t.Fatalf("settle cut by a failure: %+v", set.Reply)
				}
				sameTypes(t, "operation, the chain cut", subjectTypes(t, js, op), kernel.TypeOperationOpened, kernel.TypeOperationReserved,
					kernel.TypeOperationDispatchStarted)
				if set, err = eng.Run(ctx, "acme", settle.Step()); err != nil || set.Reply.Status != wire.StatusApplied {
					t.Fatalf("the same report again: %v %+v", err, set.Reply)
				}
			}
			if n := store.batches.Load() - before; n != 0 {
				t.Fatalf("the settlement made %d atomic batches", n)
			}
			want := []string{kernel.TypeOperationOpened, kernel.TypeOperationReserved, kernel.TypeOperationDispatchStarted}
			if conflict {
				want = append(want, kernel.TypeOperationIncident)
			}
			sameTypes(t, "operation", subjectTypes(t, js, op), append(want, kernel.TypeDecisionRecorded, kernel.TypeOperationObserved)...)
			sameTypes(t, "ledger", subjectTypes(t, js, kernel.LedgerKey{GuaranteeID: testDef.ID, Resource: "ord_881"}.Key()),
				kernel.TypeExposureReserved, kernel.TypeExposureDispatchStarted, kernel.TypeExposureObserved)
			if got := replayBalance(t, js, "ord_881"); got.Committed != 80000 || got.Held != 0 {
				t.Fatalf("replayed balance %+v", got)
			}
			// Whole now: the same report again appends nothing.
			if again, err := eng.Run(ctx, "acme", settle.Step()); err != nil || len(again.Append) != 0 || again.Reply.Status != wire.StatusApplied {
				t.Fatalf("again: %v %+v", err, again)
			}
		})
	}
}
