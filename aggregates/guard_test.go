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
	"github.com/contextos/ledger/wire"
)

// guardedReserve reserves on resource unless the control subject it reads
// (guarded) says the kill switch is engaged.
func guardedReserve(ctx context.Context, eng *Engine, resource, attempt string, decisions *atomic.Int32) (Result, error) {
	ledger := ledgerKey(resource)
	eff, err := eng.Run(ctx, "acme", funcStep{reads: kernel.Reads{{Key: ledger, Access: kernel.Write}, {Key: kernel.KeyControl, Access: kernel.Guard}},
		decide: func(l kernel.Loaded) (map[kernel.Key][]kernel.Event, *kernel.Refusal) {
			decisions.Add(1)
			if l[kernel.KeyControl].(*kernel.Control).Engaged {
				return nil, &kernel.Refusal{Code: wire.CodeKillSwitchEngaged, Reason: "engaged"}
			}
			d := kernel.DecideExposure(l[ledger].(*kernel.Ledger), kernel.ReserveStarted{Reserve: kernel.Reserve{GuaranteeID: testDef.ID, Resource: resource,
				AttemptID: attempt, OperationID: "o" + attempt, Amount: 10, Limit: testDef.Limit, DefinitionDigest: testDef.Digest()}})
			return map[kernel.Key][]kernel.Event{ledger: d.Events}, d.Refusal
		}})
	return Result{Refusal: eff.Refusal}, err
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
	if r.Refusal == nil || r.Refusal.Code != wire.CodeKillSwitchEngaged || decisions.Load() < 2 {
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
	queued := queuedPacer(eng)
	var decisions atomic.Int32
	first := make(chan error, 1)
	go func() {
		r, err := guardedReserve(tagged(context.Background(), 1), eng, "ord_slow", "s1", &decisions)
		if err == nil && r.Refusal != nil {
			err = errors.New(string(r.Refusal.Code))
		}
		first <- err
	}()
	queued.wait(t, 1)
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

// TestReadIsNotGuarded: a subject bound with Read is loaded into its map
// entry and never appended to; a change to it after the decision read it
// does not make the decision's append conflict (the subjects Read is for
// only change in the direction that makes a decision stricter).
func TestReadIsNotGuarded(t *testing.T) {
	_, js := startStore(t, t.TempDir())
	ctx := context.Background()
	eng := NewEngine(js, testSealer())
	if res, _, err := eng.Exposure(ctx, "acme", "old-guarantee", "ord_read", kernel.ReserveStarted{Reserve: kernel.Reserve{GuaranteeID: "old-guarantee",
		Resource: "ord_read", AttemptID: "a0", OperationID: "o0", Amount: 70, Limit: 100, DefinitionDigest: "d"}}); err != nil || res.Refusal != nil {
		t.Fatal(err, res.Refusal)
	}
	gate := make(chan struct{})
	geng := NewEngine(&gateStore{Store: js, gate: gate}, testSealer())
	ledger, _ := ExposureRef("acme", testDef.ID, "ord_read")
	lk := ledgerKey("ord_read")
	old := kernel.LedgerKey{GuaranteeID: "old-guarantee", Resource: "ord_read"}.Key()
	var held int64
	var decisions atomic.Int32
	done := make(chan error, 1)
	go func() {
		res, err := geng.Run(ctx, "acme", funcStep{reads: kernel.Reads{{Key: lk, Access: kernel.Write}, {Key: old, Access: kernel.Stale}},
			decide: func(l kernel.Loaded) (map[kernel.Key][]kernel.Event, *kernel.Refusal) {
				decisions.Add(1)
				held = l[old].(*kernel.Ledger).Held
				d := kernel.DecideExposure(l[lk].(*kernel.Ledger), kernel.ReserveStarted{Reserve: kernel.Reserve{GuaranteeID: testDef.ID, Resource: "ord_read",
					AttemptID: "a1", OperationID: "o1", Amount: 10, Limit: testDef.Limit, DefinitionDigest: testDef.Digest(), Carried: held}})
				return map[kernel.Key][]kernel.Event{lk: d.Events}, d.Refusal
			}})
		if err == nil && res.Refusal != nil {
			err = res.Refusal
		}
		done <- err
	}()
	waitStats(t, geng, func(s EngineStats) bool { return s.Sealed >= 1 })
	// The old ledger's hold is released meanwhile.
	if res, _, err := eng.Exposure(ctx, "acme", "old-guarantee", "ord_read", kernel.Observe{AttemptID: "a0", Outcome: kernel.OutcomeNotApplied, Source: "provider"}); err != nil || res.Refusal != nil {
		t.Fatal(err, res.Refusal)
	}
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if held != 70 || decisions.Load() != 1 {
		t.Fatalf("read held %d in %d decisions, want 70 in one", held, decisions.Load())
	}
	if s := geng.Stats(); s.Conflicts != 0 {
		t.Fatalf("stats %+v: the read subject was guarded", s)
	}
	stored, err := js.Read(ctx, ledger.Subject, 1)
	if err != nil || len(stored) != 2 {
		t.Fatalf("the ledger holds %d events, %v", len(stored), err)
	}
	ev, err := kernel.DecodeEvent(stored[0].Envelope.Type, stored[0].Envelope.V, stored[0].Envelope.Body)
	if err != nil || ev.(kernel.ExposureReserved).Carried != 70 {
		t.Fatalf("reservation %+v, %v: want carried 70", ev, err)
	}
}
