package aggregates

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/internal/testing/testenv"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
)

var testDef = kernel.Definition{ID: "refunds-per-order", CapabilityIDs: []string{"adp_payments.issue_refund"},
	ResourcePointer: "/order_id", AmountPointer: "/amount_minor", Limit: 100000, Unit: "INR_minor"}

func testSealer() *Sealer {
	key := ed25519.NewKeyFromSeed(make([]byte, 32))
	return &Sealer{Signer: codec.NewSigner(key), Clock: SystemClock{}, IDs: NewIDs(SystemClock{}, nil)}
}

// startStore starts a real embedded nats-server with JetStream in dir and
// returns a store on it.
func startStore(t testing.TB, dir string) (*events.Embedded, *events.JetStore) {
	t.Helper()
	srv := testenv.Server(t, testenv.Options{Dir: dir})
	return srv, connectStore(t, srv.ClientURL())
}

// connectStore opens a connection to url and returns a store on the event
// stream there.
func connectStore(t testing.TB, url string) *events.JetStore {
	t.Helper()
	_, js := testenv.Connect(t, url)
	return testenv.Store(t, js)
}

func reserve(attempt string, amount int64) kernel.Reserve {
	return kernel.Reserve{GuaranteeID: testDef.ID, Resource: "ord_881", AttemptID: attempt, OperationID: "op_" + attempt,
		Amount: amount, Limit: testDef.Limit, DefinitionDigest: testDef.Digest()}
}

// replayBalance folds every event of the stream for the resource through a
// fresh kernel ledger: the naive path the warm engine must agree with.
func replayBalance(t testing.TB, store events.Store, resource string) kernel.Balance {
	t.Helper()
	subject, _ := codec.ExposureSubject("acme", testDef.ID, resource)
	var l kernel.Ledger
	err := store.Replay(context.Background(), 1, func(st events.Stored) error {
		if st.Subject != subject {
			return nil
		}
		ev, err := kernel.DecodeEvent(st.Envelope.Type, st.Envelope.V, st.Envelope.Body)
		if err != nil {
			return err
		}
		return l.Apply(ev)
	})
	if err != nil {
		t.Fatal(err)
	}
	return l.Balance()
}

// TestRaceOneResource: 64 goroutines race 80000 each on one resource with
// limit 100000. Exactly one reservation exists afterwards; every other got
// exceeded or contention; a full replay gives the same balances. Shared: one
// engine (in-process serialization); replicas: one engine per goroutine, so
// they conflict through the store.
func TestRaceOneResource(t *testing.T) {
	for _, mode := range []string{"shared", "replicas"} {
		t.Run(mode, func(t *testing.T) {
			_, store := startStore(t, t.TempDir())
			shared := NewEngine(store, testSealer())
			var wg sync.WaitGroup
			codes := make(chan string, 64)
			for i := 0; i < 64; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					eng := shared
					if mode == "replicas" {
						eng = NewEngine(store, testSealer())
						eng.MaxAttempts = 64
					}
					res, _, err := eng.Exposure(context.Background(), "acme", testDef.ID, "ord_881", reserve(fmt.Sprintf("att_%02d", i), 80000))
					switch {
					case err != nil:
						codes <- "error: " + err.Error()
					case res.Refusal != nil:
						codes <- string(res.Refusal.Code)
					default:
						codes <- "reserved"
					}
				}(i)
			}
			wg.Wait()
			close(codes)
			count := map[string]int{}
			for c := range codes {
				count[c]++
			}
			if count["reserved"] != 1 || count[string(wire.CodeExceeded)]+count[string(wire.CodeContention)] != 63 {
				t.Fatalf("outcomes %v: want exactly one reservation and 63 exceeded/contention", count)
			}
			want := kernel.Balance{Limit: 100000, Committed: 0, Held: 80000, Available: 20000}
			if got := replayBalance(t, store, "ord_881"); got != want {
				t.Fatalf("replay balance %+v, want %+v", got, want)
			}
			_, bal, err := NewEngine(store, testSealer()).Exposure(context.Background(), "acme", testDef.ID, "ord_881", kernel.Observe{AttemptID: "none", Outcome: kernel.OutcomeApplied})
			if err != nil || bal != want {
				t.Fatalf("cold engine sees %+v (%v), want %+v", bal, err, want)
			}
		})
	}
}

// TestRaceTwoProcesses runs the same race from two OS processes sharing one
// NATS server.
func TestRaceTwoProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	srv, store := startStore(t, t.TempDir())
	var cmds []*exec.Cmd
	var outs []*strings.Builder
	for p := 0; p < 2; p++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
		cmd.Env = append(os.Environ(), "CTX_HELPER=race", "CTX_NATS="+srv.ClientURL(), fmt.Sprintf("CTX_PROC=%d", p))
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, out)
	}
	reserved := 0
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v\n%s", i, err, outs[i])
		}
		reserved += strings.Count(outs[i].String(), "RESERVED")
	}
	if reserved != 1 {
		t.Fatalf("%d reservations across two processes, want 1\n%s\n%s", reserved, outs[0], outs[1])
	}
	if got := replayBalance(t, store, "ord_881"); got.Held != 80000 || got.Committed != 0 {
		t.Fatalf("replay balance %+v", got)
	}
}

// TestHelperProcess is the child of the multi-process tests; it does nothing
// in a normal run.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv("CTX_HELPER")
	if mode == "" {
		return
	}
	store := connectStore(t, os.Getenv("CTX_NATS"))
	ctx := context.Background()
	switch mode {
	case "race":
		var wg sync.WaitGroup
		for i := 0; i < 32; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				eng := NewEngine(store, testSealer())
				eng.MaxAttempts = 64
				res, _, err := eng.Exposure(ctx, "acme", testDef.ID, "ord_881", reserve(fmt.Sprintf("p%s_%02d", os.Getenv("CTX_PROC"), i), 80000))
				switch {
				case err != nil:
					fmt.Println("ERROR", err)
				case res.Refusal == nil:
					fmt.Println("RESERVED")
				default:
					fmt.Println("REFUSED", res.Refusal.Code)
				}
			}(i)
		}
		wg.Wait()
	case "reserve-then-hang":
		eng := NewEngine(store, testSealer())
		res, _, err := eng.Exposure(ctx, "acme", testDef.ID, "ord_881", reserve("att_killed", 80000))
		if err != nil || res.Refusal != nil {
			fmt.Println("FAILED", err, res.Refusal)
			os.Exit(1)
		}
		fmt.Println("RESERVED")
		select {} // wait for SIGKILL between reservation and dispatch-start
	}
}

// TestKilledAfterReservation: a process is SIGKILLed after its reservation
// is acknowledged and before dispatch-start. After restart the hold is still
// there; recovery closes the unstarted attempt, and a delayed dispatch-start
// of it is refused. An attempt recovery never saw is tombstoned, and its
// delayed reservation is refused.
func TestKilledAfterReservation(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	srv, store := startStore(t, t.TempDir())
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), "CTX_HELPER=reserve-then-hang", "CTX_NATS="+srv.ClientURL())
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "RESERVED") {
		t.Fatalf("child said %q (%v)", line, err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	ctx := context.Background()
	eng := NewEngine(store, testSealer()) // the restarted runtime: cold
	_, bal, err := eng.Exposure(ctx, "acme", testDef.ID, "ord_881", reserve("att_other", 80000))
	if err != nil {
		t.Fatal(err)
	}
	if bal.Held != 80000 {
		t.Fatalf("after the kill the hold is gone: %+v", bal)
	}
	res, bal, err := eng.Exposure(ctx, "acme", testDef.ID, "ord_881", kernel.Close{AttemptID: "att_killed", Reason: "recovery: executor lost before dispatch"})
	if err != nil || res.Refusal != nil || bal.Held != 0 {
		t.Fatalf("close: %v %v %+v", err, res.Refusal, bal)
	}
	res, _, err = eng.Exposure(ctx, "acme", testDef.ID, "ord_881", kernel.StartDispatch{AttemptID: "att_killed"})
	if err != nil || res.Refusal == nil || res.Refusal.Code != wire.CodeAttemptClosed {
		t.Fatalf("delayed dispatch-start of a closed attempt: %v %v", err, res.Refusal)
	}
	// An attempt whose reservation never landed is tombstoned; a delayed
	// reservation and dispatch-start for it are refused, also through a
	// replica whose warm state predates the tombstone.
	late := NewEngine(store, testSealer())
	if _, _, err := late.Exposure(ctx, "acme", testDef.ID, "ord_881", kernel.StartDispatch{AttemptID: "warmup"}); err != nil {
		t.Fatal(err)
	}
	if res, _, err := eng.Exposure(ctx, "acme", testDef.ID, "ord_881", kernel.Close{AttemptID: "att_lost", Reason: "recovery"}); err != nil || res.Refusal != nil {
		t.Fatalf("tombstone: %v %v", err, res.Refusal)
	}
	for _, c := range []kernel.Command{reserve("att_lost", 10), kernel.StartDispatch{AttemptID: "att_lost"}} {
		res, bal, err := late.Exposure(ctx, "acme", testDef.ID, "ord_881", c)
		if err != nil || res.Refusal == nil || res.Refusal.Code != wire.CodeAttemptClosed || bal.Held != 0 {
			t.Fatalf("%T of a tombstoned attempt: %v %v %+v", c, err, res.Refusal, bal)
		}
	}
}

// TestServerRestart restarts the embedded JetStream server on the same data
// directory mid-run: every acknowledged reservation is still there and new
// decisions resume on the right sequences.
func TestServerRestart(t *testing.T) {
	dir := t.TempDir()
	srv, store := startStore(t, dir)
	eng := NewEngine(store, testSealer())
	ctx := context.Background()
	acked := 0
	for i := 0; i < 20; i++ {
		res, _, err := eng.Exposure(ctx, "acme", testDef.ID, fmt.Sprintf("ord_%d", i), kernel.Reserve{GuaranteeID: testDef.ID,
			Resource: fmt.Sprintf("ord_%d", i), AttemptID: "a", OperationID: "o", Amount: 100, Limit: testDef.Limit, DefinitionDigest: testDef.Digest()})
		if err != nil || res.Refusal != nil {
			t.Fatal(err, res.Refusal)
		}
		acked++
	}
	srv.Shutdown()
	_, store2 := startStore(t, dir)
	eng2 := NewEngine(store2, testSealer())
	for i := 0; i < acked; i++ {
		r := fmt.Sprintf("ord_%d", i)
		if got := replayBalance(t, store2, r); got.Held != 100 {
			t.Fatalf("%s lost its acknowledged hold: %+v", r, got)
		}
		res, bal, err := eng2.Exposure(ctx, "acme", testDef.ID, r, kernel.StartDispatch{AttemptID: "a"})
		if err != nil || res.Refusal != nil || bal.Held != 100 {
			t.Fatalf("resume on %s: %v %v %+v", r, err, res.Refusal, bal)
		}
	}
}

// TestPinFailsClosed: a definition whose meaning changed is refused for
// every resource, including one never seen; one that differs only in its
// limit is not a new meaning (the limit is versioned on the control subject).
func TestPinFailsClosed(t *testing.T) {
	_, store := startStore(t, t.TempDir())
	eng := NewEngine(store, testSealer())
	ctx := context.Background()
	if r, err := eng.Pin(ctx, "acme", testDef); err != nil || r != nil {
		t.Fatal(err, r)
	}
	raised := testDef
	raised.Limit = 1_000_000
	if r, err := NewEngine(store, testSealer()).Pin(ctx, "acme", raised); err != nil || r != nil {
		t.Fatalf("raised limit: %v %v", err, r)
	}
	other := testDef
	other.Unit = "USD_minor"
	r, err := NewEngine(store, testSealer()).Pin(ctx, "acme", other)
	if err != nil || r == nil || r.Code != wire.CodeDefinitionMismatch {
		t.Fatalf("another unit: %v %v", err, r)
	}
	if r, err := eng.Pin(ctx, "globex", other); err != nil || r != nil {
		t.Fatalf("another tenant pins its own: %v %v", err, r)
	}
}

// TestContentionExhausted: when every attempt conflicts, the engine refuses
// with contention and appends nothing.
func TestContentionExhausted(t *testing.T) {
	_, store := startStore(t, t.TempDir())
	eng := NewEngine(&conflictingStore{Store: store}, testSealer())
	eng.MaxAttempts = 3
	res, _, err := eng.Exposure(context.Background(), "acme", testDef.ID, "ord_881", reserve("a", 1))
	if err != nil || res.Refusal == nil || res.Refusal.Code != wire.CodeContention {
		t.Fatalf("want contention, got %v %v", err, res.Refusal)
	}
	if got := replayBalance(t, store, "ord_881"); got.Held != 0 {
		t.Fatalf("contention left a hold: %+v", got)
	}
}

// conflictingStore is a real store behind which another writer always wins:
// before each append it appends a tombstone of its own to the subject.
type conflictingStore struct {
	events.Store
	n int
}

func (c *conflictingStore) Append(ctx context.Context, subject string, expected uint64, envs ...codec.Envelope) (uint64, error) {
	c.n++
	last, err := c.Store.LastSeq(ctx, subject)
	if err != nil {
		return 0, err
	}
	other, err := testSealer().Seal("acme", []kernel.Event{kernel.ExposureTombstoned{AttemptID: fmt.Sprintf("rival_%d", c.n), Reason: "rival"}})
	if err != nil {
		return 0, err
	}
	if _, err := c.Store.Append(ctx, subject, last, other...); err != nil {
		return 0, err
	}
	seq, err := c.Store.Append(ctx, subject, expected, envs...)
	if !errors.Is(err, events.ErrConflict) {
		return seq, fmt.Errorf("expected a conflict, got %v", err)
	}
	return seq, err
}

// TestEvictionKeepsDecisionsRight: with room for only 8 warm subjects, 8
// writers reserve on 40 resources (each fits 10 reservations). Subjects are
// dropped and loaded again all along; still, exactly 10 reservations
// succeed per resource, the rest are refused shared_guarantee_exceeded, the
// engine never keeps much more than its bound warm, and a fresh fold of the
// store agrees with what the writers were told.
func TestEvictionKeepsDecisionsRight(t *testing.T) {
	_, store := startStore(t, t.TempDir())
	eng := NewEngine(store, testSealer())
	eng.MaxWarm = 8
	const resources, fits, writers = 40, 10, 8
	amount := testDef.Limit / fits
	var mu sync.Mutex
	applied := map[string]int{}
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < resources*(fits+2)/writers; i++ {
				res := fmt.Sprint("ord-", (w*7+i*3)%resources)
				att := fmt.Sprintf("a-%d-%d", w, i)
				r, _, err := eng.Exposure(context.Background(), "acme", testDef.ID, res, kernel.Reserve{GuaranteeID: testDef.ID, Resource: res,
					AttemptID: att, OperationID: "o" + att, Amount: amount, Limit: testDef.Limit, DefinitionDigest: testDef.Digest()})
				if err != nil {
					t.Error(err)
					return
				}
				if r.Refusal != nil && r.Refusal.Code != wire.CodeExceeded {
					t.Errorf("refused %s: %s", r.Refusal.Code, r.Refusal.Reason)
				}
				mu.Lock()
				if r.Refusal == nil {
					applied[res]++
				}
				mu.Unlock()
				n := eng.Stats().Warm
				// The bound, the subjects in use and those named since the
				// committer last looked.
				if n > 2*8+writers+2 {
					t.Errorf("%d subjects warm, bound 8", n)
				}
			}
		}(w)
	}
	wg.Wait()
	if st := eng.Stats(); st.Evicted == 0 {
		t.Fatalf("nothing was evicted: %+v", st)
	}
	fresh := NewEngine(store, testSealer())
	for i := 0; i < resources; i++ {
		res := fmt.Sprint("ord-", i)
		ref, _ := ExposureRef("acme", testDef.ID, res)
		st, _, err := fresh.Load(context.Background(), ref)
		if err != nil {
			t.Fatal(err)
		}
		bal := st.(*kernel.Ledger).Balance()
		if applied[res] != fits || bal.Held != testDef.Limit {
			t.Fatalf("%s: %d reservations told applied, store holds %+v", res, applied[res], bal)
		}
	}
}

// TestPinEnrolls: a pin enrolls its guarantee on the tenant's control
// subject in the same append; pinning again appends nothing; a pin stored
// without its enrollment (by a runtime before enrollment existed) is
// enrolled once by Backfill.
func TestPinEnrolls(t *testing.T) {
	_, store := startStore(t, t.TempDir())
	eng := NewEngine(store, testSealer())
	ctx := context.Background()
	cref, _ := ControlRef("acme")
	controlEvents := func() []string {
		t.Helper()
		stored, err := store.Read(ctx, cref.Subject, 1)
		if err != nil {
			t.Fatal(err)
		}
		var types []string
		for _, s := range stored {
			types = append(types, s.Envelope.Type)
		}
		return types
	}
	for range 2 {
		if r, err := eng.Pin(ctx, "acme", testDef); err != nil || r != nil {
			t.Fatal(err, r)
		}
	}
	if got := controlEvents(); len(got) != 1 || got[0] != kernel.TypeGuaranteeEnrolled {
		t.Fatalf("control subject %v, want one enrollment", got)
	}
	old := testDef
	old.ID = "pinned-before"
	pref, _ := PinRef("acme", old.ID)
	envs, err := testSealer().Seal("acme", kernel.DecidePin(nil, "acme", old).Events)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Append(ctx, pref.Subject, 0, envs...); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if r, err := NewEngine(store, testSealer()).Backfill(ctx, "acme", old.ID); err != nil || r != nil {
			t.Fatal(err, r)
		}
	}
	if r, err := eng.Backfill(ctx, "acme", "never-pinned"); err != nil || r != nil {
		t.Fatal(err, r)
	}
	if got := controlEvents(); len(got) != 2 || got[1] != kernel.TypeGuaranteeEnrolled {
		t.Fatalf("control subject %v, want two enrollments", got)
	}
	var c kernel.Control
	stored, _ := store.Read(ctx, cref.Subject, 1)
	for _, s := range stored {
		ev, err := kernel.DecodeEvent(s.Envelope.Type, s.Envelope.V, s.Envelope.Body)
		if err != nil || c.Apply(ev) != nil {
			t.Fatal(err)
		}
	}
	if _, ok := c.Enrolled(old.ID); !ok || len(c.Domain) != 2 {
		t.Fatalf("domain %+v", c.Domain)
	}
}
