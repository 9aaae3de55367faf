package daemon_test

import (
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextos/ledger/daemon"
	"github.com/contextos/ledger/gateway"
	"github.com/contextos/ledger/internal/testing/daemontest"
	"github.com/contextos/ledger/internal/testing/provider"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
	"github.com/nats-io/nats.go"
)

// TestOwnershipPermissions: with nats.ownership on, a runtime whose user
// lacks the ownership permissions of docs/operations.md's block refuses to
// start naming the bucket and the internal subjects; with the block as it
// is it serves, owns every partition alone, and an agent may not publish on the
// internal subjects a forwarded request arrives on. A second replica that
// joins gets half the partitions (each reconciles only the tenants it
// owns), and stopped, hands them back in about a heartbeat, not after its
// keys' TTL.
func TestOwnershipPermissions(t *testing.T) {
	block := docsAuthorization(t)
	prov := provider.New()
	hs := httptest.NewServer(prov.Handler())
	t.Cleanup(hs.Close)
	keyFile := ""
	owning := func(url, executor string) *daemon.Runtime {
		cfg := externalConfig(t, url, hs.URL)
		if keyFile == "" {
			keyFile = cfg.Runtime.KeyFile
		}
		cfg.Runtime.KeyFile, cfg.Runtime.Executor = keyFile, executor // replicas share one key
		cfg.NATS.Ownership.Enabled = true
		cfg.Runtime.MetricsListen = "127.0.0.1:0"
		// A TTL long enough to tell a graceful hand-over from an expiry.
		cfg.NATS.Ownership.TTL.Duration = 10 * time.Second
		cfg.NATS.Ownership = cfg.NATS.Ownership.WithDefaults()
		rt, err := bootConfig(t, cfg, daemontest.Options{})
		if err != nil {
			t.Fatalf("Boot with the ownership permissions: %v", err)
		}
		return rt
	}
	base := block
	// The block without the ownership permissions (a subject listed twice
	// is harmless).
	for _, r := range [][2]string{{`"$KV.CTX_OWNERS.>", "ctx.internal.>"`, `"$SYS.REQ.USER.INFO"`}, {`, "ctx.internal.>"] }`, `] }`}} {
		if !strings.Contains(base, r[0]) {
			t.Fatalf("the docs' block has no %q", r[0])
		}
		base = strings.Replace(base, r[0], r[1], 1)
	}
	cfg := externalConfig(t, startDocsServer(t, base), hs.URL)
	cfg.NATS.Ownership.Enabled = true
	if _, err := bootConfig(t, cfg, daemontest.Options{}); err == nil || !strings.Contains(err.Error(), "$KV.CTX_OWNERS.>") || !strings.Contains(err.Error(), "ctx.internal.>") {
		t.Fatalf("Boot without the ownership permissions: %v, want both named", err)
	}

	url := startDocsServer(t, block)
	stops := map[*daemon.Runtime]func(){}
	stop := func(r *daemon.Runtime) func() {
		if f, ok := stops[r]; ok {
			return f
		}
		var once sync.Once
		stops[r] = func() { once.Do(r.Close) }
		t.Cleanup(stops[r])
		return stops[r]
	}
	rt := owning(url, "test-1")
	stop(rt)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if s, _ := rt.Gateway.Ownership(); len(s.Owned) == rt.Config.NATS.Ownership.Partitions {
			break
		}
		if time.Now().After(deadline) {
			s, _ := rt.Gateway.Ownership()
			t.Fatalf("a lone replica owns %d partitions", len(s.Owned))
		}
	}
	e := &env{t: t, rt: rt, prov: prov}
	agent := e.client("acme", "agent_email")
	if r := e.propose(agent, "acme", "agent_email", refund("run_own", "own-1", "ord_own", 1000)); r.Status != wire.StatusApplied {
		t.Fatalf("proposal: %+v", r)
	}
	refused := make(chan error, 1)
	agent.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case refused <- err:
		default:
		}
	})
	s, _ := rt.Gateway.Ownership()
	if err := agent.Publish(gateway.OwnerSubjectPrefix+s.ID, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-refused:
		if !strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
			t.Fatalf("agent's publish on the internal subject: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server took an agent's publish on the internal subject")
	}
	if s2, _ := rt.Gateway.Ownership(); s2.Received != 0 {
		t.Fatalf("a forwarded request from an agent was received: %+v", s2)
	}

	// A second replica joins and gets its share; stopped, it hands its
	// share back at once, well within the TTL its keys would take to expire.
	owned := func(r *daemon.Runtime) int { s, _ := r.Gateway.Ownership(); return len(s.Owned) }
	second := owning(url, "test-2")
	stop(second)
	parts := rt.Config.NATS.Ownership.Partitions
	waitOwned := func(within time.Duration, what string, cond func() bool) time.Duration {
		start := time.Now()
		for !cond() {
			if time.Since(start) > within {
				stop(second)()
				t.Fatalf("not within %s: %s (first owns %d)", within, what, owned(rt))
			}
			time.Sleep(10 * time.Millisecond)
		}
		return time.Since(start)
	}
	waitOwned(20*time.Second, "the joining replica gets its share", func() bool { return owned(rt) == parts/2 && owned(second) == parts/2 })

	// The background reconciler of a replica passes over the tenants it
	// serves only: an attempt of acme's is its owner's to reconcile.
	prov.Script(provider.Pending)
	pending := e.propose(agent, "acme", "agent_email", refund("run_own", "own-p", "ord_pending", 1000))
	if pending.Status != wire.StatusPending || pending.AttemptID == "" {
		t.Fatalf("pending proposal: %+v", pending)
	}
	acmeOwner, other := rt, second
	if s, _ := second.Gateway.Ownership(); slices.Contains(s.Owned, kernel.Partition("acme", parts)) {
		acmeOwner, other = second, rt
	}
	has := func(rows []wire.SettleRow) bool {
		return slices.ContainsFunc(rows, func(r wire.SettleRow) bool { return r.AttemptID == pending.AttemptID })
	}
	queries := prov.Stats().Queries
	if rows := other.Gateway.ReconcileOnce(t.Context()); has(rows) || prov.Stats().Queries != queries {
		t.Fatalf("the replica not owning acme reconciled its attempt: %+v, provider queries %d -> %d", rows, queries, prov.Stats().Queries)
	}
	if rows := acmeOwner.Gateway.ReconcileOnce(t.Context()); !has(rows) || prov.Stats().Queries == queries {
		t.Fatalf("acme's owner did not reconcile its attempt: %+v, provider queries %d -> %d", rows, queries, prov.Stats().Queries)
	}
	stopped := time.Now()
	stop(second)()
	ttl := rt.Config.NATS.Ownership.TTL.Duration
	waitOwned(ttl, "the first replica takes back a stopped replica's share", func() bool { return owned(rt) == parts })
	if took := time.Since(stopped); took > ttl/2 {
		t.Fatalf("a graceful hand-over took %s: as long as the keys' expiry (TTL %s), not a heartbeat", took, ttl)
	}
	t.Logf("graceful hand-over in %s (TTL %s)", time.Since(stopped).Round(time.Millisecond), ttl)

	// A replica that dies without handing over: its store connection goes
	// first, so it releases nothing and its claims stay current for the
	// TTL. A request of a tenant it owned reaches the survivor, which is
	// told at once that nobody takes it where it sends it and handles it
	// itself, before the hand-over (the request would otherwise be lost and
	// time out: the proposal waits less than the TTL).
	third := owning(url, "test-3")
	stop(third)
	second = third
	waitOwned(20*time.Second, "a third replica gets its share", func() bool { return owned(rt) == parts/2 && owned(third) == parts/2 })
	p := kernel.Partition("acme", parts)
	survivor, dead := rt, third
	if s, _ := rt.Gateway.Ownership(); slices.Contains(s.Owned, p) {
		survivor, dead = third, rt
	}
	dead.NC.Close()
	stop(dead)()
	if r := e.propose(agent, "acme", "agent_email", refund("run_own", "own-2", "ord_own", 1000)); r.Status != wire.StatusApplied {
		t.Fatalf("proposal after its owner died: %+v", r)
	}
	if s, _ := survivor.Gateway.Ownership(); s.Fallbacks == 0 || slices.Contains(s.Owned, p) {
		t.Fatalf("the survivor answered %+v: want it handled here after a refused forward, the dead replica's claim still current", s)
	}
	fams := scrape(t, survivor)
	for _, name := range []string{"contextos_ownership_fallbacks_total", "contextos_ownership_forwarded_total", "contextos_ownership_partitions_owned", "contextos_ownership_partitions_known", "contextos_engine_warm_subjects"} {
		if v, ok := sample(fams, name, nil); !ok || v < 1 {
			t.Errorf("%s = %v (present %v), want at least 1", name, v, ok)
		}
	}
}
