package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/gateway"
	"github.com/contextos/ledger/internal/testing/daemontest"
	"github.com/contextos/ledger/internal/testing/provider"
	"github.com/contextos/ledger/internal/testing/testenv"
	"github.com/contextos/ledger/wire"
	"github.com/nats-io/nats-server/v2/server"
)

// TestKillSwitchHoldsOnACutReplica: two replicas on one NATS server, the
// second behind a TCP proxy. The proxy cuts the second for a few seconds
// while an operator engages the kill switch through the first; the second
// never hears of it, and its warm state still says released. After the
// cut, 100 proposals through the second replica: none may reach the
// provider, because the reserve decision reads the control subject guarded
// by its sequence, not a copy in memory.
func TestKillSwitchHoldsOnACutReplica(t *testing.T) {
	prov := provider.New()
	hs := httptest.NewServer(prov.Handler())
	t.Cleanup(hs.Close)
	dir := t.TempDir()
	base := linConfig(t, dir, hs.URL, "nats://unused", "x")
	emb, err := events.StartEmbedded(events.EmbeddedConfig{DataDir: filepath.Join(dir, "nats-server"), Port: -1,
		Configure: func(so *server.Options) { so.Users = gateway.ServerUsers(base, linRuntimePassword) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Shutdown)
	proxy := testenv.NewCutProxy(t, strings.TrimPrefix(emb.ClientURL(), "nats://"))
	a, err := bootConfig(t, linConfig(t, dir, hs.URL, emb.ClientURL(), "ks-a"), daemontest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	b, err := bootConfig(t, linConfig(t, dir, hs.URL, proxy.URL(), "ks-b"), daemontest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	ctx := context.Background()
	body := func(key string) []byte {
		raw, _ := json.Marshal(map[string]any{"run_id": "run_ks", "operation_key": key, "capability_id": "adp_payments.issue_refund",
			"arguments": map[string]any{"order_id": "ord_" + key, "amount_minor": 100, "currency": "INR"}})
		return raw
	}
	// B decides once with the switch released: its warm state holds that.
	if r := b.Gateway.Propose(ctx, "acme", "agent_email", body("warm")); r.Status != wire.StatusApplied {
		t.Fatalf("warm-up through B: %+v", r)
	}
	proxy.SetCut(true)
	waitFor(t, 10*time.Second, func() bool { return !b.NC.IsConnected() }, "B to notice the cut")
	engaged := true
	req, _ := json.Marshal(wire.OpRequest{Engaged: &engaged, Reason: "incident drill"})
	if r := a.Gateway.Op(ctx, "acme", "kill-switch", "ops_alice", req); !r.OK {
		t.Fatalf("engage through A: %+v", r)
	}
	proxy.SetCut(false)
	waitFor(t, 20*time.Second, b.NC.IsConnected, "B to reconnect")
	before := prov.Stats().Calls
	for i := 0; i < 100; i++ {
		r := b.Gateway.Propose(ctx, "acme", "agent_email", body(fmt.Sprint("k", i)))
		if r.Status != wire.StatusRefused || r.Code != wire.CodeKillSwitchEngaged {
			t.Errorf("proposal %d through B: %s %s %s", i, r.Status, r.Code, r.Reason)
		}
	}
	if got := prov.Stats().Calls - before; got != 0 {
		t.Fatalf("%d of 100 proposals through the cut replica reached the provider", got)
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, d time.Duration, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
