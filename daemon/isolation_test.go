package daemon_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/internal/testing/daemontest"
	"github.com/contextos/ledger/internal/testing/testenv"
	"github.com/contextos/ledger/wire"
)

// slowProvider wraps the test provider to take delay to answer any refund
// of an order whose id starts with "slow_".
func slowProvider(delay time.Duration) func(http.Handler) http.Handler {
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			if bytes.Contains(b, []byte(`"slow_`)) {
				select {
				case <-time.After(delay):
				case <-r.Context().Done():
				}
			}
			h.ServeHTTP(w, r)
		})
	}
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func p99(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[(len(s)*99-1)/100]
}

// TestTenantIsolationUnderFlood: tenant acme floods a provider that takes
// two seconds, with 60 KB proposals from more senders than its share of
// workers and queue. The other tenant's p99 stays within 3x its idle p99
// measured in the same run, acme's own kill switch engages fast (operators
// have their own lane), and every request of both tenants gets a reply:
// (the idle p99 is measured before and after the flood)
// acme's excess is refused overloaded, never dropped.
func TestTenantIsolationUnderFlood(t *testing.T) {
	e := startEnvWith(t, daemontest.Options{Provider: slowProvider(2 * time.Second), Config: func(cfg *config.Config) {
		for i := range cfg.Capabilities {
			cfg.Capabilities[i].HTTP.Timeout.Duration = 10 * time.Second
		}
		// 16 workers in all: one pool of 16 would be all acme's during its
		// flood; divided between the two tenants, acme has 8 (and 8 queued).
		cfg.Runtime.Workers, cfg.Runtime.Limits.TenantQueue = 16, 8
		// The test measures scheduling, not the disk: without an fsync per
		// append the other engineers' disk traffic does not decide the p99.
		cfg.NATS.Sync = "relaxed"
	}})

	globex := e.client("globex", "agent_email")
	measure := func(phase string, n int) []time.Duration {
		var ds []time.Duration
		for i := 0; i < n; i++ {
			b, _ := json.Marshal(refund("run_b", fmt.Sprintf("%s%d", phase, i), fmt.Sprintf("b_%s_%d", phase, i), 1))
			start := time.Now()
			m, err := globex.Request(wire.ProposeSubject("globex", "agent_email"), b, 15*time.Second)
			if err != nil {
				t.Fatalf("globex %s proposal %d got no reply: %v", phase, i, err)
			}
			ds = append(ds, time.Since(start))
			var r wire.Reply
			if err := json.Unmarshal(m.Data, &r); err != nil || r.Status != wire.StatusApplied {
				t.Fatalf("globex %s proposal %d: %s", phase, i, m.Data)
			}
		}
		return ds
	}
	idle := measure("idle", 60)

	pad := strings.Repeat("x", 60<<10-400)
	template, _ := json.Marshal(map[string]any{"run_id": "run_flood", "operation_key": "KEY", "capability_id": "adp_payments.issue_refund",
		"arguments": map[string]any{"order_id": "slow_KEY", "amount_minor": 1, "currency": "INR", "note": pad}})
	var replies, overloaded, applied, noReply atomic.Int64
	codes := sync.Map{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	senders := 32 // twice what acme's share (8 workers, 8 queued) holds
	for s := 0; s < senders; s++ {
		nc := e.client("acme", []string{"agent_email", "agent_chat"}[s%2])
		principal := []string{"agent_email", "agent_chat"}[s%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				b := bytes.ReplaceAll(template, []byte("KEY"), []byte(fmt.Sprintf("f%d_%d", s, i)))
				m, err := nc.Request(wire.ProposeSubject("acme", principal), b, 20*time.Second)
				if err != nil {
					noReply.Add(1)
					continue
				}
				replies.Add(1)
				var r wire.Reply
				_ = json.Unmarshal(m.Data, &r)
				key := string(r.Status) + "/" + string(r.Code)
				v, _ := codes.LoadOrStore(key, new(atomic.Int64))
				v.(*atomic.Int64).Add(1)
				switch {
				case r.Code == wire.CodeOverloaded:
					overloaded.Add(1)
					time.Sleep(500 * time.Millisecond) // what a client does with overloaded: back off
				case r.Status == wire.StatusApplied:
					applied.Add(1)
				}
			}
		}()
	}
	testenv.Eventually(t, func() bool { return overloaded.Load() > 0 }, 15*time.Second, "the flood to fill acme's share")
	flood := measure("flood", 60)

	on := true
	ops := e.client("acme", "ops_alice")
	body, _ := json.Marshal(wire.OpRequest{Engaged: &on, Reason: "flood"})
	start := time.Now()
	m, err := ops.Request(wire.OpSubject("acme", "kill-switch", "ops_alice"), body, 15*time.Second)
	kill := time.Since(start)
	if err != nil {
		t.Fatalf("kill switch during the flood: %v", err)
	}
	var kr wire.OpReply
	if err := json.Unmarshal(m.Data, &kr); err != nil || !kr.OK {
		t.Fatalf("kill switch: %s", m.Data)
	}
	close(stop)
	wg.Wait()
	// Idle again: the idle p99 is that of both idle phases, so one lucky
	// quiet moment on a shared machine does not set the bar.
	idle = append(idle, measure("after", 60)...)

	var summary []string
	codes.Range(func(k, v any) bool {
		summary = append(summary, fmt.Sprintf("%s=%d", k, v.(*atomic.Int64).Load()))
		return true
	})
	sort.Strings(summary)
	t.Logf("globex p99 idle %v, under flood %v; acme kill switch %v; acme replies %d (%s), no reply %d",
		p99(idle), p99(flood), kill, replies.Load(), strings.Join(summary, " "), noReply.Load())
	if noReply.Load() != 0 {
		t.Fatalf("%d acme requests got no reply", noReply.Load())
	}
	if applied.Load() == 0 {
		t.Fatal("the flood applied nothing: it did not reach the provider")
	}
	switch {
	case raceEnabled:
		// Under the race detector every memory access is several times
		// dearer and both tenants share the process's two cores: acme's
		// own work (parsing its 60 KB proposals) then shows in globex's
		// latency through the CPU, which no share of workers isolates.
		// The latency bar is held by the test without -race.
		t.Logf("race detector: globex p99 not compared (median idle %v, under flood %v)", median(idle), median(flood))
	case p99(flood) > 3*p99(idle):
		t.Fatalf("globex p99 %v under acme's flood, more than 3x its idle p99 %v", p99(flood), p99(idle))
	}
	if kill > time.Second {
		t.Fatalf("acme's kill switch took %v under its own flood", kill)
	}
	if e.rt.Gateway.Overloaded() == 0 {
		t.Fatal("nothing was refused overloaded")
	}
}
