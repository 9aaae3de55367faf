package testenv

import (
	"context"
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
