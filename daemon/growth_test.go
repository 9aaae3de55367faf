package daemon_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/internal/testing/daemontest"
	"github.com/contextos/ledger/internal/testing/gatewaytest"
	"github.com/contextos/ledger/internal/testing/testenv"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/projections"
	"github.com/contextos/ledger/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// refusalGrowthBound is what 10,000 refused proposals of one agent may add
// to the event and audit streams together (docs/operations.md, "Growth").
const refusalGrowthBound = 1 << 20

// TestRefusalGrowth floods a runtime with refused proposals
// (shared_guarantee_exceeded, each under a new operation key) from one
// agent and measures what the event and audit streams grow by: a flood of
// refusals costs bounded space, and every refusal is still accounted for
// in signed history (whole, or in a count). CONTEXTOS_REFUSALS sets the
// number (default 10,000); -v prints the figures.
func TestRefusalGrowth(t *testing.T) {
	n := 10000
	if s := os.Getenv("CONTEXTOS_REFUSALS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 {
			t.Fatalf("CONTEXTOS_REFUSALS=%q", s)
		}
	}
	e := startEnvWith(t, daemontest.Options{Config: func(cfg *config.Config) {
		cfg.Runtime.Limits.ProposalsPerSecond, cfg.Runtime.Limits.ProposalBurst = 1<<24, 1<<24
		// Windows of a few seconds: the flood spans several, and the test
		// waits for the last one's aggregate.
		cfg.Runtime.Limits.RefusalWindow = config.Duration{Duration: 3 * time.Second}
	}})
	rt := e.rt
	ctx := context.Background()

	// One accepted proposal first, so the streams and the tenant's audit
	// chain exist before the measurement starts.
	nc := e.client("acme", "agent_email")
	wantBalance(t, e.propose(nc, "acme", "agent_email", refund("run_g", "base", "ord_g", 10000)), 10000, 0, 90000)
	e.settled(ctx, 1)
	ev0, au0 := e.streamBytes(ctx)
	seq0, err := rt.Store.LastStreamSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	const senders = 8
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var bad []string
	for w := 0; w < senders; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := gatewaytest.Connect(t, rt.URL, passwords["acme.agent_email"], "acme", "agent_email")
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				r := gatewaytest.Propose(t, c, "acme", "agent_email", refund("run_g", fmt.Sprintf("flood-%d", i), "ord_g", 90001))
				if r.Status != wire.StatusRefused || r.Code != wire.CodeExceeded {
					mu.Lock()
					bad = append(bad, fmt.Sprintf("%d: %s %s %s", i, r.Status, r.Code, r.Reason))
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if len(bad) > 0 {
		t.Fatalf("%d of %d proposals not refused exceeded, first: %s", len(bad), n, bad[0])
	}
	sent := time.Since(start)
	// Every refusal is in signed history, whole or counted, and the audit
	// chain has caught up with all of it.
	recorded := e.settled(ctx, n, seq0)
	ev1, au1 := e.streamBytes(ctx)
	evGrowth, auGrowth := ev1-ev0, au1-au0
	t.Logf("%d refusals (%s) in %s: event stream +%d bytes, audit stream +%d bytes, together +%d bytes (%.1f bytes a refusal); %d recorded whole",
		n, wire.CodeExceeded, sent.Round(time.Millisecond), evGrowth, auGrowth, evGrowth+auGrowth, float64(evGrowth+auGrowth)/float64(n), recorded)
	if bound := uint64(refusalGrowthBound); evGrowth+auGrowth > bound {
		t.Errorf("%d refusals grew the streams by %d bytes, bound %d", n, evGrowth+auGrowth, bound)
	}
}

// streamBytes is the size of the event and the audit streams.
func (e *env) streamBytes(ctx context.Context) (ev, audit uint64) {
	e.t.Helper()
	js, err := jetstream.New(e.rt.NC)
	if err != nil {
		e.t.Fatal(err)
	}
	for i, name := range []string{events.StreamName, projections.AuditStreamName} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			e.t.Fatal(err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			e.t.Fatal(err)
		}
		if i == 0 {
			ev = info.State.Bytes
		} else {
			audit = info.State.Bytes
		}
	}
	return ev, audit
}

// settled waits until the acme events after seq (the first of from, if
// any) account for want refusals (an operation refused, or a refusal
// record: one, or its count) and the tenant's audit chain has recorded
// every event; it returns how many were recorded whole.
func (e *env) settled(ctx context.Context, want int, from ...uint64) (whole int) {
	e.t.Helper()
	after := uint64(0)
	if len(from) > 0 {
		after = from[0]
	}
	var got int
	testenv.Eventually(e.t, func() bool {
		last, err := e.rt.Store.LastStreamSeq(ctx)
		if err != nil {
			return false
		}
		if len(from) > 0 {
			got, whole = 0, 0
			err = e.rt.Store.ReplayTenant(ctx, "acme", after+1, func(s events.Stored) error {
				ev, err := kernel.DecodeEvent(s.Envelope.Type, s.Envelope.V, s.Envelope.Body)
				if err != nil {
					return err
				}
				switch r := ev.(type) {
				case kernel.OperationRefused:
					got, whole = got+1, whole+1
				case kernel.ProposalRefused:
					got += max(1, r.Count)
					if r.Count == 0 {
						whole++
					}
				}
				return nil
			})
			if err != nil || got < want {
				return false
			}
		}
		return e.rt.Service.Projectors["acme"].Status().LastEventSeq >= lastOf(ctx, e, last)
	}, 5*time.Minute, "the refusals' records and their audit")
	if len(from) > 0 && got != want {
		e.t.Fatalf("%d refusals recorded, %d sent", got, want)
	}
	return whole
}

// lastOf is the sequence of acme's last event at or before last.
func lastOf(ctx context.Context, e *env, last uint64) uint64 {
	var seq uint64
	_ = e.rt.Store.ReplayTenant(ctx, "acme", max(1, last-50), func(s events.Stored) error {
		if s.Seq <= last {
			seq = s.Seq
		}
		return nil
	})
	return seq
}
