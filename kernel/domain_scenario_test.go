package kernel

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// TestDomainScenarios replays the scripts in testdata/domain: the
// enforcement domain of one tenant (pins enrolled on the control subject,
// the configuration checked against them, proposals refused when they leave
// the domain) and replacements that carry exposure forward, on the kernel's
// steps alone. Regenerate the expected output with:
//
//	go test ./kernel -run TestDomainScenarios -rewrite
func TestDomainScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata/domain", func(t *testing.T, path string) {
		w := &domainWorld{pins: map[string]*Pin{}, ledgers: map[LedgerKey]*Ledger{}, ops: map[string]*Operation{}, holds: map[string][]Hold{},
			now: time.Date(2026, 10, 26, 9, 0, 0, 0, time.UTC)}
		datadriven.RunTest(t, path, w.run)
	})
}

// domainWorld is one tenant's pins, control subject, ledgers and operations.
type domainWorld struct {
	pins    map[string]*Pin
	control Control
	ledgers map[LedgerKey]*Ledger
	ops     map[string]*Operation
	holds   map[string][]Hold
	n       int
	now     time.Time
}

func (w *domainWorld) ledger(k LedgerKey) *Ledger {
	if w.ledgers[k] == nil {
		w.ledgers[k] = &Ledger{}
	}
	return w.ledgers[k]
}

func list(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func (w *domainWorld) run(t *testing.T, d *datadriven.TestData) string {
	arg := func(key, def string) string {
		for _, a := range d.CmdArgs {
			if a.Key == key {
				if len(a.Vals) == 0 {
					return ""
				}
				return a.Vals[0]
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
	// def is a guarantee as a configuration defines it: the order's refund
	// ceiling unless the command says otherwise.
	def := func(id string) Definition {
		return Definition{ID: id, CapabilityIDs: list(arg("caps", "adp_payments.issue_refund")), ResourcePointer: "/order_id",
			AmountPointer: "/amount_minor", Limit: num("limit", 100000), Unit: arg("unit", "INR_minor"), Window: arg("window", ""),
			Replaces: arg("replaces", "")}
	}
	var out strings.Builder
	apply := func(label string, st interface{ Apply(Event) error }, evs []Event) {
		if len(evs) == 0 {
			return
		}
		types := make([]string, len(evs))
		for i, ev := range evs {
			if err := st.Apply(ev); err != nil {
				d.Fatalf(t, "%s: %s does not fold: %v", label, ev.EventType(), err)
			}
			types[i] = ev.EventType()
		}
		fmt.Fprintf(&out, "%s: %s\n", label, strings.Join(types, ", "))
	}
	refused := func(r *Refusal) {
		if r != nil {
			fmt.Fprintf(&out, "refused %s: %s\n", r.Code, r.Reason)
		}
	}
	pin := func(id string) *Pin {
		if w.pins[id] == nil {
			w.pins[id] = &Pin{}
		}
		return w.pins[id]
	}
	switch d.Cmd {
	case "pin":
		// A runtime of this version pins a configured guarantee.
		id := arg("id", "")
		dec := DecideEnroll(PinState{Pin: pin(id), Control: &w.control}, "acme", def(id))
		apply("pin "+id, pin(id), dec.Pin)
		apply("control", &w.control, dec.Control)
		refused(dec.Refusal)
		if len(dec.Pin)+len(dec.Control) == 0 && dec.Refusal == nil {
			out.WriteString("no-op\n")
		}
	case "pin-unenrolled":
		// A pin made before enrollment existed: the pin subject only.
		id := arg("id", "")
		dec := DecidePin(pin(id), "acme", def(id))
		apply("pin "+id, pin(id), dec.Events)
		refused(dec.Refusal)
	case "backfill":
		id := arg("id", "")
		dec := DecideBackfill(PinState{Pin: pin(id), Control: &w.control})
		apply("control", &w.control, dec.Control)
		if len(dec.Control) == 0 {
			out.WriteString("no-op\n")
		}
	case "domain":
		ids := make([]string, 0, len(w.control.Domain))
		for id := range w.control.Domain {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			p := w.control.Domain[id]
			fmt.Fprintf(&out, "%s governs %s", id, strings.Join(p.Definition.CapabilityIDs, ","))
			if r := w.control.Replaced(id); len(r) > 0 {
				fmt.Fprintf(&out, ", replaces %s", strings.Join(r, " then "))
			}
			out.WriteString("\n")
		}
	case "configured":
		// A replica's configuration checked against the domain at boot.
		// Each line of the input is one [[guarantees]] table: id and
		// key=value pairs.
		var defs []Definition
		for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
			f := strings.Fields(line)
			if len(f) == 0 {
				continue
			}
			dd := Definition{ID: f[0], CapabilityIDs: []string{"adp_payments.issue_refund"}, ResourcePointer: "/order_id",
				AmountPointer: "/amount_minor", Limit: 100000, Unit: "INR_minor"}
			for _, kv := range f[1:] {
				k, v, _ := strings.Cut(kv, "=")
				switch k {
				case "caps":
					dd.CapabilityIDs = list(v)
				case "replaces":
					dd.Replaces = v
				case "unit":
					dd.Unit = v
				default:
					d.Fatalf(t, "unknown key %s", k)
				}
			}
			defs = append(defs, dd)
		}
		surfaced := list(arg("surfaced", "adp_payments.issue_refund,crm.lookup,adp_payments.issue_credit"))
		r := w.control.CheckConfigured(defs, func(c string) bool { return slices.Contains(surfaced, c) })
		if r == nil {
			out.WriteString("ok\n")
		}
		refused(r)
	case "propose":
		key, order, amount := arg("key", ""), arg("order", "ord_881"), num("amount", 0)
		capability := arg("cap", "adp_payments.issue_refund")
		w.n++
		attempt := fmt.Sprintf("att_%d", w.n)
		var holds []Hold
		var ledgers []*Ledger
		for _, id := range list(arg("holds", "")) {
			p := pin(id)
			if !p.Pinned() {
				d.Fatalf(t, "hold of %s, which is not pinned", id)
			}
			holds = append(holds, p.PinnedHold(order, amount))
			ledgers = append(ledgers, w.ledger(LedgerKey{GuaranteeID: id, Resource: order}))
		}
		// The runtime reads the ledgers of the guarantees the held ones
		// replace, unless told it did not (unread=).
		replaced := map[LedgerKey]*Ledger{}
		unread := list(arg("unread", ""))
		for _, h := range holds {
			for _, r := range w.control.Replaced(h.GuaranteeID) {
				k := LedgerKey{GuaranteeID: r, Resource: order}
				if !slices.Contains(unread, r) {
					replaced[k] = w.ledger(k)
				}
			}
		}
		if w.ops[key] == nil {
			w.ops[key] = &Operation{}
		}
		st := ProposalState{Op: w.ops[key], Ledgers: ledgers, Run: &Run{}, Control: &w.control, Replaced: replaced}
		dec := DecidePropose(st, Propose{
			Opened: OperationOpened{OperationID: "op_" + key, Principal: "agent_email", RunID: "run_1", OperationKey: key,
				CapabilityID: capability, ActionDigest: fmt.Sprintf("digest-%s-%s-%d", capability, order, amount), Executor: arg("replica", "replica-a")},
			AttemptID: attempt, Holds: holds, Now: w.now, AllowUnadmitted: true, Controls: Controls{Authority: "grant", Executor: arg("replica", "replica-a")},
		})
		apply("operation "+key, st.Op, dec.Op)
		for i, h := range holds {
			apply("ledger "+h.GuaranteeID+"/"+order, ledgers[i], eventsAt(dec.Ledgers, i))
		}
		refused(dec.Refusal)
		if dec.Refusal == nil {
			w.holds[key] = dec.Holds
		}
		fmt.Fprintf(&out, "status %s\n", st.Op.Status())
		for _, g := range HoldsOf(dec.Holds, ledgers) {
			w.balance(&out, g.GuaranteeID, g.Resource, g.Balance)
		}
	case "settle":
		key := arg("key", "")
		o := w.ops[key]
		a, _ := o.Current()
		holds := w.holds[key]
		st := SettleState{Op: o}
		for _, h := range holds {
			st.Ledgers = append(st.Ledgers, w.ledger(LedgerKey{GuaranteeID: h.GuaranteeID, Resource: h.Resource}))
		}
		dec := DecideSettle(st, Settle{AttemptID: a.AttemptID, Outcome: Outcome(arg("outcome", "")), Source: "provider", Ref: "rf",
			Generation: o.Generation, Holds: holds, Now: w.now})
		apply("operation "+key, o, dec.Op)
		for i, h := range holds {
			apply("ledger "+h.GuaranteeID+"/"+h.Resource, st.Ledgers[i], eventsAt(dec.Ledgers, i))
		}
		refused(dec.Refusal)
		fmt.Fprintf(&out, "status %s\n", o.Status())
	case "ledger":
		id, order := arg("id", ""), arg("order", "ord_881")
		l := w.ledger(LedgerKey{GuaranteeID: id, Resource: order})
		w.balance(&out, id, order, l.BalanceUnder(w.pins[id].Definition.Limit))
	default:
		d.Fatalf(t, "unknown command %s", d.Cmd)
	}
	return out.String()
}

func (w *domainWorld) balance(out *strings.Builder, id, order string, b Balance) {
	fmt.Fprintf(out, "balance %s/%s: limit=%d committed=%d held=%d carried=%d available=%d\n", id, order, b.Limit, b.Committed, b.Held, b.Carried, b.Available)
}
