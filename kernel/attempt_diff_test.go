package kernel

import (
	"fmt"
	"math/rand"
	"reflect"
	"testing"
	"time"
)

// TestAttemptStepsEqualDecisions: for generated attempts (reserved on one
// to three ledgers, then observed, closed or claimed at random), a report
// decided by SettleStep appends what DecideSettle appends on the same
// ledgers paired by position, and a release by ReleaseStep what
// DecideRelease appends, keyed by subject; SettleStep's reply is the
// operation's status and balances once the decision is folded, as the
// gateway made it.
func TestAttemptStepsEqualDecisions(t *testing.T) {
	outcomes := []Outcome{OutcomeApplied, OutcomeNotApplied, OutcomePending, OutcomeUnknown, OutcomePartial}
	reached := map[string]int{}
	for seed := int64(0); seed < 3000; seed++ {
		r := rand.New(rand.NewSource(seed))
		now := time.Date(2026, 10, 26, 9, 0, 0, 0, time.UTC)
		opKey := KeyOperation("run_1", "k")
		op := &Operation{}
		_ = op.Apply(OperationOpened{OperationID: "op_1", Principal: "agent_a", RunID: "run_1", OperationKey: "k", CapabilityID: "refund",
			ActionDigest: "d", Executor: "replica-a", Generation: 1})
		ledgers := map[LedgerKey]*Ledger{}
		var holds []Hold
		var refs []HoldRef
		for i := 0; i < 1+r.Intn(3); i++ {
			h := Hold{GuaranteeID: fmt.Sprintf("g%d", i), DefinitionDigest: "dd", Resource: "ord_1", Amount: 100, Limit: int64(1000 + r.Intn(3)*500)}
			l := &Ledger{}
			for _, ev := range DecideExposure(l, Reserve{GuaranteeID: h.GuaranteeID, Resource: h.Resource, AttemptID: "att_1", OperationID: "op_1",
				Amount: h.Amount, Limit: h.Limit, DefinitionDigest: h.DefinitionDigest}).Events {
				_ = l.Apply(ev)
			}
			ledgers[h.ledgerKey()], holds, refs = l, append(holds, h), append(refs, HoldRef{GuaranteeID: h.GuaranteeID, Resource: h.Resource, Amount: h.Amount})
		}
		_ = op.Apply(OperationReserved{AttemptID: "att_1", Generation: 1, Holds: refs})
		// Some history: the dispatch-start, a report, a claim.
		if r.Intn(4) > 0 {
			_ = op.Apply(OperationDispatchStarted{AttemptID: "att_1", Generation: 1})
			for _, l := range ledgers {
				for _, ev := range DecideExposure(l, StartDispatch{AttemptID: "att_1"}).Events {
					_ = l.Apply(ev)
				}
			}
			if r.Intn(2) == 0 {
				o := outcomes[r.Intn(len(outcomes))]
				_ = op.Apply(OperationObserved{AttemptID: "att_1", Generation: 1, Outcome: o, Source: "provider"})
				for _, l := range ledgers {
					for _, ev := range DecideExposure(l, Observe{AttemptID: "att_1", Outcome: o, Source: "provider"}).Events {
						_ = l.Apply(ev)
					}
				}
			}
		}
		if r.Intn(5) == 0 {
			_ = op.Apply(OperationClaimed{Executor: "replica-b", Generation: 2})
		}
		held := func() map[LedgerKey]*Ledger {
			out := map[LedgerKey]*Ledger{}
			for _, h := range holds {
				out[h.Key()] = ledgers[h.ledgerKey()]
			}
			return out
		}

		// A report.
		in := SettleInput{Operation: opKey, AttemptID: "att_1", Holds: holds, Outcome: outcomes[r.Intn(len(outcomes))], Source: "provider", Ref: "rf",
			Generation: uint64(1 + r.Intn(2)), Now: now, Controls: Controls{Executor: "replica-a"}}
		if r.Intn(3) == 0 {
			in.Claimant, in.Source = "replica-b/reconciler", "reconciler"
		}
		want := DecideSettle(SettleState{Op: op, Ledgers: held()}, Settle{AttemptID: in.AttemptID, Outcome: in.Outcome, Source: in.Source, Ref: in.Ref,
			Generation: in.Generation, Claimant: in.Claimant, Holds: holds, Now: now, Controls: in.Controls})
		got := SettleStep(AttemptState{Op: op, Ledgers: ledgers}, in)
		wantApp := map[Key][]Event{}
		if len(want.Op) > 0 {
			wantApp[opKey] = want.Op
		}
		for _, h := range holds {
			if len(want.Ledgers[h.Key()]) > 0 {
				wantApp[h.ledgerKey().Key()] = want.Ledgers[h.Key()]
			}
		}
		if !reflect.DeepEqual(want.Refusal, got.Refusal) || !sameAppends(wantApp, got.Append) {
			t.Fatalf("seed %d settle %+v:\n want %v %+v\n got  %v %+v", seed, in, want.Refusal, wantApp, got.Refusal, got.Append)
		}
		// The reply as the gateway made it: the states once folded.
		after := op.after(want.Op)
		lat := held()
		for k, l := range lat {
			l = orNew(l).Clone()
			for _, ev := range want.Ledgers[k] {
				_ = l.Apply(ev)
			}
			lat[k] = l
		}
		reply := statusOf(after, HoldsOf(holds, lat))
		if want.Refusal != nil {
			reply.Code, reply.Reason = want.Refusal.Code, want.Refusal.Reason
		}
		reply.AttemptID = "att_1"
		if !reflect.DeepEqual(reply, got.Reply) {
			t.Fatalf("seed %d settle reply:\n want %+v\n got  %+v", seed, reply, got.Reply)
		}
		if got.Refusal != nil {
			reached["settle "+string(got.Refusal.Code)]++
		} else {
			reached[fmt.Sprint("settle appends ", len(got.Append) > 0)]++
		}

		// A release.
		rin := ReleaseInput{Operation: opKey, AttemptID: "att_1", Holds: refs, Executor: "replica-c", Operator: "op_priya", Reason: "stuck"}
		if r.Intn(2) == 0 {
			rin.ArtifactRef = "statement-1"
		}
		rwant := DecideRelease(ReleaseState{Op: op, Ledgers: held()}, Release{AttemptID: rin.AttemptID, Executor: rin.Executor, Operator: rin.Operator,
			Reason: rin.Reason, ArtifactRef: rin.ArtifactRef})
		rgot := ReleaseStep(AttemptState{Op: op, Ledgers: ledgers}, rin)
		rApp := map[Key][]Event{}
		if len(rwant.Op) > 0 {
			rApp[opKey] = rwant.Op
		}
		for _, h := range holds {
			if len(rwant.Ledgers[h.Key()]) > 0 {
				rApp[h.ledgerKey().Key()] = rwant.Ledgers[h.Key()]
			}
		}
		if !reflect.DeepEqual(rwant.Refusal, rgot.Refusal) || !sameAppends(rApp, rgot.Append) {
			t.Fatalf("seed %d release %+v:\n want %v %+v\n got  %v %+v", seed, rin, rwant.Refusal, rApp, rgot.Refusal, rgot.Append)
		}
		if rgot.Refusal != nil {
			reached["release "+string(rgot.Refusal.Code)]++
		} else {
			reached["release"]++
		}
	}
	for _, k := range []string{"settle executor_fenced", "settle observation_contradicts_seal", "settle appends true", "settle appends false",
		"release shared_guarantee_dispatch_active", "release shared_guarantee_not_started", "release"} {
		if reached[k] == 0 {
			t.Errorf("no case reached %q: %v", k, reached)
		}
	}
}

func sameAppends(a, b map[Key][]Event) bool {
	n := 0
	for k, evs := range b {
		if len(evs) == 0 {
			continue
		}
		n++
		if !reflect.DeepEqual(a[k], evs) {
			return false
		}
	}
	return n == len(a)
}
