package events_test

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/events/storetest"
	"github.com/contextos/ledger/internal/testing/testenv"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// newJetStore returns a JetStore on a fresh stream of a fresh server.
func newJetStore(t testing.TB, syncAlways bool) (*events.JetStore, *events.Embedded, jetstream.JetStream) {
	t.Helper()
	srv := startServer(t, t.TempDir(), syncAlways)
	_, js := connect(t, srv)
	return testenv.Store(t, js), srv, js
}

// startServer starts a server storing in dir, fsyncing every write or not.
func startServer(t testing.TB, dir string, syncAlways bool) *events.Embedded {
	t.Helper()
	fsync := testenv.FsyncRelaxed
	if syncAlways {
		fsync = testenv.FsyncAlways
	}
	return testenv.Server(t, testenv.Options{Dir: dir, Fsync: fsync})
}

// connect opens a connection to srv that does not reconnect.
func connect(t testing.TB, srv *events.Embedded) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	return testenv.Connect(t, srv.ClientURL(), nats.MaxReconnects(0))
}

func TestJetStoreConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) events.Store {
		s, _, _ := newJetStore(t, true)
		return s
	})
}

func TestJetStoreConformanceInProcess(t *testing.T) {
	storetest.Run(t, func(t *testing.T) events.Store {
		srv, err := events.StartEmbedded(events.EmbeddedConfig{DataDir: t.TempDir(), DontListen: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Shutdown)
		if srv.ClientURL() != "" {
			t.Fatalf("DontListen server has URL %q", srv.ClientURL())
		}
		nc, err := srv.InProcessConn()
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
		return events.NewJetStore(js, events.StreamName)
	})
}

// TestJetStoreConformanceBackwardRead runs the suite with Read always
// walking subjects backwards by their Ctx-Prev-Seq links.
func TestJetStoreConformanceBackwardRead(t *testing.T) {
	storetest.Run(t, func(t *testing.T) events.Store {
		s, _, _ := newJetStore(t, false)
		s.ScanPerRoundTrip = -1
		return s
	})
}

// TestJetStoreReadLinks: both Read strategies return the same events, and the
// backward walk falls back to reading forward when a message lacks its link
// or a link does not lead to the subject.
func TestJetStoreReadLinks(t *testing.T) {
	store, srv, _ := newJetStore(t, false)
	nc, _ := connect(t, srv)
	ctx := testenv.Context(t)
	sub, other := storetest.Subject(t, "linked"), storetest.Subject(t, "noise")
	var want []string
	var last, olast uint64
	appendOne := func(e codec.Envelope) {
		t.Helper()
		var err error
		if last, err = store.Append(ctx, sub, last, e); err != nil {
			t.Fatal(err)
		}
		want = append(want, e.EventID)
		for i := range 3 {
			if olast, err = store.Append(ctx, other, olast, storetest.Event(t, 100+i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range 4 {
		appendOne(storetest.Event(t, i))
	}
	seqs, err := store.AppendBatch(ctx, []events.AppendItem{
		{Subject: other, ExpectedLastSeq: olast, Envs: []codec.Envelope{storetest.Event(t, 50)}},
		{Subject: sub, ExpectedLastSeq: last, Envs: []codec.Envelope{storetest.Event(t, 51), storetest.Event(t, 52)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	olast, last = seqs[0], seqs[1]
	_, _ = olast, last
	want = append(want, "", "")
	check := func(name string, s *events.JetStore, from uint64, n int) {
		t.Helper()
		got, err := s.Read(ctx, sub, from)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(got) != n {
			t.Fatalf("%s: %d events, want %d", name, len(got), n)
		}
		for i := 1; i < len(got); i++ {
			if got[i].Seq <= got[i-1].Seq || got[i].Subject != sub {
				t.Fatalf("%s: out of order at %d", name, i)
			}
		}
		for i, id := range want[len(want)-n:] {
			if id != "" && got[i].Envelope.EventID != id {
				t.Fatalf("%s: event %d is %s, want %s", name, i, got[i].Envelope.EventID, id)
			}
		}
	}
	forward := events.NewJetStore(jsOf(t, nc), events.StreamName)
	forward.ScanPerRoundTrip = 1 << 30
	backward := events.NewJetStore(jsOf(t, nc), events.StreamName)
	backward.ScanPerRoundTrip = -1
	all, err := forward.Read(ctx, sub, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*events.JetStore{forward, backward} {
		check("all", s, 0, 6)
		check("from 3rd", s, all[2].Seq, 4)
		check("from between", s, all[2].Seq-1, 4)
		check("from last", s, all[5].Seq, 1)
		check("past end", s, all[5].Seq+1, 0)
	}

	// A valid event appended without the link header (another writer).
	e := storetest.Event(t, 60)
	raw, _ := codec.Encode(e)
	m := nats.NewMsg(sub)
	m.Data = raw
	m.Header.Set("Nats-Expected-Last-Subject-Sequence", fmt.Sprint(all[5].Seq))
	if _, err := nc.RequestMsg(m, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	want = append(want, e.EventID)
	check("unlinked last", backward, 0, 7)
	// And one whose link points at another subject's message.
	e = storetest.Event(t, 61)
	raw, _ = codec.Encode(e)
	m = nats.NewMsg(sub)
	m.Data = raw
	last, _ = store.LastSeq(ctx, sub)
	m.Header.Set("Nats-Expected-Last-Subject-Sequence", fmt.Sprint(last))
	m.Header.Set("Ctx-Prev-Seq", fmt.Sprint(olast))
	if _, err := nc.RequestMsg(m, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	want = append(want, e.EventID)
	check("bad link", backward, 0, 8)
	// And one whose link skips back over events of the same subject: the
	// walk meets fewer messages than the server counts, so Read goes forward.
	e = storetest.Event(t, 62)
	raw, _ = codec.Encode(e)
	m = nats.NewMsg(sub)
	m.Data = raw
	last, _ = store.LastSeq(ctx, sub)
	m.Header.Set("Nats-Expected-Last-Subject-Sequence", fmt.Sprint(last))
	m.Header.Set("Ctx-Prev-Seq", fmt.Sprint(all[1].Seq))
	if _, err := nc.RequestMsg(m, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	want = append(want, e.EventID)
	check("skipping link", backward, 0, 9)
}

func jsOf(t *testing.T, nc *nats.Conn) jetstream.JetStream {
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// TestEnsureStream: EnsureStream creates the stream with the settings the
// store depends on, brings an existing stream that lacks them up to date, and
// is idempotent.
func TestEnsureStream(t *testing.T) {
	srv := startServer(t, t.TempDir(), false)
	_, js := connect(t, srv)
	ctx := testenv.Context(t)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: events.StreamName, Subjects: []string{"ctx.ev.>"}, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		st, err := events.EnsureStream(ctx, js, events.StreamOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c := st.CachedInfo().Config
		if !c.AllowDirect || !c.AllowAtomicPublish || !c.DenyDelete || !c.DenyPurge || c.Duplicates != events.DefaultDuplicateWindow ||
			c.Discard != jetstream.DiscardNew || c.Storage != jetstream.FileStorage || c.MaxAge != 0 || c.AllowRollup {
			t.Fatalf("stream config %+v", c)
		}
	}
}

// TestDecodeMemoAnswersOnlyForItsBytes: the store remembers the envelopes it
// appended and decoded by stream sequence. When the stream is deleted and
// made again, sequence 1 holds another event; every read (replay, subject
// read, direct get) through the same store returns the new one, decoded
// from its own bytes.
func TestDecodeMemoAnswersOnlyForItsBytes(t *testing.T) {
	store, _, js := newJetStore(t, false)
	ctx := testenv.Context(t)
	sub := storetest.Subject(t, "memo")
	first, second := storetest.Event(t, 1), storetest.Event(t, 2)
	if _, err := store.Append(ctx, sub, 0, first); err != nil {
		t.Fatal(err)
	}
	read := func(want codec.Envelope) {
		t.Helper()
		var got []events.Stored
		if err := store.Replay(ctx, 1, func(st events.Stored) error { got = append(got, st); return nil }); err != nil {
			t.Fatal(err)
		}
		byRead, err := store.Read(ctx, sub, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, sts := range [][]events.Stored{got, byRead} {
			if len(sts) != 1 || sts[0].Seq != 1 || !reflect.DeepEqual(sts[0].Envelope, want) {
				t.Fatalf("stored %+v, want only %s at sequence 1", sts, want.EventID)
			}
			if d, err := codec.Decode(sts[0].Raw); err != nil || !reflect.DeepEqual(d, sts[0].Envelope) {
				t.Fatalf("envelope %+v is not its bytes' (%+v, %v)", sts[0].Envelope, d, err)
			}
		}
	}
	read(first)
	if err := js.DeleteStream(ctx, events.StreamName); err != nil {
		t.Fatal(err)
	}
	// The server removes the deleted stream's files in the background; until
	// it has, creating the stream again fails.
	var err error
	testenv.Eventually(t, func() bool {
		_, err = events.EnsureStream(ctx, js, events.StreamOptions{})
		return err == nil
	}, 10*time.Second, "the stream to be made again")
	other := events.NewJetStore(js, events.StreamName)
	if _, err := other.Append(ctx, sub, 0, second); err != nil {
		t.Fatal(err)
	}
	read(second)
}

// TestAPI: the API prefix and timeout a store's direct requests use follow
// the JetStream context's domain, API prefix and default timeout.
func TestAPI(t *testing.T) {
	nc, _ := connect(t, startServer(t, t.TempDir(), false))
	mk := func(js jetstream.JetStream, err error) jetstream.JetStream {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return js
	}
	for _, c := range []struct {
		name    string
		js      jetstream.JetStream
		prefix  string
		timeout time.Duration
	}{
		{"default", mk(jetstream.New(nc)), "$JS.API.", 5 * time.Second},
		{"timeout", mk(jetstream.New(nc, jetstream.WithDefaultTimeout(2*time.Second))), "$JS.API.", 2 * time.Second},
		{"domain", mk(jetstream.NewWithDomain(nc, "hub")), "$JS.hub.API.", 5 * time.Second},
		{"prefix", mk(jetstream.NewWithAPIPrefix(nc, "$JS.acc.API")), "$JS.acc.API.", 5 * time.Second},
		{"prefix with dot", mk(jetstream.NewWithAPIPrefix(nc, "$JS.acc.API.")), "$JS.acc.API.", 5 * time.Second},
	} {
		if prefix, timeout := events.API(c.js); prefix != c.prefix || timeout != c.timeout {
			t.Errorf("%s: %q %v, want %q %v", c.name, prefix, timeout, c.prefix, c.timeout)
		}
	}
}
