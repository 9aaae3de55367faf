package aggregates

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
)

// guardedReserve reserves on resource unless the control subject it reads
// (guarded) says the kill switch is engaged.
func guardedReserve(ctx context.Context, eng *Engine, resource, attempt string, decisions *atomic.Int32) (Result, error) {
	ledger, _ := ExposureRef("acme", testDef.ID, resource)
	csub, _ := codec.Subject("acme", "control")
	control := Ref{Subject: csub, New: func() State { return &kernel.Control{} }}
	var st struct {
		L *kernel.Ledger
		C *kernel.Control
	}
	var d kernel.Decision
	return eng.Do(ctx, Tx{Tenant: "acme", Bind: []Binding{Bind(ledger, &st.L, &d.Events), Guard(control, &st.C)},
		Decide: func() *kernel.Refusal {
			decisions.Add(1)
			if st.C.Engaged {
				d = kernel.Decision{Refusal: &kernel.Refusal{Code: kernel.CodeKillSwitchEngaged, Reason: "engaged"}}
			} else {
				d = kernel.DecideExposure(st.L, kernel.ReserveStarted{Reserve: kernel.Reserve{GuaranteeID: testDef.ID, Resource: resource,
					AttemptID: attempt, OperationID: "o" + attempt, Amount: 10, Limit: testDef.Limit, DefinitionDigest: testDef.Digest()}})
			}
			return d.Refusal
		}})
}

// TestGuardRefusesAStaleRead: a decision that read the control subject is
// held at the store while a rival writer engages the switch there. Its
// append, guarded by the sequence it read, stores nothing on the real
// server; it is decided again on the refreshed control and refused.
func TestGuardRefusesAStaleRead(t *testing.T) {
	_, js := startStore(t, t.TempDir())
	gate := make(chan struct{})
	eng := NewEngine(&gateStore{Store: js, gate: gate}, testSealer())
	var decisions atomic.Int32
	done := make(chan Result, 1)
	go func() {
		r, err := guardedReserve(context.Background(), eng, "ord_guard", "g1", &decisions)
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	waitStats(t, eng, func(s EngineStats) bool { return s.Sealed >= 1 })
	envs, err := testSealer().Seal("acme", []kernel.Event{kernel.KillSwitchSet{Engaged: true, Operator: "ops_alice"}})
	if err != nil {
		t.Fatal(err)
	}
	csub, _ := codec.Subject("acme", "control")
	if _, err := js.Append(context.Background(), csub, 0, envs...); err != nil {
		t.Fatal(err)
	}
	close(gate)
	r := <-done
	if r.Refusal == nil || r.Refusal.Code != kernel.CodeKillSwitchEngaged || decisions.Load() < 2 {
		t.Fatalf("result %+v after %d decisions, want kill_switch_engaged on the second", r.Refusal, decisions.Load())
	}
	sub, _ := codec.ExposureSubject("acme", testDef.ID, "ord_guard")
	if last, err := js.LastSeq(context.Background(), sub); err != nil || last != 0 {
		t.Fatalf("the ledger holds %d, %v: the stale decision was stored", last, err)
	}
	if st := eng.Stats(); st.Conflicts != 1 {
		t.Fatalf("stats %+v, want one conflict", st)
	}
}

// slowReads holds reads of one subject until released.
type slowReads struct {
	events.Store
	subject string
	gate    chan struct{}
}

func (s *slowReads) Read(ctx context.Context, subject string, from uint64) ([]events.Stored, error) {
	if subject == s.subject {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.Store.Read(ctx, subject, from)
}

// TestGuardedReadKeepsNoOrder: two proposals of one tenant read its control
// subject; the first waits for a slow cold load of its ledger. The second,
// on another ledger, is decided and stored meanwhile: a guarded read does
// not queue transactions behind each other as a shared appended subject
// does.
func TestGuardedReadKeepsNoOrder(t *testing.T) {
	slow, _ := codec.ExposureSubject("acme", testDef.ID, "ord_slow")
	store := &slowReads{Store: events.NewMemStore(), subject: slow, gate: make(chan struct{})}
	eng := NewEngine(store, testSealer())
	var decisions atomic.Int32
	first := make(chan error, 1)
	go func() {
		r, err := guardedReserve(context.Background(), eng, "ord_slow", "s1", &decisions)
		if err == nil && r.Refusal != nil {
			err = errors.New(string(r.Refusal.Code))
		}
		first <- err
	}()
	waitStats(t, eng, func(EngineStats) bool { return eng.submitted.Load() >= 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := guardedReserve(ctx, eng, "ord_fast", "f1", &decisions)
	if err != nil || r.Refusal != nil {
		t.Fatalf("second proposal: %v %v", err, r.Refusal)
	}
	select {
	case err := <-first:
		t.Fatalf("the first finished before its ledger loaded: %v", err)
	default:
	}
	close(store.gate)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
}
