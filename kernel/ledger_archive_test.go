package kernel

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the scenarios' time zones, whatever the machine has

	"github.com/cockroachdb/datadriven"
	"github.com/contextos/ledger/wire"
)

// ceilingScenario holds the ledgers of guarantees over resources, and the
// guarantees' pins when a script pins them.
type ceilingScenario struct {
	ledgers map[string]*Ledger // guarantee/resource
	limits  map[string]int64
	pins    map[string]*Pin
	ctl     Control
	history map[string][]Event
	window  map[string]string // guarantee/attempt -> the calendar window it reserved in
	order   []string
	next    int
}

func (h *ceilingScenario) ledger(id, resource string) *Ledger {
	k := id + "/" + resource
	if h.ledgers[k] == nil {
		h.ledgers[k] = &Ledger{}
	}
	return h.ledgers[k]
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
		h.order = append(h.order, id)
		return "ok\n"
	case "pin":
		id := arg("id", "")
		def := Definition{ID: id, CapabilityIDs: []string{"adp_payments.issue_refund"}, ResourcePointer: "/order_id",
			AmountPointer: "/amount_minor", Limit: num("limit", 0), Unit: "INR_minor", Mode: arg("mode", ""),
			Window: arg("window", ""), TimeZone: arg("time_zone", ""), Duration: arg("duration", "")}
		if h.pins == nil {
			h.pins, h.history = map[string]*Pin{}, map[string][]Event{}
		}
		if h.limits == nil {
			h.limits = map[string]int64{}
		}
		p := h.pins[id]
		if p == nil {
			p = &Pin{}
			h.pins[id] = p
			h.order = append(h.order, id)
		}
		dec := DecidePin(p, "acme", def)
		for _, ev := range dec.Events {
			if err := p.Apply(ev); err != nil {
				d.Fatalf(t, "apply pin: %v", err)
			}
			h.history[id] = append(h.history[id], ev)
		}
		h.limits[id] = def.Limit
		out := render(dec, nil)
		if drift := h.ctl.Drift(p, def); drift != "" {
			out += "drift: configured " + drift + "\n"
		}
		return out
	case "set-limit", "set-mode":
		id := arg("id", "")
		p := h.pins[id]
		if p == nil {
			p = &Pin{}
		}
		dec := DecideRedefine(RedefineState{Pin: p, Control: &h.ctl}, Redefine{GuaranteeID: id, Resource: arg("resource", ""), Limit: num("limit", 0), Mode: arg("mode", ""),
			Operator: arg("operator", "op_alice"), Reason: arg("reason", ""), Now: scenarioTime(t, d, arg("at", "2026-12-01T09:00:00Z"))})
		for _, ev := range dec.Events {
			if err := h.ctl.Apply(ev); err != nil {
				d.Fatalf(t, "apply redefinition: %v", err)
			}
			h.history[id] = append(h.history[id], ev)
		}
		return render(dec, nil)
	case "history":
		id := arg("id", "")
		var b strings.Builder
		for i, ev := range h.history[id] {
			switch e := ev.(type) {
			case GuaranteePinned:
				fmt.Fprintf(&b, "v%d pinned limit=%d mode=%s\n", i+1, e.Definition.Limit, modeOr(e.Definition.Mode))
			case GuaranteeRedefined:
				fmt.Fprintf(&b, "v%d %s by %s: %q", e.Version, e.At, e.Operator, e.Reason)
				if e.Resource != "" {
					fmt.Fprintf(&b, " resource=%s", e.Resource)
				}
				if e.Limit != 0 {
					fmt.Fprintf(&b, " limit=%d", e.Limit)
				}
				if e.Mode != "" {
					fmt.Fprintf(&b, " mode=%s", e.Mode)
				}
				b.WriteString("\n")
			}
		}
		return b.String()
	case "churn":
		// n operations of amount each, one after the other, every one
		// reserved, started and settled by the outcomes in turn.
		id := arg("guarantee", h.order[0])
		l := h.ledger(id, "ord_881")
		outcomes := strings.Split(arg("outcomes", "applied"), ",")
		n := int(num("n", 1))
		refused := map[wire.Code]int{}
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
		l := h.ledger(id, "ord_881")
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
	case "settle":
		// One attempt's report, on the ledger the attempt reserved in.
		att := arg("attempt", "")
		now := scenarioTime(t, d, arg("at", "2026-12-01T09:00:00Z"))
		res := arg("resource", "ord_881")
		var b strings.Builder
		for _, id := range h.order {
			l := h.ledger(id, windowKey(res, h.window[id+"/"+att]))
			dec := DecideExposure(l, Observe{AttemptID: att, Outcome: Outcome(arg("outcome", "applied")), Source: "reconcile", Now: now})
			apply(l, dec)
			b.WriteString(render(dec, nil))
		}
		return b.String() + h.showAll(res, now)
	case "balance":
		return h.showAll(arg("resource", "ord_881"), scenarioTime(t, d, arg("at", "2026-12-01T09:00:00Z")))
	case "settle-open":
		id := arg("guarantee", h.order[0])
		l := h.ledger(id, arg("resource", "ord_881"))
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
		// With pins, the binding ProposeStep makes: the latest
		// version's limit and mode.
		att := fmt.Sprintf("att_%d", h.next)
		h.next++
		res := arg("resource", "ord_881")
		now := scenarioTime(t, d, arg("at", "2026-12-01T09:00:00Z"))
		var decs []Decision
		var over []string
		var keys []string // the ledger of each guarantee
		for _, id := range h.order {
			hold := Hold{GuaranteeID: id, DefinitionDigest: "d", Resource: res, Amount: num("amount", 1), Limit: h.limits[id]}
			if p := h.pins[id]; p != nil {
				hold = h.ctl.Bind(p.PinnedHold(res, hold.Amount))
				hold.DefinitionDigest = "d"
				if p.Definition.Calendar() {
					hold.Window = p.Definition.WindowAt(scenarioZone(t, d, p.Definition.TimeZone), now).Key
				}
			}
			keys = append(keys, windowKey(res, hold.Window))
			h.window[id+"/"+att] = hold.Window
			dec := DecideExposure(h.ledger(id, keys[len(keys)-1]), ReserveStarted{Reserve{GuaranteeID: id, Resource: res, AttemptID: att,
				OperationID: "op_" + att, Amount: hold.Amount, Limit: hold.Limit, DefinitionDigest: "d", Observe: hold.Observe,
				Window: hold.Window, Rolling: hold.Rolling, Now: now}})
			if dec.Refusal != nil {
				return fmt.Sprintf("refused %s: %s\n", dec.Refusal.Code, dec.Refusal.Reason) + h.showAll(res, now)
			}
			if e, ok := dec.Events[0].(ExposureReserved); ok && e.OverLimit {
				over = append(over, id)
			}
			decs = append(decs, dec)
		}
		for i, id := range h.order {
			apply(h.ledger(id, keys[i]), decs[i])
		}
		if o := arg("outcome", ""); o != "" {
			for i, id := range h.order {
				l := h.ledger(id, keys[i])
				apply(l, DecideExposure(l, Observe{AttemptID: att, Outcome: Outcome(o), Source: "provider", Now: now}))
			}
		}
		out := "reserved " + att + "\n"
		for _, id := range over {
			out += id + ": over the limit, recorded (observe mode)\n"
		}
		return out + h.showAll(res, now)
	case "observe":
		id := arg("guarantee", h.order[0])
		l := h.ledger(id, "ord_881")
		dec := DecideExposure(l, Observe{AttemptID: arg("attempt", ""), Outcome: Outcome(arg("outcome", "")), Source: arg("source", "reconcile")})
		apply(l, dec)
		out := render(dec, nil)
		return out + h.show(id)
	}
	d.Fatalf(t, "unknown command %s", d.Cmd)
	return ""
}

func (h *ceilingScenario) show(id string) string {
	l := h.ledger(id, "ord_881")
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

func (h *ceilingScenario) showAll(resource string, now time.Time) string {
	var b strings.Builder
	for _, id := range h.order {
		l := h.ledger(id, resource)
		p := h.pins[id]
		if p != nil && p.Definition.Calendar() {
			w := p.Definition.WindowAt(scenarioZone(nil, nil, p.Definition.TimeZone), now)
			l = h.ledger(id, windowKey(resource, w.Key))
			fmt.Fprintf(&b, "%s window %s until %s: ", id, w.Key, w.End.Format(time.RFC3339))
		}
		bal := l.Balance()
		if p != nil {
			bal = l.BalanceUnder(h.ctl.LimitFor(p, resource))
		}
		if l.Rolling > 0 {
			bal = bal.withCommitted(l.CommittedAt(now))
		}
		fmt.Fprintf(&b, "%s %s", id, renderBalance(bal))
		if at, amt, ok := l.NextReturn(now); ok {
			fmt.Fprintf(&b, "%s returns %d at %s\n", id, amt, at.Format(time.RFC3339))
		}
		if l.OverLimit > 0 {
			fmt.Fprintf(&b, "%s over_limit=%d\n", id, l.OverLimit)
		}
	}
	return b.String()
}

// windowKey is the harness's ledger key of a resource in a window.
func windowKey(resource, window string) string {
	if window == "" {
		return resource
	}
	return resource + "@" + window
}

func scenarioZone(t *testing.T, d *datadriven.TestData, name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		if d != nil {
			d.Fatalf(t, "time zone %q: %v", name, err)
		}
		panic(err)
	}
	return loc
}

func scenarioTime(t *testing.T, d *datadriven.TestData, s string) time.Time {
	at, err := time.Parse(time.RFC3339, s)
	if err != nil {
		d.Fatalf(t, "bad time %q: %v", s, err)
	}
	return at
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
		checkSnapshotReplay(t, seed, log, &full, rng.Intn(len(log)))
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

// TestDefinitionChangesKeepTheCeiling drives random reservations, settles
// and operator redefinitions (limits up and down, per-resource overrides,
// observe and enforce) and checks that every reservation made in enforce
// mode fits the latest version's limit, that a definition change never
// moves a balance, and that only observe mode marks a reservation over the
// limit.
func TestDefinitionChangesKeepTheCeiling(t *testing.T) {
	outcomes := []Outcome{OutcomeApplied, OutcomeNotApplied, OutcomePending}
	for seed := int64(1); seed <= 100; seed++ {
		rng := rand.New(rand.NewSource(seed))
		def := Definition{ID: "g", CapabilityIDs: []string{"c"}, ResourcePointer: "/r", AmountPointer: "/a", Limit: int64(100 + rng.Intn(900)), Unit: "u"}
		var pin Pin
		var ctl Control
		for _, ev := range DecidePin(&pin, "t", def).Events {
			if err := pin.Apply(ev); err != nil {
				t.Fatal(err)
			}
		}
		ledgers := map[string]*Ledger{"r1": {}, "r2": {}}
		var open []struct{ res, att string }
		for step := 0; step < 300; step++ {
			switch k := rng.Intn(10); {
			case k < 2:
				before := map[string]Balance{"r1": ledgers["r1"].Balance(), "r2": ledgers["r2"].Balance()}
				c := Redefine{GuaranteeID: "g", Limit: int64(1 + rng.Intn(1000)), Operator: "op", Reason: "r", Now: time.Unix(int64(step), 0)}
				switch rng.Intn(3) {
				case 0:
					c.Resource = []string{"r1", "r2"}[rng.Intn(2)]
				case 1:
					c.Mode = []string{ModeEnforce, ModeObserve}[rng.Intn(2)]
					c.Limit = 0
				}
				for _, ev := range DecideRedefine(RedefineState{Pin: &pin, Control: &ctl}, c).Events {
					if err := ctl.Apply(ev); err != nil {
						t.Fatalf("seed %d step %d: %v", seed, step, err)
					}
				}
				for r, l := range ledgers {
					if l.Balance() != before[r] {
						t.Fatalf("seed %d step %d: a definition change moved %s's balance", seed, step, r)
					}
				}
			case k < 6:
				res := []string{"r1", "r2"}[rng.Intn(2)]
				l := ledgers[res]
				att := fmt.Sprintf("a%d", step)
				h := ctl.Bind(pin.PinnedHold(res, int64(1+rng.Intn(300))))
				dec := DecideExposure(l, ReserveStarted{Reserve{GuaranteeID: "g", Resource: res, AttemptID: att, OperationID: "o" + att,
					Amount: h.Amount, Limit: h.Limit, DefinitionDigest: "d", Observe: h.Observe}})
				if dec.Refusal != nil {
					continue
				}
				e := dec.Events[0].(ExposureReserved)
				if e.OverLimit && !h.Observe {
					t.Fatalf("seed %d step %d: over the limit in enforce mode", seed, step)
				}
				for _, ev := range dec.Events {
					if err := l.Apply(ev); err != nil {
						t.Fatalf("seed %d step %d: %v", seed, step, err)
					}
				}
				if !h.Observe && l.Committed+l.Held > h.Limit {
					t.Fatalf("seed %d step %d: %d + %d > limit %d in enforce mode", seed, step, l.Committed, l.Held, h.Limit)
				}
				open = append(open, struct{ res, att string }{res, att})
			default:
				if len(open) == 0 {
					continue
				}
				i := rng.Intn(len(open))
				o := open[i]
				l := ledgers[o.res]
				out := outcomes[rng.Intn(len(outcomes))]
				for _, ev := range DecideExposure(l, Observe{AttemptID: o.att, Outcome: out, Source: "p"}).Events {
					if err := l.Apply(ev); err != nil {
						t.Fatalf("seed %d step %d: %v", seed, step, err)
					}
				}
				if out.Definitive() {
					open = append(open[:i], open[i+1:]...)
				}
			}
			for _, l := range ledgers {
				checkInvariants(t, l)
			}
		}
	}
}

// TestRollingWindowProperties drives random reservations and reports over
// a rolling window with time moving forward at random steps, and checks
// against a naive recount: what the ledger counts as committed at a
// decision time is never less than what was committed within the duration
// before it (an effect never leaves early), every enforced reservation fits
// the limit that way, and a snapshot plus the tail equals the full fold.
func TestRollingWindowProperties(t *testing.T) {
	const dur = 24 * 3600
	for seed := int64(1); seed <= 60; seed++ {
		rng := rand.New(rand.NewSource(seed))
		var l Ledger
		var log []Event
		type commit struct{ at, amount int64 }
		var commits []commit
		open := map[string]int64{}
		var order []string
		now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
		limit := int64(1000 + rng.Intn(5000))
		for step := 0; step < 400; step++ {
			now = now.Add(time.Duration(rng.Intn(4*3600)) * time.Second)
			var dec Decision
			if len(order) > 0 && rng.Intn(2) == 0 {
				i := rng.Intn(len(order))
				att := order[i]
				out := []Outcome{OutcomeApplied, OutcomeNotApplied, OutcomePending}[rng.Intn(3)]
				dec = DecideExposure(&l, Observe{AttemptID: att, Outcome: out, Source: "p", Now: now})
				if dec.Refusal == nil && out.Definitive() {
					if out == OutcomeApplied {
						commits = append(commits, commit{now.Unix(), open[att]})
					}
					delete(open, att)
					order = append(order[:i], order[i+1:]...)
				}
			} else {
				att := fmt.Sprintf("a%d", step)
				amt := int64(1 + rng.Intn(800))
				dec = DecideExposure(&l, ReserveStarted{Reserve{GuaranteeID: "g", Resource: "r", AttemptID: att, OperationID: "o" + att,
					Amount: amt, Limit: limit, DefinitionDigest: "d", Rolling: dur, Now: now}})
				if dec.Refusal == nil {
					open[att] = amt
					order = append(order, att)
				}
			}
			for _, ev := range dec.Events {
				if err := l.Apply(ev); err != nil {
					t.Fatalf("seed %d step %d: %v", seed, step, err)
				}
				log = append(log, ev)
			}
			checkInvariants(t, &l)
			var naive int64
			for _, c := range commits {
				if c.at > now.Unix()-dur {
					naive += c.amount
				}
			}
			if got := l.CommittedAt(now); got < naive {
				t.Fatalf("seed %d step %d: the window counts %d committed, %d were committed within its duration", seed, step, got, naive)
			}
			if l.CommittedAt(now)+l.Held > limit {
				t.Fatalf("seed %d step %d: %d + %d > %d", seed, step, l.CommittedAt(now), l.Held, limit)
			}
			if len(l.Buckets) > RollingBuckets+1 {
				t.Fatalf("seed %d step %d: %d buckets", seed, step, len(l.Buckets))
			}
		}
		checkSnapshotReplay(t, seed, log, &l, rng.Intn(len(log)+1))
	}
}

// checkSnapshotReplay folds log[:cut], takes a snapshot of it (JSON, then
// Rebuild), folds the rest on the snapshot and wants exactly full.
func checkSnapshotReplay(t *testing.T, seed int64, log []Event, full *Ledger, cut int) {
	t.Helper()
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
	want, _ := json.Marshal(full)
	got, _ := json.Marshal(&resumed)
	if string(want) != string(got) {
		t.Fatalf("seed %d: snapshot plus tail differs from the full fold", seed)
	}
}
