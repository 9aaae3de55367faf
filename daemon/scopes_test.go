package daemon_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/contextos/ledger/client"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/internal/testing/daemontest"
	"github.com/contextos/ledger/internal/testing/gatewaytest"
	"github.com/contextos/ledger/internal/testing/provider"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
)

// scopedOperators are the operators the scope tests add to acme, beside
// ops_alice (no scopes list: every scope).
var scopedOperators = map[string]string{"ops_ro": "ro-ops-secret-passphrase", "ops_bob": "bob-secret-passphrase", "ops_approver": "approver-secret-passphrase"}

// startScopedEnv boots the gateway tests' configuration with acme's
// operators scoped and its two-person rule on.
func startScopedEnv(t *testing.T) *env {
	t.Helper()
	return startEnvWith(t, daemontest.Options{Edit: func(s string) string {
		for _, edit := range []struct{ old, repl string }{
			{"id = \"acme\"\n", "id = \"acme\"\ntwo_person = [\"assert_absence\", \"limit_raise\"]\nlimit_raise_above = 150000\n"},
			{"  id = \"ops_alice\"\n  password = \"alice-secret-passphrase\"\n", `  id = "ops_alice"
  password = "alice-secret-passphrase"

  [[tenants.operators]]
  id = "ops_ro"
  password = "ro-ops-secret-passphrase"
  scopes = ["read"]

  [[tenants.operators]]
  id = "ops_bob"
  password = "bob-secret-passphrase"
  scopes = ["read", "recover", "limits"]

  [[tenants.operators]]
  id = "ops_approver"
  password = "approver-secret-passphrase"
  scopes = ["read", "approve"]
`},
		} {
			if !strings.Contains(s, edit.old) {
				t.Fatalf("the configuration has no %q", edit.old)
			}
			s = strings.Replace(s, edit.old, edit.repl, 1)
		}
		return s
	}})
}

// opAs sends an operator verb over NATS as operator of acme.
func (e *env) opAs(operator, verb string, body any) wire.OpReply {
	e.t.Helper()
	pw := scopedOperators[operator]
	if pw == "" {
		pw = passwords["acme."+operator]
	}
	nc := gatewaytest.Connect(e.t, e.rt.URL, pw, "acme", operator)
	b, _ := json.Marshal(body)
	msg, err := nc.Request(wire.OpSubject("acme", verb, operator), b, 10*time.Second)
	if err != nil {
		e.t.Fatalf("%s %s: %v", operator, verb, err)
	}
	var r wire.OpReply
	if err := json.Unmarshal(msg.Data, &r); err != nil {
		e.t.Fatal(err)
	}
	return r
}

// subject is acme's subject of kind and key.
func (e *env) subject(kind, key string) string {
	e.t.Helper()
	s, err := codec.Subject("acme", kind, key)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// operatorRefusals returns the signed operator.refused events of an
// operator's refusal subject.
func (e *env) operatorRefusals(operator string) []kernel.OperatorRefused {
	e.t.Helper()
	var out []kernel.OperatorRefused
	for _, ev := range e.signed(e.subject("refusal", operator)) {
		if r, ok := ev.(kernel.OperatorRefused); ok {
			out = append(out, r)
		}
	}
	return out
}

// TestOperatorScopeDenied: an operator holding only read reads the kill
// switch but is refused operator_scope_denied when releasing it, over
// NATS; the switch stays engaged, and the refusal is a signed
// operator.refused event in the stream and a record of the audit export.
func TestOperatorScopeDenied(t *testing.T) {
	e := startScopedEnv(t)
	on, off := true, false
	if r := e.opAs("ops_alice", "kill-switch", wire.OpRequest{Engaged: &on, Reason: "drill"}); !r.OK {
		t.Fatalf("engage by ops_alice (every scope): %+v", r)
	}
	if r := e.opAs("ops_ro", "kill-switch", wire.OpRequest{}); !r.OK || r.KillSwitch == nil || !*r.KillSwitch {
		t.Fatalf("read of the kill switch by ops_ro: %+v", r)
	}
	r := e.opAs("ops_ro", "kill-switch", wire.OpRequest{Engaged: &off, Reason: "let me through"})
	if r.OK || r.Code != wire.CodeOperatorScopeDenied || !strings.Contains(r.Reason, "kill_switch") {
		t.Fatalf("release by ops_ro: %+v", r)
	}
	if r := e.opAs("ops_approver", "assert-absence", wire.OpRequest{AttemptID: "01J0000000000000000000000", ArtifactRef: "x"}); r.Code != wire.CodeOperatorScopeDenied {
		t.Fatalf("assert-absence by an approver: %+v", r)
	}
	nc := e.client("acme", "agent_email")
	if p := e.propose(nc, "acme", "agent_email", refund("run_s", "k1", "ord_s", 100)); p.Code != wire.CodeKillSwitchEngaged {
		t.Fatalf("the switch did not stay engaged: %+v", p)
	}
	refusals := e.operatorRefusals("ops_ro")
	if len(refusals) != 1 || refusals[0].Code != wire.CodeOperatorScopeDenied || refusals[0].Verb != "kill-switch" || refusals[0].Operator != "ops_ro" || refusals[0].BodyBytes == 0 {
		t.Fatalf("ops_ro's refusal events: %+v", refusals)
	}
	// An ordinary refusal of an action is recorded too: an unknown attempt.
	if r := e.opAs("ops_bob", "close-attempt", wire.OpRequest{AttemptID: "01J0000000000000000000000"}); r.Code != wire.CodeAttemptUnknown {
		t.Fatalf("close-attempt of an unknown attempt: %+v", r)
	}
	if got := e.operatorRefusals("ops_bob"); len(got) != 1 || got[0].Code != wire.CodeAttemptUnknown || got[0].Verb != "close-attempt" {
		t.Fatalf("ops_bob's refusal events: %+v", got)
	}
	// The audit export (as the read-only operator: read is enough) holds
	// the refusal beside the accepted kill switch.
	audit := &client.AuditClient{NC: gatewaytest.Connect(t, e.rt.URL, scopedOperators["ops_ro"], "acme", "ops_ro"), Tenant: "acme", Operator: "ops_ro", Timeout: 5 * time.Second}
	waitFor(t, 20*time.Second, func() bool {
		entries, err := audit.ExportAudit(context.Background())
		if err != nil {
			return false
		}
		var refused, engaged bool
		for _, raw := range entries.Records {
			var rec struct {
				Subject string `json:"subject"`
				Event   struct {
					Type string `json:"type"`
				} `json:"event"`
			}
			if json.Unmarshal(raw, &rec) != nil {
				continue
			}
			refused = refused || rec.Event.Type == kernel.TypeOperatorRefused && rec.Subject == e.subject("refusal", "ops_ro")
			engaged = engaged || rec.Event.Type == kernel.TypeKillSwitchSet
		}
		return refused && engaged
	}, "the audit export to hold ops_ro's refusal beside the kill switch")
}

// TestTwoPersonRule: with two_person = ["assert_absence", "limit_raise"],
// ops_alice's assert-absence is held as a signed request (the hold stays);
// ops_alice confirming it is refused second_operator_required; ops_bob
// (recover) confirms it and the hold is released. A limit raised above
// limit_raise_above waits the same way; one at or under it does not.
func TestTwoPersonRule(t *testing.T) {
	e := startScopedEnv(t)
	nc := e.client("acme", "agent_email")
	e.prov.Script(provider.Pending)
	p := e.propose(nc, "acme", "agent_email", refund("run_2p", "k1", "ord_2p", 700))
	if p.Status != wire.StatusPending {
		t.Fatalf("pending proposal: %+v", p)
	}
	wantBalance(t, p, 0, 700, 99300)
	held := func() wire.ExposureRow {
		t.Helper()
		r := e.opAs("ops_ro", "exposure", wire.OpRequest{GuaranteeID: "refunds-per-order", Resource: "ord_2p"})
		if !r.OK || len(r.Exposure) != 1 {
			t.Fatalf("exposure: %+v", r)
		}
		return r.Exposure[0]
	}

	req := e.opAs("ops_alice", "assert-absence", wire.OpRequest{AttemptID: p.AttemptID, ArtifactRef: "ticket:2p"})
	id, _ := req.Data["request_id"].(string)
	if req.OK || req.Code != wire.CodeSecondOperatorRequired || id == "" {
		t.Fatalf("assert-absence by ops_alice: %+v", req)
	}
	if x := held(); x.Held != 700 || x.Available != 99300 {
		t.Fatalf("the request alone changed the balance: %+v", x)
	}
	if evs := e.signed(e.subject("oprequest", id)); len(evs) != 1 || evs[0].(kernel.OperatorRequested).Operator != "ops_alice" {
		t.Fatalf("request events: %+v", evs)
	}
	if r := e.opAs("ops_alice", wire.VerbConfirm, wire.ConfirmRequest{RequestID: id}); r.Code != wire.CodeSecondOperatorRequired {
		t.Fatalf("self-confirmation: %+v", r)
	}
	if r := e.opAs("ops_approver", wire.VerbConfirm, wire.ConfirmRequest{RequestID: id}); r.Code != wire.CodeOperatorScopeDenied {
		t.Fatalf("confirmation by an operator without recover: %+v", r)
	}
	if x := held(); x.Held != 700 {
		t.Fatalf("refused confirmations changed the balance: %+v", x)
	}
	if got := e.operatorRefusals("ops_alice"); len(got) != 1 || got[0].Code != wire.CodeSecondOperatorRequired || got[0].Verb != wire.VerbConfirm {
		t.Fatalf("ops_alice's refusal events: %+v", got)
	}
	r := e.opAs("ops_bob", wire.VerbConfirm, wire.ConfirmRequest{RequestID: id})
	if !r.OK || len(r.Settled) != 1 || r.Settled[0].Status != wire.StatusNotApplied {
		t.Fatalf("confirmation by ops_bob: %+v", r)
	}
	if x := held(); x.Held != 0 || x.Available != 100000 {
		t.Fatalf("after the confirmation: %+v", x)
	}
	evs := e.signed(e.subject("oprequest", id))
	if len(evs) != 2 || evs[1] != (kernel.OperatorConfirmed{RequestID: id, Operator: "ops_bob"}) {
		t.Fatalf("request events after the confirmation: %+v", evs)
	}
	if r := e.opAs("ops_alice", wire.VerbConfirm, wire.ConfirmRequest{RequestID: id}); r.Code != wire.CodeRequestMalformed {
		t.Fatalf("a second confirmation: %+v", r)
	}

	// Limits: at the threshold applies at once; above it waits.
	limit := func() int64 {
		t.Helper()
		r := e.opAs("ops_ro", "guarantee-history", wire.GuaranteeHistoryRequest{GuaranteeID: "refunds-per-order"})
		if !r.OK || len(r.Versions) == 0 || r.NextCursor != "" {
			t.Fatalf("guarantee-history: %+v", r)
		}
		return r.Versions[len(r.Versions)-1].Limit
	}
	if r := e.opAs("ops_bob", "guarantee-set-limit", wire.SetLimitRequest{GuaranteeID: "refunds-per-order", Limit: 150000, Reason: "season"}); !r.OK {
		t.Fatalf("set-limit at the threshold: %+v", r)
	}
	raise := e.opAs("ops_bob", "guarantee-set-limit", wire.SetLimitRequest{GuaranteeID: "refunds-per-order", Limit: 900000, Reason: "more"})
	rid, _ := raise.Data["request_id"].(string)
	if raise.Code != wire.CodeSecondOperatorRequired || rid == "" {
		t.Fatalf("set-limit above the threshold: %+v", raise)
	}
	if l := limit(); l != 150000 {
		t.Fatalf("the held raise applied: limit %d", l)
	}
	if r := e.opAs("ops_ro", wire.VerbConfirm, wire.ConfirmRequest{RequestID: rid}); r.Code != wire.CodeOperatorScopeDenied {
		t.Fatalf("confirmation by read only: %+v", r)
	}
	if r := e.opAs("ops_alice", wire.VerbConfirm, wire.ConfirmRequest{RequestID: rid}); !r.OK {
		t.Fatalf("confirmation of the raise by ops_alice: %+v", r)
	}
	if l := limit(); l != 900000 {
		t.Fatalf("after the raise's confirmation: limit %d", l)
	}
}
