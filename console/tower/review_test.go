package tower

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/contextos/ledger/console"
	"github.com/contextos/ledger/exposure"
	"github.com/contextos/ledger/internal/testing/gatewaytest"
	"github.com/contextos/ledger/wire"
	"github.com/nats-io/nats.go"
)

// outcomeCode is the code the page shows for a runtime's answer.
func outcomeCode(t *testing.T, page, log string) string {
	t.Helper()
	m := regexp.MustCompile(`<tr data-outcome="` + regexp.QuoteMeta(log) + `">.*?<td class="code"><code>([^<]*)</code>`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no outcome of %s on the page:\n%s", log, page)
	}
	return m[1]
}

// TestTowerReviewActions: through towerd's page (real HTTP, a real
// runtime), the requester of a two-person request cannot confirm it
// (second_operator_required, shown with its code), a deny from the queue
// is recorded in the operator's name and shows in the history, a waiver of
// a guardrail the tenant does not hold is refused by the runtime, and a
// form naming a runtime or tenant outside the session acts nowhere.
func TestTowerReviewActions(t *testing.T) {
	b := bootWith(t, reviewConfig)
	high := gatewaytest.Propose(t, b.conn("acme", "agent_email"), "acme", "agent_email", map[string]any{"run_id": "run_h", "operation_key": "h1",
		"capability_id": "adp_payments.issue_refund_high", "arguments": map[string]any{"order_id": "ord_h", "amount_minor": 500, "currency": "INR"}})
	if high.Code != wire.CodeApprovalRequired {
		t.Fatalf("%+v", high)
	}
	alice := &console.Login{Tenant: "acme", Operator: "ops_alice", Conns: map[string]*nats.Conn{"": b.conn("acme", "ops_alice")}}
	var held wire.OpReply
	if err := alice.Call(context.Background(), "", "guarantee-set-limit", wire.SetLimitRequest{GuaranteeID: "refunds-per-order", Limit: 300000, Reason: "peak"}, &held); err != nil {
		t.Fatal(err)
	}
	requestID, _ := held.Data["request_id"].(string)
	if held.Code != wire.CodeSecondOperatorRequired || requestID == "" {
		t.Fatalf("the limit raise: %+v", held)
	}
	_, keys := b.export(t.TempDir(), "acme", "ops_alice", func(exposure.View) bool { return true })
	_, gKeys := b.export(t.TempDir(), "globex", "ops_bob", func(exposure.View) bool { return true })
	srv := serveTower(t, `listen = "127.0.0.1:0"
[[runtimes]]
name = "us-1"
nats_url = "`+b.rt.URL+`"
  [[runtimes.tenants]]
  id = "acme"
  keys = "`+keys+`"
  [[runtimes.tenants]]
  id = "globex"
  keys = "`+gKeys+`"
`)

	c := newClient(t, srv.URL)
	page := c.login("acme", "ops_alice")
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(page, `data-request="us-1/acme/`+requestID+`"`) {
		if time.Now().After(deadline) {
			t.Fatalf("the request is not in the queue:\n%s", page)
		}
		_, page = c.post("/refresh", url.Values{"csrf": {csrfOf(t, page)}})
	}
	tok := csrfOf(t, page)
	status, page := c.post("/confirm", url.Values{"csrf": {tok}, "runtime": {"us-1"}, "tenant": {"acme"}, "request_id": {requestID}})
	if status != http.StatusOK || outcomeCode(t, page, "us-1/acme") != string(wire.CodeSecondOperatorRequired) {
		t.Fatalf("the requester's own confirmation: %d\n%s", status, page)
	}
	status, page = c.post("/deny", url.Values{"csrf": {tok}, "runtime": {"us-1"}, "tenant": {"acme"}, "action_digest": {high.ActionDigest}, "risk": {"high"}, "reason": {"not this one"}})
	if status != http.StatusOK || outcomeCode(t, page, "us-1/acme") != "" || !strings.Contains(page, `<td class="ack">yes</td><td>ops_alice</td>`) {
		t.Fatalf("the denial: %d\n%s", status, page)
	}
	for !strings.Contains(page, `data-decision="ops_alice denied"`) {
		if time.Now().After(deadline) {
			t.Fatalf("the denial is not in the history:\n%s", page)
		}
		_, page = c.post("/refresh", url.Values{"csrf": {tok}})
	}
	status, page = c.post("/waiver", url.Values{"csrf": {tok}, "tenant": {"acme"}, "waiver_id": {"w1"}, "guardrail_id": {"nope"}, "kind": {"run"},
		"target": {"run_1"}, "for": {"1h"}, "reason": {"x"}})
	if status != http.StatusOK || outcomeCode(t, page, "us-1/acme") != string(wire.CodeRequestMalformed) {
		t.Fatalf("a waiver of no guardrail: %d\n%s", status, page)
	}
	for _, tc := range []struct {
		path string
		form url.Values
	}{
		{"/confirm", url.Values{"runtime": {"us-1"}, "tenant": {"globex"}, "request_id": {requestID}}},
		{"/approve", url.Values{"runtime": {"eu-9"}, "tenant": {"acme"}, "action_digest": {high.ActionDigest}, "risk": {"high"}}},
		{"/waiver", url.Values{"tenant": {"globex"}, "waiver_id": {"w2"}, "guardrail_id": {"g"}, "kind": {"run"}, "target": {"r"}, "for": {"1h"}, "reason": {"x"}}},
		{"/waiver", url.Values{"tenant": {"acme"}, "waiver_id": {"w2"}, "guardrail_id": {"g"}, "kind": {"run"}, "target": {"r"}, "for": {"200h"}, "reason": {"x"}}},
		{"/guardrail", url.Values{"guardrail_id": {"g"}, "capability_id": {"c"}, "rule": {"cap"}, "max_amount": {"-1"}}},
	} {
		tc.form.Set("csrf", tok)
		if status, body := c.post(tc.path, tc.form); status != http.StatusBadRequest || !strings.Contains(body, `id="error"`) {
			t.Fatalf("%s %v: %d\n%s", tc.path, tc.form, status, body)
		}
	}
}

// serveTower starts a tower of the configuration src that serves its web
// view on loopback and re-reads only on request, closed when t ends.
func serveTower(t *testing.T, src string) *Server {
	t.Helper()
	cfg, err := ParseConfig([]byte(src), "")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(cfg).Serve(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}
