package kernel

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestCeilingScenarios replays the scripts in testdata/ceilings: long-lived
// ledgers and several ceilings on one call. Regenerate with
// go test ./kernel -run TestCeilingScenarios -rewrite
func TestCeilingScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata/ceilings", func(t *testing.T, path string) {
		h := &ceilingScenario{ledgers: map[string]*Ledger{}, next: 1}
		datadriven.RunTest(t, path, h.run)
	})
}

// ceilingScenario holds one ledger per guarantee of a single resource.
type ceilingScenario struct {
	ledgers map[string]*Ledger
	limits  map[string]int64
	order   []string
	next    int
}

func (h *ceilingScenario) run(t *testing.T, d *datadriven.TestData) string {
	arg := func(key, def string) string {
		for _, a := range d.CmdArgs {
			if a.Key == key && len(a.Vals) > 0 {
				return strings.Join(a.Vals, ",")
			}
		}
		return def
	}
	num := func(key string, def int64) int64 {
		n, err := strconv.ParseInt(arg(key, strconv.FormatInt(def, 10)), 10, 64)
		if err != nil {
			d.Fatalf(t, "bad %s: %v", key, err)
		}
		return n
	}
	apply := func(l *Ledger, dec Decision) {
		for _, ev := range dec.Events {
			if err := l.Apply(ev); err != nil {
				d.Fatalf(t, "apply %s: %v", ev.EventType(), err)
			}
		}
		checkInvariants(t, l)
	}
	switch d.Cmd {
	case "guarantee":
		id := arg("id", "")
		if h.limits == nil {
			h.limits = map[string]int64{}
		}
		h.limits[id] = num("limit", 0)
		h.ledgers[id] = &Ledger{}
		h.order = append(h.order, id)
		return "ok\n"
	case "churn":
		// n operations of amount each, one after the other, every one
		// reserved, started and settled by the outcomes in turn.
		id := arg("guarantee", h.order[0])
		l := h.ledgers[id]
		outcomes := strings.Split(arg("outcomes", "applied"), ",")
		n := int(num("n", 1))
		refused := map[Code]int{}
		for i := 0; i < n; i++ {
			att := fmt.Sprintf("att_%d", h.next)
			h.next++
			dec := DecideExposure(l, ReserveStarted{Reserve{GuaranteeID: id, Resource: "ord_881", AttemptID: att,
				OperationID: "op_" + att, Amount: num("amount", 1), Limit: h.limits[id], DefinitionDigest: "d"}})
			if dec.Refusal != nil {
				refused[dec.Refusal.Code]++
				continue
			}
			apply(l, dec)
			apply(l, DecideExposure(l, Observe{AttemptID: att, Outcome: Outcome(outcomes[i%len(outcomes)]), Source: "provider"}))
		}
		var b strings.Builder
		for code, c := range refused {
			fmt.Fprintf(&b, "refused %s x%d\n", code, c)
		}
		return b.String() + h.show(id)
	case "hold":
		// n operations reserved and started but not settled.
		id := arg("guarantee", h.order[0])
		l := h.ledgers[id]
		var last Decision
		for i := 0; i < int(num("n", 1)); i++ {
			att := fmt.Sprintf("att_%d", h.next)
			h.next++
			last = DecideExposure(l, ReserveStarted{Reserve{GuaranteeID: id, Resource: "ord_881", AttemptID: att,
				OperationID: "op_" + att, Amount: num("amount", 1), Limit: h.limits[id], DefinitionDigest: "d"}})
			if last.Refusal != nil {
				return fmt.Sprintf("after %d holds: refused %s: %s\n", i, last.Refusal.Code, last.Refusal.Reason) + h.show(id)
			}
			apply(l, last)
		}
		return h.show(id)
	case "settle-open":
		id := arg("guarantee", h.order[0])
		l := h.ledgers[id]
		var open []string
		for _, r := range l.Receipts {
			if r.State.Open() {
				open = append(open, r.AttemptID)
			}
		}
		for _, att := range open {
			apply(l, DecideExposure(l, Observe{AttemptID: att, Outcome: Outcome(arg("outcome", "applied")), Source: "reconcile"}))
		}
		return h.show(id)
	case "reserve-all":
		// One call covered by every guarantee: reserve on all of them or
		// on none, as the gateway's atomic append does; the first refusal
		// names its ceiling.
		att := fmt.Sprintf("att_%d", h.next)
		h.next++
		var decs []Decision
		for _, id := range h.order {
			dec := DecideExposure(h.ledgers[id], ReserveStarted{Reserve{GuaranteeID: id, Resource: "ord_881", AttemptID: att,
				OperationID: "op_" + att, Amount: num("amount", 1), Limit: h.limits[id], DefinitionDigest: "d"}})
			if dec.Refusal != nil {
				return fmt.Sprintf("refused %s: %s\n", dec.Refusal.Code, dec.Refusal.Reason) + h.showAll()
			}
			decs = append(decs, dec)
		}
		for i, id := range h.order {
			apply(h.ledgers[id], decs[i])
		}
		if o := arg("outcome", ""); o != "" {
			for _, id := range h.order {
				l := h.ledgers[id]
				apply(l, DecideExposure(l, Observe{AttemptID: att, Outcome: Outcome(o), Source: "provider"}))
			}
		}
		return "reserved " + att + "\n" + h.showAll()
	case "observe":
		id := arg("guarantee", h.order[0])
		l := h.ledgers[id]
		dec := DecideExposure(l, Observe{AttemptID: arg("attempt", ""), Outcome: Outcome(arg("outcome", "")), Source: arg("source", "reconcile")})
		apply(l, dec)
		out := render(dec, nil)
		return out + h.show(id)
	}
	d.Fatalf(t, "unknown command %s", d.Cmd)
	return ""
}

func (h *ceilingScenario) show(id string) string {
	l := h.ledgers[id]
	snap, err := json.Marshal(l)
	if err != nil {
		panic(err)
	}
	// The snapshot must decode and rebuild to the same balances.
	var back Ledger
	if err := json.Unmarshal(snap, &back); err != nil {
		panic(err)
	}
	if err := back.Rebuild(); err != nil {
		panic(err)
	}
	if back.Balance() != l.Balance() {
		panic("snapshot balance differs")
	}
	a := l.Archived
	return fmt.Sprintf("%s: receipts=%d open=%d archived committed=%d (amount %d) released=%d snapshot<=%dKiB\n%s",
		id, len(l.Receipts), l.OpenReceipts(), a.Committed, a.CommittedAmount, a.Released, (len(snap)+1023)/1024,
		renderBalance(l.Balance()))
}

func (h *ceilingScenario) showAll() string {
	var b strings.Builder
	for _, id := range h.order {
		l := h.ledgers[id]
		fmt.Fprintf(&b, "%s %s", id, renderBalance(l.Balance()))
	}
	return b.String()
}

// TestArchivedLedgerReplays checks the optimized fold against the naive
// one: for random long histories, a snapshot taken at any point plus the
// tail of events reaches exactly the state of one fold of every event, and
// the balances equal the sums over receipts and archive.
func TestArchivedLedgerReplays(t *testing.T) {
	outcomes := []Outcome{OutcomeApplied, OutcomeNotApplied, OutcomePending, OutcomeUnknown}
	for seed := int64(1); seed <= 6; seed++ {
		rng := rand.New(rand.NewSource(seed))
		var full Ledger
		var log []Event
		var open []string
		limit := int64(1 << 40)
		for i := 0; i < 5000; i++ {
			var dec Decision
			if len(open) > 0 && rng.Intn(3) > 0 {
				k := rng.Intn(len(open))
				dec = DecideExposure(&full, Observe{AttemptID: open[k], Outcome: outcomes[rng.Intn(len(outcomes))], Source: "p"})
				if dec.Refusal == nil {
					if r, _ := previewReceipt(&full, dec, open[k]); !r.Open() {
						open = append(open[:k], open[k+1:]...)
					}
				}
			} else {
				att := fmt.Sprintf("a%d", i)
				dec = DecideExposure(&full, ReserveStarted{Reserve{GuaranteeID: "g", Resource: "r", AttemptID: att, OperationID: "o" + att,
					Amount: int64(1 + rng.Intn(100)), Limit: limit, DefinitionDigest: "d"}})
				if dec.Refusal == nil {
					open = append(open, att)
				}
			}
			for _, ev := range dec.Events {
				if err := full.Apply(ev); err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
				log = append(log, ev)
			}
			checkInvariants(t, &full)
			if len(full.Receipts) > MaxListed {
				t.Fatalf("seed %d: %d receipts listed", seed, len(full.Receipts))
			}
		}
		cut := rng.Intn(len(log))
		var head Ledger
		for _, ev := range log[:cut] {
			if err := head.Apply(ev); err != nil {
				t.Fatal(err)
			}
		}
		b, _ := json.Marshal(&head)
		var resumed Ledger
		if err := json.Unmarshal(b, &resumed); err != nil {
			t.Fatal(err)
		}
		if err := resumed.Rebuild(); err != nil {
			t.Fatalf("seed %d: snapshot does not rebuild: %v", seed, err)
		}
		for _, ev := range log[cut:] {
			if err := resumed.Apply(ev); err != nil {
				t.Fatalf("seed %d: tail after snapshot: %v", seed, err)
			}
		}
		want, _ := json.Marshal(&full)
		got, _ := json.Marshal(&resumed)
		if string(want) != string(got) {
			t.Fatalf("seed %d: snapshot plus tail differs from the full fold", seed)
		}
	}
}

// previewReceipt is the state of attempt's receipt once dec applies.
func previewReceipt(l *Ledger, dec Decision, attempt string) (ReceiptState, bool) {
	c := l.Clone()
	for _, ev := range dec.Events {
		_ = c.Apply(ev)
	}
	r, ok := c.Receipt(attempt)
	return r.State, ok
}
