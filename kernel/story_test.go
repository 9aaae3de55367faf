package kernel

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// TestStories replays the scripts in testdata/story: the whole governed
// step (admission, approvals, run budgets, reservation, dispatch,
// settlement, reconciliation, release, the kill switch, fencing) on the
// kernel's steps alone, each subject folded as a runtime would fold what it
// appended. Regenerate the expected output with:
//
//	go test ./kernel -run TestStories -rewrite
func TestStories(t *testing.T) {
	datadriven.Walk(t, "testdata/story", func(t *testing.T, path string) {
		w := newWorld()
		datadriven.RunTest(t, path, w.run)
	})
}

// world holds every subject of one tenant, by name.
type world struct {
	ops       map[string]*Operation // by operation key
	holds     map[string][]Hold     // by operation key: what its attempt holds
	gen       map[string]uint64     // by operation key: the generation its executor started at
	ledgers   map[string]*Ledger    // by resource
	runs      map[string]*Run
	approvals map[string]*Approval
	control   Control
	integrity LogIntegrity
	witness   WitnessStatus
	n         int
	now       time.Time
}

func newWorld() *world {
	return &world{ops: map[string]*Operation{}, holds: map[string][]Hold{}, gen: map[string]uint64{}, ledgers: map[string]*Ledger{},
		runs: map[string]*Run{}, approvals: map[string]*Approval{}, now: time.Date(2026, 10, 26, 9, 0, 0, 0, time.UTC)}
}

func (w *world) op(key string) *Operation {
	if w.ops[key] == nil {
		w.ops[key] = &Operation{}
	}
	return w.ops[key]
}

func (w *world) ledger(res string) *Ledger {
	if w.ledgers[res] == nil {
		w.ledgers[res] = &Ledger{}
	}
	return w.ledgers[res]
}

func (w *world) run_(id string) *Run {
	if w.runs[id] == nil {
		w.runs[id] = &Run{}
	}
	return w.runs[id]
}

// storyDigest stands for the action digest of a refund proposal: the same
// agent, order and amount give the same digest.
func storyDigest(principal, order string, amount int64) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s|%s|%d", principal, order, amount)))
	return hex.EncodeToString(sum[:])
}

func (w *world) run(t *testing.T, d *datadriven.TestData) string {
	arg := func(key, def string) string {
		for _, a := range d.CmdArgs {
			if a.Key == key {
				if len(a.Vals) == 0 {
					return "true"
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
	dur := func(key, def string) time.Duration {
		v, err := time.ParseDuration(arg(key, def))
		if err != nil {
			d.Fatalf(t, "bad %s: %v", key, err)
		}
		return v
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
	balances := func(resources ...string) {
		sort.Strings(resources)
		for _, res := range resources {
			b := w.ledger(res).Balance()
			if b.Limit == 0 {
				b.Available = 100000 // nothing held yet: the guarantee's whole limit
			}
			fmt.Fprintf(&out, "balance %s: committed=%d held=%d available=%d\n", res, b.Committed, b.Held, b.Available)
		}
	}
	key := arg("key", "")
	switch d.Cmd {
	case "admit":
		r := w.run_(arg("run", ""))
		dec := DecideAdmit(r, nil, AdmitRun{RunID: arg("run", ""), Principal: arg("principal", ""), Operator: "op_priya",
			Calls: num("calls", 1), Amount: num("amount", 0)})
		apply("run "+arg("run", ""), r, dec.Child)
		refused(dec.Refusal)
	case "approve":
		id := arg("id", "")
		a := &Approval{}
		dec := DecideApprovalGrant(a, GrantApproval{ApprovalID: id, ActionDigest: storyDigest(arg("principal", ""), arg("order", ""), num("amount", 0)),
			Risk: "high", Operator: "op_priya", Now: w.now, TTL: dur("ttl", "1h")})
		apply("approval "+id, a, dec.Events)
		refused(dec.Refusal)
		if dec.Refusal == nil {
			w.approvals[id] = a
		}
	case "deny":
		id := arg("id", "")
		a := w.approvals[id]
		if a == nil {
			a = &Approval{}
		}
		dec := DecideApprovalDeny(a, DenyApproval{ApprovalID: id, ActionDigest: storyDigest(arg("principal", ""), arg("order", ""), num("amount", 0)),
			Risk: "high", Operator: "op_priya", Reason: arg("reason", ""), Now: w.now})
		apply("approval "+id, a, dec.Events)
		refused(dec.Refusal)
		w.approvals[id] = a
	case "propose":
		principal, order, amount := arg("principal", ""), arg("order", ""), num("amount", 0)
		w.n++
		attempt := fmt.Sprintf("att_%d", w.n)
		holds := []Hold{{GuaranteeID: "refunds-per-order", DefinitionDigest: demoDefinition().Digest(), Resource: order, Amount: amount, Limit: 100000}}
		st := ProposalState{Op: w.op(key), Ledgers: []*Ledger{w.ledger(order)}, Run: w.run_(arg("run", "")), Control: &w.control,
			Integrity: &w.integrity, Witness: w.witness}
		approvalID := arg("approval", "")
		if approvalID != "" {
			st.Approval = w.approvals[approvalID]
			if st.Approval == nil {
				st.Approval = &Approval{}
			}
		}
		dec := DecidePropose(st, Propose{
			Opened: OperationOpened{OperationID: "op_" + key, Principal: principal, RunID: arg("run", ""), OperationKey: key,
				CapabilityID: "adp_payments.issue_refund", ActionDigest: storyDigest(principal, order, amount), Executor: arg("executor", "replica-a")},
			AttemptID: attempt, Holds: holds, ApprovalRequired: true, ApprovalID: approvalID, Risk: "high", Now: w.now,
			RunAmount: amount, Controls: Controls{Authority: "grant", Executor: arg("executor", "replica-a")},
		})
		if dec.Existing {
			fmt.Fprintf(&out, "the same proposal again: status %s\n", st.Op.Status())
			break
		}
		apply("operation "+key, st.Op, dec.Op)
		apply("ledger "+order, st.Ledgers[0], eventsAt(dec.Ledgers, 0))
		apply("run "+arg("run", ""), st.Run, dec.Run)
		if st.Approval != nil {
			apply("approval "+approvalID, st.Approval, dec.Approval)
		}
		refused(dec.Refusal)
		if dec.Refusal == nil {
			w.holds[key], w.gen[key] = holds, st.Op.Generation
		}
		fmt.Fprintf(&out, "status %s\n", st.Op.Status())
		balances(order)
	case "settle", "reconcile":
		o := w.op(key)
		a, _ := o.Current()
		holds := w.holds[key]
		st := SettleState{Op: o}
		var res []string
		for _, h := range holds {
			st.Ledgers = append(st.Ledgers, w.ledger(h.Resource))
			res = append(res, h.Resource)
		}
		cmd := Settle{AttemptID: a.AttemptID, Outcome: Outcome(arg("outcome", "")), Source: "provider", Ref: arg("ref", ""),
			Generation: uint64(num("generation", int64(w.gen[key]))), Holds: holds}
		if d.Cmd == "reconcile" {
			plan := PlanReconcile(o, ReconcileInput{AttemptID: a.AttemptID, Sweep: arg("sweep", "") != "", Age: dur("age", "1m"), Grace: 21 * time.Second})
			if plan.Action != ReconcileQuery {
				fmt.Fprintf(&out, "plan: %s\n", [...]string{"nothing", "query", "close", "wait"}[plan.Action])
				if plan.Code != "" || plan.Reason != "" {
					fmt.Fprintf(&out, "%s %s\n", plan.Code, plan.Reason)
				}
				break
			}
			fmt.Fprintf(&out, "plan: query the provider, which answers %s\n", cmd.Outcome)
			if Unchanged(o, a.AttemptID, cmd.Outcome) {
				out.WriteString("no change\n")
				break
			}
			cmd.Source, cmd.Claimant = "reconciler", "replica-b/reconciler"
		}
		dec := DecideSettle(st, cmd)
		apply("operation "+key, o, dec.Op)
		for i, l := range st.Ledgers {
			apply("ledger "+res[i], l, eventsAt(dec.Ledgers, i))
		}
		refused(dec.Refusal)
		fmt.Fprintf(&out, "status %s\n", o.Status())
		balances(res...)
	case "close", "assert-absence":
		o := w.op(key)
		a, _ := o.Current()
		st := ReleaseState{Op: o}
		var res []string
		for _, h := range w.holds[key] {
			st.Ledgers = append(st.Ledgers, w.ledger(h.Resource))
			res = append(res, h.Resource)
		}
		dec := DecideRelease(st, Release{AttemptID: a.AttemptID, Executor: "replica-b", Operator: "op_priya", Reason: arg("reason", ""),
			ArtifactRef: arg("artifact", "")})
		apply("operation "+key, o, dec.Op)
		for i, l := range st.Ledgers {
			apply("ledger "+res[i], l, eventsAt(dec.Ledgers, i))
		}
		refused(dec.Refusal)
		fmt.Fprintf(&out, "status %s\n", o.Status())
		balances(res...)
	case "kill":
		dec := DecideKillSwitch(&w.control, SetKillSwitch{Engaged: arg("engaged", "true") == "true", Operator: "op_priya"})
		apply("control", &w.control, dec.Events)
	case "witness":
		// The runtime's live view of its witnesses: policy and state.
		states := map[string]Witnessing{"pending": WitnessPending, "cosigned": WitnessCosigned, "missing": WitnessMissing}
		w.witness = WitnessStatus{Policy: WitnessPolicy(arg("policy", "")), State: states[arg("state", "cosigned")], Reason: arg("reason", "")}
	case "integrity-fail":
		dec := DecideIntegrityFailure(&w.integrity, FailIntegrity{Witness: arg("witness", "witness.example/w1"), Kind: arg("kind", IntegrityShrank),
			LogSize: num("log", 0), WitnessSize: num("witnessed", 0), Reason: arg("reason", ""), Executor: "replica-a"})
		apply("integrity", &w.integrity, dec.Events)
		refused(dec.Refusal)
		if len(dec.Events) == 0 && dec.Refusal == nil {
			fmt.Fprintf(&out, "incident %d already open: nothing recorded\n", w.integrity.Incidents)
		}
	case "integrity-resolve":
		dec := DecideResolveIntegrity(&w.integrity, ResolveIntegrity{Operator: "op_priya", Resolution: arg("resolution", ""),
			ArtifactRef: arg("artifact", ""), Statement: arg("statement", "")})
		apply("integrity", &w.integrity, dec.Events)
		refused(dec.Refusal)
	case "advance":
		w.now = w.now.Add(dur("by", "0s"))
		fmt.Fprintf(&out, "now %s\n", w.now.Format(time.RFC3339))
	default:
		d.Fatalf(t, "unknown command %s", d.Cmd)
	}
	return out.String()
}

func eventsAt(l [][]Event, i int) []Event {
	if i < len(l) {
		return l[i]
	}
	return nil
}
