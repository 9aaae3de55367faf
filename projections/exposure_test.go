package projections

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/exposure"
	"github.com/contextos/ledger/internal/testing/testenv"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/verifier"
	"github.com/contextos/ledger/wire"
)

// TestExposureRandomRunReplayEqualsLive drives thousands of random exposure
// commands (pending, unknown and partial outcomes included) from two
// concurrent writers through the kernel into a real JetStream store while
// the live view follows. Then, through the ops verbs as the CLI uses them:
// the offline replay of the exported events.jsonl equals the live view.json
// exactly; so does the replay of the audit export, a fresh full fold, and a
// naive per-subject fold of the store.
func TestExposureRandomRunReplayEqualsLive(t *testing.T) {
	e := newEnv(t)
	commands := 3000
	if testing.Short() {
		commands = 600
	}
	resources := []string{"ord_1", "ord_2", "ord.3", "ord*4", "ord>5", "ord 6", "ordé7", "ord_8"}
	vnc, _ := e.connect(t)
	live := NewModel(ModelConfig{Store: events.NewJetStore(e.js, events.StreamName)})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = live.Run(ctx, vnc, 5*time.Millisecond, t.Logf) }()
	projector := e.projector(t, "acme", e.log, func(c *AuditConfig) { c.Notify = vnc; c.CheckpointEvery = 100 })
	wg.Add(1)
	go func() { defer wg.Done(); _ = projector.Run(ctx) }()

	writers := []*driver{newDriver(e, "acme", 11, resources), newDriver(e, "acme", 12, resources), newDriver(e, "globex", 13, resources[:2])}
	var wwg sync.WaitGroup
	for i, d := range writers {
		n := commands / 2
		if i == 2 {
			n = commands / 10
		}
		wwg.Add(1)
		go func() {
			defer wwg.Done()
			for j := 0; j < n; j++ {
				if _, err := d.step(context.Background()); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wwg.Wait()
	if t.Failed() {
		return
	}
	stats := map[string]int{}
	for _, d := range writers[:2] {
		for k, v := range d.stats {
			stats[k] += v
		}
	}
	t.Logf("run: %v", stats)
	for _, must := range []string{kernel.TypeExposureReserved, kernel.TypeExposureObserved, kernel.TypeExposureClosed, kernel.TypeExposureAbsenceAsserted, kernel.TypeExposureTombstoned} {
		if stats[must] == 0 {
			t.Fatalf("the run never produced %s", must)
		}
	}
	var lastSeq uint64
	if err := e.store.Replay(context.Background(), 1, func(st events.Stored) error { lastSeq = st.Seq; return nil }); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, func() bool { return live.Seq() == lastSeq }, 60*time.Second, "the live view to catch up")
	acme := tenantEvents(t, e.store, "acme")
	testenv.Eventually(t, func() bool { return projector.Status().LastEventSeq == acme[len(acme)-1].Seq }, 60*time.Second, "the audit log to catch up")
	cancel()
	wg.Wait()
	if n := live.RefusedEvents(""); n != 0 {
		t.Fatalf("the live model refused %d stored events", n)
	}

	c := serveOps(t, e, "acme", live)
	viewJSON, err := c.File(context.Background(), wire.VerbExposureView, nil)
	if err != nil {
		t.Fatal(err)
	}
	liveView, err := exposure.ParseView(viewJSON)
	if err != nil {
		t.Fatal(err)
	}
	var jsonl bytes.Buffer
	lines, _, err := c.ExportEvents(context.Background(), &jsonl, 0)
	if err != nil {
		t.Fatal(err)
	}
	if lines != len(acme) {
		t.Fatalf("exported %d events, acme has %d", lines, len(acme))
	}
	replayed, err := verifier.Replay(bytes.NewReader(jsonl.Bytes()), e.keys(t, "acme").Keyring)
	if err != nil {
		t.Fatal(err)
	}
	if d := verifier.Compare(replayed, liveView); len(d) != 0 {
		t.Fatalf("offline replay differs from the live view: %v", d)
	}

	entries, err := exportEntries(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	fromAudit, err := verifier.ReplayEntries(entries)
	if err != nil {
		t.Fatal(err)
	}
	if d := verifier.Compare(fromAudit, liveView); len(d) != 0 {
		t.Fatalf("replay of the audit export differs from the live view: %v", d)
	}

	fresh := NewModel(ModelConfig{Store: e.store})
	if err := fresh.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := verifier.Compare(fresh.View("acme"), live.View("acme")); len(d) != 0 {
		t.Fatalf("incremental view differs from a fresh full fold: %v", d)
	}

	// Naive model: fold each subject's events, read by subject, into a fresh
	// ledger; no routing code shared with the view.
	held, open := 0, 0
	for _, r := range liveView.Resources {
		sts, err := e.store.Read(context.Background(), r.Subject, 0)
		if err != nil {
			t.Fatal(err)
		}
		var l kernel.Ledger
		for _, st := range sts {
			ev, err := kernel.DecodeEvent(st.Envelope.Type, st.Envelope.V, st.Envelope.Body)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Apply(ev); err != nil {
				t.Fatal(err)
			}
		}
		b := l.Balance()
		if b.Limit != r.Limit || b.Committed != r.Committed || b.Held != r.Held || b.Available != r.Available || len(l.Receipts) != r.Receipts {
			t.Fatalf("%s: view %+v, naive fold %+v with %d receipts", r.Subject, r, b, len(l.Receipts))
		}
		if b.Committed+b.Held > b.Limit {
			t.Fatalf("%s: ceiling broken: %+v", r.Subject, b)
		}
		for _, a := range r.OpenAttempts {
			open++
			if a.State == kernel.StateHeld.String() {
				held++
			}
		}
	}
	if len(liveView.Resources) != len(resources) || open == 0 || held == 0 {
		t.Fatalf("view has %d resources, %d open attempts, %d held after a pending/unknown report", len(liveView.Resources), open, held)
	}
	if g := live.View("globex"); len(g.Resources) != 2 {
		t.Fatalf("globex view: %+v", g)
	}
}

// TestModelDeliveryHarness delivers events to a model with duplicates,
// stale repeats and a replay of everything after it caught up: the model
// equals the full fold. An event the kernel refuses is not applied, is
// counted and reported, and the fold goes on with the next event.
func TestModelDeliveryHarness(t *testing.T) {
	e := newEnv(t)
	d := newDriver(e, "acme", 21, []string{"a", "b"})
	d.appendN(t, 200)
	var all []events.Stored
	if err := e.store.Replay(context.Background(), 1, func(st events.Stored) error { all = append(all, st); return nil }); err != nil {
		t.Fatal(err)
	}
	full := NewModel(ModelConfig{Store: e.store})
	if err := full.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rng := rand.New(rand.NewSource(1))
	v := NewModel(ModelConfig{Store: e.store})
	for i, st := range all {
		v.Apply(ctx, st)
		if rng.Intn(3) == 0 { // a duplicate delivery
			v.Apply(ctx, st)
		}
		if i > 0 && rng.Intn(4) == 0 { // a stale redelivery
			v.Apply(ctx, all[rng.Intn(i)])
		}
	}
	for _, st := range all { // redeliver everything
		v.Apply(ctx, st)
	}
	if diff := verifier.Compare(v.View("acme"), full.View("acme")); len(diff) != 0 {
		t.Fatalf("model after duplicated deliveries differs from the full fold: %v", diff)
	}
	if v.RefusedEvents("") != 0 {
		t.Fatalf("refused %d valid events", v.RefusedEvents(""))
	}
	before := v.View("acme")
	// An observation of an unknown attempt cannot be folded.
	env, err := e.signer.Seal(kernel.TypeExposureObserved, kernel.EventVersion, nextID(), "acme", codec.FormatTime(time.Unix(0, 0)),
		kernel.ExposureObserved{AttemptID: "nobody", Outcome: kernel.OutcomeApplied, Source: "x"})
	if err != nil {
		t.Fatal(err)
	}
	last := all[len(all)-1]
	bad := events.Stored{Seq: last.Seq + 1, Subject: all[0].Subject, Envelope: env}
	v.Apply(ctx, bad)
	if d := verifier.Compare(v.View("acme"), before); len(d) != 0 {
		t.Fatalf("a refused event changed the view: %v", d)
	}
	if v.RefusedEvents("acme") != 1 || v.Seq() != bad.Seq {
		t.Fatalf("refused %d, seq %d; want 1 refused and seq %d", v.RefusedEvents("acme"), v.Seq(), bad.Seq)
	}
	in := v.Incidents("acme")
	if len(in) == 0 || in[len(in)-1].Kind != KindStoredEventRefused || in[len(in)-1].Code != wire.CodeStoredEventRefused ||
		!strings.Contains(in[len(in)-1].Reason, "unknown attempt nobody") {
		t.Fatalf("incidents %+v do not report the refused event", in)
	}
	// The fold goes on: a valid event after it is applied.
	env2, err := e.signer.Seal(kernel.TypeExposureTombstoned, kernel.EventVersion, nextID(), "acme", codec.FormatTime(time.Unix(0, 0)),
		kernel.ExposureTombstoned{AttemptID: "late", Reason: "x"})
	if err != nil {
		t.Fatal(err)
	}
	v.Apply(ctx, events.Stored{Seq: bad.Seq + 1, Subject: all[0].Subject, Envelope: env2})
	if v.View("acme").Seq != bad.Seq+1 {
		t.Fatal("the model did not go on after a refused event")
	}
}

// TestModelSkipsNonEvents: a stored message that is not a valid event
// (only the runtime's own user can write one) is counted and reported; the
// model goes on folding the events after it, and its balances equal a fold
// of the valid events alone.
func TestModelSkipsNonEvents(t *testing.T) {
	e := newEnv(t)
	d := newDriver(e, "acme", 41, []string{"ord_1", "ord_2"})
	d.appendN(t, 30)
	if _, err := e.js.Publish(context.Background(), "ctx.ev.acme.control", []byte(`{"not":"an event"}`)); err != nil {
		t.Fatal(err)
	}
	d.appendN(t, 30)
	v := NewModel(ModelConfig{Store: e.store})
	if err := v.Sync(context.Background()); err != nil {
		t.Fatalf("sync over a non-event: %v", err)
	}
	if got := v.RefusedEvents("acme"); got != 1 {
		t.Fatalf("refused %d, want one message", got)
	}
	if err := v.Sync(context.Background()); err != nil || v.RefusedEvents("acme") != 1 {
		t.Fatalf("a second sync: %v, refused %d", err, v.RefusedEvents("acme"))
	}
	var all []events.Stored
	if err := events.ReplayValid(context.Background(), e.store, func() uint64 {
		if len(all) == 0 {
			return 0
		}
		return all[len(all)-1].Seq
	}, func(s events.Stored) error { all = append(all, s); return nil }, func(*events.CorruptError) {}); err != nil {
		t.Fatal(err)
	}
	fresh := NewModel(ModelConfig{Store: e.store})
	for _, s := range all {
		fresh.Apply(context.Background(), s)
	}
	if d := verifier.Compare(fresh.View("acme"), v.View("acme")); len(d) != 0 {
		t.Fatalf("model over a skipped message differs from the fold of the valid events: %v", d)
	}
}

// TestRunLoopLogsALastingErrorOnce: a sync that keeps failing the same way
// is logged once, not at every poll; its end is logged too.
func TestRunLoopLogsALastingErrorOnce(t *testing.T) {
	var mu sync.Mutex
	var logged []string
	calls := 0
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = runLoop(ctx, nil, nil, "ctx.ev.>", time.Millisecond, 0, func(f string, a ...any) {
			mu.Lock()
			logged = append(logged, fmt.Sprintf(f, a...))
			mu.Unlock()
		}, func(context.Context) error {
			mu.Lock()
			defer mu.Unlock()
			calls++
			switch {
			case calls <= 20:
				return errors.New("stored message 7 is not a valid event")
			case calls <= 25:
				return nil
			case calls <= 40:
				return errors.New("store unreachable")
			case calls <= 45:
				return nil
			}
			cancel()
			return nil
		})
	}()
	<-done
	mu.Lock()
	defer mu.Unlock()
	want := []string{"projections: stored message 7 is not a valid event", "projections: ctx.ev.> resumed", "projections: store unreachable", "projections: ctx.ev.> resumed"}
	if fmt.Sprint(logged) != fmt.Sprint(want) {
		t.Fatalf("logged %q, want %q", logged, want)
	}
}
