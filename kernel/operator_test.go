package kernel

import (
	"strings"
	"testing"

	"github.com/contextos/ledger/wire"
)

// TestDecideOperatorVerb: the scope each verb needs, read-or-change verbs
// by their body, unknown verbs closed to scoped operators, and the
// two-person rule.
func TestDecideOperatorVerb(t *testing.T) {
	ro := []Scope{ScopeRead}
	policy := OperatorPolicy{TwoPerson: []string{TwoPersonAssertAbsence, TwoPersonLimitRaise}, LimitRaiseAbove: 50000}
	for _, tc := range []struct {
		name   string
		policy OperatorPolicy
		scopes []Scope
		verb   string
		body   string
		code   wire.Code // "" admitted
		second bool
	}{
		{"no scopes list holds every scope", OperatorPolicy{}, nil, "kill-switch", `{"engaged":false}`, "", false},
		{"read reads exposure", OperatorPolicy{}, ro, "exposure", ``, "", false},
		{"read reads the kill switch", OperatorPolicy{}, ro, "kill-switch", `{}`, "", false},
		{"read reads the kill switch, empty body", OperatorPolicy{}, ro, "kill-switch", ``, "", false},
		{"read cannot release the kill switch", OperatorPolicy{}, ro, "kill-switch", `{"engaged":false}`, wire.CodeOperatorScopeDenied, false},
		{"an unreadable kill-switch body needs kill_switch", OperatorPolicy{}, ro, "kill-switch", `{"engaged":`, wire.CodeOperatorScopeDenied, false},
		{"kill_switch releases it", OperatorPolicy{}, []Scope{ScopeKillSwitch}, "kill-switch", `{"engaged":false}`, "", false},
		{"read lists breakers", OperatorPolicy{}, ro, wire.VerbBreaker, `{}`, "", false},
		{"read cannot reset a breaker", OperatorPolicy{}, ro, wire.VerbBreaker, `{"reset":true,"capability_id":"x"}`, wire.CodeOperatorScopeDenied, false},
		{"recover resets a breaker", OperatorPolicy{}, []Scope{ScopeRecover}, wire.VerbBreaker, `{"reset":true}`, "", false},
		{"read cannot approve", OperatorPolicy{}, ro, "approve", `{}`, wire.CodeOperatorScopeDenied, false},
		{"approve approves", OperatorPolicy{}, []Scope{ScopeApprove}, "deny", `{}`, "", false},
		{"approve cannot assert absence", OperatorPolicy{}, []Scope{ScopeApprove}, "assert-absence", `{}`, wire.CodeOperatorScopeDenied, false},
		{"recover closes attempts", OperatorPolicy{}, []Scope{ScopeRecover}, "close-attempt", `{}`, "", false},
		{"resolve resolves evidence", OperatorPolicy{}, []Scope{ScopeResolve}, "evidence", `{}`, "", false},
		{"resolve resolves integrity", OperatorPolicy{}, []Scope{ScopeResolve}, "integrity-resolve", `{}`, "", false},
		{"limits grants", OperatorPolicy{}, []Scope{ScopeLimits}, "grant", `{}`, "", false},
		{"recover cannot set limits", OperatorPolicy{}, []Scope{ScopeRecover}, "guarantee-set-limit", `{"limit":1}`, wire.CodeOperatorScopeDenied, false},
		{"limits imports prior exposure", OperatorPolicy{}, []Scope{ScopeLimits}, wire.VerbGuaranteeImport, `{}`, "", false},
		{"read cannot import", OperatorPolicy{}, ro, wire.VerbGuaranteeImport, `{}`, wire.CodeOperatorScopeDenied, false},
		{"read reports outcomes", OperatorPolicy{}, ro, wire.VerbReport, `{}`, "", false},
		{"read exports the audit", OperatorPolicy{}, ro, wire.VerbAuditExport, `{}`, "", false},
		{"an unknown verb needs every scope", OperatorPolicy{}, AllScopes[:5], "new-verb", `{}`, wire.CodeOperatorScopeDenied, false},
		{"an unknown verb with every scope", OperatorPolicy{}, AllScopes, "new-verb", `{}`, "", false},
		{"confirm is admitted to any operator", OperatorPolicy{}, ro, wire.VerbConfirm, `{}`, "", false},
		{"two-person assert-absence", policy, nil, "assert-absence", `{"attempt_id":"a"}`, "", true},
		{"two-person still checks the scope first", policy, ro, "assert-absence", `{}`, wire.CodeOperatorScopeDenied, false},
		{"a limit above the threshold", policy, nil, "guarantee-set-limit", `{"limit":50001}`, "", true},
		{"a limit at the threshold", policy, nil, "guarantee-set-limit", `{"limit":50000}`, "", false},
		{"a mode change only", policy, nil, "guarantee-set-limit", `{"mode":"observe"}`, "", false},
		{"without the rule", OperatorPolicy{}, nil, "guarantee-set-limit", `{"limit":99999999}`, "", false},
		{"only assert_absence held", OperatorPolicy{TwoPerson: []string{TwoPersonAssertAbsence}}, nil, "guarantee-set-limit", `{"limit":99999999}`, "", false},
		{"close-attempt never held", policy, nil, "close-attempt", `{}`, "", false},
	} {
		v := DecideOperatorVerb(tc.policy, OperatorAction{Operator: "ops_x", Scopes: tc.scopes, Verb: tc.verb, Body: []byte(tc.body)})
		var code wire.Code
		if v.Refusal != nil {
			code = v.Refusal.Code
		}
		if code != tc.code || v.SecondOperator != tc.second {
			t.Errorf("%s: code %q second %v (%v); want %q %v", tc.name, code, v.SecondOperator, v.Refusal, tc.code, tc.second)
		}
	}
}

// TestTwoPersonRequest: a held request is confirmed once, by another
// operator holding its scope.
func TestTwoPersonRequest(t *testing.T) {
	var q OperatorRequest
	d := DecideOperatorRequest(&q, RequestOperatorAction{RequestID: "r1", Operator: "alice", Verb: "assert-absence", Scope: ScopeRecover, Body: []byte(`{"attempt_id":"a"}`)})
	if d.Refusal != nil || len(d.Events) != 1 {
		t.Fatalf("request: %+v", d)
	}
	if err := q.Apply(d.Events[0]); err != nil {
		t.Fatal(err)
	}
	if d := DecideOperatorRequest(&OperatorRequest{}, RequestOperatorAction{RequestID: "r2", Body: []byte(strings.Repeat("x", MaxOperatorRequestBody+1))}); d.Refusal == nil || d.Refusal.Code != wire.CodeRequestMalformed {
		t.Errorf("oversized body: %+v", d)
	}
	for _, tc := range []struct {
		name string
		q    *OperatorRequest
		cmd  Confirm
		code wire.Code
	}{
		{"unknown request", &OperatorRequest{}, Confirm{RequestID: "r9", Operator: "bob"}, wire.CodeRequestMalformed},
		{"the requester", &q, Confirm{RequestID: "r1", Operator: "alice"}, wire.CodeSecondOperatorRequired},
		{"another operator without the scope", &q, Confirm{RequestID: "r1", Operator: "carol", Scopes: []Scope{ScopeRead, ScopeApprove}}, wire.CodeOperatorScopeDenied},
		{"another operator with the scope", &q, Confirm{RequestID: "r1", Operator: "bob", Scopes: []Scope{ScopeRecover}}, ""},
		{"another operator with every scope", &q, Confirm{RequestID: "r1", Operator: "bob"}, ""},
	} {
		d := DecideConfirm(tc.q, tc.cmd)
		var code wire.Code
		if d.Refusal != nil {
			code = d.Refusal.Code
		}
		if code != tc.code {
			t.Errorf("%s: %q (%v), want %q", tc.name, code, d.Refusal, tc.code)
		}
		if code == "" && (len(d.Events) != 1 || d.Events[0] != (OperatorConfirmed{RequestID: "r1", Operator: tc.cmd.Operator})) {
			t.Errorf("%s: events %+v", tc.name, d.Events)
		}
	}
	if err := q.Apply(OperatorConfirmed{RequestID: "r1", Operator: "bob"}); err != nil {
		t.Fatal(err)
	}
	if d := DecideConfirm(&q, Confirm{RequestID: "r1", Operator: "dave"}); d.Refusal == nil || !strings.Contains(d.Refusal.Reason, "confirmed by bob") {
		t.Errorf("second confirmation: %+v", d)
	}
}

// TestOperatorRefusedBounded: a refusal record stays small whatever the
// request carried.
func TestOperatorRefusedBounded(t *testing.T) {
	long := strings.Repeat("é", 100000)
	ev := NewOperatorRefused("ops_x", long, []byte(long), &Refusal{Code: wire.CodeOperatorScopeDenied, Reason: long})
	if len(ev.Verb) > wire.ShortenAbove || len(ev.Reason) > wire.ShortenAbove || ev.ReasonDigest != wire.Digest(long) || ev.BodyBytes != len(long) || len(ev.BodyDigest) != 64 {
		t.Fatalf("unbounded record: verb %d reason %d %+v", len(ev.Verb), len(ev.Reason), ev.ReasonDigest)
	}
	var l RefusalLog
	if err := l.Apply(ev); err != nil || l.Count != 1 {
		t.Fatalf("refusal log: %v %d", err, l.Count)
	}
}
