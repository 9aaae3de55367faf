package projections

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"math/rand"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextos/ledger/audit"
	"github.com/contextos/ledger/client"
	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/exposure"
	"github.com/contextos/ledger/internal/testing/testenv"
	"github.com/contextos/ledger/verifier"
	"github.com/contextos/ledger/wire"
)

// checkExactlyOnce exports tenant's audit log through the ops verbs (as the
// CLI does), verifies it offline and checks that its records are exactly the
// tenant's events, each once, in stream order.
func checkExactlyOnce(t *testing.T, e *env, tenant string) audit.Entries {
	t.Helper()
	entries := exportAudit(t, e, tenant)
	b, err := audit.MarshalEntries(entries)
	if err != nil {
		t.Fatal(err)
	}
	// The records past the last checkpoint are checked as a chain; tests
	// that need every record covered say so.
	res, err := verifier.VerifyEntriesPolicy(b, e.keys(t, tenant), verifier.Policy{AllowPartial: true})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK() {
		t.Fatalf("exported chain does not verify: %v", res.Failure)
	}
	want := tenantEvents(t, e.store, tenant)
	if len(entries.Records) != len(want) {
		t.Fatalf("%d records for %d events", len(entries.Records), len(want))
	}
	for i, raw := range entries.Records {
		r, _, err := audit.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if r.EventSeq != want[i].Seq || r.Subject != want[i].Subject || !bytes.Equal(r.Event, want[i].Raw) {
			t.Fatalf("record %d holds event %d on %q, want event %d on %q", i, r.EventSeq, r.Subject, want[i].Seq, want[i].Subject)
		}
	}
	return entries
}

// serveOps mounts the ops verbs on a real connection and returns a client.
func serveOps(t *testing.T, e *env, tenant string, model *Model) *client.AuditClient {
	t.Helper()
	nc, js := e.connect(t)
	ops := NewOps(OpsConfig{Log: NewAuditLog(js, AuditStreamName), Events: events.NewJetStore(js, events.StreamName), PublicKeys: []ed25519.PublicKey{e.signer.Key.Public().(ed25519.PublicKey)}, Model: model, MaxReply: 64 * 1024})
	subs, err := serveVerbs(context.Background(), ops, nc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, s := range subs {
			_ = s.Unsubscribe()
		}
	})
	cnc, _ := e.connect(t)
	return &client.AuditClient{NC: cnc, Tenant: tenant, Operator: "ops_alice", PageSize: 50}
}

func exportAudit(t *testing.T, e *env, tenant string) audit.Entries {
	t.Helper()
	c := serveOps(t, e, tenant, nil)
	entries, err := exportEntries(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

func TestAuditSyncRecordsEveryEventOnce(t *testing.T) {
	e := newEnv(t)
	acme := newDriver(e, "acme", 1, []string{"ord_1", "ord.2*>", "ord 3"})
	other := newDriver(e, "globex", 2, []string{"ord_1"})
	for i := 0; i < 5; i++ {
		acme.appendN(t, 12)
		other.appendN(t, 5)
	}
	p := e.projector(t, "acme", e.log, nil)
	if err := p.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A second Sync with nothing new appends nothing.
	if err := p.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	entries := checkExactlyOnce(t, e, "acme")
	if len(entries.Checkpoints) == 0 {
		t.Fatal("no checkpoint published")
	}
	// A fresh projector (a restart) resumes at the end and records the rest.
	acme.appendN(t, 7)
	p2 := e.projector(t, "acme", e.log, nil)
	if err := p2.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkExactlyOnce(t, e, "acme")
	if st := p2.Status(); st.Records != int64(len(tenantEvents(t, e.store, "acme"))) {
		t.Fatalf("status %+v", st)
	}
}

// hookClock runs hook at its call number at (once), and from then on
// reads an hour later, which makes a time-based checkpoint due.
type hookClock struct {
	calls int
	at    int
	hook  func()
	t     time.Time
}

func (c *hookClock) Now() time.Time {
	c.calls++
	if c.calls == c.at {
		c.hook()
	}
	if c.calls >= c.at {
		return c.t.Add(time.Hour)
	}
	return c.t
}

// TestAuditCheckpointRaceKeepsEventsOnce: replica A appends its first record
// and, as it is about to publish a checkpoint, replica B records the rest of
// the events and publishes checkpoints. A's checkpoint loses the race and
// adopts B's, reading B's records; what A still had to record is now in the
// log, and A must not record it again (CI once saw a chain with event
// sequences going back: "record 123 has event_seq 120 after 123").
func TestAuditCheckpointRaceKeepsEventsOnce(t *testing.T) {
	e := newEnv(t)
	d := newDriver(e, "acme", 11, []string{"r1", "r2"})
	d.appendN(t, 20)
	b := e.projector(t, "acme", e.log, func(c *AuditConfig) { c.CheckpointEvery = 7 })
	clock := &hookClock{at: 2, t: time.Unix(1_700_000_000, 0), hook: func() {
		if err := b.Sync(context.Background()); err != nil {
			t.Errorf("replica B: %v", err)
		}
	}}
	a := e.projector(t, "acme", e.log, func(c *AuditConfig) { c.CheckpointEvery = 7; c.Clock = clock })
	if err := a.Sync(context.Background()); err != nil {
		t.Fatalf("replica A: %v", err)
	}
	if clock.calls < 2 {
		t.Fatal("replica B never ran inside A's checkpoint")
	}
	checkExactlyOnce(t, e, "acme")
	if st := a.Status(); st.Appended != 1 || st.LastEventSeq != tenantEvents(t, e.store, "acme")[19].Seq {
		t.Fatalf("replica A: %+v, want 1 record appended and the log caught up", st)
	}
}

// TestAuditTwoReplicasNeverFork runs two projectors of the same tenant at
// once, each on its own connection, while events keep arriving: one chain,
// every event exactly once, and checkpoints that agree.
func TestAuditTwoReplicasNeverFork(t *testing.T) {
	e := newEnv(t)
	d := newDriver(e, "acme", 3, []string{"r1", "r2", "r3", "r4"})
	d.appendN(t, 40)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var replicas []*AuditProjector
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		nc, js := e.connect(t)
		p := e.projector(t, "acme", NewAuditLog(js, AuditStreamName), func(c *AuditConfig) {
			c.Events = events.NewJetStore(js, events.StreamName)
			c.Notify = nc
			c.CheckpointEvery = 7
			c.Logf = t.Logf
		})
		replicas = append(replicas, p)
		wg.Add(1)
		go func() { defer wg.Done(); _ = p.Run(ctx) }()
	}
	n := 300
	if testing.Short() {
		n = 100
	}
	d.appendN(t, n)
	last := tenantEvents(t, e.store, "acme")
	lastSeq := last[len(last)-1].Seq
	for _, p := range replicas {
		testenv.Eventually(t, func() bool { return p.Status().LastEventSeq == lastSeq }, 30*time.Second, "replicas to catch up")
	}
	cancel()
	wg.Wait()
	for i, p := range replicas {
		st := p.Status()
		t.Logf("replica %d: appended %d records, lost %d races", i, st.Appended, st.Conflicts)
	}
	entries := checkExactlyOnce(t, e, "acme")
	if len(entries.Checkpoints) < 2 {
		t.Fatalf("%d checkpoints", len(entries.Checkpoints))
	}
}

// TestAuditResumeAfterAbruptClose closes a running projector's connection at
// a random point mid-stream, several times: each successor resumes with no
// event skipped and none recorded twice.
func TestAuditResumeAfterAbruptClose(t *testing.T) {
	e := newEnv(t)
	d := newDriver(e, "acme", 4, []string{"r1", "r2"})
	d.appendN(t, 150)
	total := len(tenantEvents(t, e.store, "acme"))
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	for round := 0; round < 4; round++ {
		nc, js := e.connect(t)
		p := e.projector(t, "acme", NewAuditLog(js, AuditStreamName), func(c *AuditConfig) {
			c.Events = events.NewJetStore(js, events.StreamName)
		})
		before := p.Status().Records
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- p.Sync(ctx) }()
		stopAt := int64(rng.Intn(total/4) + 1)
		tail := func() int64 {
			r, ok, err := e.log.Tail(context.Background(), "acme")
			if err != nil || !ok {
				return 0
			}
			return r.Record.Index + 1
		}
		testenv.Eventually(t, func() bool { return tail() >= before+stopAt || tail() == int64(total) }, 30*time.Second, "some progress")
		nc.Close() // abrupt: in-flight appends are lost or stored without an ack
		cancel()
		<-done
		d.appendN(t, 20)
		total = len(tenantEvents(t, e.store, "acme"))
	}
	p := e.projector(t, "acme", e.log, nil)
	if err := p.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkExactlyOnce(t, e, "acme")
}

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestAuditCheckpointEveryNOrT publishes a checkpoint every N records and,
// by the injected clock, T after the last one when records are uncovered.
func TestAuditCheckpointEveryNOrT(t *testing.T) {
	e := newEnv(t)
	d := newDriver(e, "acme", 5, []string{"r1"})
	clock := &fakeClock{now: time.Unix(1767225600, 0)}
	p := e.projector(t, "acme", e.log, func(c *AuditConfig) {
		c.CheckpointEvery = 10
		c.CheckpointInterval = time.Minute
		c.Clock = clock
	})
	d.appendN(t, 25)
	n := int64(len(tenantEvents(t, e.store, "acme")))
	if err := p.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	cp, ok, err := e.log.LastCheckpoint(context.Background(), "acme")
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if want := n / 10 * 10; cp.Checkpoint.Size != want {
		t.Fatalf("checkpoint of size %d after %d records, want %d", cp.Checkpoint.Size, n, want)
	}
	clock.Advance(59 * time.Second)
	if err := p.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if cp2, _, _ := e.log.LastCheckpoint(context.Background(), "acme"); cp2.Seq != cp.Seq {
		t.Fatal("checkpoint published before the interval")
	}
	clock.Advance(time.Second)
	if err := p.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	cp3, _, _ := e.log.LastCheckpoint(context.Background(), "acme")
	if cp3.Checkpoint.Size != n {
		t.Fatalf("checkpoint of size %d after the interval, want %d", cp3.Checkpoint.Size, n)
	}
	clock.Advance(time.Hour)
	if err := p.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if cp4, _, _ := e.log.LastCheckpoint(context.Background(), "acme"); cp4.Seq != cp3.Seq {
		t.Fatal("checkpoint published with no new record")
	}
}

// TestAuditRefusesCorruptCheckpoint: a checkpoint on the log that disagrees
// with the records stops the projector instead of extending a forked log.
func TestAuditRefusesCorruptCheckpoint(t *testing.T) {
	e := newEnv(t)
	d := newDriver(e, "acme", 6, []string{"r1"})
	d.appendN(t, 5)
	p := e.projector(t, "acme", e.log, func(c *AuditConfig) { c.CheckpointEvery = 1000 })
	if err := p.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	ns, err := audit.NewNoteSigner(audit.Origin("acme"), e.signer.Key)
	if err != nil {
		t.Fatal(err)
	}
	bogus, err := audit.SignCheckpoint(audit.Checkpoint{Origin: audit.Origin("acme"), Size: 2}, ns)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.log.AppendCheckpoint(context.Background(), "acme", 0, bogus); err != nil {
		t.Fatal(err)
	}
	p2 := e.projector(t, "acme", e.log, nil)
	if err := p2.Sync(context.Background()); err == nil {
		t.Fatal("projector accepted a log whose checkpoint disagrees with its records")
	}
}

func TestAuditLogAppendConflicts(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	seq, err := e.log.AppendCheckpoint(ctx, "acme", 0, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.log.AppendCheckpoint(ctx, "acme", 0, []byte("y"))
	var ce *events.ConflictError
	if !errors.As(err, &ce) || ce.Actual != seq {
		t.Fatalf("got %v, want a conflict naming %d", err, seq)
	}
	if _, err := e.log.Append(ctx, "not a token", 0, []byte("{}")); err == nil {
		t.Fatal("append to an invalid tenant accepted")
	}
}

// auditOpsEnv records 30 events of acme (checkpoints every 10 records),
// serves the ops verbs and returns the keys they publish.
func auditOpsEnv(t *testing.T, seed int64) (*env, *AuditProjector, *client.AuditClient, audit.Keys) {
	t.Helper()
	e := newEnv(t)
	newDriver(e, "acme", seed, []string{"r1", "r2"}).appendN(t, 30)
	p := e.projector(t, "acme", e.log, func(c *AuditConfig) { c.CheckpointEvery = 10 })
	if err := p.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := serveOps(t, e, "acme", nil)
	keysJSON, err := c.File(context.Background(), wire.VerbAuditKeys, nil)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := audit.ParseKeys(keysJSON)
	if err != nil {
		t.Fatal(err)
	}
	return e, p, c, keys
}

// TestAuditOpsProveAndKeys proves an event's record through the ops verbs
// and verifies the proof offline with the published keys.
func TestAuditOpsProveAndKeys(t *testing.T) {
	e, p, c, keys := auditOpsEnv(t, 7)
	ctx := context.Background()
	evs := tenantEvents(t, e.store, "acme")
	st := p.Status()
	for _, i := range []int{0, 3, int(st.CheckpointSize) - 1} {
		proof, err := c.File(ctx, wire.VerbAuditProve, wire.ProveRequest{EventID: evs[i].Envelope.EventID})
		if err != nil {
			t.Fatal(err)
		}
		pr, rec, err := verifier.VerifyProof(proof, keys)
		if err != nil {
			t.Fatalf("proof of record %d: %v", i, err)
		}
		if pr.Index != int64(i) || rec.EventSeq != evs[i].Seq {
			t.Fatalf("proof of record %d names record %d event %d", i, pr.Index, rec.EventSeq)
		}
	}
	var oe *client.AuditError
	var err error
	if st.CheckpointSize < int64(len(evs)) {
		_, err = c.File(ctx, wire.VerbAuditProve, wire.ProveRequest{EventID: evs[len(evs)-1].Envelope.EventID})
		if !errors.As(err, &oe) || oe.Code != wire.CodeAuditNotCheckpointed {
			t.Fatalf("uncheckpointed record: got %v", err)
		}
	}
	_, err = c.File(ctx, wire.VerbAuditProve, wire.ProveRequest{EventID: nextID()})
	if !errors.As(err, &oe) || oe.Code != wire.CodeAuditNotFound {
		t.Fatalf("unknown event: got %v", err)
	}
	_, err = c.Call(ctx, wire.VerbAuditExport, map[string]any{"from": 0, "tenant": "globex"})
	if !errors.As(err, &oe) || oe.Code != "request_malformed" {
		t.Fatalf("a body naming a tenant must be refused, got %v", err)
	}
}

// TestAuditOpsProveConsistency proves through the ops verb that each of the
// log's checkpoints is a prefix of the latest, verifies every proof offline
// with the published keys, and refuses sizes no checkpoint has.
func TestAuditOpsProveConsistency(t *testing.T) {
	e, p, c, keys := auditOpsEnv(t, 9)
	ctx := context.Background()
	var notes [][]byte
	if err := e.log.Checkpoints(ctx, "acme", 0, 0, func(c StoredCheckpoint) error { notes = append(notes, c.Note); return nil }); err != nil {
		t.Fatal(err)
	}
	latest := p.Status().CheckpointSize
	if len(notes) < 2 {
		t.Fatalf("%d checkpoints, want several", len(notes))
	}
	for _, note := range notes {
		cp, err := audit.ReadCheckpoint(note)
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.File(ctx, wire.VerbAuditProveConsistency, wire.ConsistencyRequest{OldSize: cp.Size})
		if err != nil {
			t.Fatalf("size %d: %v", cp.Size, err)
		}
		got, old, cur, err := verifier.VerifyConsistency(b, keys)
		if err != nil {
			t.Fatalf("size %d: %v", cp.Size, err)
		}
		if old.Size != cp.Size || !bytes.Equal(got.Old, note) || cur.Size != latest {
			t.Fatalf("size %d: proof of %d against %d (latest %d)", cp.Size, old.Size, cur.Size, latest)
		}
	}
	var oe *client.AuditError
	for _, c2 := range []struct {
		size int64
		code wire.Code
	}{{latest - 1, wire.CodeAuditNotFound}, {latest + 10, wire.CodeAuditNotCheckpointed}, {0, wire.CodeRequestMalformed}, {-3, wire.CodeRequestMalformed}} {
		_, err := c.File(ctx, wire.VerbAuditProveConsistency, wire.ConsistencyRequest{OldSize: c2.size})
		if !errors.As(err, &oe) || oe.Code != c2.code {
			t.Fatalf("old size %d: got %v, want %s", c2.size, err, c2.code)
		}
	}
}

// TestAuditExportPaging pages through an export whose pages are cut by the
// item limit and by the reply budget, from the start and from the middle.
func TestAuditExportPaging(t *testing.T) {
	e := newEnv(t)
	d := newDriver(e, "acme", 8, []string{"r1", "r2"})
	d.appendN(t, 60)
	// Another tenant's events between: no export of acme's shows them.
	newDriver(e, "globex", 9, []string{"r1"}).appendN(t, 40)
	d.appendN(t, 60)
	p := e.projector(t, "acme", e.log, nil)
	if err := p.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	ops := NewOps(OpsConfig{Log: e.log, Events: e.store, MaxReply: 8 * 1024})
	ctx := context.Background()
	var got [][]byte
	pages := 0
	for from := uint64(0); ; pages++ {
		r := ops.Handle(ctx, "acme", wire.VerbAuditExport, []byte(`{"from":`+strconv.FormatUint(from, 10)+`,"limit":50}`))
		if !r.OK {
			t.Fatalf("%s: %s", r.Code, r.Reason)
		}
		got = append(got, r.Items...)
		if r.Done {
			break
		}
		from = r.Next
	}
	want := tenantEvents(t, e.store, "acme")
	if len(got) != len(want) || pages < 3 {
		t.Fatalf("%d records in %d pages for %d events", len(got), pages, len(want))
	}
	mid := ops.Handle(ctx, "acme", wire.VerbAuditExport, []byte(`{"from":57,"limit":1}`))
	if !mid.OK || len(mid.Items) != 1 || !bytes.Equal(mid.Items[0], got[57]) || mid.Next != 58 {
		t.Fatalf("page from 57: %+v", mid)
	}
	end := ops.Handle(ctx, "acme", wire.VerbAuditExport, []byte(`{"from":`+strconv.Itoa(len(got))+`}`))
	if !end.OK || !end.Done || len(end.Items) != 0 {
		t.Fatalf("page at the end: %+v", end)
	}
	if r := ops.Handle(ctx, "acme", wire.VerbAuditExport, []byte(`{"from":`+strconv.Itoa(len(got)+5)+`}`)); r.OK {
		t.Fatal("page beyond the end accepted")
	}
	if r := ops.Handle(ctx, "acme", wire.VerbAuditExport, []byte(`{"limit":100000}`)); r.OK {
		t.Fatal("oversized limit accepted")
	}
	var lines int
	for from := uint64(0); ; {
		r := ops.Handle(ctx, "acme", wire.VerbEventsExport, []byte(`{"from":`+strconv.FormatUint(from, 10)+`,"limit":7}`))
		if !r.OK {
			t.Fatalf("%s: %s", r.Code, r.Reason)
		}
		lines += len(r.Items)
		for _, line := range r.Items {
			if !bytes.Contains(line, []byte(`"subject":"ctx.ev.acme.`)) {
				t.Fatalf("acme's export holds %s", line)
			}
		}
		if r.Done {
			break
		}
		from = r.Next
	}
	if lines != len(want) {
		t.Fatalf("%d event lines for %d events", lines, len(want))
	}
	if r := ops.Handle(ctx, "acme", "bogus", nil); r.OK || ops.Handler("bogus") != nil {
		t.Fatal("unknown verb accepted")
	}
}

// TestServiceRecordsAndServes starts the whole service for two tenants: both
// logs fill, and the verbs serve each tenant its own log, keys and view.
func TestServiceRecordsAndServes(t *testing.T) {
	e := newEnv(t)
	svc, err := StartService(context.Background(), ServiceConfig{NC: e.nc, JS: e.js, Store: e.store, Signer: e.signer,
		Tenants: []string{"acme", "globex"}, PollInterval: 5 * time.Millisecond, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	newDriver(e, "acme", 41, []string{"r1", "r2"}).appendN(t, 40)
	newDriver(e, "globex", 42, []string{"r1"}).appendN(t, 20)
	for _, tenant := range []string{"acme", "globex"} {
		evs := tenantEvents(t, e.store, tenant)
		p := svc.Projectors[tenant]
		testenv.Eventually(t, func() bool { return p.Status().LastEventSeq == evs[len(evs)-1].Seq }, 30*time.Second, tenant+"'s log")
		if err := p.Checkpoint(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	nc, _ := e.connect(t)
	subs, err := serveVerbs(context.Background(), svc.Ops, nc)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, s := range subs {
			_ = s.Unsubscribe()
		}
	}()
	cnc, _ := e.connect(t)
	for _, tenant := range []string{"acme", "globex"} {
		c := &client.AuditClient{NC: cnc, Tenant: tenant, Operator: "ops"}
		keysJSON, err := c.File(context.Background(), wire.VerbAuditKeys, nil)
		if err != nil {
			t.Fatal(err)
		}
		keys, err := audit.ParseKeys(keysJSON)
		if err != nil {
			t.Fatal(err)
		}
		entries, err := exportEntries(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := audit.MarshalEntries(entries)
		res, err := verifier.VerifyEntries(b, keys)
		if err != nil || !res.OK() || res.Checkpoints == 0 || res.Records != int64(len(tenantEvents(t, e.store, tenant))) {
			t.Fatalf("%s: %v %+v", tenant, err, res)
		}
		viewJSON, err := c.File(context.Background(), wire.VerbExposureView, nil)
		if err != nil {
			t.Fatal(err)
		}
		v, err := exposure.ParseView(viewJSON)
		if err != nil || v.Tenant != tenant {
			t.Fatalf("%s view: %v %+v", tenant, err, v)
		}
	}
}

// TestServiceProjectorWakesFromTheModel: in the service a projector has no
// subscription of its own; the read model's folds wake it. With polls an
// hour apart, every event still reaches the log soon after it is stored.
func TestServiceProjectorWakesFromTheModel(t *testing.T) {
	e := newEnv(t)
	svc, err := StartService(context.Background(), ServiceConfig{NC: e.nc, JS: e.js, Store: e.store, Signer: e.signer,
		Tenants: []string{"acme"}, PollInterval: time.Hour, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	p := svc.Projectors["acme"]
	if p.feed == nil || p.cfg.Notify != nil {
		t.Fatal("the service's projector does not follow the read model")
	}
	d := newDriver(e, "acme", 43, []string{"r1", "r2"})
	for round := 0; round < 3; round++ {
		d.appendN(t, 20)
		evs := tenantEvents(t, e.store, "acme")
		testenv.Eventually(t, func() bool { return p.Status().LastEventSeq == evs[len(evs)-1].Seq }, 30*time.Second, "the log to reach the last event")
	}
	checkExactlyOnce(t, e, "acme")
}

// TestAuditRecordsInBatches: a backlog of events is recorded in atomic
// batches (of at most MaxRecordBatch, never across the next checkpoint),
// not one durable append per event; every event is recorded exactly once,
// in order, and the checkpoints fall at the same sizes as before.
func TestAuditRecordsInBatches(t *testing.T) {
	e := newEnv(t)
	d := newDriver(e, "acme", 9, []string{"ord_1", "ord_2", "ord_3"})
	d.appendN(t, 400)
	n := int64(len(tenantEvents(t, e.store, "acme")))
	const every = 100
	p := e.projector(t, "acme", e.log, func(c *AuditConfig) { c.CheckpointEvery = every; c.CheckpointInterval = time.Hour })
	if err := p.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := p.Status()
	// One batch per checkpoint interval at most, plus the remainder.
	if st.Appended != n || st.Batches > n/every+1 || st.Batches < 2 {
		t.Fatalf("%d events: %+v", n, st)
	}
	checkExactlyOnce(t, e, "acme")
	var sizes []int64
	if err := e.log.Checkpoints(context.Background(), "acme", 1, 0, func(c StoredCheckpoint) error {
		sizes = append(sizes, c.Checkpoint.Size)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i, s := range sizes {
		if s != int64(i+1)*every {
			t.Fatalf("checkpoint sizes %v, want multiples of %d", sizes, every)
		}
	}
	if int64(len(sizes)) != n/every {
		t.Fatalf("%d checkpoints for %d records", len(sizes), n)
	}
}

// TestAuditRecordsInFullBatches: with the default checkpoint spacing a
// backlog goes in atomic batches as large as nats-server accepts, and the
// server stores them.
func TestAuditRecordsInFullBatches(t *testing.T) {
	e := newEnv(t)
	d := newDriver(e, "acme", 9, []string{"ord_1", "ord_2", "ord_3"})
	d.appendN(t, 2500)
	n := int64(len(tenantEvents(t, e.store, "acme")))
	p := e.projector(t, "acme", e.log, func(c *AuditConfig) { c.CheckpointEvery = 0; c.CheckpointInterval = time.Hour })
	if err := p.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := p.Status()
	if n < 2*MaxRecordBatch || st.Appended != n || st.Batches > n/MaxRecordBatch+1 {
		t.Fatalf("%d events: %+v", n, st)
	}
	checkExactlyOnce(t, e, "acme")
}

// TestAuditReadsOnlyItsTenant: a tenant's projector reads its own tenant's
// events and nothing of another's. Before, each Sync replayed every event
// stored after the tenant's last one, so a quiet tenant's projector read all
// of a busy tenant's traffic once a poll interval, without bound.
func TestAuditReadsOnlyItsTenant(t *testing.T) {
	e := newEnv(t)
	ctx := testenv.Context(t)
	busy := newDriver(e, "acme", 11, []string{"ord_1", "ord_2"})
	quiet := newDriver(e, "globex", 12, []string{"ord_1"})
	quiet.appendN(t, 1)
	nc, js := e.connect(t)
	p := e.projector(t, "globex", e.log, func(c *AuditConfig) { c.Events = testenv.Store(t, js) })
	if err := p.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	busy.appendN(t, 600)
	in := nc.Stats().InMsgs
	if err := p.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	// A Sync with nothing of its own to record: a few replies (an empty
	// read, the log's tail), not one per event of the other tenant.
	if got := nc.Stats().InMsgs - in; got > 8 {
		t.Fatalf("a quiet tenant's Sync received %d messages after another tenant's 600 events", got)
	}
	quiet.appendN(t, 3)
	if err := p.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	checkExactlyOnce(t, e, "globex")
}

// tenantReads counts the events ReplayTenant delivers: what an audit
// projector reads from the stream itself.
type tenantReads struct {
	events.Store
	read atomic.Int64
}

func (c *tenantReads) ReplayTenant(ctx context.Context, tenant string, from uint64, fn func(events.Stored) error) error {
	return c.Store.ReplayTenant(ctx, tenant, from, func(s events.Stored) error {
		c.read.Add(1)
		return fn(s)
	})
}

// TestAuditTakesTheModelsEvents: a projector following the read model
// records the tenant's events the model folded without reading them from
// the stream, exactly once and in order; when the model met more of them
// than a feed holds, or the projector's position is outside what the feed
// covers, the projector reads them from the stream instead, to the same log.
func TestAuditTakesTheModelsEvents(t *testing.T) {
	e := newEnv(t)
	ctx := testenv.Context(t)
	store := &tenantReads{Store: e.store}
	m := NewModel(ModelConfig{Store: store})
	p := e.projector(t, "acme", e.log, func(c *AuditConfig) { c.Events = store })
	p.feed = m.follow("acme")
	p.feed.max = 50
	acme := newDriver(e, "acme", 21, []string{"ord_1", "ord_2"})
	globex := newDriver(e, "globex", 22, []string{"ord_1"})
	step := func(name string, acmeEvents int, wantRead func(int64) bool) {
		t.Helper()
		acme.appendN(t, acmeEvents)
		globex.appendN(t, 10)
		if err := m.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case <-p.feed.wake:
		default:
			t.Fatalf("%s: the model did not wake the projector", name)
		}
		before := store.read.Load()
		if err := p.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if got := store.read.Load() - before; !wantRead(got) {
			t.Fatalf("%s: the projector read %d events from the stream", name, got)
		}
		checkExactlyOnce(t, e, "acme")
	}
	none := func(n int64) bool { return n == 0 }
	step("fed", 20, none)
	step("fed again", 30, none)
	step("more than a feed holds", 60, func(n int64) bool { return n >= 60 })
	step("fed after an overflow", 20, none)
	// The projector records a few events itself (a poll before the model's
	// Sync): the feed, which starts before them, hands it only the rest.
	acme.appendN(t, 5)
	if err := p.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	step("fed over what was read", 10, none)
	// A projector whose log another replica moved past the feed reads
	// from its own position.
	acme.appendN(t, 5)
	other := e.projector(t, "acme", e.log, nil)
	if err := other.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	checkExactlyOnce(t, e, "acme")
}

// TestAuditFedStopsAtANonEvent: a stored message that is not a valid event
// stops a fed projector where it stopped one reading the stream: the events
// before it are recorded, and Sync reports the message.
func TestAuditFedStopsAtANonEvent(t *testing.T) {
	e := newEnv(t)
	ctx := testenv.Context(t)
	d := newDriver(e, "acme", 31, []string{"ord_1"})
	d.appendN(t, 12)
	if _, err := e.js.Publish(ctx, "ctx.ev.acme.control", []byte(`{"not":"an event"}`)); err != nil {
		t.Fatal(err)
	}
	d.appendN(t, 12)
	m := NewModel(ModelConfig{Store: e.store})
	fed := e.projector(t, "acme", e.log, nil)
	fed.feed = m.follow("acme")
	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	var corrupt *events.CorruptError
	if err := fed.Sync(ctx); !errors.As(err, &corrupt) {
		t.Fatalf("fed projector over a non-event: %v", err)
	}
	if got, want := fed.Status().LastEventSeq, corrupt.Seq-1; got != want {
		t.Fatalf("fed projector recorded through %d, want %d (the event before the non-event)", got, want)
	}
}

// exportEntries fetches the tenant's audit log as the verifier reads it.
func exportEntries(ctx context.Context, c *client.AuditClient) (audit.Entries, error) {
	e, err := c.ExportAudit(ctx)
	return audit.Entries(e), err
}
