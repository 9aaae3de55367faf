package events_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/storetest"
	"github.com/contextos/ledger/internal/testing/testenv"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// startCluster starts a three-node JetStream cluster of embedded servers on
// loopback (the scale-out deployment: R3 streams), configured through the
// Configure hook, and returns a JetStream context on a connection to all.
func startCluster(t *testing.T) (jetstream.JetStream, []*events.Embedded) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a three-node cluster")
	}
	ports, err := testenv.FreePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	var routes []string
	for _, p := range ports {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	var srvs []*events.Embedded
	var urls []string
	for i := range ports {
		srv, err := events.StartEmbedded(events.EmbeddedConfig{
			DataDir:    t.TempDir(),
			Port:       -1,
			ServerName: fmt.Sprint("n", i+1),
			// A clustered server on a loaded CI machine (race detector,
			// other packages' clusters) can take longer than the
			// default to accept connections; readiness is still waited
			// for, never assumed.
			ReadyTimeout: time.Minute,
			Configure: func(o *server.Options) {
				o.Cluster.Name = "ctx"
				o.Cluster.Host = "127.0.0.1"
				o.Cluster.Port = ports[i]
				o.Routes = server.RoutesFromStr(strings.Join(routes, ","))
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Shutdown)
		srvs = append(srvs, srv)
		urls = append(urls, srv.ClientURL())
	}
	nc, err := events.Connect(strings.Join(urls, ","), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := js.AccountInfo(ctx)
		return err == nil
	}, 30*time.Second, "a JetStream meta leader")
	return js, srvs
}

// freshR3Store (re)creates the event stream with three replicas and waits
// until it takes appends.
func freshR3Store(t *testing.T, js jetstream.JetStream) *events.JetStore {
	t.Helper()
	ctx := testenv.Context(t)
	if err := js.DeleteStream(ctx, events.StreamName); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatal(err)
	}
	testenv.Eventually(t, func() bool {
		c, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := events.EnsureStream(c, js, events.StreamOptions{Replicas: 3})
		return err == nil
	}, 30*time.Second, "the R3 stream")
	testenv.Eventually(t, func() bool {
		c, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		st, err := js.Stream(c, events.StreamName)
		if err != nil {
			return false
		}
		info := st.CachedInfo()
		if info.Cluster == nil || info.Cluster.Leader == "" || len(info.Cluster.Replicas) != 2 {
			return false
		}
		for _, r := range info.Cluster.Replicas {
			if !r.Current {
				return false
			}
		}
		return true
	}, 30*time.Second, "an R3 stream leader with current replicas")
	// A leader with current replicas may not yet answer publishes made
	// through this connection's server ("no responders"). A publish
	// expecting a sequence no subject has is answered with an error and
	// stores nothing.
	testenv.Eventually(t, func() bool {
		m := nats.NewMsg("ctx.ev.probe.ready")
		m.Header.Set("Nats-Expected-Last-Subject-Sequence", "4294967295")
		_, err := js.Conn().RequestMsg(m, 2*time.Second)
		return err == nil
	}, 30*time.Second, "the R3 stream to answer publishes")
	return events.NewJetStore(js, events.StreamName)
}

// TestJetStoreConformanceR3 runs the suite against a replicated stream on a
// three-node cluster: the replicated publish path (Msg-Id checked before the
// expected sequence; 10164 for concurrent appends to one subject) and reads
// served by replicas that may lag.
func TestJetStoreConformanceR3(t *testing.T) {
	js, _ := startCluster(t)
	storetest.Run(t, func(t *testing.T) events.Store { return freshR3Store(t, js) })
}

// TestServerR3RetryIsDuplicate records that on a replicated stream the
// message id is checked before the expected sequence: a retried publish
// (same Nats-Msg-Id and stale expectation) gets a duplicate ack naming the
// original sequence, where a standalone server answers 10071.
func TestServerR3RetryIsDuplicate(t *testing.T) {
	js, _ := startCluster(t)
	store := freshR3Store(t, js)
	nc := js.Conn()
	const subj = "ctx.ev.acme.k.a"
	a := rawRequest(t, nc, subj, "x", "Nats-Msg-Id", "id1", "Nats-Expected-Last-Subject-Sequence", "0")
	if a.Error != nil || a.Seq != 1 {
		t.Fatalf("first publish: %v", a)
	}
	a = rawRequest(t, nc, subj, "x", "Nats-Msg-Id", "id1", "Nats-Expected-Last-Subject-Sequence", "0")
	if a.Error != nil || !a.Duplicate || a.Seq != 1 {
		t.Fatalf("R3 retry: %v, want duplicate of 1", a)
	}
	// A different message with the stale expectation: 10071 with the actual.
	a = rawRequest(t, nc, subj, "y", "Nats-Msg-Id", "id2", "Nats-Expected-Last-Subject-Sequence", "0")
	wantAckErr(t, a, 10071, "wrong last sequence: 1")

	// Through the store: the retry returns the original sequence.
	ctx := testenv.Context(t)
	sub := storetest.Subject(t, "r3")
	e := storetest.Event(t, 1)
	s1, err := store.Append(ctx, sub, 0, e)
	if err != nil {
		t.Fatal(err)
	}
	if s2, err := store.Append(ctx, sub, 0, e); err != nil || s2 != s1 {
		t.Fatalf("R3 store retry = %d, %v; want %d", s2, err, s1)
	}
	// Every read sees every acknowledged append at once, whichever replica
	// answers the Direct Gets.
	var last uint64 = s1
	for i := range 30 {
		if last, err = store.Append(ctx, sub, last, storetest.Event(t, 10+i)); err != nil {
			t.Fatal(err)
		}
		got, err := store.Read(ctx, sub, 0)
		if err != nil || len(got) != i+2 || got[len(got)-1].Seq != last {
			t.Fatalf("read after append %d: %d events, %v", i, len(got), err)
		}
		if l, err := store.LastSeq(ctx, sub); err != nil || l != last {
			t.Fatalf("LastSeq after append %d = %d, %v; want %d", i, l, err, last)
		}
	}
}
