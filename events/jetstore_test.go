package events_test

import (
	"context"
	"testing"
	"time"

	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/storetest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// startServer starts an embedded server on a random loopback port with its
// data in dir, shut down at the end of the test.
func startServer(t testing.TB, dir string, syncAlways bool) *events.Embedded {
	t.Helper()
	srv, err := events.StartEmbedded(events.EmbeddedConfig{DataDir: dir, Port: -1, SyncAlways: &syncAlways})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	return srv
}

// connect opens a client connection to srv over loopback TCP and a
// JetStream context on it, closed at the end of the test.
func connect(t testing.TB, srv *events.Embedded) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := events.Connect(srv.ClientURL(), nats.MaxReconnects(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// newJetStore returns a JetStore on a fresh stream of a fresh server.
func newJetStore(t testing.TB, syncAlways bool) (*events.JetStore, *events.Embedded, jetstream.JetStream) {
	t.Helper()
	srv := startServer(t, t.TempDir(), syncAlways)
	_, js := connect(t, srv)
	if _, err := events.EnsureStream(testCtx(t), js, events.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	return events.NewJetStore(js, events.StreamName), srv, js
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond every few milliseconds until it holds or d passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
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
		if _, err := events.EnsureStream(testCtx(t), js, events.StreamOptions{}); err != nil {
			t.Fatal(err)
		}
		return events.NewJetStore(js, events.StreamName)
	})
}
