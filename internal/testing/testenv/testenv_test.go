package testenv

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextos/ledger/events/codec"
)

func TestServerConnectStore(t *testing.T) {
	srv := Server(t, Options{})
	_, js := Connect(t, srv.ClientURL())
	store := Store(t, js)
	if seq, err := store.LastSeq(context.Background(), codec.SubjectPrefix+"acme.control"); err != nil || seq != 0 {
		t.Fatalf("a fresh stream: seq %d, %v", seq, err)
	}
}

func TestEventually(t *testing.T) {
	var n atomic.Int64
	go func() {
		for i := 0; i < 3; i++ {
			time.Sleep(time.Millisecond)
			n.Add(1)
		}
	}()
	Eventually(t, func() bool { return n.Load() == 3 }, 5*time.Second, "three ticks")
	ft := &fakeT{TB: t}
	func() {
		defer func() { _ = recover() }()
		Eventually(ft, func() bool { return false }, 10*time.Millisecond, "never")
	}()
	if !ft.failed {
		t.Fatal("Eventually did not fail on a condition that never holds")
	}
}

type fakeT struct {
	testing.TB
	failed bool
}

func (f *fakeT) Helper() {}

func (f *fakeT) Fatalf(string, ...any) {
	f.failed = true
	panic("fatal")
}

// TestFreePorts: the ports are distinct, bindable, and below the kernel's
// ephemeral range when it leaves room, so no outgoing connection holds one.
func TestFreePorts(t *testing.T) {
	ports, err := FreePorts(12)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	low := ephemeralStart()
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("port %d returned twice: %v", p, ports)
		}
		seen[p] = true
		if low-minPort >= 1000 && (p < minPort || p >= low) {
			t.Fatalf("port %d is not in [%d, %d)", p, minPort, low)
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Fatalf("port %d: %v", p, err)
		}
		l.Close()
	}
}
