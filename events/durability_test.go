package events_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/events/storetest"
	"github.com/contextos/ledger/internal/testing/testenv"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestJetStoreRetryAfterLostAck: a publish whose acknowledgement never
// reached the client, retried as the client would, is stored once and the
// retry returns the original sequence.
func TestJetStoreRetryAfterLostAck(t *testing.T) {
	store, srv, _ := newJetStore(t, true)
	nc, _ := connect(t, srv)
	ctx := testenv.Context(t)
	sub := storetest.Subject(t, "ord.lost")
	e := storetest.Event(t, 1)
	raw, err := codec.Encode(e)
	if err != nil {
		t.Fatal(err)
	}

	// The exact message Append sends, but with no reply subject: the server
	// stores it and the ack is lost.
	m := nats.NewMsg(sub)
	m.Data = raw
	m.Header.Set("Nats-Msg-Id", e.EventID)
	m.Header.Set("Nats-Expected-Last-Subject-Sequence", "0")
	if err := nc.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
	var stored uint64
	testenv.Eventually(t, func() bool {
		stored, err = store.LastSeq(ctx, sub)
		return err == nil && stored > 0
	}, 10*time.Second, "the unacknowledged publish to be stored")

	// The client times out and retries the same envelope and expectation.
	for range 2 {
		seq, err := store.Append(ctx, sub, 0, e)
		if err != nil || seq != stored {
			t.Fatalf("retry = %d, %v; want the original %d", seq, err, stored)
		}
	}
	got, err := store.Read(ctx, sub, 0)
	if err != nil || len(got) != 1 || got[0].Seq != stored || got[0].Envelope.EventID != e.EventID {
		t.Fatalf("after retries: %d events (%v)", len(got), err)
	}

	// Same for a multi-event append: the batch committed, its ack was lost.
	sub2 := storetest.Subject(t, "ord.lost.batch")
	envs := []codec.Envelope{storetest.Event(t, 2), storetest.Event(t, 3)}
	for i, e := range envs {
		raw, err := codec.Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		m := nats.NewMsg(sub2)
		m.Data = raw
		m.Header.Set("Nats-Batch-Id", "lost")
		m.Header.Set("Nats-Batch-Sequence", strconv.Itoa(i+1))
		if i == 0 {
			m.Header.Set("Nats-Expected-Last-Subject-Sequence", "0")
		} else {
			m.Header.Set("Nats-Batch-Commit", "1")
		}
		if err := nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, func() bool {
		stored, err = store.LastSeq(ctx, sub2)
		return err == nil && stored > 0
	}, 10*time.Second, "the unacknowledged batch to be committed")
	seq, err := store.Append(ctx, sub2, 0, envs...)
	if err != nil || seq != stored {
		t.Fatalf("batch retry = %d, %v; want %d", seq, err, stored)
	}
	if got, _ := store.Read(ctx, sub2, 0); len(got) != 2 {
		t.Fatalf("batch retry stored %d events", len(got))
	}
}

// TestJetStoreDuplicateAckChecksBytes: when the server answers "duplicate"
// for an event id, the store makes sure the stored message is this event; an
// id reused for different content is an error, not a silent success.
func TestJetStoreDuplicateAckChecksBytes(t *testing.T) {
	store, _, _ := newJetStore(t, true)
	ctx := testenv.Context(t)
	a, b := storetest.Subject(t, "a"), storetest.Subject(t, "b")
	e := storetest.Event(t, 1)
	if _, err := store.Append(ctx, a, 0, e); err != nil {
		t.Fatal(err)
	}
	// A different message under e's id on b: the server reports a duplicate
	// of e (the id was seen); the store must refuse to call that success.
	other := storetest.Event(t, 2)
	other.EventID = e.EventID
	other, err := codec.NewSigner(mustKey(t)).Seal(other.Type, other.V, e.EventID, other.Tenant, other.Time, other.Body)
	if err != nil {
		t.Fatal(err)
	}
	_, err = store.Append(ctx, b, 0, other)
	if !errors.Is(err, events.ErrEventIDReused) {
		t.Fatalf("reused id: %v, want ErrEventIDReused", err)
	}
	if got, _ := store.Read(ctx, b, 0); len(got) != 0 {
		t.Fatal("reused id stored")
	}
}

func mustKey(t *testing.T) []byte {
	k, err := codec.GenerateKey(strings.NewReader(strings.Repeat("k", 32)))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// freePort is a port a server can listen on again after a restart
// (testenv.FreePorts).
func freePort(t *testing.T) int {
	t.Helper()
	ps, err := testenv.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	return ps[0]
}

type acked struct {
	subject string
	seq     uint64
	env     codec.Envelope
}

// writeUntil appends n events round-robin over subjects, retrying each one
// with the same envelope and expectation until it is acknowledged (an error
// other than a conflict leaves the outcome unknown), and reports every
// acknowledged event. after is called once after the k-th ack.
func writeUntil(t *testing.T, store events.Store, subjects []string, n, k int, after func()) []acked {
	t.Helper()
	last := map[string]uint64{}
	var out []acked
	retries := 0
	defer func() { t.Logf("%d events acknowledged after %d retries", len(out), retries) }()
	for i := range n {
		sub := subjects[i%len(subjects)]
		e := storetest.Event(t, i)
		deadline := time.Now().Add(30 * time.Second)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			seq, err := store.Append(ctx, sub, last[sub], e)
			cancel()
			if err == nil {
				last[sub] = seq
				out = append(out, acked{sub, seq, e})
				break
			}
			if errors.Is(err, events.ErrConflict) || errors.Is(err, events.ErrInvalidAppend) {
				t.Fatalf("event %d: %v", i, err)
			}
			if time.Now().After(deadline) {
				t.Fatalf("event %d not acknowledged in 30s: %v", i, err)
			}
			retries++
			time.Sleep(10 * time.Millisecond) // back off while the server is down
		}
		if i+1 == k && after != nil {
			after()
		}
	}
	return out
}

func checkAcked(t *testing.T, store events.Store, all []acked) {
	t.Helper()
	ctx := testenv.Context(t)
	bySub := map[string][]acked{}
	for _, a := range all {
		bySub[a.subject] = append(bySub[a.subject], a)
	}
	for sub, want := range bySub {
		got, err := store.Read(ctx, sub, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d events stored, %d acknowledged", sub, len(got), len(want))
		}
		for i := range want {
			if got[i].Seq != want[i].seq || got[i].Envelope.EventID != want[i].env.EventID {
				t.Fatalf("%s[%d]: seq %d id %s, acknowledged seq %d id %s", sub, i, got[i].Seq, got[i].Envelope.EventID, want[i].seq, want[i].env.EventID)
			}
		}
	}
}

// TestJetStoreServerRestartMidRun: the embedded server is shut down and
// started again on the same data directory while a writer is appending.
// Every acknowledged event is there afterwards, exactly once, and appends
// resume with the right expected sequences.
func TestJetStoreServerRestartMidRun(t *testing.T) {
	dir, port := t.TempDir(), freePort(t)
	start := func() *events.Embedded {
		srv, err := events.StartEmbedded(events.EmbeddedConfig{DataDir: dir, Port: port})
		if err != nil {
			t.Fatal(err)
		}
		return srv
	}
	srv := start()
	t.Cleanup(func() { srv.Shutdown() })
	nc, err := events.Connect(srv.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := events.EnsureStream(testenv.Context(t), js, events.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	store := events.NewJetStore(js, events.StreamName)
	subjects := []string{storetest.Subject(t, "ord.1"), storetest.Subject(t, "ord_1"), storetest.Subject(t, "ord 1")}

	// The restart runs concurrently with the writer, so appends are in
	// flight while the server goes away and comes back.
	restarted := make(chan *events.Embedded, 1)
	var restarting atomic.Bool
	all := writeUntil(t, store, subjects, 60, 25, func() {
		restarting.Store(true)
		old := srv
		go func() {
			old.Shutdown()
			restarted <- start()
		}()
	})
	if !restarting.Load() {
		t.Fatal("server was not restarted")
	}
	srv = <-restarted
	checkAcked(t, store, all)

	// A fresh client after a second restart sees the same; EnsureStream on the
	// existing stream changes nothing.
	srv.Shutdown()
	srv = start()
	_, js2 := connect(t, srv)
	if _, err := events.EnsureStream(testenv.Context(t), js2, events.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	store2 := events.NewJetStore(js2, events.StreamName)
	checkAcked(t, store2, all)
	ctx := testenv.Context(t)
	for _, sub := range subjects {
		last, err := store2.LastSeq(ctx, sub)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store2.Append(ctx, sub, last-1, storetest.Event(t, 1000)); !errors.Is(err, events.ErrConflict) {
			t.Fatalf("stale expectation after restart: %v", err)
		}
		if _, err := store2.Append(ctx, sub, last, storetest.Event(t, 1001)); err != nil {
			t.Fatalf("append after restart: %v", err)
		}
	}
}

// TestJetStoreProcessCrash: the server runs in a child process that is
// killed with SIGKILL right after the acknowledgements; a server started on
// the same data directory has every acknowledged event.
func TestJetStoreProcessCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a server process")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChildServer$")
	cmd.Env = append(os.Environ(), "EVENTS_CRASH_CHILD_DIR="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	url := ""
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "READY "); ok {
			url = u
			break
		}
	}
	if url == "" {
		t.Fatal("child server did not start")
	}
	nc, err := events.Connect(url, nats.MaxReconnects(0))
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := events.EnsureStream(testenv.Context(t), js, events.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	store := events.NewJetStore(js, events.StreamName)
	subjects := []string{storetest.Subject(t, "a"), storetest.Subject(t, "b")}
	all := writeUntil(t, store, subjects, 40, 0, nil)
	// And one atomic batch across both subjects.
	ctx := testenv.Context(t)
	items := []events.AppendItem{
		{Subject: subjects[0], ExpectedLastSeq: all[len(all)-2].seq, Envs: []codec.Envelope{storetest.Event(t, 100), storetest.Event(t, 101)}},
		{Subject: subjects[1], ExpectedLastSeq: all[len(all)-1].seq, Envs: []codec.Envelope{storetest.Event(t, 102)}},
	}
	seqs, err := store.AppendBatch(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	all = append(all, acked{subjects[0], seqs[0] - 1, items[0].Envs[0]}, acked{subjects[0], seqs[0], items[0].Envs[1]}, acked{subjects[1], seqs[1], items[1].Envs[0]})

	if err := cmd.Process.Kill(); err != nil { // SIGKILL: no shutdown, no flush
		t.Fatal(err)
	}
	_ = cmd.Wait()
	killed = true
	nc.Close()

	srv := startServer(t, dir, true)
	_, js2 := connect(t, srv)
	checkAcked(t, events.NewJetStore(js2, events.StreamName), all)
}

// TestCrashChildServer is the child process of TestJetStoreProcessCrash.
func TestCrashChildServer(t *testing.T) {
	dir := os.Getenv("EVENTS_CRASH_CHILD_DIR")
	if dir == "" {
		t.Skip("child process of TestJetStoreProcessCrash")
	}
	srv, err := events.StartEmbedded(events.EmbeddedConfig{DataDir: dir, Port: -1})
	if err != nil {
		fmt.Println("FAILED", err)
		os.Exit(1)
	}
	fmt.Println("READY " + srv.ClientURL())
	select {} // until killed
}
