package projections

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/verifier"
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
	live := NewExposureView(events.NewJetStore(e.js, events.StreamName))
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
	waitFor(t, 60*time.Second, "the live view to catch up", func() bool { return live.Seq() == lastSeq })
	acme := tenantEvents(t, e.store, "acme")
	waitFor(t, 60*time.Second, "the audit log to catch up", func() bool { return projector.Status().LastEventSeq == acme[len(acme)-1].Seq })
	cancel()
	wg.Wait()
	if err := live.Err(); err != nil {
		t.Fatal(err)
	}

	c := serveOps(t, e, "acme", live)
	viewJSON, err := c.File(context.Background(), VerbExposureView, nil)
	if err != nil {
		t.Fatal(err)
	}
	liveView, err := verifier.ParseView(viewJSON)
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

	entries, err := c.ExportAudit(context.Background())
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

	fresh := NewExposureView(e.store)
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

// TestExposureViewDeliveryHarness delivers events to a view with duplicates,
// stale repeats and a replay of everything after it caught up: the view
// equals the full fold, and an event the kernel refuses stops it for good.
func TestExposureViewDeliveryHarness(t *testing.T) {
	e := newEnv(t)
	d := newDriver(e, "acme", 21, []string{"a", "b"})
	d.appendN(t, 200)
	var all []events.Stored
	if err := e.store.Replay(context.Background(), 1, func(st events.Stored) error { all = append(all, st); return nil }); err != nil {
		t.Fatal(err)
	}
	full := NewExposureView(e.store)
	if err := full.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(1))
	v := NewExposureView(e.store)
	for i, st := range all {
		if err := v.Apply(st); err != nil {
			t.Fatal(err)
		}
		if rng.Intn(3) == 0 { // a duplicate delivery
			if err := v.Apply(st); err != nil {
				t.Fatal(err)
			}
		}
		if i > 0 && rng.Intn(4) == 0 { // a stale redelivery
			if err := v.Apply(all[rng.Intn(i)]); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, st := range all { // redeliver everything
		if err := v.Apply(st); err != nil {
			t.Fatal(err)
		}
	}
	if diff := verifier.Compare(v.View("acme"), full.View("acme")); len(diff) != 0 {
		t.Fatalf("view after duplicated deliveries differs from the full fold: %v", diff)
	}
	// An observation of an unknown attempt cannot be folded: the view stops.
	env, err := e.signer.Seal(kernel.TypeExposureObserved, kernel.EventVersion, nextID(), "acme", events.FormatTime(time.Unix(0, 0)),
		kernel.ExposureObserved{AttemptID: "nobody", Outcome: kernel.OutcomeApplied, Source: "x"})
	if err != nil {
		t.Fatal(err)
	}
	bad := events.Stored{Seq: all[len(all)-1].Seq + 1, Subject: all[0].Subject, Envelope: env}
	if err := v.Apply(bad); err == nil || v.Err() == nil {
		t.Fatal("view folded an event the kernel refuses")
	}
	if err := v.Apply(events.Stored{Seq: bad.Seq + 1, Subject: all[0].Subject, Envelope: all[0].Envelope}); err == nil {
		t.Fatal("a stopped view went on")
	}
}

func TestExposureMetrics(t *testing.T) {
	e := newEnv(t)
	d := newDriver(e, "acme", 31, []string{`ord"1\x`, "ord\n2"})
	d.appendN(t, 60)
	v := NewExposureView(e.store)
	if err := v.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(v.MetricsHandler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	text := string(body)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Fatalf("content type %q", ct)
	}
	view := v.View("acme")
	for _, r := range view.Resources {
		if r.GuaranteeID == "" {
			continue
		}
		for name, val := range map[string]int64{"held": r.Held, "committed": r.Committed, "available": r.Available, "limit": r.Limit} {
			line := "contextos_exposure_" + name + `{tenant="acme",guarantee="refunds",resource=` + promLabel(r.Resource) + "} " + strconv.FormatInt(val, 10) + "\n"
			if !strings.Contains(text, line) {
				t.Fatalf("metrics lack %q:\n%s", line, text)
			}
		}
	}
	for _, want := range []string{`resource="ord\"1\\x"`, `resource="ord\n2"`, "# TYPE contextos_exposure_held gauge\n", "contextos_exposure_view_seq "} {
		if !strings.Contains(text, want) {
			t.Fatalf("metrics lack %q:\n%s", want, text)
		}
	}
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if !strings.HasPrefix(line, "# ") && !strings.HasPrefix(line, "contextos_exposure_") {
			t.Fatalf("malformed metrics line %q", line)
		}
	}
}

// TestExposureViewSkipsNonEvents: a stored message that is not a valid event
// (only the runtime's own user can write one) is skipped and counted; the
// view goes on folding the events after it, and its balances equal a fold
// of the valid events alone.
func TestExposureViewSkipsNonEvents(t *testing.T) {
	e := newEnv(t)
	d := newDriver(e, "acme", 41, []string{"ord_1", "ord_2"})
	d.appendN(t, 30)
	if _, err := e.js.Publish(context.Background(), "ctx.ev.acme.control", []byte(`{"not":"an event"}`)); err != nil {
		t.Fatal(err)
	}
	d.appendN(t, 30)
	v := NewExposureView(e.store)
	if err := v.Sync(context.Background()); err != nil {
		t.Fatalf("sync over a non-event: %v", err)
	}
	if got := v.Skipped(); len(got) != 1 {
		t.Fatalf("skipped %v, want one message", got)
	}
	if err := v.Sync(context.Background()); err != nil || len(v.Skipped()) != 1 {
		t.Fatalf("a second sync: %v, skipped %v", err, v.Skipped())
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
	fresh := NewExposureView(e.store)
	for _, s := range all {
		if err := fresh.Apply(s); err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(fresh.View("acme")) != fmt.Sprint(v.View("acme")) || v.Seq() != fresh.Seq() {
		t.Fatalf("view over a skipped message %+v differs from the fold of the valid events %+v", v.View("acme"), fresh.View("acme"))
	}
	if !strings.Contains(string(v.metrics()), "contextos_exposure_view_skipped 1\n") {
		t.Fatal("metrics do not count the skipped message")
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
		_ = runLoop(ctx, nil, "ctx.ev.>", time.Millisecond, func(f string, a ...any) {
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
