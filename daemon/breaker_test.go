package daemon_test

import (
	"crypto/ed25519"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/daemon"
	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/gateway"
	"github.com/contextos/ledger/internal/testing/daemontest"
	"github.com/contextos/ledger/internal/testing/provider"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
)

// breakerOp sends the breaker verb as ops_alice of acme.
func (e *env) breakerOp(req wire.BreakerRequest) wire.OpReply {
	e.t.Helper()
	nc := e.client("acme", "ops_alice")
	b, _ := json.Marshal(req)
	msg, err := nc.Request(wire.OpSubject("acme", wire.VerbBreaker, "ops_alice"), b, 10*time.Second)
	if err != nil {
		e.t.Fatalf("breaker: %v", err)
	}
	var r wire.OpReply
	if err := json.Unmarshal(msg.Data, &r); err != nil {
		e.t.Fatal(err)
	}
	return r
}

// TestBreakerTripsOnAFailingProvider: a provider that starts answering 503
// trips the capability's breaker after threshold failures within the
// window; the trip is a signed event with its figures, refuses the
// tenant's next proposals circuit_breaker_open, shows in the breaker verb
// and the metrics, outlives a restart, and an operator resets it.
func TestBreakerTripsOnAFailingProvider(t *testing.T) {
	var failing atomic.Bool
	prov := provider.New()
	inner := prov.Handler()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	defer hs.Close()
	const capID = "adp_payments.issue_refund"
	edit := func(c *config.Config) {
		cp, _ := c.Capability(capID)
		cp.Breaker = config.BreakerConfig{Threshold: 3, Window: config.Duration{Duration: time.Minute}}
	}
	e, logs := bootObserved(t, hs.URL, daemon.BootOptions{}, edit)
	nc := e.client("acme", "agent_email")
	if r := e.propose(nc, "acme", "agent_email", refund("run_b", "ok", "ord_b0", 10)); r.Status != wire.StatusApplied {
		t.Fatalf("healthy provider: %s %s", r.Status, r.Reason)
	}
	failing.Store(true)
	for i, key := range []string{"f1", "f2", "f3"} {
		r := e.propose(nc, "acme", "agent_email", refund("run_b", key, "ord_b"+key, 10))
		if r.Status != wire.StatusUnknown || r.Reason != "provider answered 502 Bad Gateway" {
			t.Fatalf("failure %d: %s %q", i+1, r.Status, r.Reason)
		}
	}
	r := e.propose(nc, "acme", "agent_email", refund("run_b", "after", "ord_after", 10))
	if r.Status != wire.StatusRefused || r.Code != wire.CodeBreakerOpen || !strings.Contains(r.Reason, "3 provider failures within 1m0s") ||
		!strings.Contains(r.Reason, "provider answered 502 Bad Gateway") {
		t.Fatalf("after the trip: %s %s %q", r.Status, r.Code, r.Reason)
	}
	logs.waitLine(t, "circuit breaker tripped", map[string]any{"level": "WARN", "tenant": "acme", "capability": capID, "failures": 3, "threshold": 3})
	// Another tenant's breaker is its own.
	if r := e.propose(e.client("globex", "agent_email"), "globex", "agent_email", refund("run_g", "g1", "ord_g", 10)); r.Status == wire.StatusRefused {
		t.Fatalf("globex refused by acme's breaker: %s %s", r.Code, r.Reason)
	}

	subject, _ := gateway.BreakerSubject("acme", capID)
	sts, err := e.rt.Store.Read(t.Context(), subject, 0)
	if err != nil || len(sts) != 1 || sts[0].Envelope.Type != kernel.TypeBreakerTripped {
		t.Fatalf("breaker subject: %d events, %v", len(sts), err)
	}
	ring := codec.Keyring{}
	ring.Add(e.rt.Signer.Key.Public().(ed25519.PublicKey))
	if err := ring.Verify(sts[0].Envelope); err != nil {
		t.Fatalf("trip event signature: %v", err)
	}
	ev, _ := kernel.DecodeEvent(sts[0].Envelope.Type, sts[0].Envelope.V, sts[0].Envelope.Body)
	trip := ev.(kernel.BreakerTripped)
	if trip.Failures != 3 || trip.Threshold != 3 || trip.WindowMillis != 60000 || trip.CapabilityID != capID || trip.FirstFailure > trip.LastFailure {
		t.Fatalf("trip figures %+v", trip)
	}

	list := e.breakerOp(wire.BreakerRequest{})
	if !list.OK || len(list.Breakers) != 1 || !list.Breakers[0].Open || list.Breakers[0].Trip == nil || list.Breakers[0].Trip.Failures != 3 {
		t.Fatalf("breaker verb: %+v", list)
	}
	fams := scrape(t, e.rt)
	if v, _ := sample(fams, "contextos_breaker_open", map[string]string{"tenant": "acme", "capability": capID}); v != 1 {
		t.Fatalf("contextos_breaker_open %v", v)
	}
	if v, _ := sample(fams, "contextos_breaker_trips_total", map[string]string{"tenant": "acme", "capability": capID}); v != 1 {
		t.Fatalf("contextos_breaker_trips_total %v", v)
	}
	if v, _ := sample(fams, "contextos_decisions_total", map[string]string{"code": string(wire.CodeBreakerOpen)}); v != 1 {
		t.Fatalf("decisions refused circuit_breaker_open: %v", v)
	}

	// A restart loads the open breaker from the store.
	e.rt.Close()
	e.reboot(e.rt.Config, daemontest.Options{Log: logs})
	nc = e.client("acme", "agent_email")
	if r := e.propose(nc, "acme", "agent_email", refund("run_b", "restart", "ord_r", 10)); r.Code != wire.CodeBreakerOpen {
		t.Fatalf("after a restart: %s %s", r.Status, r.Code)
	}

	failing.Store(false)
	if rep := e.breakerOp(wire.BreakerRequest{CapabilityID: capID, Reset: true, Reason: "provider back"}); !rep.OK || rep.Breakers[0].Open {
		t.Fatalf("reset: %+v", rep)
	}
	logs.waitLine(t, "operator action", map[string]any{"verb": wire.VerbBreaker, "operator": "ops_alice", "ok": true})
	if r := e.propose(nc, "acme", "agent_email", refund("run_b", "healed", "ord_h", 10)); r.Status != wire.StatusApplied {
		t.Fatalf("after the reset: %s %s %s", r.Status, r.Code, r.Reason)
	}
	if sts, _ := e.rt.Store.Read(t.Context(), subject, 0); len(sts) != 2 || sts[1].Envelope.Type != kernel.TypeBreakerReset {
		t.Fatalf("breaker subject after the reset: %d events", len(sts))
	}
	if rep := e.breakerOp(wire.BreakerRequest{CapabilityID: "nope", Reset: true}); rep.OK || rep.Code != wire.CodeCapabilityNotSurfaced {
		t.Fatalf("reset of an unknown capability: %+v", rep)
	}
}

// TestBreakerFollowedByAnotherReplica: a trip recorded by one replica
// refuses the tenant's proposals on another, and a reset on the second
// closes it on the first.
func TestBreakerFollowedByAnotherReplica(t *testing.T) {
	emb, err := events.StartEmbedded(events.EmbeddedConfig{DataDir: t.TempDir(), Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Shutdown()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer hs.Close()
	const capID = "adp_payments.issue_refund"
	key := filepath.Join(t.TempDir(), "runtime.key")
	boot := func(executor string) *env {
		e, _ := bootObserved(t, hs.URL, daemon.BootOptions{}, func(c *config.Config) {
			c.NATS.URL, c.Runtime.KeyFile, c.Runtime.Executor = emb.ClientURL(), key, executor
			cp, _ := c.Capability(capID)
			cp.Breaker = config.BreakerConfig{Threshold: 1, Window: config.Duration{Duration: time.Minute}}
		})
		return e
	}
	a, b := boot("replica-a"), boot("replica-b")
	// Requests over NATS go to either replica (a queue group): call each
	// gateway's handler directly.
	body, _ := json.Marshal(refund("run_x", "k1", "ord_x", 10))
	if r := a.rt.Gateway.ProposeObserved(t.Context(), "acme", "agent_email", nil, body); r.Status != wire.StatusUnknown {
		t.Fatalf("failing provider: %s %s", r.Status, r.Reason)
	}
	// b learns of the trip from the stream, without a failure of its own.
	deadline := time.Now().Add(10 * time.Second)
	for !b.rt.Gateway.BreakerOpen("acme", capID) {
		if time.Now().After(deadline) {
			t.Fatal("replica b never saw the trip")
		}
		time.Sleep(20 * time.Millisecond)
	}
	body, _ = json.Marshal(refund("run_x", "k2", "ord_y", 10))
	if r := b.rt.Gateway.ProposeObserved(t.Context(), "acme", "agent_email", nil, body); r.Code != wire.CodeBreakerOpen {
		t.Fatalf("replica b after the trip: %s %s %s", r.Status, r.Code, r.Reason)
	}
	if rep := b.rt.Gateway.Op(t.Context(), "acme", wire.VerbBreaker, "ops_alice", []byte(`{"capability_id":"`+capID+`","reset":true}`)); !rep.OK {
		t.Fatalf("reset on b: %+v", rep)
	}
	for a.rt.Gateway.BreakerOpen("acme", capID) {
		if time.Now().After(deadline.Add(10 * time.Second)) {
			t.Fatal("replica a never saw the reset")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
