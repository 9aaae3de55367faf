package kernel

import (
	"crypto/sha256"
	"encoding/hex"
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

// TestProposeStepEqualsGatewayPath: for generated manifests, proposals and
// states, ProposeStep's effects equal what the path before it appends and
// answers: the gateway's checks before the ledger (transcribed below as
// gatewayPath: the body's bound, the parse, the tenant, the capability, the
// action binding, the breaker, authority, policy, the run amount, the
// evidence gate, the pins and windows) followed by DecidePropose over its
// positional state. Events are compared keyed by subject, with the
// refusal, the unbound record, the reply and the dispatch.
func TestProposeStepEqualsGatewayPath(t *testing.T) {
	pack, unresolved := seedEvidence(t)
	resolved := seedResolved(t, unresolved)
	n := 4000
	if testing.Short() {
		n = 500
	}
	codes := map[wire.Code]int{}
	for seed := int64(0); seed < int64(n); seed++ {
		g := newDiffGen(seed, pack, unresolved, resolved)
		m, in, s := g.case_()
		want := gatewayPath(m, in, s)
		got := ProposeStep(s, in)
		if msg := diffEffects(want, got); msg != "" {
			t.Fatalf("seed %d: %s\nbody %s", seed, msg, in.Body)
		}
		// The step as a runtime drives it: what its reads name, no more.
		step := in.Step()
		l := Loaded{}
		for _, r := range step.Reads() {
			l[r.Key] = stateOf(s, r.Key)
		}
		if msg := diffEffects(want, step.Decide(l)); msg != "" {
			t.Fatalf("seed %d, over its reads: %s\nbody %s", seed, msg, in.Body)
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

// gatewayPath is the proposal path as it was before ProposeStep: the
// checks the gateway made before the reserve transaction
// (gateway/propose.go Propose and bindAction, gateway/authz.go
// checkControls and runAmount, gateway/guarantee.go pinOf,
// gateway/breaker.go breakerRefusal, gateway/domain.go readReplaced), then
// DecidePropose with the precomputed refusal, its ledgers and holds paired
// by position, and the reply the gateway made of it.
func gatewayPath(m *Manifest, in ProposeInput, s ProposeState) Effects {
	unbound := func(r *Refusal, body []byte) Effects {
		sum := sha256.Sum256(body)
		return Effects{Refusal: r, Reply: Reply{Status: wire.StatusRefused, Code: r.Code, Reason: r.Reason},
			Unbound: &ProposalRefused{Principal: in.Principal, Code: r.Code, Reason: r.Reason, BodyDigest: hex.EncodeToString(sum[:]), BodyBytes: len(body)}}
	}
	body := in.Body
	if len(body) > m.MaxProposalBytes {
		return unbound(&Refusal{Code: wire.CodeRequestMalformed, Reason: fmt.Sprintf("proposal of %d bytes exceeds %d", len(body), m.MaxProposalBytes)}, body)
	}
	p, r := ParseProposal(body)
	if r != nil {
		return unbound(r, body)
	}
	tc, ok := m.Tenants[in.Tenant]
	if !ok {
		return unbound(&Refusal{Code: wire.CodeAuthorityDenied, Reason: "unknown tenant"}, body)
	}
	cp, ok := m.Capabilities[p.CapabilityID]
	if !ok {
		return unbound(&Refusal{Code: wire.CodeCapabilityNotSurfaced, Reason: fmt.Sprintf("capability %q is not in the pinned manifest", clipID(p.CapabilityID))}, body)
	}
	// bindAction
	var ptrs []Pointer
	for _, g := range m.Guarantees {
		if g.Definition.Covers(p.CapabilityID) {
			if ptr, err := ParsePointer(g.Definition.AmountPointer); err == nil {
				ptrs = append(ptrs, ptr)
			}
		}
	}
	policy := cp.Policy
	if policy == nil {
		policy, _ = CompilePolicy(Policy{})
	}
	var args map[string]any
	var canon json.RawMessage
	var digest string
	argRefusal := func() *Refusal {
		a, r := DecodeArguments(p.Arguments, ptrs...)
		if r != nil {
			return r
		}
		c, err := Canonical(json.RawMessage(p.Arguments))
		if err != nil {
			return &Refusal{Code: wire.CodeRequestMalformed, Reason: "arguments cannot be canonicalized: " + err.Error()}
		}
		d, err := ActionDigest(ActionBinding{Tenant: in.Tenant, Principal: in.Principal, RunID: p.RunID, CapabilityID: p.CapabilityID,
			Arguments: c, EvidenceRefs: p.EvidenceRefs, CapabilityVersion: cp.Version, PolicyDigest: policy.Digest()})
		if err != nil {
			return &Refusal{Code: wire.CodeRequestMalformed, Reason: "the action cannot be digested: " + err.Error()}
		}
		args, canon, digest = a, c, d
		return nil
	}()
	if argRefusal != nil {
		sum := sha256.Sum256(body)
		canon, digest = json.RawMessage(p.Arguments), "body:"+hex.EncodeToString(sum[:])
	}
	// The checks that need no ledger.
	var refusal *Refusal
	var authority string
	var runAmount int64
	var gate json.RawMessage
	var compiled *CompiledContext
	switch {
	case cp.Breaker.Threshold != 0 && s.Breaker != nil && s.Breaker.Open:
		trip := s.Breaker.Trip
		refusal = &Refusal{Code: wire.CodeBreakerOpen, Reason: fmt.Sprintf("the circuit breaker of %s tripped at %s after %d provider failures within %s (last: %s); an operator resets it with ctx breaker reset",
			p.CapabilityID, trip.LastFailure, trip.Failures, time.Duration(trip.WindowMillis)*time.Millisecond, trip.LastReason)}
	case argRefusal != nil:
		refusal = argRefusal
	default:
		refusal = func() *Refusal {
			agent, ok := tc.Agents[in.Principal]
			if !ok {
				return &Refusal{Code: wire.CodeAuthorityDenied, Reason: fmt.Sprintf("%s is not an agent of tenant %s", in.Principal, tc.ID)}
			}
			src, r := CheckAuthority(s.Authority, in.Principal, cp.ID, slices.Contains(agent.Capabilities, cp.ID))
			authority = src
			if r != nil {
				return r
			}
			if r := policy.Evaluate(args); r != nil {
				return r
			}
			if ptr := cp.RunAmount; ptr != "" {
				pp, err := ParsePointer(ptr)
				if err != nil {
					return &Refusal{Code: wire.CodeRequestMalformed, Reason: err.Error()}
				}
				v, _ := pp.Eval(args)
				amt, r := ParseAmount(v)
				if r != nil {
					return &Refusal{Code: wire.CodeRequestMalformed, Reason: "the run budget reads the amount at " + ptr + ": " + r.Reason}
				}
				runAmount = amt
			}
			if cp.Pack == nil {
				return nil
			}
			var records []*EvidenceRecord
			for _, ref := range p.EvidenceRefs {
				rec := s.Evidence[ref]
				if rec == nil {
					rec = &EvidenceRecord{}
				}
				records = append(records, rec)
			}
			cc, r := CheckEvidenceContext(*cp.Pack, RunContext{Tenant: in.Tenant, Principal: in.Principal, RunID: p.RunID, DecisionKey: cp.DecisionKey,
				DecisionTime: in.Now, AllowedSources: agent.EvidenceSources, Capabilities: []string{cp.ID}}, records)
			if cc != nil {
				compiled = cc
				if b, err := json.Marshal(cc.Gate); err == nil {
					gate = b
				}
			}
			return r
		}()
	}
	type bound struct {
		hold Hold
		key  LedgerKey
	}
	var bs []bound
	if refusal == nil {
		for _, g := range m.Guarantees {
			def := g.Definition
			if !def.Covers(p.CapabilityID) {
				continue
			}
			pg, ok := tc.Pins[def.ID]
			if !ok {
				refusal = &Refusal{Code: wire.CodeDefinitionMismatch, Reason: "guarantee " + def.ID + " is not pinned"}
				break
			}
			if pg.Refusal != nil {
				refusal = pg.Refusal
				break
			}
			res, amt, er := def.Extract(args)
			if er != nil {
				refusal = er
				break
			}
			hold := pg.Pin.PinnedHold(res, amt)
			if pg.Pin.Definition.Calendar() {
				zone := g.Zone
				if zone == nil {
					zone = time.UTC
				}
				hold.Window = pg.Pin.Definition.WindowAt(zone, in.Now).Key
			}
			bs = append(bs, bound{hold: hold, key: LedgerKey{GuaranteeID: hold.GuaranteeID, Resource: res, Window: hold.Window}})
		}
	}
	// The reserve transaction.
	holds := make([]Hold, len(bs))
	ledgers := map[LedgerKey]*Ledger{}
	for i, b := range bs {
		holds[i], ledgers[b.key] = b.hold, orNew(s.Ledgers[b.key]).Clone()
	}
	replaced := map[LedgerKey]*Ledger{}
	for _, b := range bs {
		for _, id := range tc.Pins[b.hold.GuaranteeID].Replaced {
			k := LedgerKey{GuaranteeID: id, Resource: b.hold.Resource, Window: b.hold.Window}
			if slices.ContainsFunc(bs, func(o bound) bool { return o.key == k }) {
				continue
			}
			replaced[k] = orNew(s.Ledgers[k])
		}
	}
	approvalRequired := cp.Approval == "required" || cp.Approval != "none" && cp.Risk == "high"
	controls := Controls{Authority: authority, ApprovalID: p.ApprovalID, Executor: in.Executor, EvidenceGate: gate,
		CapabilityVersion: cp.Version, Risk: cp.Risk, PolicyDigest: policy.Digest(),
		Trace: TraceOf(TraceInput{Context: compiled, EvidenceRefs: p.EvidenceRefs, Arguments: canon, ManifestDigest: m.Digest, TraceID: in.TraceID})}
	cmd := Propose{Opened: OperationOpened{OperationID: in.OperationID, Principal: in.Principal, RunID: p.RunID, OperationKey: p.OperationKey,
		CapabilityID: p.CapabilityID, ActionDigest: digest, Executor: in.Executor},
		AttemptID: in.AttemptID, Holds: holds, Refusal: refusal, ApprovalID: p.ApprovalID, Now: in.Now, RunAmount: runAmount,
		AllowUnadmitted: tc.AllowUnadmitted, Controls: controls, Arguments: canon, ApprovalRequired: approvalRequired, Risk: cp.Risk,
		SameActionFence: cp.SameActionFenced(), Pack: manifestPack(cp.Pack)}
	op := orNew(s.Op).after(nil)
	st := ProposalState{Op: op, Ledgers: ledgers, Run: orNew(s.Run), Control: s.Control, Replaced: replaced, Integrity: s.Integrity, Witness: in.Witness}
	if p.ApprovalID != "" {
		st.Approval = orNew(s.Approval)
	}
	d := DecidePropose(st, cmd)
	if d.Refusal != nil && d.Refusal.Code == wire.CodeOperationConflict {
		return unbound(d.Refusal, canon)
	}
	if d.Existing {
		return Effects{Reply: statusOf(op, HoldsOf(cmd.Holds, st.Ledgers))}
	}
	eff := Effects{Refusal: d.Refusal}
	opKey := KeyOperation(p.RunID, p.OperationKey)
	eff.put(opKey, d.Op...)
	for _, b := range bs {
		eff.put(b.key.Key(), d.Ledgers[b.key]...)
	}
	eff.put(KeyRun(p.RunID), d.Run...)
	if p.ApprovalID != "" {
		eff.put(KeyApproval(p.ApprovalID), d.Approval...)
	}
	// The reply, from the states once the decision is folded (Done).
	after := &Operation{}
	for _, ev := range d.Op {
		_ = after.Apply(ev)
	}
	for _, b := range bs {
		for _, ev := range d.Ledgers[b.key] {
			_ = ledgers[b.key].Apply(ev)
		}
	}
	replyHolds := cmd.Holds
	if d.Holds != nil {
		replyHolds = d.Holds
	}
	eff.Reply = statusOf(after, HoldsOf(replyHolds, ledgers))
	eff.Reply.Gate = gate
	if d.Refusal == nil {
		eff.Dispatch = &Dispatch{Operation: opKey, OperationID: in.OperationID, AttemptID: in.AttemptID, Generation: after.Generation,
			CapabilityID: p.CapabilityID, Arguments: canon, Holds: d.Holds, Controls: d.Controls, Gate: gate}
	}
	return eff
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
