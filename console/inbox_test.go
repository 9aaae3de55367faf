package console_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/contextos/ledger/wire"
)

const highCap = "adp_payments.issue_refund_high"

// requireVerb fails the test when the runtime does not serve an operator
// verb the console calls, naming it.
func (e *env) requireVerb(verb string, body any) {
	e.t.Helper()
	nc := e.agent("acme", "ops_alice")
	b, _ := json.Marshal(body)
	m, err := nc.Request(wire.OpSubject("acme", verb, "ops_alice"), b, 10*time.Second)
	if err != nil {
		e.t.Fatal(err)
	}
	var r wire.OpReply
	_ = json.Unmarshal(m.Data, &r)
	if r.Code == wire.CodeRequestMalformed && strings.Contains(r.Reason, "unknown verb") {
		e.t.Fatalf("the runtime does not serve the operator verb %q (ctx.v1.<tenant>.ops.%s.<operator>) the console calls", verb, verb)
	}
}

var approvalIDRE = regexp.MustCompile(`approval_id: ([0-9A-Za-z]+)`)

// TestConsoleApprove: a high-risk proposal refused approval_required is in
// the inbox with its digest, capability, arguments and principal; approved
// through the console, the agent's resend naming the approval is applied.
func TestConsoleApprove(t *testing.T) {
	e := startEnv(t)
	agent := e.agent("acme", "agent_email")
	proposal := refund(highCap, "big-refund", "ord_900", 50000)
	r := e.propose(agent, "acme", "agent_email", proposal)
	if r.Code != wire.CodeApprovalRequired || r.ActionDigest == "" {
		t.Fatalf("a high-risk proposal: %+v", r)
	}
	c := e.client()
	c.login("acme", "ops_alice")
	t.Run("inbox", func(t *testing.T) {
		(&env{t: t, rt: e.rt}).requireVerb("approvals", struct{}{})
		_, page := c.get("/approvals")
		for _, want := range []string{`data-digest="` + r.ActionDigest + `"`, highCap, "agent_email", "big-refund", "ord_900"} {
			if !strings.Contains(page, want) {
				t.Fatalf("the inbox lacks %q:\n%s", want, page)
			}
		}
	})
	status, page := c.act("approve", url.Values{"action_digest": {r.ActionDigest}, "capability_id": {highCap}}, url.Values{"expires_in": {"15m"}})
	m := approvalIDRE.FindStringSubmatch(page)
	if status != http.StatusOK || m == nil {
		t.Fatalf("approve: %d\n%s", status, page)
	}
	// The action digest does not cover the operation key: the agent sends
	// the same action again, naming the approval (docs/authorization.md).
	proposal["approval_id"] = m[1]
	proposal["operation_key"] = "big-refund-approved"
	if r2 := e.propose(agent, "acme", "agent_email", proposal); r2.Status != wire.StatusApplied {
		t.Fatalf("the resend with the approval: %+v", r2)
	}
}

// TestConsoleDeny: deny needs a reason and sends the deny verb.
func TestConsoleDeny(t *testing.T) {
	e := startEnv(t)
	e.requireVerb("deny", struct{}{})
	r := e.propose(e.agent("acme", "agent_email"), "acme", "agent_email", refund(highCap, "big-refund", "ord_900", 50000))
	c := e.client()
	c.login("acme", "ops_alice")
	q := url.Values{"action_digest": {r.ActionDigest}, "capability_id": {highCap}}
	if status, page := c.act("deny", q, nil); status != http.StatusBadRequest || !strings.Contains(page, "Reason is required") {
		t.Fatalf("deny without a reason: %d\n%s", status, page)
	}
	status, page := c.act("deny", q, url.Values{"reason": {"not this order"}})
	if status != http.StatusOK || !strings.Contains(page, `class="flash ok"`) {
		t.Fatalf("deny: %d\n%s", status, page)
	}
}

// TestConsoleIncidents: a contradicting observation appears on the
// incidents page.
func TestConsoleIncidents(t *testing.T) {
	e := startEnv(t)
	e.requireVerb("incidents", struct{}{})
	r := e.pendingHold(15000)
	c := e.client()
	c.login("acme", "ops_alice")
	c.act("assert-absence", url.Values{"attempt_id": {r.AttemptID}}, url.Values{"artifact_ref": {"ticket:SUP-1"}})
	e.prov.Settle(r.AttemptID, "succeeded")
	c.act("reconcile", url.Values{"attempt_id": {r.AttemptID}}, nil)
	waitFor(t, "the incident on the page", func() bool {
		_, page := c.get("/incidents")
		return strings.Contains(page, r.AttemptID) && strings.Contains(page, string(wire.CodeObservationContradictsSeal))
	})
}

// TestConsoleRevoke: revoking through the console refuses the agent's next
// proposal authority_denied; granting it back lets it through.
func TestConsoleRevoke(t *testing.T) {
	e := startEnv(t)
	c := e.client()
	c.login("acme", "ops_alice")
	_, page := c.get("/authority")
	if !strings.Contains(page, "agent_phone") || !strings.Contains(page, refundCap) {
		t.Fatalf("authority page:\n%s", page)
	}
	q := url.Values{"principal": {"agent_phone"}, "capability_id": {refundCap}, "reason": {"suspicious refunds"}}
	if status, page := c.act("revoke", q, nil); status != http.StatusOK || !strings.Contains(page, "granted: false") {
		t.Fatalf("revoke: %d\n%s", status, page)
	}
	agent := e.agent("acme", "agent_phone")
	if r := e.propose(agent, "acme", "agent_phone", refund(refundCap, "r1", "ord_5", 100)); r.Code != wire.CodeAuthorityDenied {
		t.Fatalf("after revoke: %+v", r)
	}
	// The revocation, read from the verified chain, and what the kernel
	// makes of it.
	_, page = c.get("/authority")
	csrf := csrfOf(t, page)
	waitFor(t, "the revocation in the verified chain", func() bool {
		_, page = c.post("/audit/verify", url.Values{"csrf": {csrf}, "return": {"/authority"}}, nil)
		return strings.Contains(page, "<td>revoked</td><td>ops_alice</td><td>suspicious refunds</td>")
	})
	row := page[strings.Index(page, `<tr data-agent="agent_phone">`):]
	row = row[:strings.Index(row, "</tr>")]
	if !strings.Contains(row, `class="lacks" data-capability="`+refundCap+`"`) {
		t.Fatalf("agent_phone still holds %s:\n%s", refundCap, row)
	}
	if status, page := c.act("grant", q, nil); status != http.StatusOK || !strings.Contains(page, "granted: true") {
		t.Fatalf("grant: %d\n%s", status, page)
	}
	if r := e.propose(agent, "acme", "agent_phone", refund(refundCap, "r2", "ord_5", 100)); r.Status != wire.StatusApplied {
		t.Fatalf("after grant: %+v", r)
	}
}
