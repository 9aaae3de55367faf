package kernel

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/contextos/ledger/wire"
)

// TestProposeStepOverItsReads: for generated manifests, proposals and
// states that reach every obligation, the step as a runtime drives it
// (Reads, then Decide over what they name, no more) decides what
// ProposeStep decides over the whole state; a refusal appends to the
// operation only (nothing is redeemed, consumed or held) and dispatches
// nothing; an accepted proposal appends to the operation, its run and every
// ledger it holds on, and dispatches once.
func TestProposeStepOverItsReads(t *testing.T) {
	pack, unresolved := seedEvidence(t)
	resolved := seedResolved(t, unresolved)
	n := 4000
	if testing.Short() {
		n = 500
	}
	codes := map[wire.Code]int{}
	for seed := int64(0); seed < int64(n); seed++ {
		g := newDiffGen(seed, pack, unresolved, resolved)
		_, in, s := g.case_()
		want := ProposeStep(s, in)
		step := in.Step()
		l := Loaded{}
		for _, r := range step.Reads() {
			l[r.Key] = stateOf(s, r.Key)
		}
		if msg := diffEffects(want, step.Decide(l)); msg != "" {
			t.Fatalf("seed %d, over its reads: %s\nbody %s", seed, msg, in.Body)
		}
		if msg := invariants(want, step.Reads()); msg != "" {
			t.Fatalf("seed %d: %s\nbody %s", seed, msg, in.Body)
		}
		if want.Refusal != nil {
			codes[want.Refusal.Code]++
		} else if want.Dispatch != nil {
			codes["(dispatched)"]++
		} else {
			codes["(existing)"]++
		}
	}
	// The generator reaches every obligation.
	for _, c := range []wire.Code{wire.CodeRequestMalformed, wire.CodeCapabilityNotSurfaced, wire.CodeAuthorityDenied, wire.CodePolicyDenied, wire.CodeApprovalRequired,
		wire.CodeApprovalMismatch, wire.CodeApprovalRedeemed, wire.CodeApprovalExpired, wire.CodeApprovalDenied, wire.CodeEvidenceInsufficient, wire.CodeRunBudgetExhausted,
		wire.CodeKillSwitchEngaged, wire.CodeResourceInvalid, wire.CodeAmountInvalid, wire.CodeExceeded, wire.CodeDefinitionMismatch, wire.CodeOperationConflict,
		wire.CodeBreakerOpen, wire.CodeDomainMismatch, wire.CodeLogIntegrityFailed, wire.CodeLogUnwitnessed, wire.CodeUnresolvedAttempt, "(dispatched)", "(existing)"} {
		if codes[c] == 0 {
			t.Errorf("no generated case reached %s (reached %v)", c, codes)
		}
	}
}

// invariants describes how a proposal's effects break what every decision
// keeps, or "".
func invariants(e Effects, reads Reads) string {
	var ops, others []Key
	for k, evs := range e.Append {
		if len(evs) == 0 {
			continue
		}
		if k.Kind == KindOperation {
			ops = append(ops, k)
		} else {
			others = append(others, k)
		}
	}
	switch {
	case len(ops) > 1:
		return fmt.Sprintf("appends to %d operations", len(ops))
	case e.Refusal != nil && (len(others) > 0 || e.Dispatch != nil):
		return fmt.Sprintf("refused %s, yet appends to %v (dispatch %v)", e.Refusal.Code, others, e.Dispatch != nil)
	case e.Refusal == nil && len(e.Append) > 0 && e.Dispatch == nil:
		return "accepted without a dispatch"
	case e.Dispatch != nil && (len(ops) != 1 || ops[0] != e.Dispatch.Operation):
		return fmt.Sprintf("dispatches %v, appending to %v", e.Dispatch.Operation, ops)
	case e.Dispatch != nil:
		for _, h := range e.Dispatch.Holds {
			if len(e.Append[h.ledgerKey().Key()]) == 0 {
				return fmt.Sprintf("dispatches a hold on %v without reserving on it", h.ledgerKey())
			}
		}
	}
	for _, r := range reads {
		if r.Access != Write && len(e.Append[r.Key]) > 0 {
			return fmt.Sprintf("appends to %v, read %s", r.Key, r.Access)
		}
	}
	return ""
}

// stateOf is the state of key k in s (the empty one when s has none).
func stateOf(s ProposeState, k Key) Aggregate {
	var a Aggregate
	switch k.Kind {
	case KindOperation:
		a = s.Op
	case KindRun:
		a = s.Run
	case KindApproval:
		a = s.Approval
	case KindControl:
		a = s.Control
	case KindIntegrity:
		a = s.Integrity
	case KindAuthority:
		a = s.Authority
	case KindBreaker:
		a = s.Breaker
	case KindPacks:
		if s.Packs != nil {
			a = s.Packs
		}
	case KindEvidence:
		if r := s.Evidence[k.ID]; r != nil {
			a = r
		}
	case KindLedger:
		if l := s.Ledgers[k.Ledger()]; l != nil {
			a = l
		}
	}
	if a == nil || reflect.ValueOf(a).IsNil() {
		return k.New()
	}
	return a
}

// normalized returns the effects with empty lists as nil: an empty list
// and none mean the same.
func normalized(e Effects) Effects {
	if e.Dispatch != nil {
		d := *e.Dispatch
		if len(d.Holds) == 0 {
			d.Holds = nil
		}
		if len(d.Controls.Guarantees) == 0 {
			d.Controls.Guarantees = nil
		}
		e.Dispatch = &d
	}
	if len(e.Reply.Guarantees) == 0 {
		e.Reply.Guarantees = nil
	}
	return e
}

// diffEffects describes how got differs from want, or "".
func diffEffects(want, got Effects) string {
	want, got = normalized(want), normalized(got)
	var b strings.Builder
	if !reflect.DeepEqual(want.Refusal, got.Refusal) {
		fmt.Fprintf(&b, "refusal: want %v, got %v\n", want.Refusal, got.Refusal)
	}
	keys := map[Key]bool{}
	for k, evs := range want.Append {
		if len(evs) > 0 {
			keys[k] = true
		}
	}
	for k, evs := range got.Append {
		if len(evs) > 0 {
			keys[k] = true
		}
	}
	for k := range keys {
		if w, g := want.Append[k], got.Append[k]; !reflect.DeepEqual(w, g) {
			fmt.Fprintf(&b, "events of %v:\n want %+v\n got  %+v\n", k, w, g)
		}
	}
	if !reflect.DeepEqual(want.Unbound, got.Unbound) {
		fmt.Fprintf(&b, "unbound: want %+v, got %+v\n", want.Unbound, got.Unbound)
	}
	if !reflect.DeepEqual(want.Reply, got.Reply) {
		fmt.Fprintf(&b, "reply:\n want %+v\n got  %+v\n", want.Reply, got.Reply)
	}
	if !reflect.DeepEqual(want.Dispatch, got.Dispatch) {
		fmt.Fprintf(&b, "dispatch:\n want %+v\n got  %+v\n", want.Dispatch, got.Dispatch)
	}
	return b.String()
}

// diffGen generates one manifest, proposal and state from a seed.
type diffGen struct {
	r                               *rand.Rand
	pack                            ContextPack
	unresolved, resolved            []*EvidenceRecord
	now                             time.Time
	order, customer                 string
	amount                          int64
	principal, run, key, approvalID string
}

func newDiffGen(seed int64, pack ContextPack, unresolved, resolved []*EvidenceRecord) *diffGen {
	return &diffGen{r: rand.New(rand.NewSource(seed)), pack: pack, unresolved: unresolved, resolved: resolved,
		now: time.Date(2026, 10, 26, 23, 30, 0, 0, time.UTC)}
}

func (g *diffGen) one(n int) bool { return g.r.Intn(n) == 0 }

func pick[T any](g *diffGen, xs ...T) T { return xs[g.r.Intn(len(xs))] }

// The guarantees the generator configures: per order, per customer and
// day in Kolkata, per order that replaces an older one (rolling), and the
// older one, never configured.
func (g *diffGen) definitions() []Definition {
	return []Definition{
		{ID: "per-order", CapabilityIDs: []string{"refund"}, ResourcePointer: "/order_id", AmountPointer: "/amount_minor", Limit: pick(g, int64(100000), 50000, 1000), Unit: "INR_minor",
			Mode: pick(g, "", "", ModeObserve)},
		{ID: "per-customer-day", CapabilityIDs: []string{"refund", "credit"}, ResourcePointer: "/customer", AmountPointer: "/amount_minor", Limit: 200000, Unit: "INR_minor",
			Window: WindowDay, TimeZone: "Asia/Kolkata"},
		{ID: "per-order-v2", CapabilityIDs: []string{"refund"}, ResourcePointer: "/order_id", AmountPointer: "/amount_minor", Limit: 150000, Unit: "INR_minor",
			Replaces: "per-order-v1", Window: WindowRolling, Duration: "24h"},
		{ID: "per-order-v1", CapabilityIDs: []string{"refund"}, ResourcePointer: "/order_id", AmountPointer: "/amount_minor", Limit: 150000, Unit: "INR_minor",
			Window: WindowRolling, Duration: "24h"},
	}
}

func (g *diffGen) case_() (*Manifest, ProposeInput, ProposeState) {
	kolkata := time.FixedZone("IST", 5*3600+1800)
	defs := g.definitions()
	policy, _ := CompilePolicy(pick(g, Policy{}, Policy{MaxAmount: 60000, AmountPointer: "/amount_minor"},
		Policy{Allowed: []AllowedValues{{Pointer: "/currency", Values: []string{"INR"}}}}))
	refund := &Capability{ID: "refund", Version: pick(g, "1", "2"), Risk: pick(g, "low", "medium", "high"), Effectful: true,
		Approval: pick(g, "", "", ApprovalRequired, ApprovalNone), RunAmount: pick(g, "", "/amount_minor", "/amount_minor", "/missing"), Policy: policy}
	if g.one(4) {
		refund.Breaker = BreakerRule{Threshold: 2, Window: time.Minute}
	}
	refund.NoSameActionFence = g.one(4)
	if g.one(6) {
		pack := g.pack
		refund.Pack, refund.DecisionKey = &pack, "support.refund.execute"
	}
	credit := &Capability{ID: "credit", Version: "1", Risk: "low"}
	m := &Manifest{Capabilities: map[string]*Capability{"refund": refund, "credit": credit}, MaxProposalBytes: pick(g, 1<<16, 1<<16, 1<<16, 120),
		Digest: "5e1f0c0a9d7e3b2a1c4d6e8f0a2b4c6d8e0f1a3b5c7d9e1f2a4b6c8d0e2f4a6b"}
	tenant := &Tenant{ID: "acme", AllowUnadmitted: g.one(2), Pins: map[string]PinnedGuarantee{},
		Agents: map[string]*Agent{
			"agent_a": {ID: "agent_a", Capabilities: []string{"refund", "credit"}, EvidenceSources: pick(g, []string{"kg", "crm", "policy_store", "idp"}, nil)},
			"agent_b": {ID: "agent_b", Capabilities: []string{"credit"}},
		}}
	m.Tenants = map[string]*Tenant{"acme": tenant}
	// The configuration: a subset of the guarantees, never one beside the
	// one it replaces (a configuration that boots never has both).
	control := &Control{}
	for _, d := range defs {
		if d.ID == "per-order-v1" {
			continue
		}
		if !g.one(3) {
			gr := Guarantee{Definition: d}
			if d.Window == WindowDay {
				gr.Zone = kolkata
			}
			m.Guarantees = append(m.Guarantees, gr)
		}
	}
	if g.one(8) {
		m.Guarantees = append(m.Guarantees, Guarantee{Definition: defs[3]}) // a stale replica configured with the replaced one
		m.Guarantees = slices.DeleteFunc(m.Guarantees, func(x Guarantee) bool { return x.Definition.ID == "per-order-v2" })
	}
	// The pins and the enforcement domain.
	enroll := func(d Definition) *Pin {
		p := &Pin{Tenant: "acme", Definition: d.normalized(), Digest: d.Digest()}
		if !g.one(6) {
			_ = control.Apply(GuaranteeEnrolled{Definition: p.Definition, DefinitionDigest: p.Digest})
		}
		return p
	}
	pins := map[string]*Pin{}
	for _, d := range defs {
		pins[d.ID] = enroll(d)
	}
	for _, gr := range m.Guarantees {
		id := gr.Definition.ID
		pg := PinnedGuarantee{Pin: pins[id], Replaced: control.Replaced(id)}
		switch g.r.Intn(12) {
		case 0:
			continue // not pinned
		case 1:
			pg = PinnedGuarantee{Refusal: &Refusal{Code: wire.CodeDefinitionMismatch, Reason: "guarantee " + id + " is pinned to another definition"}}
		case 2:
			pg.Replaced = nil // this runtime did not read what it replaces
		}
		tenant.Pins[id] = pg
	}
	if g.one(10) {
		other := Definition{ID: "unconfigured", CapabilityIDs: []string{"refund"}, ResourcePointer: "/order_id", AmountPointer: "/amount_minor", Limit: 5, Unit: "INR_minor"}
		_ = control.Apply(GuaranteeEnrolled{Definition: other, DefinitionDigest: other.Digest()})
	}
	if g.one(5) {
		_ = control.Apply(GuaranteeRedefined{GuaranteeID: "per-order", Version: 2, Limit: pick(g, int64(70000), 90000), Operator: "op", Reason: "r", At: "2026-10-01T00:00:00Z"})
	}
	if g.one(12) {
		_ = control.Apply(KillSwitchSet{Engaged: true, Operator: "op"})
	}

	// The proposal.
	g.principal = pick(g, "agent_a", "agent_a", "agent_a", "agent_b", "stranger")
	g.run, g.key = "run_1", fmt.Sprintf("k%d", g.r.Intn(3))
	g.order, g.customer = pick(g, "ord_1", "ord_2"), pick(g, "cus_1", "cus_2")
	g.amount = pick(g, int64(10000), 40000, 80000, 120000)
	capability := pick(g, "refund", "refund", "refund", "refund", "credit", "unknown.capability")
	amount := fmt.Sprint(g.amount)
	switch g.r.Intn(14) {
	case 0:
		amount = pick(g, `"10"`, "0", "-5", "1.5", "1e400", "null", "9007199254740993")
	case 1:
		g.order = ""
	}
	args := fmt.Sprintf(`{"order_id":%q,"customer":%q,"amount_minor":%s,"currency":%q}`, g.order, g.customer, amount, pick(g, "INR", "INR", "EUR"))
	if g.one(20) {
		args = pick(g, `{"order_id":"x","order_id":"y"}`, `{"a":1.00000000000000000001}`, `[]`)
	}
	var refs []string
	if refund.Pack != nil || g.one(10) {
		for _, r := range g.unresolved {
			if !g.one(3) {
				refs = append(refs, r.Ref)
			}
		}
	}
	g.approvalID = pick(g, "", "", "ap_1")
	body := fmt.Sprintf(`{"run_id":%q,"operation_key":%q,"capability_id":%q,"arguments":%s`, g.run, g.key, capability, args)
	if len(refs) > 0 {
		rb, _ := json.Marshal(refs)
		body += `,"evidence_refs":` + string(rb)
	}
	if g.approvalID != "" {
		body += fmt.Sprintf(`,"approval_id":%q`, g.approvalID)
	}
	body += "}"
	switch g.r.Intn(30) {
	case 0:
		body = `{"run_id":"r"}`
	case 1:
		body = `not json`
	}
	in := ProposeInput{Manifest: m, Tenant: pick(g, "acme", "acme", "acme", "acme", "acme", "acme", "acme", "globex"), Principal: g.principal,
		Body: []byte(body), Now: g.now, OperationID: "op_new", AttemptID: "att_new", Executor: "replica-a",
		TraceID: "4bf92f3577b34da6a3ce929d0e0e4736"}
	if g.one(6) {
		in.Witness = WitnessStatus{Policy: pick(g, WitnessWarn, WitnessRequire), State: pick(g, WitnessPending, WitnessCosigned, WitnessMissing), Reason: "w"}
	}

	// The state.
	s := ProposeState{Control: control, Integrity: &LogIntegrity{}, Ledgers: map[LedgerKey]*Ledger{}}
	if g.one(15) {
		_ = s.Integrity.Apply(IntegrityFailed{Witness: "w1", Kind: IntegrityShrank, LogSize: 3, WitnessSize: 5, Reason: "shrank", Executor: "x"})
	}
	digest := prepare(in).digest
	s.Op = &Operation{}
	switch g.r.Intn(8) {
	case 0:
		_ = s.Op.Apply(OperationOpened{OperationID: "op_old", Principal: g.principal, RunID: g.run, OperationKey: g.key, CapabilityID: capability,
			ActionDigest: digest, Executor: "replica-b", Generation: 1})
	case 1:
		_ = s.Op.Apply(OperationOpened{OperationID: "op_old", Principal: g.principal, RunID: g.run, OperationKey: g.key, CapabilityID: capability,
			ActionDigest: strings.Repeat("ab", 32), Executor: "replica-b", Generation: 1})
	}
	if s.Op.Opened() && g.one(2) {
		_ = s.Op.Apply(OperationReserved{AttemptID: "att_old", Generation: 1, Holds: []HoldRef{{GuaranteeID: "per-order", Resource: g.order, Amount: g.amount}}})
		_ = s.Op.Apply(OperationDispatchStarted{AttemptID: "att_old", Generation: 1})
	}
	s.Run = &Run{}
	switch g.r.Intn(4) {
	case 0:
		_ = s.Run.Apply(RunAdmitted{RunID: g.run, Principal: "agent_a", Operator: "op", Calls: pick(g, int64(1), 5), Amount: pick(g, int64(50000), 500000)})
	case 1:
		_ = s.Run.Apply(RunAdmitted{RunID: g.run, Principal: "agent_b", Operator: "op", Calls: 5, Amount: 500000})
	}
	if g.approvalID != "" {
		s.Approval = &Approval{}
		exp := g.now.Add(pick(g, time.Hour, -time.Minute))
		switch g.r.Intn(6) {
		case 0:
		case 1:
			_ = s.Approval.Apply(ApprovalGranted{ApprovalID: "ap_1", ActionDigest: strings.Repeat("cd", 32), Risk: refund.Risk, Operator: "op", GrantedAt: exp.Add(-2 * time.Hour), ExpiresAt: exp})
		default:
			if len(digest) == 64 {
				_ = s.Approval.Apply(ApprovalGranted{ApprovalID: "ap_1", ActionDigest: digest, Risk: pick(g, refund.Risk, refund.Risk, "low"), Operator: "op",
					GrantedAt: exp.Add(-2 * time.Hour), ExpiresAt: exp})
				switch g.r.Intn(5) {
				case 0:
					_ = s.Approval.Apply(ApprovalRedeemed{ApprovalID: "ap_1", OperationID: "op_other", ActionDigest: digest})
				case 1:
					_ = s.Approval.Apply(ApprovalDenied{ApprovalID: "ap_1", ActionDigest: digest, Risk: s.Approval.Risk, Operator: "op", Reason: "no", DeniedAt: g.now})
				}
			}
		}
	}
	if g.one(4) {
		s.Authority = &Authority{}
		_ = s.Authority.Apply(AuthorityChanged{Principal: g.principal, CapabilityID: capability, Granted: g.one(2), Operator: "op"})
	}
	if refund.Breaker.Threshold > 0 && g.one(2) {
		s.Breaker = &Breaker{}
		_ = s.Breaker.Apply(BreakerTripped{CapabilityID: "refund", Failures: 2, Threshold: 2, WindowMillis: 60000, FirstFailure: "a", LastFailure: "b", LastReason: "timeout"})
	}
	if refund.Pack != nil {
		s.Packs = &PackCatalog{}
	}
	if len(refs) > 0 {
		s.Evidence = map[string]*EvidenceRecord{}
		recs := g.unresolved
		if g.one(2) {
			recs = g.resolved
		}
		for _, r := range recs {
			s.Evidence[r.Ref] = r
		}
	}
	// Ledgers with history on the resources the proposal may name, whose
	// open attempts are sometimes of the proposal's own action.
	var action string
	if p := prepare(in); p.unbound == nil && p.argRefusal == nil {
		action, _ = SameActionKey(p.wire.CapabilityID, p.canon)
	}
	for _, d := range defs {
		res := g.order
		if d.ResourcePointer == "/customer" {
			res = g.customer
		}
		if res == "" {
			continue
		}
		k := LedgerKey{GuaranteeID: d.ID, Resource: res}
		if d.Window == WindowDay {
			k.Window = d.WindowAt(kolkata, g.now).Key
		}
		l := &Ledger{}
		rolling, _ := d.RollingSeconds()
		for i := 0; i < g.r.Intn(4); i++ {
			att := fmt.Sprintf("old_%d", i)
			dec := DecideExposure(l, ReserveStarted{Reserve{GuaranteeID: d.ID, Resource: res, AttemptID: att, OperationID: "op_" + att,
				Amount: pick(g, int64(10000), 30000), Limit: d.Limit, DefinitionDigest: d.Digest(), Window: k.Window, Rolling: rolling, Now: g.now.Add(-time.Hour),
				Action: pick(g, "", action, action)}})
			for _, ev := range dec.Events {
				_ = l.Apply(ev)
			}
			if dec.Refusal == nil && g.one(2) {
				for _, ev := range DecideExposure(l, Observe{AttemptID: att, Outcome: OutcomeApplied, Source: "provider", Now: g.now.Add(-time.Hour)}).Events {
					_ = l.Apply(ev)
				}
			}
		}
		s.Ledgers[k] = l
	}
	return m, in, s
}
