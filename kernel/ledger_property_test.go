package kernel

import (
	"fmt"
	"math/rand"
	"testing"
)

// TestLedgerProperties drives random command sequences over many attempts and
// checks after every step that the ceiling holds, that kept balances equal
// the sums recomputed from receipts, that a refusal changes nothing, and that
// held only falls without committed rising on a definitive absence or the
// close of an unstarted attempt.
func TestLedgerProperties(t *testing.T) {
	outcomes := []Outcome{OutcomeApplied, OutcomeNotApplied, OutcomePending, OutcomeUnknown, OutcomePartial, "bogus"}
	for seed := int64(1); seed <= 200; seed++ {
		rng := rand.New(rand.NewSource(seed))
		var l Ledger
		limit := int64(1 + rng.Intn(5000))
		attempt := func() string { return fmt.Sprintf("a%d", rng.Intn(60)) }
		for step := 0; step < 400; step++ {
			cmd := randomCommand(rng, 2, func() Reserve {
				return Reserve{GuaranteeID: "g", Resource: "r", AttemptID: attempt(), OperationID: fmt.Sprintf("o%d", rng.Intn(30)),
					Amount: int64(rng.Intn(1200)) - 10, Limit: limit, DefinitionDigest: "d"}
			}, attempt, outcomes)
			before := l.Balance()
			dec := DecideExposure(&l, cmd)
			for _, ev := range dec.Events {
				if err := l.Apply(ev); err != nil {
					t.Fatalf("seed %d step %d: decided event does not apply: %v", seed, step, err)
				}
			}
			after := l.Balance()
			checkInvariants(t, &l)
			if dec.Refusal != nil && after != before {
				t.Fatalf("seed %d step %d: refusal %s changed balances", seed, step, dec.Refusal.Code)
			}
			if after.Held < before.Held && after.Committed == before.Committed {
				if !releasesByRule(dec.Events) {
					t.Fatalf("seed %d step %d: held fell %d -> %d without commit through %v", seed, step, before.Held, after.Held, dec.Events)
				}
			}
			if after.Committed < before.Committed {
				t.Fatalf("seed %d step %d: committed fell", seed, step)
			}
		}
		// Replaying the receipts' events in a fresh ledger is not possible
		// without the log; Rebuild checks the exported state instead.
		snap := Ledger{GuaranteeID: l.GuaranteeID, Resource: l.Resource, DefinitionDigest: l.DefinitionDigest, Limit: l.Limit,
			Committed: l.Committed, Held: l.Held, Receipts: l.Receipts, Tombstones: l.Tombstones, Archived: l.Archived}
		if err := snap.Rebuild(); err != nil {
			t.Fatalf("seed %d: snapshot does not rebuild: %v", seed, err)
		}
	}
}

func releasesByRule(evs []Event) bool {
	for _, ev := range evs {
		switch e := ev.(type) {
		case ExposureClosed, ExposureAbsenceAsserted:
			return true
		case ExposureObserved:
			if e.Outcome == OutcomeNotApplied {
				return true
			}
		}
	}
	return false
}

// TestLedgerLog folds the decided events of a random run into a second
// ledger and checks that the fold of the log equals the incremental state.
func TestLedgerLog(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	var live, replay Ledger
	for i := 0; i < 5000; i++ {
		a := fmt.Sprintf("a%d", rng.Intn(500))
		var cmd Command
		switch rng.Intn(4) {
		case 0:
			cmd = Reserve{GuaranteeID: "g", Resource: "r", AttemptID: a, OperationID: a, Amount: int64(1 + rng.Intn(50)), Limit: 10000, DefinitionDigest: "d"}
		case 1:
			cmd = StartDispatch{AttemptID: a}
		case 2:
			cmd = Observe{AttemptID: a, Outcome: []Outcome{OutcomeApplied, OutcomeNotApplied, OutcomePending}[rng.Intn(3)], Source: "p"}
		case 3:
			cmd = Close{AttemptID: a, Reason: "r"}
		}
		for _, ev := range DecideExposure(&live, cmd).Events {
			if err := live.Apply(ev); err != nil {
				t.Fatal(err)
			}
			if err := replay.Apply(ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	if live.Balance() != replay.Balance() || len(live.Receipts) != len(replay.Receipts) {
		t.Fatalf("replay %+v differs from live %+v", replay.Balance(), live.Balance())
	}
}

func TestApplyRefusesForeignEvents(t *testing.T) {
	var l Ledger
	cases := []Event{
		ExposureDispatchStarted{AttemptID: "x"},
		ExposureObserved{AttemptID: "x", Outcome: OutcomeApplied},
		ExposureReserved{AttemptID: "x", Amount: 10, Limit: 5, GuaranteeID: "g", Resource: "r", DefinitionDigest: "d"},
		GuaranteePinned{},
	}
	for _, ev := range cases {
		if err := l.Apply(ev); err == nil {
			t.Errorf("Apply(%T) accepted an event that does not fit", ev)
		}
	}
	if l.Balance() != (Balance{}) {
		t.Fatalf("refused events changed the ledger: %+v", l.Balance())
	}
}

// TestReserveStartedIsReserveThenStart: over random ledgers (reservations
// of all kinds, starts, observations, closes, absence assertions), the one
// decision ReserveStarted is exactly Reserve then StartDispatch decided one
// after the other: the same events in the same order, or the same refusal
// (the reservation's, or the start's when the reservation decided nothing).
func TestReserveStartedIsReserveThenStart(t *testing.T) {
	outcomes := []Outcome{OutcomeApplied, OutcomeNotApplied, OutcomePending, OutcomeUnknown}
	compared := map[string]int{}
	for seed := int64(1); seed <= 100; seed++ {
		rng := rand.New(rand.NewSource(seed))
		var l Ledger
		limit := int64(1 + rng.Intn(3000))
		attempt := func() string { return fmt.Sprintf("a%d", rng.Intn(40)) }
		reserve := func() Reserve {
			return Reserve{GuaranteeID: "g", Resource: "r", AttemptID: attempt(), OperationID: fmt.Sprintf("o%d", rng.Intn(20)),
				Amount: int64(rng.Intn(900)) - 5, Limit: limit, DefinitionDigest: []string{"d", "d", "d", "other"}[rng.Intn(4)]}
		}
		for step := 0; step < 300; step++ {
			r := reserve()
			if n := len(l.Receipts); n > 0 && rng.Intn(3) == 0 {
				// The exact reservation of a receipt again (a retry).
				rc := l.Receipts[rng.Intn(n)]
				r.AttemptID, r.OperationID, r.Amount, r.DefinitionDigest = rc.AttemptID, rc.OperationID, rc.Amount, "d"
			}
			got := DecideExposure(&l, ReserveStarted{r})
			want := DecideExposure(&l, r)
			kind := "refused"
			if want.Refusal == nil {
				c := l.Clone()
				for _, ev := range want.Events {
					if err := c.Apply(ev); err != nil {
						t.Fatal(err)
					}
				}
				start := DecideExposure(c, StartDispatch{AttemptID: r.AttemptID})
				if start.Refusal != nil {
					want = start
					kind = "start refused"
				} else {
					want.Events = append(want.Events, start.Events...)
					kind = fmt.Sprint(len(want.Events), " events")
				}
			}
			compared[kind]++
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("seed %d step %d: ReserveStarted %+v\nReserve then StartDispatch %+v", seed, step, got, want)
			}
			// Move the ledger on with a random command.
			for _, ev := range DecideExposure(&l, randomCommand(rng, 1, reserve, attempt, outcomes)).Events {
				if err := l.Apply(ev); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	// Every branch was compared, not only refusals.
	for _, k := range []string{"refused", "start refused", "2 events", "1 events", "0 events"} {
		if compared[k] == 0 {
			t.Fatalf("no case of %q among %v", k, compared)
		}
	}
}

// randomCommand picks a reservation (reserveWeight chances in
// reserveWeight+4) or a start, an observation, a close or an absence
// assertion of a random attempt.
func randomCommand(rng *rand.Rand, reserveWeight int, reserve func() Reserve, attempt func() string, outcomes []Outcome) Command {
	n := rng.Intn(reserveWeight + 4)
	if n < reserveWeight {
		return reserve()
	}
	switch n - reserveWeight {
	case 0:
		return StartDispatch{AttemptID: attempt()}
	case 1:
		return Observe{AttemptID: attempt(), Outcome: outcomes[rng.Intn(len(outcomes))], Source: "provider"}
	case 2:
		return Close{AttemptID: attempt(), Reason: "test"}
	default:
		return AssertAbsence{AttemptID: attempt(), Operator: "op", ArtifactRef: "ref"}
	}
}
