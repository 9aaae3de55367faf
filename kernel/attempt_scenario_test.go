package kernel

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// attemptWorld runs the steps on one attempt after its reservation
// (SettleInput.Step and ReleaseInput.Step) over its operation and the
// ledgers of its holds. The attempt's history before the step under test
// (reservation, dispatch-start, another executor's claim) is folded in
// directly; every step's effects are then appended and folded as a runtime
// does, and printed in full, keyed by subject, with the step's refusal,
// incidents and reply.
type attemptWorld struct {
	subjects
	holds []Hold
	now   time.Time
}

// The attempt of the scripts.
var (
	attemptOp = KeyOperation("run_1", "k")
)

const (
	attemptID     = "att_1"
	attemptOpID   = "op_1"
	attemptAmount = 100
)

func newAttemptWorld() *attemptWorld {
	return &attemptWorld{subjects: subjects{}, now: time.Date(2026, 10, 26, 9, 0, 0, 0, time.UTC)}
}

func (w *attemptWorld) run(t *testing.T, d *datadriven.TestData) string {
	var out strings.Builder
	arg := func(key, def string) string { return scenarioArg(d, key, def) }
	switch d.Cmd {
	case "reserve":
		// A new attempt, reserved by executor replica-a at generation 1 on
		// one ledger of order ord_1 for each limit named.
		w.subjects, w.holds = subjects{}, nil
		op := &Operation{}
		w.fold(t, d, attemptOp, op, OperationOpened{OperationID: attemptOpID, Principal: "agent_a", RunID: "run_1", OperationKey: "k",
			CapabilityID: "refund", ActionDigest: "d", Executor: "replica-a", Generation: 1})
		var refs []HoldRef
		for i, s := range strings.Split(arg("limits", "1000"), ",") {
			limit, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				d.Fatalf(t, "limits: %v", err)
			}
			h := Hold{GuaranteeID: fmt.Sprintf("g%d", i), DefinitionDigest: "dd", Resource: "ord_1", Amount: attemptAmount, Limit: limit}
			l := &Ledger{}
			w.subjects[h.ledgerKey().Key()] = l
			dec := DecideExposure(l, Reserve{GuaranteeID: h.GuaranteeID, Resource: h.Resource, AttemptID: attemptID, OperationID: attemptOpID,
				Amount: h.Amount, Limit: h.Limit, DefinitionDigest: h.DefinitionDigest})
			if dec.Refusal != nil {
				d.Fatalf(t, "reserve: %v", dec.Refusal)
			}
			w.fold(t, d, h.ledgerKey().Key(), l, dec.Events...)
			w.holds, refs = append(w.holds, h), append(refs, HoldRef{GuaranteeID: h.GuaranteeID, Resource: h.Resource, Amount: h.Amount})
		}
		w.fold(t, d, attemptOp, op, OperationReserved{AttemptID: attemptID, Generation: 1, Holds: refs})
		w.subjects[attemptOp] = op
		w.balances(&out)
	case "start":
		// The executor's durable dispatch-start, on the operation and
		// every ledger.
		w.fold(t, d, attemptOp, w.opOf(attemptOp), OperationDispatchStarted{AttemptID: attemptID, Generation: w.opOf(attemptOp).Generation})
		for _, h := range w.holds {
			l := w.ledgerOf(h.ledgerKey())
			w.fold(t, d, h.ledgerKey().Key(), l, DecideExposure(l, StartDispatch{AttemptID: attemptID}).Events...)
		}
		w.balances(&out)
	case "claim":
		// Another executor takes the operation over: a new generation.
		op := w.opOf(attemptOp)
		w.fold(t, d, attemptOp, op, OperationClaimed{Executor: arg("executor", "replica-b"), Generation: op.Generation + 1})
		fmt.Fprintf(&out, "operation at generation %d\n", op.Generation)
	case "settle":
		in := SettleInput{Operation: attemptOp, AttemptID: attemptID, Holds: w.holds, Outcome: Outcome(arg("outcome", "")),
			Source: arg("source", "provider"), Ref: arg("ref", "rf"), Generation: uint64(scenarioNum(t, d, "generation", 1)),
			Claimant: arg("claimant", ""), Now: w.now, Controls: Controls{Executor: "replica-a"}}
		eff := w.step(t, d, &out, in.Step())
		// The reply is the operation's status and balances once the
		// effects are folded.
		if st := w.opOf(attemptOp).Status(); eff.Reply.Status != st {
			d.Fatalf(t, "reply status %s, the operation's %s", eff.Reply.Status, st)
		}
		w.checkBalances(t, d, eff.Reply)
	case "release":
		// An operator's release by replica-c: a close, or with artifact
		// an assertion of absence. orphan=<attempt> releases an attempt no
		// operation knows, on the attempt's ledgers.
		in := ReleaseInput{Operation: attemptOp, AttemptID: attemptID, Executor: "replica-c", Operator: "op_priya", Reason: arg("reason", ""),
			ArtifactRef: arg("artifact", "")}
		if id := arg("orphan", ""); id != "" {
			in.Operation, in.AttemptID = Key{}, id
		}
		for _, h := range w.holds {
			in.Holds = append(in.Holds, HoldRef{GuaranteeID: h.GuaranteeID, Resource: h.Resource, Amount: h.Amount})
		}
		eff := w.step(t, d, &out, in.Step())
		if eff.Refusal == nil {
			if in.Operation != (Key{}) && eff.Reply.Status != w.opOf(attemptOp).Status() {
				d.Fatalf(t, "reply status %s, the operation's %s", eff.Reply.Status, w.opOf(attemptOp).Status())
			}
			w.checkBalances(t, d, eff.Reply)
		}
	default:
		d.Fatalf(t, "unknown command %s", d.Cmd)
	}
	return out.String()
}

// fold applies history events to the state of k.
func (w *attemptWorld) fold(t *testing.T, d *datadriven.TestData, k Key, st Aggregate, evs ...Event) {
	for _, ev := range evs {
		if err := st.Apply(ev); err != nil {
			d.Fatalf(t, "%v: %s does not fold: %v", k, ev.EventType(), err)
		}
	}
}

// step runs a step over what its reads name, appends its effects to the
// subjects they are keyed by, in the order of the reads, and writes every
// event appended, the refusal, the incidents and the reply.
func (w *attemptWorld) step(t *testing.T, d *datadriven.TestData, out *strings.Builder, step Step) Effects {
	reads := step.Reads()
	eff := step.Decide(w.load(reads))
	written := map[Key]bool{}
	for _, r := range reads {
		written[r.Key] = r.Access == Write
	}
	for k, evs := range eff.Append {
		if len(evs) > 0 && !written[k] {
			d.Fatalf(t, "the step appends to %v, which it does not read for writing", k)
		}
	}
	appended := false
	for _, r := range reads {
		for _, ev := range eff.Append[r.Key] {
			if err := w.subjects[r.Key].Apply(ev); err != nil {
				d.Fatalf(t, "%s: %s does not fold: %v", attemptLabel(r.Key), ev.EventType(), err)
			}
			b, err := json.Marshal(ev)
			if err != nil {
				d.Fatalf(t, "%v", err)
			}
			fmt.Fprintf(out, "%s: %s %s\n", attemptLabel(r.Key), ev.EventType(), b)
			appended = true
		}
	}
	if !appended {
		out.WriteString("nothing appended\n")
	}
	if eff.Refusal != nil {
		fmt.Fprintf(out, "refused %s: %s\n", eff.Refusal.Code, eff.Refusal.Reason)
	}
	for _, inc := range eff.Incidents {
		fmt.Fprintf(out, "incident %s on %s\n", inc.Kind, inc.AttemptID)
	}
	r := eff.Reply
	fmt.Fprintf(out, "reply %s", r.Status)
	if r.Code != "" {
		fmt.Fprintf(out, " %s", r.Code)
	}
	fmt.Fprintf(out, " attempt=%s", r.AttemptID)
	if r.OperationID != "" {
		fmt.Fprintf(out, " operation=%s", r.OperationID)
	}
	out.WriteString("\n")
	for _, g := range r.Guarantees {
		b := g.Balance
		fmt.Fprintf(out, "  %s/%s amount=%d: limit=%d committed=%d held=%d available=%d\n", g.GuaranteeID, g.Resource, g.Amount,
			b.Limit, b.Committed, b.Held, b.Available)
	}
	return eff
}

// checkBalances fails when a reply's balance of a hold is not its ledger's
// once the step's effects are folded.
func (w *attemptWorld) checkBalances(t *testing.T, d *datadriven.TestData, r Reply) {
	for _, g := range r.Guarantees {
		if l := w.ledgerOf(LedgerKey{GuaranteeID: g.GuaranteeID, Resource: g.Resource}); g.Balance != l.Balance() {
			d.Fatalf(t, "reply balance of %s/%s %+v, its ledger's %+v", g.GuaranteeID, g.Resource, g.Balance, l.Balance())
		}
	}
}

// balances writes every ledger's balance.
func (w *attemptWorld) balances(out *strings.Builder) {
	for _, h := range w.holds {
		b := w.ledgerOf(h.ledgerKey()).Balance()
		fmt.Fprintf(out, "%s: limit=%d committed=%d held=%d available=%d\n", attemptLabel(h.ledgerKey().Key()), b.Limit, b.Committed, b.Held, b.Available)
	}
}

func attemptLabel(k Key) string {
	if k.Kind == KindLedger {
		return "ledger " + k.ID + "/" + k.Sub
	}
	return "operation"
}
