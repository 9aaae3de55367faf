package kernel

import (
	"strings"
	"testing"

	"github.com/contextos/ledger/wire"
)

// TestAdmit walks every branch of admission in its order: identity, body
// bound, rate, lane, and what each asks the door to measure next.
func TestAdmit(t *testing.T) {
	agent := AdmitInput{Kind: AdmitProposal, Tenant: "acme", Principal: "agent_a", TenantKnown: true, Size: 10, MaxSize: 100}
	with := func(in AdmitInput, f func(*AdmitInput)) AdmitInput { f(&in); return in }
	op := with(agent, func(in *AdmitInput) { in.Kind, in.Principal, in.IsOperator = AdmitOperator, "ops_alice", true })
	compile := with(agent, func(in *AdmitInput) { in.Kind = AdmitCompile })
	for _, tc := range []struct {
		name      string
		in        AdmitInput
		code      wire.Code
		reason    string
		next      Measure
		oversized string
	}{
		{name: "unknown tenant", in: with(agent, func(in *AdmitInput) { in.TenantKnown = false }),
			code: wire.CodeAuthorityDenied, reason: "unknown tenant"},
		{name: "unknown tenant before ops", in: with(agent, func(in *AdmitInput) { in.TenantKnown, in.Principal = false, "ops" }),
			code: wire.CodeAuthorityDenied, reason: "unknown tenant"},
		{name: "ops", in: with(agent, func(in *AdmitInput) { in.Principal = "ops" }),
			code: wire.CodeAuthorityDenied, reason: "ops is not a principal"},
		{name: "ops as operator", in: with(op, func(in *AdmitInput) { in.Principal = "ops" }),
			code: wire.CodeAuthorityDenied, reason: "ops is not a principal"},
		{name: "not an operator", in: with(op, func(in *AdmitInput) { in.IsOperator = false }),
			code: wire.CodeAuthorityDenied, reason: "ops_alice is not an operator of tenant acme"},
		{name: "an agent needs no operator role", in: with(agent, func(in *AdmitInput) { in.IsOperator = false }), next: MeasureRate},
		{name: "identity before the body bound", in: with(op, func(in *AdmitInput) { in.IsOperator, in.Size = false, 1000 }),
			code: wire.CodeAuthorityDenied, reason: "ops_alice is not an operator of tenant acme"},
		{name: "rate first", in: agent, next: MeasureRate},
		{name: "rate limited", in: with(agent, func(in *AdmitInput) { in.Rate = Failed }),
			code: wire.CodeRateLimited, reason: "more proposals than agent_a's rate limit allows; nothing was stored, slow down"},
		{name: "compile rate limited", in: with(compile, func(in *AdmitInput) { in.Rate = Failed }),
			code: wire.CodeRateLimited, reason: "more proposals than agent_a's rate limit allows; nothing was stored, slow down"},
		{name: "operator rate limited", in: with(op, func(in *AdmitInput) { in.Rate = Failed }),
			code: wire.CodeRateLimited, reason: "more requests than ops_alice's rate limit allows; nothing was stored, slow down"},
		{name: "lane after rate", in: with(agent, func(in *AdmitInput) { in.Rate = Passed }), next: MeasureLane},
		{name: "overloaded", in: with(agent, func(in *AdmitInput) { in.Rate, in.Lane = Passed, Failed }),
			code: wire.CodeOverloaded, reason: "tenant acme has every proposal worker busy and its queue full; nothing was stored, retry later"},
		{name: "operator overloaded", in: with(op, func(in *AdmitInput) { in.Rate, in.Lane = Passed, Failed }),
			code: wire.CodeOverloaded, reason: "tenant acme has every operator worker busy and its queue full; nothing was stored, retry later"},
		{name: "queued", in: with(agent, func(in *AdmitInput) { in.Rate, in.Lane = Passed, Passed })},
		{name: "at the bound", in: with(agent, func(in *AdmitInput) { in.Size = 100 }), next: MeasureRate},
		{name: "oversized spends no token", in: with(agent, func(in *AdmitInput) { in.Size = 101 }), next: MeasureLane,
			oversized: "proposal of 101 bytes exceeds 100"},
		{name: "oversized ignores the rate", in: with(agent, func(in *AdmitInput) { in.Size, in.Rate = 101, Failed }), next: MeasureLane,
			oversized: "proposal of 101 bytes exceeds 100"},
		{name: "oversized queued", in: with(agent, func(in *AdmitInput) { in.Size, in.Lane = 101, Passed }),
			oversized: "proposal of 101 bytes exceeds 100"},
		{name: "oversized compile", in: with(compile, func(in *AdmitInput) { in.Size, in.Lane = 101, Passed }),
			oversized: "compile request of 101 bytes exceeds 100"},
		{name: "oversized operator", in: with(op, func(in *AdmitInput) { in.Size, in.Lane = 101, Passed }),
			oversized: "operator request of 101 bytes exceeds 100"},
		{name: "oversized overloaded", in: with(agent, func(in *AdmitInput) { in.Size, in.Lane = 101, Failed }),
			code: wire.CodeOverloaded, reason: "tenant acme has every proposal worker busy and its queue full; nothing was stored, retry later"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := Admit(tc.in)
			if got := refusalString(a.Refusal); got != refusalString(refusalOrNil(tc.code, tc.reason)) {
				t.Errorf("refusal %s, want %s", got, refusalString(refusalOrNil(tc.code, tc.reason)))
			}
			if a.Next != tc.next {
				t.Errorf("next %d, want %d", a.Next, tc.next)
			}
			want := refusalOrNil(wire.CodeRequestMalformed, tc.oversized)
			if tc.oversized == "" {
				want = nil
			}
			if got := refusalString(a.Oversized); got != refusalString(want) {
				t.Errorf("oversized %s, want %s", got, refusalString(want))
			}
			if a.Refusal != nil && (a.Next != MeasureNone || a.Oversized != nil) {
				t.Errorf("a refusal with more: %+v", a)
			}
		})
	}
}

func refusalOrNil(code wire.Code, reason string) *Refusal {
	if code == "" {
		return nil
	}
	return &Refusal{Code: code, Reason: reason}
}

func refusalString(r *Refusal) string {
	if r == nil {
		return "none"
	}
	return r.Error()
}

// TestAdmitMeasuresInOrder drives Admit as a door does, measuring what it
// asks for: a denied rate leaves the lane unmeasured.
func TestAdmitMeasuresInOrder(t *testing.T) {
	for _, tc := range []struct {
		rate, lane bool
		measured   []Measure
		code       wire.Code
	}{
		{rate: true, lane: true, measured: []Measure{MeasureRate, MeasureLane}},
		{rate: false, lane: true, measured: []Measure{MeasureRate}, code: wire.CodeRateLimited},
		{rate: true, lane: false, measured: []Measure{MeasureRate, MeasureLane}, code: wire.CodeOverloaded},
	} {
		in := AdmitInput{Tenant: "acme", Principal: "agent_a", TenantKnown: true, MaxSize: 100}
		var measured []Measure
		var a Admission
		for a = Admit(in); a.Next != MeasureNone; a = Admit(in) {
			measured = append(measured, a.Next)
			switch a.Next {
			case MeasureRate:
				in.Rate = VerdictOf(tc.rate)
			case MeasureLane:
				in.Lane = VerdictOf(tc.lane)
			}
		}
		if len(measured) != len(tc.measured) || (a.Refusal == nil) != (tc.code == "") || a.Refusal != nil && a.Refusal.Code != tc.code {
			t.Errorf("rate %v lane %v: measured %v, refusal %v; want %v, %s", tc.rate, tc.lane, measured, a.Refusal, tc.measured, tc.code)
		}
	}
}

func TestCheckOperator(t *testing.T) {
	for _, tc := range []struct {
		known, op bool
		refused   bool
	}{{true, true, false}, {true, false, true}, {false, false, true}, {false, true, true}} {
		r := CheckOperator(tc.known, tc.op, "ops_alice", "acme")
		if (r != nil) != tc.refused || r != nil && r.Error() != string(wire.CodeAuthorityDenied)+": ops_alice is not an operator of tenant acme" {
			t.Errorf("known %v operator %v: %v", tc.known, tc.op, r)
		}
	}
}

func TestCheckReplySubject(t *testing.T) {
	inbox := wire.InboxPrefix("acme", "agent_a")
	if r := CheckReplySubject(inbox+".x1", "acme", "agent_a"); r != nil {
		t.Errorf("own inbox refused: %v", r)
	}
	r := CheckReplySubject(wire.InboxPrefix("acme", "agent_b")+".x1", "acme", "agent_a")
	if r == nil || r.Code != wire.CodeRequestMalformed || r.Reason != "reply subject outside the principal's inbox "+inbox+".>" {
		t.Errorf("another's inbox: %v", r)
	}
}

func TestAuthorizeCompile(t *testing.T) {
	ok := CompileAccess{Tenant: "acme", Principal: "agent_a", CapabilityID: "refund", Agent: true, Surfaced: true, HasPack: true}
	for _, tc := range []struct {
		name string
		a    CompileAccess
		want string
	}{
		{"allowed", ok, "none"},
		{"not an agent", CompileAccess{Tenant: "acme", Principal: "agent_a", CapabilityID: "refund"},
			string(wire.CodeAuthorityDenied) + ": agent_a is not an agent of tenant acme"},
		{"not surfaced", CompileAccess{Tenant: "acme", Principal: "agent_a", CapabilityID: "refund", Agent: true},
			string(wire.CodeCapabilityNotSurfaced) + ": capability refund is not in the manifest"},
		{"no pack", CompileAccess{Tenant: "acme", Principal: "agent_a", CapabilityID: "refund", Agent: true, Surfaced: true},
			string(wire.CodeContextInvalid) + ": capability refund has no context pack"},
	} {
		if got := refusalString(AuthorizeCompile(tc.a)); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestParseContextRequest(t *testing.T) {
	long := strings.Repeat("x", wire.MaxIDBytes+1)
	for _, tc := range []struct{ body, want string }{
		{`{"run_id":"r1","capability_id":"refund"}`, "none"},
		{`{"run_id":"r1"}`, string(wire.CodeRequestMalformed) + ": capability_id is required"},
		{`{"run_id":"` + long + `","capability_id":"refund"}`, string(wire.CodeRequestMalformed) + ": run_id is longer than " + itoa(wire.MaxIDBytes) + " bytes"},
		{`{"run_id":"r1","capability_id":"refund","evidence_refs":[""]}`,
			string(wire.CodeRequestMalformed) + ": evidence refs must be non-empty and at most " + itoa(wire.MaxEvidenceRefBytes) + " bytes"},
	} {
		_, r := ParseContextRequest([]byte(tc.body))
		if got := refusalString(r); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.body, got, tc.want)
		}
	}
	if _, r := ParseContextRequest([]byte(`{"run_id":"r1","capability_id":"refund","extra":1}`)); r == nil || r.Code != wire.CodeRequestMalformed ||
		!strings.HasPrefix(r.Reason, "compile request: ") {
		t.Errorf("unknown field: %v", r)
	}
}

func TestCheckImportRow(t *testing.T) {
	if got := refusalString(CheckImportRow(ImportRow{GuaranteeID: "g"})); got != string(wire.CodeResourceInvalid)+": the row names no resource" {
		t.Errorf("no resource: %s", got)
	}
	if r := CheckImportRow(ImportRow{GuaranteeID: "g", Resource: "ord_1"}); r != nil {
		t.Errorf("a resource: %v", r)
	}
}

func TestResolvePin(t *testing.T) {
	pin := &Pin{}
	bad := &Refusal{Code: wire.CodeDefinitionMismatch, Reason: "differs"}
	for _, tc := range []struct {
		name string
		p    PinnedGuarantee
		ok   bool
		want string
		pin  bool
	}{
		{"absent", PinnedGuarantee{}, false, string(wire.CodeDefinitionMismatch) + ": guarantee g is not pinned", false},
		{"empty", PinnedGuarantee{}, true, string(wire.CodeDefinitionMismatch) + ": guarantee g is not pinned", false},
		{"refused", PinnedGuarantee{Pin: pin, Refusal: bad}, true, string(wire.CodeDefinitionMismatch) + ": differs", false},
		{"pinned", PinnedGuarantee{Pin: pin}, true, "none", true},
	} {
		p, r := ResolvePin("g", tc.p, tc.ok)
		if got := refusalString(r); got != tc.want || (p.Pin == pin) != tc.pin {
			t.Errorf("%s: %s (pin %v), want %s", tc.name, got, p.Pin, tc.want)
		}
	}
	if got := refusalString(CheckPinnedHistory(&Pin{}, "g", "acme")); got != string(wire.CodeDefinitionMismatch)+": guarantee g is not pinned in tenant acme" {
		t.Errorf("history of an unpinned guarantee: %s", got)
	}
}

func TestOperatorReplyRefused(t *testing.T) {
	ev := OperatorReplyRefused("ops_alice", "kill-switch", []byte("{}"), wire.OpReply{Code: wire.CodeRequestMalformed, Reason: "bad"})
	if ev.Operator != "ops_alice" || ev.Verb != "kill-switch" || ev.Code != wire.CodeRequestMalformed || ev.Reason != "bad" || ev.BodyBytes != 2 {
		t.Errorf("record %+v", ev)
	}
}
