package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/contextos/ledger/events"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Options configure Server. The zero value is a server on a random
// loopback port storing under a fresh t.TempDir(), with the embedded
// default fsync setting.
type Options struct {
	Dir        string // JetStream store directory; "" is t.TempDir()
	Fsync      Fsync
	DontListen bool // in-process connections only
	// Configure, when set, changes the server's options last (users and
	// permissions).
	Configure func(*server.Options)
}

// Fsync is the server's fsync setting.
type Fsync uint8

// Fsync settings.
const (
	FsyncDefault Fsync = iota // the embedded default (always)
	FsyncAlways               // fsync before every acknowledgement
	FsyncRelaxed              // the server's periodic sync
)

// Server starts an embedded nats-server with JetStream and shuts it down at
// the end of the test.
func Server(t testing.TB, o Options) *events.Embedded {
	t.Helper()
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	cfg := events.EmbeddedConfig{DataDir: o.Dir, Port: -1, DontListen: o.DontListen, Configure: o.Configure}
	if o.Fsync != FsyncDefault {
		always := o.Fsync == FsyncAlways
		cfg.SyncAlways = &always
	}
	srv, err := events.StartEmbedded(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	return srv
}

// Connect opens a connection to url and a JetStream context on it, closed
// at the end of the test.
func Connect(t testing.TB, url string, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := events.Connect(url, opts...)
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

// Store ensures the event stream on js and returns a JetStore on it.
func Store(t testing.TB, js jetstream.JetStream) *events.JetStore {
	t.Helper()
	if _, err := events.EnsureStream(Context(t), js, events.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	return events.NewJetStore(js, events.StreamName)
}

// Context returns a context that ends with the test, or after 30 s.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Eventually polls cond every few milliseconds until it holds, and fails
// the test (naming what it waited for) when timeout passes first.
func Eventually(t testing.TB, cond func() bool, timeout time.Duration, what ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, fmt.Sprint(what...))
		}
		time.Sleep(2 * time.Millisecond)
	}
}
