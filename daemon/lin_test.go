package daemon_test

// Linearizability of the gateway across replicas: several runtimes (each
// with its own engine and warm state) serve one JetStream through the queue
// group, many agents propose concurrently over NATS, an operator reads
// balances and reconciles, some calls time out at the client. The recorded
// history is checked per resource with porcupine (package lincheck), every
// balance any client saw is checked against the ceiling, and the stream is
// audited and accounted against the provider's records.

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"math/rand/v2"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/daemon"
	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/gateway"
	"github.com/contextos/ledger/internal/testing/chaos"
	"github.com/contextos/ledger/internal/testing/daemontest"
	"github.com/contextos/ledger/internal/testing/lincheck"
	"github.com/contextos/ledger/internal/testing/provider"
	"github.com/contextos/ledger/internal/testing/testenv"
	"github.com/contextos/ledger/wire"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const linRuntimePassword = "lin-runtime-secret"

var linAgents = map[string]string{"agent_email": "email-secret-passphrase", "agent_chat": "chat-secret-passphrase", "agent_third": "third-secret-passphrase"}

// linConfig is testConfig for a replica on an external NATS.
func linConfig(t testing.TB, dir, providerURL, natsURL, executor string) *config.Config {
	t.Helper()
	cfg := testConfig(t, dir, providerURL)
	cfg.NATS.URL, cfg.NATS.User, cfg.NATS.Password = natsURL, gateway.RuntimeUser, linRuntimePassword
	cfg.Runtime.Executor = executor
	cfg.Runtime.ReconcileInterval.Duration = 0 // the test reconciles itself; its history has no reconciler
	cfg.Runtime.KeyFile = filepath.Join(dir, "runtime.key")
	return cfg
}

type replicas struct {
	url  string
	rts  []*daemon.Runtime
	prov *provider.Server
	dir  string
}

// startReplicas starts one NATS server (JetStream, file storage, the
// gateway's users and permissions) and n runtimes on it sharing one key.
func startReplicas(t *testing.T, n int) *replicas {
	t.Helper()
	prov := provider.New()
	hs := httptest.NewServer(prov.Handler())
	t.Cleanup(hs.Close)
	dir := t.TempDir()
	base := linConfig(t, dir, hs.URL, "nats://unused", "x")
	emb := testenv.Server(t, testenv.Options{Dir: filepath.Join(dir, "nats-server"),
		Configure: func(so *server.Options) { so.Users = gateway.ServerUsers(base, linRuntimePassword) }})
	r := &replicas{url: emb.ClientURL(), prov: prov, dir: dir}
	for i := 0; i < n; i++ {
		rt, err := bootConfig(t, linConfig(t, dir, hs.URL, r.url, "lin-"+string(rune('a'+i))), daemontest.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(rt.Close)
		r.rts = append(r.rts, rt)
	}
	return r
}

// audit replays the stream through a runtime-user connection.
func (r *replicas) audit(t *testing.T) *lincheck.Report {
	t.Helper()
	nc, err := nats.Connect(r.url, nats.UserInfo(gateway.RuntimeUser, linRuntimePassword))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	keys := codec.Keyring{}
	for _, rt := range r.rts {
		keys.Add(rt.Signer.Key.Public().(ed25519.PublicKey))
	}
	rep, err := lincheck.Audit(context.Background(), events.NewJetStore(js, events.StreamName), keys)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestLinearizableAcrossReplicas: three replicas, three agents with two
// connections each over 20 orders, provider answers mixed (applied,
// pending, failed, 409, late), 10% of calls with a client timeout shorter
// than the provider's, 10% resends; an operator reads balances meanwhile.
// Afterwards everything is reconciled; the history must be linearizable,
// no reply may show a balance over the ceiling, every acknowledged
// operation must be in the stream, and the provider's effects must equal
// the committed receipts.
func TestLinearizableAcrossReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("three runtimes and a few hundred proposals")
	}
	r := startReplicas(t, 3)
	r.prov.Delay = time.Second // past the capability's 500ms timeout
	rng := rand.New(rand.NewPCG(7, 11))
	var modes []provider.Mode
	for i := 0; i < 400; i++ {
		switch x := rng.IntN(100); {
		case x < 12:
			modes = append(modes, provider.Pending)
		case x < 20:
			modes = append(modes, provider.Failed)
		case x < 25:
			modes = append(modes, provider.Conflict)
		case x < 29:
			modes = append(modes, provider.Timeout)
		default:
			modes = append(modes, provider.Applied)
		}
	}
	r.prov.Script(modes...)
	d := chaos.NewDriver(r.url, "acme", "refunds-per-order", 100000)
	var orders []string
	for i := 0; i < 20; i++ {
		orders = append(orders, "ord_"+string(rune('a'+i)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // a guard, not a speed limit: CI runs packages in parallel on 2 cores
	defer cancel()
	load := chaos.Load{Agents: linAgents, Resources: orders, Amounts: []int64{5000, 10000, 20000, 30000, 50000},
		PerAgent: 30, Workers: 2, Timeout: 10 * time.Second, Short: 150 * time.Millisecond, ShortRate: 0.1, ResendRate: 0.1,
		Reads: 60, ReadWorkers: 2, Operator: [2]string{"ops_alice", "alice-secret-passphrase"}, Seed: 42}
	if err := d.Run(ctx, load); err != nil {
		t.Fatal(err)
	}
	op, err := d.Connect("ops_alice", "alice-secret-passphrase")
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	// Calls whose clients stopped waiting go on to their settlement; they
	// must end before Finalize may find no open attempt and stop.
	testenv.Eventually(t, func() bool {
		for _, rt := range r.rts {
			if rt.Gateway.Proposing() != 0 {
				return false
			}
		}
		return true
	}, time.Minute, "proposals left behind by short client timeouts to end")
	if _, err := d.Finalize(ctx, op, r.prov, 3*time.Second, time.Now().Add(4*time.Minute)); err != nil {
		t.Fatal(err)
	}
	for _, o := range orders {
		if _, err := op.Read(o, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	rep := r.audit(t)
	ops := d.Operations(rep.Attempts)
	if v := lincheck.BalanceViolations(ops); len(v) > 0 {
		t.Errorf("balances over the ceiling in replies: %v", v)
	}
	res := lincheck.Check(ops, time.Minute, "")
	t.Logf("history: %s; replies %v", res, d.Counts())
	if !res.OK {
		t.Errorf("%s", res)
	}
	if len(rep.CeilingViolations)+len(rep.BadSignatures)+len(rep.FoldErrors) > 0 {
		t.Errorf("stream: ceiling %v, signatures %v, fold %v", rep.CeilingViolations, rep.BadSignatures, rep.FoldErrors)
	}
	acct := chaos.Account(rep, r.prov, d.Acks(), "acme", "refunds-per-order", 100000)
	if v := acct.Violations(); len(v) > 0 {
		t.Errorf("accounting: %s", strings.Join(v, "\n"))
	}
	if n, amt := rep.Stranded(); n != 0 {
		t.Errorf("%d attempts (%d) stranded after reconciliation", n, amt)
	}
	b, _ := json.Marshal(acct)
	t.Logf("accounting %s", b)
}

// TestStaleRefusalAcrossReplicas: a refusal decided on one replica's warm
// state must not rest on a ledger another replica changed. Replica A holds
// 80000 on ord_s (provider pending); the provider fails it and replica B's
// reconciliation releases it; then 50000 through A fits the ceiling
// (0 + 50000 <= 100000) and must be applied, and no reply may report the
// released hold.
func TestStaleRefusalAcrossReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("two runtimes")
	}
	r := startReplicas(t, 2)
	a, b := r.rts[0].Gateway, r.rts[1].Gateway
	ctx := context.Background()
	body := func(key string, amount int64) []byte {
		p, _ := json.Marshal(map[string]any{"run_id": "run_s", "operation_key": key, "capability_id": chaos.Capability,
			"arguments": map[string]any{"order_id": "ord_s", "amount_minor": amount}})
		return p
	}
	r.prov.Script(provider.Pending)
	first := a.Propose(ctx, "acme", "agent_email", body("k1", 80000))
	if first.Status != wire.StatusPending || *first.Held != 80000 {
		t.Fatalf("first: %+v", first)
	}
	r.prov.Settle(first.AttemptID, "failed")
	rec := b.Op(ctx, "acme", "reconcile", "ops_alice", []byte(`{"attempt_id":"`+first.AttemptID+`"}`))
	if len(rec.Settled) != 1 || rec.Settled[0].Status != wire.StatusNotApplied {
		t.Fatalf("reconcile on B: %+v", rec)
	}
	second := a.Propose(ctx, "acme", "agent_email", body("k2", 50000))
	if second.Status != wire.StatusApplied {
		t.Fatalf("50000 on a released order through replica A: %s %s (%s) committed=%d held=%d; "+
			"the refusal was decided on A's stale warm ledger (held 80000) and appended only to the operation subject, "+
			"so no expected sequence on the ledger caught it (aggregates/engine.go Do: verify staleness before appending a refusal)",
			second.Status, second.Code, second.Reason, deref(second.Committed), deref(second.Held))
	}
}

func deref(p *int64) int64 {
	if p == nil {
		return -1
	}
	return *p
}
