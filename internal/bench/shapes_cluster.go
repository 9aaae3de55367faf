package bench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/contextos/ledger/events"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// RawCluster is three nats-servers in one JetStream cluster on loopback
// (fsync before every acknowledgement), the event stream at R3 allowing
// fast batches, and one connection per writer, writer k's to server k%3
// first: the storage of the scale-out deployment without the runtimes.
type RawCluster struct {
	Servers []*server.Server
	Conns   []*nats.Conn
	Stores  []*events.JetStore
	dir     string
}

// StartRawCluster starts the servers in a new directory under parent,
// waits for the stream's leader and opens writers connections.
func StartRawCluster(parent string, writers int) (*RawCluster, error) {
	dir, err := os.MkdirTemp(parent, "rawcluster-")
	if err != nil {
		return nil, err
	}
	c := &RawCluster{dir: dir}
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()
	servers, urls, err := startServers(dir, "shapes", nil)
	if err != nil {
		return nil, err
	}
	c.Servers = servers
	for k := 0; k < writers; k++ {
		order := append(append([]string{}, urls[k%3:]...), urls[:k%3]...)
		nc, err := events.Connect(strings.Join(order, ","), nats.DontRandomize(), nats.MaxReconnects(-1))
		if err != nil {
			return nil, err
		}
		c.Conns = append(c.Conns, nc)
	}
	js, err := jetstream.New(c.Conns[0])
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err = AllowFast(ctx, js, 3)
		cancel()
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if err != nil {
		return nil, fmt.Errorf("R3 stream: %w", err)
	}
	for _, nc := range c.Conns {
		js, err := jetstream.New(nc)
		if err != nil {
			return nil, err
		}
		c.Stores = append(c.Stores, events.NewJetStore(js, events.StreamName))
	}
	// The stream takes publishes once its leader is elected and known to
	// every server: probe each connection with an append that stores
	// nothing (no subject has that sequence).
	for _, nc := range c.Conns {
		for {
			m := nats.NewMsg("ctx.ev.probe.ready")
			m.Header.Set("Nats-Expected-Last-Subject-Sequence", "4294967295")
			if _, err = nc.RequestMsg(m, 2*time.Second); err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		if err != nil {
			return nil, fmt.Errorf("R3 stream not answering: %w", err)
		}
	}
	ok = true
	return c, nil
}

// Close stops the servers and removes their directories.
func (c *RawCluster) Close() {
	for _, nc := range c.Conns {
		nc.Close()
	}
	for _, s := range c.Servers {
		s.Shutdown()
	}
	_ = os.RemoveAll(c.dir)
}

// Beside returns a target on another connection (another replica) that
// writes the same events under the same guarded subjects as t.
func (t *ShapeTarget) Beside(store *events.JetStore, nc *nats.Conn) *ShapeTarget {
	u := *t
	u.Store, u.Fast = store, events.NewFastPublisher(nc, events.StreamName)
	return &u
}
