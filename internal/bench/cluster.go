package bench

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/daemon"
	"github.com/contextos/ledger/gateway"
	"github.com/contextos/ledger/internal/testing/provider"
	"github.com/contextos/ledger/internal/testing/testenv"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Cluster is the scale-out deployment on loopback: three nats-servers in
// one JetStream cluster (R3 streams, fsync before every acknowledgement),
// runtimes booted against it as contextosd replicas are (external NATS,
// one queue group, a shared runtime key, their own executor ids), a
// loopback provider and one connection per agent, spread over the servers.
type Cluster struct {
	Servers []*server.Server
	RTs     []*daemon.Runtime
	URLs    []string
	http    *httptest.Server
	dir     string
	agents  []*nats.Conn
	spread  []string // with ClusterOptions.Spread, the tenants agents are spread over
}

// startServers starts three nats-servers under dir in one JetStream cluster
// on loopback, fsync before every acknowledgement, each shaped by configure,
// and returns them with their client URLs. A port picked free can be taken
// by another process before its server binds it (a server that cannot listen
// never becomes ready), so a start whose servers are not all ready is shut
// down and tried again on new ports.
func startServers(dir, name string, configure func(o *server.Options)) ([]*server.Server, []string, error) {
	const attempts = 3
	var last error
	for a := 0; a < attempts; a++ {
		ports, err := testenv.FreePorts(6)
		if err != nil {
			return nil, nil, err
		}
		var urls, routes []string
		for i := 0; i < 3; i++ {
			urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", ports[i]))
			routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", ports[3+i]))
		}
		var servers []*server.Server
		stop := func() {
			for _, srv := range servers {
				srv.Shutdown()
				srv.WaitForShutdown()
			}
		}
		for i := 0; i < 3; i++ {
			o := &server.Options{
				ServerName: fmt.Sprint("n", i+1), Host: "127.0.0.1", Port: ports[i],
				JetStream: true, StoreDir: filepath.Join(dir, fmt.Sprintf("a%d", a), fmt.Sprint("n", i+1)), SyncAlways: true,
				NoLog: true, NoSigs: true,
				Cluster: server.ClusterOpts{Name: name, Host: "127.0.0.1", Port: ports[3+i]},
				Routes:  server.RoutesFromStr(strings.Join(routes, ",")),
			}
			if configure != nil {
				configure(o)
			}
			srv, err := server.NewServer(o)
			if err != nil {
				stop()
				return nil, nil, err
			}
			go srv.Start()
			servers = append(servers, srv)
		}
		last = nil
		for _, srv := range servers {
			if !srv.ReadyForConnections(20 * time.Second) {
				last = fmt.Errorf("cluster server %s did not start (%d attempts on fresh ports)", srv.Name(), a+1)
				break
			}
		}
		if last == nil {
			return servers, urls, nil
		}
		stop()
	}
	return nil, nil, last
}

// StartCluster starts the three servers, waits for JetStream, and boots
// replicas runtimes and agents agent connections.
func StartCluster(parent string, replicas, agents int) (*Cluster, error) {
	return StartClusterWith(parent, ClusterOptions{Replicas: replicas, Agents: agents})
}

// ClusterOptions shape a Cluster.
type ClusterOptions struct {
	Replicas, Agents int
	// Owning turns nats.ownership on in every replica, with TTL and
	// Heartbeat when set (the defaults otherwise).
	Owning         bool
	TTL, Heartbeat time.Duration
	// Tenants are more tenants besides Tenant, each with the same agents
	// (Connect opens their connections).
	Tenants []string
	// Spread puts the agents in one tenant per ownership partition
	// (SpreadTenants), agent a in the (a mod partitions)-th, instead of all
	// in Tenant: the work of many tenants, which owning replicas divide.
	Spread bool
}

// SpreadTenants is one tenant id for each of n ownership partitions, the
// k-th in partition k and Tenant in its own, so that agents spread over
// them fall evenly on replicas owning equal shares of the partitions.
func SpreadTenants(n int) []string {
	out := make([]string, n)
	out[kernel.Partition(Tenant, n)] = Tenant
	for i, left := 0, n-1; left > 0; i++ {
		t := fmt.Sprintf("spread-%d", i)
		if k := kernel.Partition(t, n); out[k] == "" {
			out[k], left = t, left-1
		}
	}
	return out
}

// tenantOf is agent a's tenant: Tenant, or with the agents spread the
// (a mod partitions)-th of the spread tenants.
func (c *Cluster) tenantOf(a int) string {
	if len(c.spread) == 0 {
		return Tenant
	}
	return c.spread[a%len(c.spread)]
}

// StartClusterWith is StartCluster shaped by o.
func StartClusterWith(parent string, o ClusterOptions) (*Cluster, error) {
	replicas, agents := o.Replicas, o.Agents
	dir, err := os.MkdirTemp(parent, "cluster-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir}
	if o.Spread {
		c.spread = SpreadTenants(config.DefaultOwnershipPartitions)
	}
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()
	prov := provider.New()
	c.http = httptest.NewServer(prov.Handler())
	pwb := make([]byte, 12)
	_, _ = rand.Read(pwb)
	pw := hex.EncodeToString(pwb)
	build := func(urls []string) ([]*config.Config, error) {
		cfgs := make([]*config.Config, replicas)
		for r := range cfgs {
			sections := fmt.Sprintf("[nats]\nurl = %q\nuser = %q\npassword = %q\nreply_user = %q\nreply_password = %q\nreplicas = 3\n\n[runtime]\nkey_file = %q\nexecutor = \"bench-%d\"\n",
				strings.Join(urls, ","), gateway.RuntimeUser, pw, gateway.ReplyUser, pw, filepath.Join(dir, "runtime.key"), r+1)
			if o.Owning {
				sections = strings.Replace(sections, "\n\n[runtime]", fmt.Sprintf("\n\n[nats.ownership]\nenabled = true\nttl = %q\nheartbeat = %q\n\n[runtime]",
					cmp.Or(o.TTL, config.DefaultOwnershipTTL), cmp.Or(o.Heartbeat, config.DefaultOwnershipHeartbeat)), 1)
			}
			text := runtimeConfig(sections, c.http.URL, agents)
			for _, t := range o.Tenants {
				text += fmt.Sprintf("\n[[tenants]]\nid = %q\nunadmitted_runs = \"unlimited\"\n", t)
				for a := 0; a < agents; a++ {
					text += agentTOML(a)
				}
			}
			for k, t := range c.spread {
				if t == Tenant {
					continue
				}
				text += fmt.Sprintf("\n[[tenants]]\nid = %q\nunadmitted_runs = \"unlimited\"\n", t)
				for a := k; a < agents; a += len(c.spread) {
					text += agentTOML(a)
				}
			}
			var err error
			if cfgs[r], err = config.Parse([]byte(text)); err != nil {
				return nil, err
			}
		}
		return cfgs, nil
	}
	// The servers' users come from the tenants, which do not depend on
	// where the servers listen; the runtimes' configuration does.
	draft, err := build([]string{"nats://127.0.0.1:4222"})
	if err != nil {
		return nil, err
	}
	users := gateway.ServerUsers(draft[0], pw)
	servers, urls, err := startServers(dir, "bench", func(o *server.Options) { o.Users = users })
	if err != nil {
		return nil, err
	}
	cfgs, err := build(urls)
	if err != nil {
		return nil, err
	}
	c.Servers = servers
	c.URLs = urls
	if err := waitJetStream(strings.Join(urls, ","), pw); err != nil {
		return nil, err
	}
	quiet := daemon.BootOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, cfg := range cfgs {
		// A cluster electing its stream leaders refuses the first boots.
		var rt *daemon.Runtime
		for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(250 * time.Millisecond) {
			if rt, err = daemon.Boot(cfg, quiet); err == nil || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			return nil, fmt.Errorf("boot a replica on the cluster: %w", err)
		}
		c.RTs = append(c.RTs, rt)
	}
	for a := 0; a < agents; a++ {
		p := fmt.Sprintf("agent_%02d", a)
		// Each agent starts on another server, as clients of a cluster do.
		order := append(append([]string{}, urls[a%3:]...), urls[:a%3]...)
		t := c.tenantOf(a)
		nc, err := nats.Connect(strings.Join(order, ","), nats.DontRandomize(), nats.UserInfo(wire.UserName(t, p), fmt.Sprintf("secret-passphrase-%02d", a)),
			nats.CustomInboxPrefix(wire.InboxPrefix(t, p)))
		if err != nil {
			return nil, err
		}
		c.agents = append(c.agents, nc)
	}
	ok = true
	return c, nil
}

// waitJetStream waits until the cluster has elected its meta leader.
func waitJetStream(urls, pw string) error {
	nc, err := nats.Connect(urls, nats.UserInfo(gateway.RuntimeUser, pw), nats.MaxReconnects(-1))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := js.AccountInfo(ctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("JetStream cluster not ready: %w", err)
		}
	}
}

// Connect opens agent a's connection as an agent of tenant, on the a-th
// server first; the caller closes it.
func (c *Cluster) Connect(tenant string, a int) (*nats.Conn, error) {
	p := fmt.Sprintf("agent_%02d", a)
	order := append(append([]string{}, c.URLs[a%3:]...), c.URLs[:a%3]...)
	return nats.Connect(strings.Join(order, ","), nats.DontRandomize(), nats.UserInfo(wire.UserName(tenant, p), fmt.Sprintf("secret-passphrase-%02d", a)),
		nats.CustomInboxPrefix(wire.InboxPrefix(tenant, p)))
}

// Conflicts is the optimistic conflicts of every replica's engine.
func (c *Cluster) Conflicts() uint64 {
	var n uint64
	for _, rt := range c.RTs {
		n += rt.Gateway.Engine().Stats().Conflicts
	}
	return n
}

// Gateway is the cluster seen through one replica: the agents' proposals
// reach every replica (one queue group), the followers' lag and the
// engine's statistics are that replica's: the one that owns Tenant's
// partition with nats.ownership on, else the first.
func (c *Cluster) Gateway() *Gateway {
	for _, rt := range c.RTs {
		if s, ok := rt.Gateway.Ownership(); ok && slices.Contains(s.Owned, kernel.Partition(Tenant, rt.Config.NATS.Ownership.Partitions)) {
			return &Gateway{RT: rt, agents: c.agents, tenantOf: c.tenantOf}
		}
	}
	return &Gateway{RT: c.RTs[0], agents: c.agents, tenantOf: c.tenantOf}
}

// Close stops the runtimes, the servers and the provider and removes the
// data directories.
func (c *Cluster) Close() {
	for _, nc := range c.agents {
		nc.Close()
	}
	for _, rt := range c.RTs {
		rt.Close()
	}
	for _, srv := range c.Servers {
		srv.Shutdown()
	}
	if c.http != nil {
		c.http.Close()
	}
	_ = os.RemoveAll(c.dir)
}

// WaitOwned waits until the replicas, with nats.ownership on, own every
// partition between them, none more than its fair share (the first to boot
// claims all, then gives the others theirs), and each sees every
// partition's owner.
func (c *Cluster) WaitOwned(ctx context.Context, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		owned, seen := 0, true
		var parts int
		for _, rt := range c.RTs {
			s, ok := rt.Gateway.Ownership()
			if !ok {
				return fmt.Errorf("nats.ownership is off")
			}
			owned += len(s.Owned)
			parts = rt.Config.NATS.Ownership.Partitions
			seen = seen && s.Known == parts && len(s.Owned) <= kernel.FairShare(parts, len(c.RTs))
		}
		if owned == parts && seen {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the replicas own %d of %d partitions after %s", owned, parts, within)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
