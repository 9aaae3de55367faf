package kernel

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/contextos/ledger/wire"
)

func mustArgs(t *testing.T, s string) map[string]any {
	t.Helper()
	a, r := DecodeArguments([]byte(s))
	if r != nil {
		t.Fatalf("arguments %s: %v", s, r)
	}
	return a
}

func refundPolicy(t *testing.T) *CompiledPolicy {
	t.Helper()
	p, err := CompilePolicy(Policy{MaxAmount: 90000, AmountPointer: "/amount_minor",
		Allowed:  []AllowedValues{{Pointer: "/currency", Values: []string{"INR"}}},
		Patterns: []PatternRule{{Pointer: "/order_id", Regexp: `ord_[0-9]+`}}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func fold(t *testing.T, s interface{ Apply(Event) error }, evs []Event) {
	t.Helper()
	for _, ev := range evs {
		// Through the codec, as the store would give it back.
		b, err := Canonical(ev)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeEvent(ev.EventType(), EventVersion, b)
		if err != nil {
			t.Fatalf("decode %s: %v", ev.EventType(), err)
		}
		if err := s.Apply(back); err != nil {
			t.Fatalf("apply %s: %v", ev.EventType(), err)
		}
	}
}

const digestA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
const digestB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

// TestAuthorizationTable walks every authorization control and the
// evidence gate through the kernel: each row is one decision
// and the code it must give ("" = allowed). The controls are distinct: no
// row passes one control by satisfying another.
func TestAuthorizationTable(t *testing.T) {
	t0 := time.Date(2026, 10, 26, 12, 0, 0, 0, time.UTC)
	pol := refundPolicy(t)

	revoked := &Authority{}
	fold(t, revoked, DecideAuthorityChange(revoked, ChangeAuthority{Principal: "agent_chat", CapabilityID: "refund", Operator: "ops_alice"}).Events)
	granted := &Authority{}
	fold(t, granted, DecideAuthorityChange(granted, ChangeAuthority{Principal: "agent_chat", CapabilityID: "lookup", Grant: true, Operator: "ops_alice"}).Events)

	approval := &Approval{}
	fold(t, approval, DecideApprovalGrant(approval, GrantApproval{ApprovalID: "ap1", ActionDigest: digestA, Risk: "high", Operator: "ops_alice", Now: t0, TTL: time.Hour}).Events)
	redeemed := &Approval{}
	fold(t, redeemed, DecideApprovalGrant(redeemed, GrantApproval{ApprovalID: "ap1", ActionDigest: digestA, Risk: "high", Operator: "ops_alice", Now: t0, TTL: time.Hour}).Events)
	fold(t, redeemed, DecideApproval(redeemed, RedeemApproval{Required: true, ApprovalID: "ap1", ActionDigest: digestA, Risk: "high", OperationID: "op1", Now: t0}).Events)
	redeem := func(a *Approval, id, digest, risk string, at time.Time) *Refusal {
		return DecideApproval(a, RedeemApproval{Required: true, ApprovalID: id, ActionDigest: digest, Risk: risk, OperationID: "op2", Now: at}).Refusal
	}

	run := &Run{}
	fold(t, run, DecideAdmit(run, nil, AdmitRun{RunID: "r1", Principal: "agent_email", Operator: "ops_alice", Calls: 2, Amount: 1000}).Child)
	consume := func(r *Run, principal string, amount int64, allow bool) *Refusal {
		return DecideConsume(r, ConsumeRun{RunID: "r1", Principal: principal, OperationID: "op", AttemptID: "at", Amount: amount, AllowUnadmitted: allow}).Refusal
	}
	spent := &Run{}
	fold(t, spent, DecideAdmit(spent, nil, AdmitRun{RunID: "r1", Principal: "agent_email", Operator: "ops_alice", Calls: 1, Amount: 1000}).Child)
	fold(t, spent, DecideConsume(spent, ConsumeRun{RunID: "r1", Principal: "agent_email", Amount: 10}).Events)

	pack, records := seedEvidence(t)
	resolved := seedResolved(t, records)
	runCtx := RunContext{Tenant: "acme", Principal: "agent_email", RunID: "run_01", DecisionKey: "support.refund.execute", DecisionTime: t0,
		AllowedSources: []string{"kg", "crm", "ledger", "policy_store", "idp", "memory"}, Capabilities: []string{"adp_payments.issue_refund"}}
	evidence := func(run RunContext, recs []*EvidenceRecord) *Refusal {
		_, r := CheckEvidence(pack, run, recs)
		return r
	}
	late := runCtx
	late.DecisionTime = t0.Add(2 * time.Hour)

	rows := []struct {
		name string
		got  *Refusal
		want wire.Code
	}{
		{"authority: configured grant", second(CheckAuthority(&Authority{}, "agent_chat", "refund", true)), ""},
		{"authority: no grant", second(CheckAuthority(&Authority{}, "agent_chat", "refund", false)), wire.CodeAuthorityDenied},
		{"authority: configured grant revoked", second(CheckAuthority(revoked, "agent_chat", "refund", true)), wire.CodeAuthorityDenied},
		{"authority: revocation is per capability", second(CheckAuthority(revoked, "agent_chat", "lookup", true)), ""},
		{"authority: revocation is per principal", second(CheckAuthority(revoked, "agent_email", "refund", true)), ""},
		{"authority: operator grant beyond config", second(CheckAuthority(granted, "agent_chat", "lookup", false)), ""},

		{"policy: within", pol.Evaluate(mustArgs(t, `{"order_id":"ord_881","amount_minor":80000,"currency":"INR"}`)), ""},
		{"policy: over max_amount", pol.Evaluate(mustArgs(t, `{"order_id":"ord_881","amount_minor":90001,"currency":"INR"}`)), wire.CodePolicyDenied},
		{"policy: amount a string", pol.Evaluate(mustArgs(t, `{"order_id":"ord_881","amount_minor":"1","currency":"INR"}`)), wire.CodePolicyDenied},
		{"policy: currency not allowed", pol.Evaluate(mustArgs(t, `{"order_id":"ord_881","amount_minor":1,"currency":"USD"}`)), wire.CodePolicyDenied},
		{"policy: currency missing", pol.Evaluate(mustArgs(t, `{"order_id":"ord_881","amount_minor":1}`)), wire.CodePolicyDenied},
		{"policy: id pattern is anchored", pol.Evaluate(mustArgs(t, `{"order_id":"xord_881","amount_minor":1,"currency":"INR"}`)), wire.CodePolicyDenied},
		{"policy: id not a string", pol.Evaluate(mustArgs(t, `{"order_id":881,"amount_minor":1,"currency":"INR"}`)), wire.CodePolicyDenied},

		{"approval: none needed, none named", DecideApproval(nil, RedeemApproval{Risk: "low", ActionDigest: digestA, Now: t0}).Refusal, ""},
		{"approval: required, none named", DecideApproval(nil, RedeemApproval{Required: true, Risk: "high", ActionDigest: digestA, Now: t0}).Refusal, wire.CodeApprovalRequired},
		{"approval: unknown id", redeem(&Approval{}, "ap9", digestA, "high", t0), wire.CodeApprovalRequired},
		{"approval: exact", redeem(approval, "ap1", digestA, "high", t0), ""},
		{"approval: other digest", redeem(approval, "ap1", digestB, "high", t0), wire.CodeApprovalMismatch},
		{"approval: other risk", redeem(approval, "ap1", digestA, "medium", t0), wire.CodeApprovalMismatch},
		{"approval: last instant", redeem(approval, "ap1", digestA, "high", t0.Add(time.Hour-time.Nanosecond)), ""},
		{"approval: expired", redeem(approval, "ap1", digestA, "high", t0.Add(time.Hour)), wire.CodeApprovalExpired},
		{"approval: redeemed", redeem(redeemed, "ap1", digestA, "high", t0), wire.CodeApprovalRedeemed},
		{"approval: named though not required is still checked", DecideApproval(redeemed, RedeemApproval{ApprovalID: "ap1", ActionDigest: digestA, Risk: "high", Now: t0}).Refusal, wire.CodeApprovalRedeemed},

		{"budget: within", consume(run, "agent_email", 1000, false), ""},
		{"budget: amount over", consume(run, "agent_email", 1001, false), wire.CodeRunBudgetExhausted},
		{"budget: calls spent", consume(spent, "agent_email", 0, false), wire.CodeRunBudgetExhausted},
		{"budget: never admitted, refused", consume(&Run{}, "agent_email", 1, false), wire.CodeRunBudgetExhausted},
		{"budget: never admitted, allowed unbudgeted", consume(&Run{}, "agent_email", 1, true), ""},
		{"budget: admitted for another principal", consume(run, "agent_chat", 1, false), wire.CodeAuthorityDenied},
		{"budget: child larger than parent", DecideAdmit(&Run{}, run, AdmitRun{RunID: "c1", ParentRunID: "r1", Principal: "agent_chat", Operator: "ops_alice", Calls: 3, Amount: 1}).Refusal, wire.CodeRunBudgetExhausted},
		{"budget: child of a run never admitted", DecideAdmit(&Run{}, &Run{}, AdmitRun{RunID: "c1", ParentRunID: "r0", Principal: "agent_chat", Operator: "ops_alice", Calls: 1}).Refusal, wire.CodeRunBudgetExhausted},
		{"budget: admitted twice with another budget", DecideAdmit(run, nil, AdmitRun{RunID: "r1", Principal: "agent_email", Operator: "ops_alice", Calls: 3, Amount: 1000}).Refusal, wire.CodeRunAlreadyAdmitted},

		{"evidence: seed conflict unresolved", evidence(runCtx, records), wire.CodeEvidenceInsufficient},
		{"evidence: resolved by accountable review", evidence(runCtx, resolved), ""},
		{"evidence: resolved but judged after it expired", evidence(late, resolved), wire.CodeEvidenceInsufficient},
		{"evidence: nothing named", evidence(runCtx, nil), wire.CodeEvidenceInsufficient},
	}
	for _, r := range rows {
		var got wire.Code
		if r.got != nil {
			got = r.got.Code
			if r.got.Reason == "" {
				t.Errorf("%s: refusal without a reason", r.name)
			}
		}
		if got != r.want {
			t.Errorf("%s: got %q (%v), want %q", r.name, got, r.got, r.want)
		}
	}
}

func second(_ string, r *Refusal) *Refusal { return r }

// seedEvidence loads the seed pack and the ord_881/ord_992 conflict vector
// and publishes each candidate and the unresolved marker into records.
func seedEvidence(t *testing.T) (ContextPack, []*EvidenceRecord) {
	t.Helper()
	read := func(name string) []byte {
		b, err := os.ReadFile("../testdata/context/conflict_unresolved/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	pack, err := ParseContextPack(read("pack.json"))
	if err != nil {
		t.Fatal(err)
	}
	cands, err := ParseEvidence(read("evidence.json"))
	if err != nil {
		t.Fatal(err)
	}
	markers, err := ParseMarkers(read("markers.json"))
	if err != nil {
		t.Fatal(err)
	}
	byRef := map[string]*EvidenceRecord{}
	var records []*EvidenceRecord
	for _, c := range cands {
		r := &EvidenceRecord{}
		d := DecidePublishEvidence(r, PublishEvidence{Tenant: "acme", Operator: "ops_alice", Candidate: c})
		if d.Refusal != nil {
			t.Fatalf("publish %s: %v", c.Ref, d.Refusal)
		}
		fold(t, r, d.Events)
		byRef[c.Ref] = r
		records = append(records, r)
	}
	for _, m := range markers {
		for _, ref := range m.EvidenceRefs {
			d := DecideMarkEvidence(byRef[ref], MarkEvidence{Ref: ref, Operator: "ops_alice", Marker: m})
			if d.Refusal != nil {
				t.Fatalf("mark %s: %v", ref, d.Refusal)
			}
			fold(t, byRef[ref], d.Events)
		}
	}
	return pack, records
}

// seedResolved returns copies of records with the seed conflict resolved
// by ops_alice's review selecting the knowledge-graph snapshot.
func seedResolved(t *testing.T, records []*EvidenceRecord) []*EvidenceRecord {
	t.Helper()
	var out []*EvidenceRecord
	for _, r := range records {
		c := &EvidenceRecord{Ref: r.Ref, Candidate: r.Candidate, Markers: map[string]EvidenceConflictMarker{}}
		for id, m := range r.Markers {
			c.Markers[id] = m
			m.Status = ConflictResolved
			m.Resolution = &ConflictResolution{ResolutionRef: "review:order-resolution:441", Kind: ResolutionAccountableReview,
				ResolvedBy: "ops_alice", SelectedEvidenceRefs: []string{"kg:order:ord_881#snapshot_41"}}
			d := DecideMarkEvidence(c, MarkEvidence{Ref: r.Ref, Operator: "ops_alice", Marker: m})
			if d.Refusal != nil {
				t.Fatalf("resolve on %s: %v", r.Ref, d.Refusal)
			}
			fold(t, c, d.Events)
		}
		out = append(out, c)
	}
	return out
}

// TestPolicyDigest: the digest names the policy, not its spelling: list
// order and duplicates do not change it; any constraint does.
func TestPolicyDigest(t *testing.T) {
	a, err := CompilePolicy(Policy{MaxAmount: 5, AmountPointer: "/a",
		Allowed: []AllowedValues{{Pointer: "/c", Values: []string{"INR", "EUR", "INR"}}, {Pointer: "/b", Values: []string{"x"}}}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := CompilePolicy(Policy{AmountPointer: "/a", MaxAmount: 5,
		Allowed: []AllowedValues{{Pointer: "/b", Values: []string{"x"}}, {Pointer: "/c", Values: []string{"EUR", "INR"}}}})
	c, _ := CompilePolicy(Policy{AmountPointer: "/a", MaxAmount: 6,
		Allowed: []AllowedValues{{Pointer: "/b", Values: []string{"x"}}, {Pointer: "/c", Values: []string{"EUR", "INR"}}}})
	if a.Digest() != b.Digest() || a.Digest() == c.Digest() || len(a.Digest()) != 64 {
		t.Fatalf("digests %s %s %s", a.Digest(), b.Digest(), c.Digest())
	}
	for _, bad := range []Policy{
		{MaxAmount: 5},
		{MaxAmount: -1, AmountPointer: "/a"},
		{Allowed: []AllowedValues{{Pointer: "/c"}}},
		{Allowed: []AllowedValues{{Pointer: "/c", Values: []string{"a"}}, {Pointer: "/c", Values: []string{"b"}}}},
		{Patterns: []PatternRule{{Pointer: "/id", Regexp: "("}}},
		{Patterns: []PatternRule{{Pointer: "", Regexp: "a"}}},
	} {
		if _, err := CompilePolicy(bad); err == nil {
			t.Errorf("policy %+v compiled", bad)
		}
	}
}

// TestApprovalFold: a redemption folds once; the grant's bounds are
// enforced; expiry is judged at the time given, never a clock.
func TestApprovalFold(t *testing.T) {
	t0 := time.Date(2026, 10, 26, 12, 0, 0, 0, time.UTC)
	a := &Approval{}
	for _, bad := range []GrantApproval{
		{ApprovalID: "x", ActionDigest: "ABC", Risk: "high", Operator: "o", Now: t0, TTL: time.Minute},
		{ApprovalID: "x", ActionDigest: digestA, Risk: "extreme", Operator: "o", Now: t0, TTL: time.Minute},
		{ApprovalID: "x", ActionDigest: digestA, Risk: "high", Operator: "o", Now: t0, TTL: 0},
		{ApprovalID: "x", ActionDigest: digestA, Risk: "high", Operator: "o", Now: t0, TTL: MaxApprovalTTL + 1},
		{ApprovalID: "x", ActionDigest: digestA, Risk: "high", Operator: "o", TTL: time.Minute},
	} {
		if d := DecideApprovalGrant(a, bad); d.Refusal == nil || d.Refusal.Code != wire.CodeRequestMalformed {
			t.Errorf("grant %+v: %+v", bad, d)
		}
	}
	g := DecideApprovalGrant(a, GrantApproval{ApprovalID: "x", ActionDigest: digestA, Risk: "high", Operator: "o", Now: t0, TTL: time.Minute})
	fold(t, a, g.Events)
	if d := DecideApprovalGrant(a, GrantApproval{ApprovalID: "x", ActionDigest: digestA, Risk: "high", Operator: "o", Now: t0, TTL: time.Minute}); d.Refusal == nil {
		t.Fatal("an approval id was granted twice")
	}
	d := DecideApproval(a, RedeemApproval{ApprovalID: "x", ActionDigest: digestA, Risk: "high", OperationID: "op1", Now: t0})
	fold(t, a, d.Events)
	if err := a.Apply(d.Events[0]); err == nil {
		t.Fatal("a second redemption folded")
	}
	if a.RedeemedBy != "op1" {
		t.Fatalf("redeemed by %q", a.RedeemedBy)
	}
}

// TestRunDelegationConserves: whatever order children are admitted and
// consume in, parent available + children's budgets == the parent's
// admission, and no run goes below zero.
func TestRunDelegationConserves(t *testing.T) {
	parent := &Run{}
	fold(t, parent, DecideAdmit(parent, nil, AdmitRun{RunID: "p", Principal: "a", Operator: "o", Calls: 10, Amount: 10000}).Child)
	var children []*Run
	for i := 0; i < 6; i++ {
		c := &Run{}
		d := DecideAdmit(c, parent, AdmitRun{RunID: "c" + string(rune('0'+i)), ParentRunID: "p", Principal: "b", Operator: "o", Calls: 2, Amount: 3000})
		if i >= 3 {
			if d.Refusal == nil || d.Refusal.Code != wire.CodeRunBudgetExhausted {
				t.Fatalf("child %d: %+v", i, d)
			}
			continue
		}
		if d.Refusal != nil {
			t.Fatalf("child %d: %v", i, d.Refusal)
		}
		fold(t, c, d.Child)
		fold(t, parent, d.Parent)
		children = append(children, c)
	}
	calls, amount := parent.Available()
	for _, c := range children {
		calls += c.Calls
		amount += c.Amount
	}
	if calls != 10 || amount != 10000 {
		t.Fatalf("budget not conserved: calls %d amount %d", calls, amount)
	}
	// A child spends its own budget, never the parent's.
	c := children[0]
	for i := 0; i < 3; i++ {
		d := DecideConsume(c, ConsumeRun{RunID: c.RunID, Principal: "b", Amount: 1000})
		if i == 2 {
			if d.Refusal == nil || d.Refusal.Code != wire.CodeRunBudgetExhausted {
				t.Fatalf("third call of a 2-call child: %+v", d)
			}
			break
		}
		fold(t, c, d.Events)
	}
	if pc, pa := parent.Available(); pc != 4 || pa != 1000 {
		t.Fatalf("parent changed by a child's spending: %d %d", pc, pa)
	}
	if !strings.Contains(c.Describe(), "calls 2+0 delegated of 2") {
		t.Fatalf("describe: %s", c.Describe())
	}
}

// TestEvidenceRecordRules: a ref's candidate is immutable, a marker may
// only move to resolved, a resolution is final, a review names its
// publisher, and a candidate of another tenant is refused.
func TestEvidenceRecordRules(t *testing.T) {
	_, records := seedEvidence(t)
	var kg *EvidenceRecord
	for _, r := range records {
		if strings.HasPrefix(r.Ref, "kg:") {
			kg = r
		}
	}
	cand := *kg.Candidate
	if d := DecidePublishEvidence(kg, PublishEvidence{Tenant: "acme", Operator: "ops_bob", Candidate: cand}); d.Refusal != nil || len(d.Events) != 0 {
		t.Fatalf("republishing the same candidate: %+v", d)
	}
	changed := cand
	changed.Verified = false
	if d := DecidePublishEvidence(kg, PublishEvidence{Tenant: "acme", Operator: "ops_alice", Candidate: changed}); d.Refusal == nil || d.Refusal.Code != wire.CodeEvidenceRecordConflict {
		t.Fatalf("changing a published candidate: %+v", d)
	}
	other := cand
	other.Ref = "kg:new"
	if d := DecidePublishEvidence(&EvidenceRecord{}, PublishEvidence{Tenant: "globex", Operator: "ops_alice", Candidate: other}); d.Refusal == nil || d.Refusal.Code != wire.CodeAuthorityDenied {
		t.Fatalf("cross-tenant publish: %+v", d)
	}
	var m EvidenceConflictMarker
	for _, x := range kg.Markers {
		m = x
	}
	m.Status = ConflictResolved
	m.Resolution = &ConflictResolution{ResolutionRef: "review:1", Kind: ResolutionAccountableReview, ResolvedBy: "ops_mallory",
		SelectedEvidenceRefs: []string{kg.Ref}}
	if d := DecideMarkEvidence(kg, MarkEvidence{Ref: kg.Ref, Operator: "ops_alice", Marker: m}); d.Refusal == nil || d.Refusal.Code != wire.CodeAuthorityDenied {
		t.Fatalf("review in another's name: %+v", d)
	}
	m.Resolution.ResolvedBy = "ops_alice"
	d := DecideMarkEvidence(kg, MarkEvidence{Ref: kg.Ref, Operator: "ops_alice", Marker: m})
	if d.Refusal != nil {
		t.Fatal(d.Refusal)
	}
	fold(t, kg, d.Events)
	m.Resolution.SelectedEvidenceRefs = []string{"crm:order:ord_881#snapshot_19"}
	if d := DecideMarkEvidence(kg, MarkEvidence{Ref: kg.Ref, Operator: "ops_alice", Marker: m}); d.Refusal == nil || d.Refusal.Code != wire.CodeEvidenceRecordConflict {
		t.Fatalf("re-resolving: %+v", d)
	}
	m.Status, m.Resolution = ConflictUnresolved, nil
	if d := DecideMarkEvidence(kg, MarkEvidence{Ref: kg.Ref, Operator: "ops_alice", Marker: m}); d.Refusal == nil || d.Refusal.Code != wire.CodeEvidenceRecordConflict {
		t.Fatalf("un-resolving: %+v", d)
	}
	// The gate a refusal carries encodes with DESIGN's field names.
	pack, recs := seedEvidence(t)
	gate, r := CheckEvidence(pack, RunContext{Tenant: "acme", Principal: "agent_email", RunID: "r", DecisionKey: "support.refund.execute",
		DecisionTime: time.Date(2026, 10, 26, 12, 0, 0, 0, time.UTC), AllowedSources: []string{"kg", "crm", "policy_store", "idp"}}, recs)
	if r == nil || gate == nil {
		t.Fatal("the seed conflict passed the gate")
	}
	b, _ := json.Marshal(gate)
	for _, f := range []string{`"decision_key":"support.refund.execute"`, `"unresolved":["order_lookup"]`, `"commit_allowed":false`, `"conflict_id":"conflict:order:ord_881:identity"`} {
		if !strings.Contains(string(b), f) {
			t.Errorf("gate %s lacks %s", b, f)
		}
	}
}

// TestDecideApprovalDeny: a denial needs a reason; it answers a request no
// under a new id, or withdraws an unused grant (its digest and risk, when
// named, must be the grant's); a redeemed approval can no longer be denied;
// denying twice changes nothing; and a denied approval never redeems.
func TestDecideApprovalDeny(t *testing.T) {
	now := time.Date(2026, 10, 26, 12, 0, 0, 0, time.UTC)
	digest := strings.Repeat("ab", 32)
	grant := func() *Approval {
		a := &Approval{}
		d := DecideApprovalGrant(a, GrantApproval{ApprovalID: "ap1", ActionDigest: digest, Risk: "high", Operator: "op", Now: now, TTL: time.Hour})
		if err := a.Apply(d.Events[0]); err != nil {
			t.Fatal(err)
		}
		return a
	}
	deny := DenyApproval{ApprovalID: "ap1", Operator: "op", Reason: "no", Now: now}
	redeemed := grant()
	if err := redeemed.Apply(ApprovalRedeemed{ApprovalID: "ap1", OperationID: "o1", ActionDigest: digest}); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		a    *Approval
		cmd  DenyApproval
		code wire.Code
		evs  int
	}{
		"request":        {&Approval{}, DenyApproval{ApprovalID: "ap1", ActionDigest: digest, Risk: "high", Operator: "op", Reason: "no", Now: now}, "", 1},
		"request digest": {&Approval{}, DenyApproval{ApprovalID: "ap1", ActionDigest: "x", Risk: "high", Operator: "op", Reason: "no", Now: now}, wire.CodeRequestMalformed, 0},
		"no reason":      {grant(), DenyApproval{ApprovalID: "ap1", Operator: "op", Now: now}, wire.CodeRequestMalformed, 0},
		"withdraw":       {grant(), deny, "", 1},
		"other risk":     {grant(), DenyApproval{ApprovalID: "ap1", Risk: "low", Operator: "op", Reason: "no", Now: now}, wire.CodeApprovalMismatch, 0},
		"redeemed":       {redeemed, deny, wire.CodeApprovalRedeemed, 0},
	} {
		d := DecideApprovalDeny(c.a, c.cmd)
		if got := codeOf(d.Refusal); got != c.code || len(d.Events) != c.evs {
			t.Errorf("%s: %v %d events, want %q %d", name, d.Refusal, len(d.Events), c.code, c.evs)
			continue
		}
		if len(d.Events) == 0 {
			continue
		}
		if err := c.a.Apply(d.Events[0]); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if again := DecideApprovalDeny(c.a, deny); again.Refusal != nil || len(again.Events) != 0 {
			t.Errorf("%s: second denial %+v", name, again)
		}
		r := DecideApproval(c.a, RedeemApproval{Required: true, ApprovalID: "ap1", ActionDigest: digest, Risk: "high", Now: now})
		if codeOf(r.Refusal) != wire.CodeApprovalDenied {
			t.Errorf("%s: redemption of a denied approval: %+v", name, r)
		}
	}
}

func codeOf(r *Refusal) wire.Code {
	if r == nil {
		return ""
	}
	return r.Code
}
