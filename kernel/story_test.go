package kernel

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// storyCapability is the refund capability of the stories: high risk, so
// every proposal needs an operator's approval of its exact action.
var storyCapability = &Capability{ID: "adp_payments.issue_refund", Version: "2026-10", Risk: "high", Effectful: true,
	RunAmount: "/amount_minor"}

// storyManifest is the tenant acme with its three agents, the refund
// capability and the order's refund ceiling of INR 1,000.
func storyManifest() *Manifest {
	def := demoDefinition()
	agents := map[string]*Agent{}
	for _, id := range []string{"agent_email", "agent_chat", "agent_ops"} {
		agents[id] = &Agent{ID: id, Capabilities: []string{storyCapability.ID}}
	}
	return &Manifest{Capabilities: map[string]*Capability{storyCapability.ID: storyCapability},
		Guarantees: []Guarantee{{Definition: def}},
		Tenants: map[string]*Tenant{"acme": {ID: "acme", Agents: agents,
			Pins: map[string]PinnedGuarantee{def.ID: {Pin: &Pin{Tenant: "acme", Definition: def, Digest: def.Digest()}}}}},
		MaxProposalBytes: 1 << 16}
}

// world holds every subject of one tenant, by key, and what the runtime
// keeps of each operation's dispatch.
type world struct {
	subjects
	m        *Manifest
	dispatch map[string]*Dispatch // by operation key: the dispatch its proposal asked for
	opKeys   map[string]Key       // by operation key: the key of its operation
	witness  WitnessStatus
	tally    *RefusalTally // the runtime's refusal window, once a story opens one
	ceilings []string      // guarantees a story added beside the order's (ceiling)
	n        int
	now      time.Time
}

func newWorld() *world {
	return &world{subjects: subjects{}, m: storyManifest(), dispatch: map[string]*Dispatch{}, opKeys: map[string]Key{}, now: time.Date(2026, 10, 26, 9, 0, 0, 0, time.UTC)}
}

// storyDigest is the action digest of a refund proposal: what the propose
// step binds (BindAction, as ProposeStep calls it), which an operator
// approves.
func storyDigest(t *testing.T, principal, run, order string, amount int64) string {
	act, r := BindAction("acme", principal, Proposal{RunID: run, CapabilityID: storyCapability.ID, Arguments: json.RawMessage(refundArgs(order, amount))},
		storyCapability)
	if r != nil {
		t.Fatal(r)
	}
	return act.Digest
}

// label names a subject in the output.
func label(k Key) string {
	switch {
	case k.Kind == KindOperation && k.Scope != "":
		return "operation " + k.Sub + " of " + k.Scope
	case k.Kind == KindOperation:
		return "operation " + k.Sub
	case k.Kind == KindLedger:
		return "ledger " + k.Sub
	}
	if k.ID != "" {
		return k.Kind.String() + " " + k.ID
	}
	return k.Kind.String()
}

// label names a subject as label does, and a ledger of a ceiling a story
// added by its guarantee too.
func (w *world) label(k Key) string {
	if l, ok := w.subjects[k].(*Ledger); ok && slices.Contains(w.ceilings, l.GuaranteeID) {
		return label(k) + " " + l.GuaranteeID
	}
	return label(k)
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
		resources = slices.Compact(resources)
		for _, res := range resources {
			b := w.ledgerOf(LedgerKey{GuaranteeID: "refunds-per-order", Resource: res}).Balance()
			if b.Limit == 0 {
				b.Available = 100000 // nothing held yet: the guarantee's whole limit
			}
			fmt.Fprintf(&out, "balance %s: committed=%d held=%d available=%d\n", res, b.Committed, b.Held, b.Available)
			for _, id := range w.ceilings {
				for _, st := range w.subjects {
					if l, ok := st.(*Ledger); ok && l.GuaranteeID == id && l.Resource == res {
						b := l.Balance()
						fmt.Fprintf(&out, "balance %s %s: committed=%d held=%d available=%d\n", res, id, b.Committed, b.Held, b.Available)
					}
				}
			}
		}
	}
	key := arg("key", "")
	opKey := w.opKeys[key]
	switch d.Cmd {
	case "admit":
		k := KeyRun(arg("run", ""))
		r := w.load(Reads{{Key: k, Access: Write}})[k].(*Run)
		dec := DecideAdmit(r, nil, AdmitRun{RunID: arg("run", ""), Principal: arg("principal", ""), Operator: "op_priya",
			Calls: num("calls", 1), Amount: num("amount", 0)})
		apply("run "+arg("run", ""), r, dec.Child)
		refused(dec.Refusal)
	case "approve":
		id := arg("id", "")
		k := KeyApproval(id)
		a := w.load(Reads{{Key: k, Access: Write}})[k].(*Approval)
		dec := DecideApprovalGrant(a, GrantApproval{ApprovalID: id, ActionDigest: storyDigest(t, arg("principal", ""), arg("run", ""), arg("order", ""), num("amount", 0)),
			Risk: "high", Operator: "op_priya", Now: w.now, TTL: dur("ttl", "1h")})
		apply("approval "+id, a, dec.Events)
		refused(dec.Refusal)
	case "deny":
		id := arg("id", "")
		k := KeyApproval(id)
		a := w.load(Reads{{Key: k, Access: Write}})[k].(*Approval)
		dec := DecideApprovalDeny(a, DenyApproval{ApprovalID: id, ActionDigest: storyDigest(t, arg("principal", ""), arg("run", ""), arg("order", ""), num("amount", 0)),
			Risk: "high", Operator: "op_priya", Reason: arg("reason", ""), Now: w.now})
		apply("approval "+id, a, dec.Events)
		refused(dec.Refusal)
	case "ceiling":
		// Another ceiling on every refund, pinned: a proposal then holds
		// on a ledger of each.
		def := demoDefinition()
		def.ID, def.Limit, def.Window = arg("id", ""), num("limit", 0), arg("window", "")
		w.m.Guarantees = append(w.m.Guarantees, Guarantee{Definition: def})
		w.m.Tenants["acme"].Pins[def.ID] = PinnedGuarantee{Pin: &Pin{Tenant: "acme", Definition: def, Digest: def.Digest()}}
		w.ceilings = append(w.ceilings, def.ID)
		fmt.Fprintf(&out, "guarantee %s: limit %d\n", def.ID, def.Limit)
	case "propose":
		principal, order, amount := arg("principal", ""), arg("order", ""), num("amount", 0)
		w.n++
		in := ProposeInput{Manifest: w.m, Tenant: "acme", Principal: principal,
			Body: proposalBody(arg("run", ""), key, storyCapability.ID, refundArgs(order, amount), arg("approval", "")),
			Now:  w.now, OperationID: "op_" + key, AttemptID: fmt.Sprintf("att_%d", w.n), Executor: arg("executor", "replica-a"), Witness: w.witness}
		if w.tally != nil {
			in.Refusals = w.tally
		}
		w.opKeys[key] = KeyOperation(arg("run", ""), key)
		eff := w.subjects.run(t, d, &out, in.Step(), w.label)
		if eff.Scoped {
			// As the runtime does: decided again on the principal's own
			// subject of the key.
			out.WriteString("the key is another principal's: decided again on the principal's own subject of it\n")
			in.Scoped = true
			w.opKeys[key] = KeyScopedOperation(arg("run", ""), key, principal)
			eff = w.subjects.run(t, d, &out, in.Step(), w.label)
		}
		if eff.Unbound != nil {
			fmt.Fprintf(&out, "unbound: %s on the refusal subject of %s\n", eff.Unbound.Code, eff.Unbound.Principal)
		}
		if tl := eff.Tally; tl != nil {
			w.tally.Add(tl.Key, tl.Refused, tl.Whole)
			fmt.Fprintf(&out, "tally %s/%s/%s: whole=%t\n", tl.Key.Principal, tl.Key.Code, tl.Key.CapabilityID, tl.Whole)
		}
		if len(eff.Append) == 0 && eff.Refusal == nil {
			fmt.Fprintf(&out, "the same proposal again: status %s\n", eff.Reply.Status)
			break
		}
		refused(eff.Refusal)
		if eff.Dispatch != nil {
			w.dispatch[key] = eff.Dispatch
		}
		fmt.Fprintf(&out, "status %s\n", eff.Reply.Status)
		balances(order)
	case "settle", "reconcile":
		o := w.opOf(opKey)
		a, _ := o.Current()
		disp := w.dispatch[key]
		var res []string
		for _, h := range disp.Holds {
			res = append(res, h.Resource)
		}
		in := disp.Settle(Outcome(arg("outcome", "")), arg("ref", ""), w.now)
		in.Controls = Controls{}
		in.Generation = uint64(num("generation", int64(disp.Generation)))
		if d.Cmd == "reconcile" {
			plan := PlanReconcile(o, ReconcileInput{AttemptID: a.AttemptID, Sweep: arg("sweep", "") != "", Age: dur("age", "1m"), Grace: 21 * time.Second})
			if plan.Action != ReconcileQuery {
				fmt.Fprintf(&out, "plan: %s\n", [...]string{"nothing", "query", "close", "wait"}[plan.Action])
				if plan.Code != "" || plan.Reason != "" {
					fmt.Fprintf(&out, "%s %s\n", plan.Code, plan.Reason)
				}
				break
			}
			fmt.Fprintf(&out, "plan: query the provider, which answers %s\n", in.Outcome)
			if Unchanged(o, a.AttemptID, in.Outcome) {
				out.WriteString("no change\n")
				break
			}
			in.Source, in.Claimant = "reconciler", "replica-b/reconciler"
		}
		if n := num("prefix", -1); n >= 0 {
			// A crash (or a conflict) after the first n events of a
			// provider's report were stored: the rest is not.
			step := in.Step()
			eff := step.Decide(w.load(step.Reads()))
			if !eff.Prefix {
				d.Fatalf(t, "the report's effects may not be stored as a prefix")
			}
			cut := Effects{Append: map[Key][]Event{}}
			for _, k := range eff.Order {
				evs := eff.Append[k]
				m := min(int(n), len(evs))
				if m > 0 {
					cut.Append[k] = evs[:m]
				}
				n -= int64(m)
			}
			w.subjects.apply(t, d, &out, step.Reads(), cut, w.label)
			fmt.Fprintf(&out, "stored a prefix; status %s\n", w.opOf(opKey).Status())
			balances(res...)
			break
		}
		eff := w.subjects.run(t, d, &out, in.Step(), w.label)
		refused(eff.Refusal)
		if len(eff.Append) == 0 && eff.Refusal == nil {
			out.WriteString("nothing to append\n")
		}
		fmt.Fprintf(&out, "status %s\n", eff.Reply.Status)
		balances(res...)
	case "close", "assert-absence":
		o := w.opOf(opKey)
		a, _ := o.Current()
		var res []string
		for _, h := range a.Holds {
			res = append(res, h.Resource)
		}
		in := ReleaseInput{Operation: opKey, AttemptID: a.AttemptID, Holds: a.Holds, Executor: "replica-b", Operator: "op_priya", Reason: arg("reason", ""),
			ArtifactRef: arg("artifact", "")}
		eff := w.subjects.run(t, d, &out, in.Step(), w.label)
		refused(eff.Refusal)
		fmt.Fprintf(&out, "status %s\n", w.opOf(opKey).Status())
		balances(res...)
	case "kill":
		c := w.load(Reads{{Key: KeyControl, Access: Write}})[KeyControl].(*Control)
		dec := DecideKillSwitch(c, SetKillSwitch{Engaged: arg("engaged", "true") == "true", Operator: "op_priya"})
		apply("control", c, dec.Events)
	case "witness":
		// The runtime's live view of its witnesses: policy and state.
		states := map[string]Witnessing{"pending": WitnessPending, "cosigned": WitnessCosigned, "missing": WitnessMissing}
		w.witness = WitnessStatus{Policy: WitnessPolicy(arg("policy", "")), State: states[arg("state", "cosigned")], Reason: arg("reason", "")}
	case "integrity-fail":
		integrity := w.load(Reads{{Key: KeyIntegrity, Access: Write}})[KeyIntegrity].(*LogIntegrity)
		dec := DecideIntegrityFailure(integrity, FailIntegrity{Witness: arg("witness", "witness.example/w1"), Kind: arg("kind", IntegrityShrank),
			LogSize: num("log", 0), WitnessSize: num("witnessed", 0), Reason: arg("reason", ""), Executor: "replica-a"})
		apply("integrity", integrity, dec.Events)
		refused(dec.Refusal)
		if len(dec.Events) == 0 && dec.Refusal == nil {
			fmt.Fprintf(&out, "incident %d already open: nothing recorded\n", integrity.Incidents)
		}
	case "integrity-resolve":
		integrity := w.load(Reads{{Key: KeyIntegrity, Access: Write}})[KeyIntegrity].(*LogIntegrity)
		dec := DecideResolveIntegrity(integrity, ResolveIntegrity{Operator: "op_priya", Resolution: arg("resolution", ""),
			ArtifactRef: arg("artifact", ""), Statement: arg("statement", "")})
		apply("integrity", integrity, dec.Events)
		refused(dec.Refusal)
	case "refusal-window":
		// The runtime's refusal window: opened, or closed with its
		// aggregates.
		if arg("close", "") == "" {
			w.tally = &RefusalTally{}
			break
		}
		for _, ev := range w.tally.Close(arg("close", "")) {
			fmt.Fprintf(&out, "aggregate %s/%s/%s: %d: %s\n", ev.Principal, ev.Code, ev.CapabilityID, ev.Count, ev.Reason)
		}
	case "advance":
		w.now = w.now.Add(dur("by", "0s"))
		fmt.Fprintf(&out, "now %s\n", w.now.Format(time.RFC3339))
	default:
		d.Fatalf(t, "unknown command %s", d.Cmd)
	}
	return out.String()
}
