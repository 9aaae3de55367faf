package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/daemon"
	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/internal/testing/daemontest"
	"github.com/contextos/ledger/internal/testing/testenv"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// streamMsgs is the number of messages in the event stream.
func streamMsgs(t *testing.T, rt *daemon.Runtime) uint64 {
	t.Helper()
	js, err := jetstream.New(rt.NC)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(context.Background(), events.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// bootLimits boots the gateway test configuration with changed limits.
func bootLimits(t *testing.T, set func(*config.LimitsConfig)) *env {
	t.Helper()
	return startEnvWith(t, daemontest.Options{Config: func(cfg *config.Config) { set(&cfg.Runtime.Limits) }})
}

// flood sends n proposals from one agent, 32 at a time, and counts the
// replies by code; a request without a reply fails the test.
func flood(t *testing.T, nc *nats.Conn, tenant, principal string, n int, body func(i int) any) map[wire.Code]int {
	t.Helper()
	var mu sync.Mutex
	codes := map[wire.Code]int{}
	var next, lost atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				b, _ := json.Marshal(body(i))
				m, err := nc.Request(wire.ProposeSubject(tenant, principal), b, 15*time.Second)
				if err != nil {
					lost.Add(1)
					continue
				}
				var r wire.Reply
				_ = json.Unmarshal(m.Data, &r)
				mu.Lock()
				codes[r.Code]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if lost.Load() != 0 {
		t.Fatalf("%d of %d proposals got no reply", lost.Load(), n)
	}
	return codes
}

// TestUnsurfacedFloodIsBounded: thousands of proposals naming capabilities
// that do not exist leave the event stream a handful of messages longer
// (the first refusal of each window, then one signed aggregate per window
// that counts the others) and the memory where it was; every proposal is
// answered, and the aggregates account for every refusal.
func TestUnsurfacedFloodIsBounded(t *testing.T) {
	e := bootLimits(t, func(l *config.LimitsConfig) {
		l.RefusalWindow.Duration = 500 * time.Millisecond
		l.ProposalsPerSecond, l.ProposalBurst = 100000, 100000 // this test is about what is stored, not the rate
	})
	nc := e.client("acme", "agent_email")
	// Warm up, so the heap baseline includes the daemon's steady state.
	flood(t, nc, "acme", "agent_email", 200, func(i int) any { return unsurfaced(i) })
	before, heap := streamMsgs(t, e.rt), heapInUse()
	const n = 5000
	start := time.Now()
	codes := flood(t, nc, "acme", "agent_email", n, func(i int) any { return unsurfaced(1000 + i) })
	took := time.Since(start)
	if codes[wire.CodeCapabilityNotSurfaced] != n {
		t.Fatalf("replies %v, want %d capability_not_surfaced", codes, n)
	}
	// Every refusal is accounted for by the refusal log once the last
	// window is flushed.
	subject, _ := codec.Subject("acme", "refusal", "agent_email")
	want := n + 200
	counted := func() int {
		evs, err := e.rt.Store.Read(context.Background(), subject, 0)
		if err != nil {
			t.Fatal(err)
		}
		var log kernel.RefusalLog
		for _, s := range evs {
			ev, err := kernel.DecodeEvent(s.Envelope.Type, s.Envelope.V, s.Envelope.Body)
			if err != nil {
				t.Fatal(err)
			}
			if err := log.Apply(ev); err != nil {
				t.Fatal(err)
			}
		}
		return log.Count
	}
	testenv.Eventually(t, func() bool { return counted() >= want }, 20*time.Second, "the refusal log to count every refusal")
	if got := counted(); got != want {
		t.Fatalf("the refusal log counts %d refusals, want %d", got, want)
	}
	after, heapAfter := streamMsgs(t, e.rt), heapInUse()
	windows := uint64(took/(500*time.Millisecond)) + 3
	t.Logf("%d unsurfaced proposals in %v: %d stream messages (at most %d windows x 2), heap %d -> %d KiB",
		n, took.Round(time.Millisecond), after-before, windows, heap>>10, heapAfter>>10)
	if after-before > 2*windows {
		t.Fatalf("%d unsurfaced proposals stored %d messages", n, after-before)
	}
	if heapAfter > heap+32<<20 {
		t.Fatalf("heap grew from %d to %d bytes", heap, heapAfter)
	}
	if st := e.rt.Gateway.Model().Stats(); st.OperationsKept != 0 {
		t.Fatalf("the read model keeps %d operations after refusals only", st.OperationsKept)
	}
}

func unsurfaced(i int) map[string]any {
	return map[string]any{"run_id": "run_u", "operation_key": fmt.Sprintf("u%d", i), "capability_id": fmt.Sprintf("no.such_%d", i),
		"arguments": map[string]any{"order_id": "ord_u", "amount_minor": 1}}
}

// TestRateLimitBeforeStore: past its rate limit an agent's proposals are
// refused rate_limited before anything is stored; another agent of the
// same tenant is not limited by it.
func TestRateLimitBeforeStore(t *testing.T) {
	e := bootLimits(t, func(l *config.LimitsConfig) { l.ProposalsPerSecond, l.ProposalBurst = 5, 20 })
	nc := e.client("acme", "agent_email")
	before := streamMsgs(t, e.rt)
	// Each amount differs, so no proposal meets the same-action fence of another in flight.
	codes := flood(t, nc, "acme", "agent_email", 300, func(i int) any { return refund("run_r", fmt.Sprintf("r%d", i), "ord_r", int64(i+1)) })
	applied := codes[""]
	if codes[wire.CodeRateLimited] < 300-20-5*10 || applied < 20 || applied+codes[wire.CodeRateLimited] != 300 {
		t.Fatalf("replies %v", codes)
	}
	// Only the admitted proposals stored anything: each is one atomic
	// append of a fixed number of events, the same for all.
	perProposal := (streamMsgs(t, e.rt) - before) / uint64(applied)
	if (streamMsgs(t, e.rt)-before)%uint64(applied) != 0 || perProposal > 12 {
		t.Fatalf("%d stream messages for %d applied proposals", streamMsgs(t, e.rt)-before, applied)
	}
	other := e.client("acme", "agent_chat")
	if r := e.propose(other, "acme", "agent_chat", refund("run_r2", "c1", "ord_c", 1)); r.Status != wire.StatusApplied {
		t.Fatalf("another agent: %+v", r)
	}
}
