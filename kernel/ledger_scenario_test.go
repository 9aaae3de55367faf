package kernel

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// scenarioNow is the decision time of the scenarios' imports.
var scenarioNow = time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)

func demoDefinition() Definition {
	return Definition{ID: "refunds-per-order", CapabilityIDs: []string{"adp_payments.issue_refund"},
		ResourcePointer: "/order_id", AmountPointer: "/amount_minor", Limit: 100000, Unit: "INR_minor"}
}

type scenario struct {
	def    Definition
	pin    *Pin
	ledger Ledger
}

func (h *scenario) run(t *testing.T, d *datadriven.TestData) string {
	arg := func(key, def string) string {
		for _, a := range d.CmdArgs {
			if a.Key == key && len(a.Vals) > 0 {
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
	var dec Decision
	switch d.Cmd {
	case "pin":
		def := h.def
		def.Limit = num("limit", def.Limit)
		def.Unit = arg("unit", def.Unit)
		def.AmountPointer = arg("amount", def.AmountPointer)
		dec = DecidePin(h.pin, arg("tenant", "acme"), def)
		if dec.Refusal == nil {
			for _, ev := range dec.Events {
				p := &Pin{}
				if err := p.Apply(ev); err != nil {
					d.Fatalf(t, "apply pin: %v", err)
				}
				h.pin = p
			}
			h.def = def
		}
		return render(dec, nil)
	case "reserve":
		def := h.def
		if h.pin != nil {
			def = h.pin.Definition
		}
		dec = DecideExposure(&h.ledger, Reserve{GuaranteeID: def.ID, Resource: arg("resource", "ord_881"),
			AttemptID: arg("attempt", ""), OperationID: arg("op", ""), Amount: num("amount", 0),
			Limit: num("limit", def.Limit), DefinitionDigest: arg("digest", def.Digest())})
	case "extract":
		args, r := DecodeArguments([]byte(d.Input))
		if r != nil {
			return "refused " + string(r.Code) + ": " + r.Reason + "\n"
		}
		res, amt, r := h.def.Extract(args)
		if r != nil {
			return "refused " + string(r.Code) + ": " + r.Reason + "\n"
		}
		return fmt.Sprintf("resource=%q amount=%d\n", res, amt)
	case "import":
		def := h.def
		if h.pin != nil {
			def = h.pin.Definition
		}
		dec = DecideExposure(&h.ledger, Import{GuaranteeID: def.ID, Resource: arg("resource", "ord_881"),
			Reference: arg("ref", ""), Amount: num("amount", 0), Limit: num("limit", def.Limit),
			DefinitionDigest: arg("digest", def.Digest()), Operator: arg("operator", ""), Now: scenarioNow})
	case "imports":
		var b strings.Builder
		for _, r := range h.ledger.Imports {
			fmt.Fprintf(&b, "%s amount=%d operator=%s\n", r.Reference, r.Amount, r.Operator)
		}
		fmt.Fprintf(&b, "imported=%d\n", h.ledger.Imported)
		// A snapshot of the ledger (decoded, then rebuilt) keeps them.
		if c := h.ledger.Clone(); c.Imported != h.ledger.Imported || len(c.Imports) != len(h.ledger.Imports) {
			d.Fatalf(t, "clone lost the imports")
		}
		return b.String()
	case "start":
		dec = DecideExposure(&h.ledger, StartDispatch{AttemptID: arg("attempt", "")})
	case "observe":
		dec = DecideExposure(&h.ledger, Observe{AttemptID: arg("attempt", ""), Outcome: Outcome(arg("outcome", "")),
			Source: arg("source", "provider"), Ref: arg("ref", "")})
	case "close":
		dec = DecideExposure(&h.ledger, Close{AttemptID: arg("attempt", ""), Reason: arg("reason", "operator")})
	case "assert-absence":
		dec = DecideExposure(&h.ledger, AssertAbsence{AttemptID: arg("attempt", ""), Operator: arg("operator", ""),
			ArtifactRef: arg("artifact", "")})
	case "receipts":
		var b strings.Builder
		for _, r := range h.ledger.Receipts {
			fmt.Fprintf(&b, "%s op=%s amount=%d state=%s last=%s\n", r.AttemptID, r.OperationID, r.Amount, r.State, r.Last)
		}
		return b.String()
	case "balance":
		return renderBalance(h.ledger.Balance())
	default:
		d.Fatalf(t, "unknown command %s", d.Cmd)
	}
	before := h.ledger.Balance()
	for _, ev := range dec.Events {
		if err := h.ledger.Apply(ev); err != nil {
			d.Fatalf(t, "apply %s: %v", ev.EventType(), err)
		}
	}
	after := h.ledger.Balance()
	if dec.Refusal != nil && before != after {
		d.Fatalf(t, "refusal changed balances: %+v -> %+v", before, after)
	}
	checkInvariants(t, &h.ledger)
	return render(dec, &after)
}

func render(dec Decision, b *Balance) string {
	var s strings.Builder
	if dec.Refusal != nil {
		fmt.Fprintf(&s, "refused %s: %s\n", dec.Refusal.Code, dec.Refusal.Reason)
	}
	if len(dec.Events) == 0 && dec.Refusal == nil {
		s.WriteString("no-op\n")
	}
	for _, ev := range dec.Events {
		body, err := Canonical(ev)
		if err != nil {
			panic(err)
		}
		fmt.Fprintf(&s, "event %s %s\n", ev.EventType(), body)
	}
	if b != nil {
		s.WriteString(renderBalance(*b))
	}
	return s.String()
}

func renderBalance(b Balance) string {
	return fmt.Sprintf("balance limit=%d committed=%d held=%d available=%d\n", b.Limit, b.Committed, b.Held, b.Available)
}

// checkInvariants recomputes the balances from the receipts the naive way and
// compares them with the incrementally kept ones.
func checkInvariants(t testing.TB, l *Ledger) {
	t.Helper()
	committed, held := l.Archived.CommittedAmount+l.Imported, int64(0)
	for _, r := range l.Receipts {
		switch {
		case r.State.Open():
			held += r.Amount
		case r.State == StateCommitted:
			committed += r.Amount
		}
	}
	if l.Rolling > 0 {
		committed = 0
		for _, b := range l.Buckets {
			committed += b.Amount
		}
	}
	if committed != l.Committed || held != l.Held {
		t.Fatalf("balances drifted: kept committed=%d held=%d, receipts say committed=%d held=%d", l.Committed, l.Held, committed, held)
	}
	if l.Limit != 0 && l.OverLimit == 0 && l.Committed+l.Held > l.Limit {
		t.Fatalf("ceiling broken: %d + %d > %d", l.Committed, l.Held, l.Limit)
	}
}
