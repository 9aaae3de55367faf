package chaos

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestChaos runs the harness against real processes: one nats-server and
// then a 3-node cluster, three contextosd each, with faults. The short
// version (the default, about three minutes on two cores) runs in CI;
// CHAOS_LONG=1 runs the long one (make chaos). Skipped under -short.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns nats-server and contextosd processes for minutes")
	}
	type scenario struct {
		mode     Mode
		duration time.Duration
		every    time.Duration
		orders   int
		agents   int
		owning   bool
	}
	scenarios := []scenario{{ModeSingle, 30 * time.Second, 3 * time.Second, 300, 8, false}, {ModeCluster, 25 * time.Second, 3 * time.Second, 300, 8, false},
		{ModeCluster, 25 * time.Second, 3 * time.Second, 300, 8, true}}
	if os.Getenv("CHAOS_LONG") != "" {
		scenarios = []scenario{{ModeSingle, 4 * time.Minute, 2 * time.Second, 500, 12, false}, {ModeCluster, 4 * time.Minute, 2 * time.Second, 500, 12, false},
			{ModeCluster, 4 * time.Minute, 2 * time.Second, 500, 12, true}}
	}
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	ctx := context.Background()
	if err := Build(ctx, root, bin); err != nil {
		t.Fatal(err)
	}
	for _, s := range scenarios {
		name := string(s.mode)
		if s.owning {
			name += "-owning"
		}
		t.Run(name, func(t *testing.T) {
			res, err := Run(ctx, Options{Mode: s.mode, Duration: s.duration, FaultEvery: s.every, Resources: s.orders, Agents: s.agents,
				Seed: uint64(time.Now().UnixNano()), Bin: bin, Log: testLog{t}, Ownership: s.owning})
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			res.Table(&b)
			t.Log(b.String())
			if !res.OK() {
				t.Fatalf("chaos %s: violations; work dir kept: %s", s.mode, res.Dir)
			}
			_ = os.RemoveAll(res.Dir)
		})
	}
}

type testLog struct{ t *testing.T }

func (l testLog) Write(b []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}
