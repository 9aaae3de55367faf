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

// newDomainWorld is a tenant with no pins, no ledgers and no operations;
// effectful surfaces the refund and credit capabilities as effectful.
func newDomainWorld(effectful bool) *domainWorld {
	return &domainWorld{subjects: subjects{}, pins: map[string]*Pin{}, dispatch: map[string]*Dispatch{},
		now: time.Date(2026, 10, 26, 9, 0, 0, 0, time.UTC), effectful: effectful}
}

// domainWorld is one tenant's pins, control subject, ledgers and
// operations.
type domainWorld struct {
	subjects
	pins     map[string]*Pin
	dispatch map[string]*Dispatch // by operation key
	n        int
	now      time.Time
	// effectful surfaces the refund and credit capabilities as effectful
	// (fenced unless a proposal says fence=off).
	effectful bool
}

// ctl is the tenant's control subject.
func (w *domainWorld) ctl() *Control {
	return w.load(Reads{{Key: KeyControl, Access: Write}})[KeyControl].(*Control)
}

// domainCapabilities are the capabilities the domain scripts surface.
var domainCapabilities = []string{"adp_payments.issue_refund", "crm.lookup", "adp_payments.issue_credit"}

// domainLabel names a subject in the output.
func domainLabel(k Key) string {
	switch k.Kind {
	case KindOperation:
		return "operation " + k.Sub
	case KindLedger:
		return "ledger " + k.ID + "/" + k.Sub
	}
	return label(k)
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
			Replaces: arg("replaces", ""), Mode: arg("mode", "")}
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
		dec := DecideEnroll(PinState{Pin: pin(id), Control: w.ctl()}, "acme", def(id))
		apply("pin "+id, pin(id), dec.Pin)
		apply("control", w.ctl(), dec.Control)
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
		dec := DecideBackfill(PinState{Pin: pin(id), Control: w.ctl()})
		apply("control", w.ctl(), dec.Control)
		if len(dec.Control) == 0 {
			out.WriteString("no-op\n")
		}
	case "domain":
		ctl := w.ctl()
		ids := make([]string, 0, len(ctl.Domain))
		for id := range ctl.Domain {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			p := ctl.Domain[id]
			fmt.Fprintf(&out, "%s governs %s", id, strings.Join(p.Definition.CapabilityIDs, ","))
			if r := ctl.Replaced(id); len(r) > 0 {
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
		r := w.ctl().CheckConfigured(defs, func(c string) bool { return slices.Contains(surfaced, c) })
		if r == nil {
			out.WriteString("ok\n")
		}
		refused(r)
	case "propose":
		// A replica configured with the guarantees holds= names, as
		// pinned (configured-caps= says what its configuration has them
		// govern instead), proposes: the step reads what it names.
		key, order, amount := arg("key", ""), arg("order", "ord_881"), num("amount", 0)
		capability := arg("cap", "adp_payments.issue_refund")
		w.n++
		tenant := &Tenant{ID: "acme", AllowUnadmitted: true, Pins: map[string]PinnedGuarantee{},
			Agents: map[string]*Agent{"agent_email": {ID: "agent_email", Capabilities: domainCapabilities},
				"agent_chat": {ID: "agent_chat", Capabilities: domainCapabilities}}}
		m := &Manifest{Capabilities: map[string]*Capability{}, Tenants: map[string]*Tenant{"acme": tenant}}
		for _, c := range domainCapabilities {
			m.Capabilities[c] = &Capability{ID: c, Version: "1", Risk: "low", Effectful: w.effectful && c != "crm.lookup",
				NoSameActionFence: arg("fence", "on") == "off"}
		}
		unread := list(arg("unread", ""))
		for _, id := range list(arg("holds", "")) {
			p := pin(id)
			if !p.Pinned() {
				d.Fatalf(t, "hold of %s, which is not pinned", id)
			}
			configured := p.Definition
			if caps := arg("configured-caps", ""); caps != "" {
				configured.CapabilityIDs = list(caps)
			}
			m.Guarantees = append(m.Guarantees, Guarantee{Definition: configured})
			pg := PinnedGuarantee{Pin: p, Refusal: DecidePin(p, "acme", configured).Refusal}
			// The runtime reads the ledgers of the guarantees the held
			// ones replace, unless told it did not (unread=).
			for _, r := range w.ctl().Replaced(id) {
				if !slices.Contains(unread, r) {
					pg.Replaced = append(pg.Replaced, r)
				}
			}
			tenant.Pins[id] = pg
		}
		in := ProposeInput{Manifest: m, Tenant: "acme", Principal: arg("principal", "agent_email"), Body: proposalBody(arg("run", "run_1"), key, capability, refundArgs(order, amount), ""),
			Now: w.now, OperationID: "op_" + key, AttemptID: fmt.Sprintf("att_%d", w.n), Executor: arg("replica", "replica-a")}
		eff := w.subjects.run(t, d, &out, in.Step(), domainLabel)
		refused(eff.Refusal)
		if eff.Dispatch != nil {
			w.dispatch[key] = eff.Dispatch
		}
		fmt.Fprintf(&out, "status %s\n", eff.Reply.Status)
		for _, g := range eff.Reply.Guarantees {
			w.balance(&out, g.GuaranteeID, g.Resource, g.Balance)
		}
	case "settle":
		key := arg("key", "")
		disp := w.dispatch[key]
		eff := w.subjects.run(t, d, &out, disp.Settle(Outcome(arg("outcome", "")), "rf", w.now).Step(), domainLabel)
		refused(eff.Refusal)
		fmt.Fprintf(&out, "status %s\n", eff.Reply.Status)
	case "ledger":
		id, order := arg("id", ""), arg("order", "ord_881")
		l := w.ledgerOf(LedgerKey{GuaranteeID: id, Resource: order})
		w.balance(&out, id, order, l.BalanceUnder(w.pins[id].Definition.Limit))
	default:
		d.Fatalf(t, "unknown command %s", d.Cmd)
	}
	return out.String()
}

func (w *domainWorld) balance(out *strings.Builder, id, order string, b Balance) {
	fmt.Fprintf(out, "balance %s/%s: limit=%d committed=%d held=%d carried=%d available=%d\n", id, order, b.Limit, b.Committed, b.Held, b.Carried, b.Available)
}
