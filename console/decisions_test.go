package console_test

import (
	"net/url"
	"strings"
	"testing"
)

// TestConsoleDecisions: the decisions page lists a decision with the
// evidence it cited, each ref a link to the decisions that cited it; a
// filter by another ref lists none, and another tenant's operator sees
// none of acme's.
func TestConsoleDecisions(t *testing.T) {
	e := startEnv(t)
	const ref = "kg:order:ord_881#snapshot_41"
	body := refund(refundCap, "cited-1", "ord_881", 700)
	body["evidence_refs"] = []string{ref}
	r := e.propose(e.agent("acme", "agent_phone"), "acme", "agent_phone", body)
	if r.OperationID == "" {
		t.Fatalf("no operation: %+v", r)
	}
	alice := e.client()
	alice.login("acme", "ops_alice")
	_, page := alice.get("/decisions")
	link := `href="/decisions?evidence_ref=` + url.QueryEscape(ref) + `"`
	if !strings.Contains(page, r.OperationID) || !strings.Contains(page, ref) {
		t.Fatalf("decisions page lacks operation %s or its evidence %s:\n%s", r.OperationID, ref, page)
	}
	if !strings.Contains(strings.ReplaceAll(page, "%3a", "%3A"), link) {
		t.Fatalf("evidence ref is not linked as %s:\n%s", link, page)
	}
	if _, page = alice.get("/decisions?evidence_ref=" + url.QueryEscape(ref)); !strings.Contains(page, r.OperationID) {
		t.Fatalf("the evidence link lists no decision:\n%s", page)
	}
	if _, page = alice.get("/decisions?evidence_ref=kg:other"); strings.Contains(page, r.OperationID) || !strings.Contains(page, "No decisions.") {
		t.Fatalf("another ref lists the decision:\n%s", page)
	}
	bob := e.client()
	bob.login("globex", "ops_bob")
	if _, page = bob.get("/decisions"); strings.Contains(page, r.OperationID) || strings.Contains(page, ref) {
		t.Fatalf("globex's decisions show acme's:\n%s", page)
	}
}
