package daemon_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextos/ledger/aggregates"
	"github.com/contextos/ledger/daemon"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/gateway"
	"github.com/contextos/ledger/internal/testing/daemontest"
	"github.com/contextos/ledger/internal/testing/provider"
	"github.com/contextos/ledger/internal/testing/refundcfg"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
)

// fakeClock is the gateway's clock in these tests: decision times (approval
// expiry, evidence currency) are inputs the test controls.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// seedTime is the decision time of the context vectors.
var seedTime = time.Date(2026, 10, 26, 12, 0, 0, 0, time.UTC)

// authzEnv boots a runtime on the refund configuration as edit changes
// its text, with a fake clock. {{PACK}} in the edited text stands for the
// path of the context vectors' conflict_unresolved pack.
func authzEnv(t *testing.T, edit func(string) string) (*env, *fakeClock) {
	t.Helper()
	pack, err := filepath.Abs("../testdata/context/conflict_unresolved/pack.json")
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{t: seedTime}
	d := daemontest.Boot(t, daemontest.Options{Edit: func(s string) string { return strings.ReplaceAll(edit(s), "{{PACK}}", pack) },
		Boot: daemon.BootOptions{Clock: clock}})
	return envOf(t, d), clock
}

// authzEdit edits the refund configuration into the authorization tests':
// acme's runs must be admitted by an operator before they may propose; the
// refund reads its run amount at /amount_minor and has a policy (at most
// 90000, currency INR, order ids ord_...); adp_payments.issue_refund_high
// is the refund (without its policy) at high risk, so every proposal
// needs an operator's approval of its exact action; agent_email may
// propose it, and the order's ceiling governs both.
func authzEdit(text string) string {
	text = refundcfg.Replace(text,
		`unadmitted_runs = "unlimited" # the tests propose in runs no operator admitted`, `unadmitted_runs = "refuse"`,
		`  capabilities = ["adp_payments.issue_refund", "crm.lookup", "bank.wire"]`,
		`  capabilities = ["adp_payments.issue_refund", "adp_payments.issue_refund_high", "crm.lookup", "bank.wire"]`)
	text = refundcfg.EditBlock(text, "capabilities", capRefund, "adapter = \"http\"\n", "adapter = \"http\"\namount_pointer = \"/amount_minor\"\n")
	text = refundcfg.Derive(text, "capabilities", capRefund, capRefundHigh, `risk = "medium"`, `risk = "high"`)
	text = refundcfg.AppendToBlock(text, "capabilities", capRefund, `
  [capabilities.policy]
  max_amount = 90000

    [[capabilities.policy.allowed]]
    pointer = "/currency"
    values = ["INR"]

    [[capabilities.policy.pattern]]
    pointer = "/order_id"
    regexp = "ord_[0-9a-z]+"`)
	return refundcfg.EditBlock(text, "guarantees", refundcfg.Guarantee,
		`capability_ids = ["adp_payments.issue_refund"]`, `capability_ids = ["adp_payments.issue_refund", "adp_payments.issue_refund_high"]`)
}

// evidenceEdit edits the refund configuration into the evidence gate's
// tests': the refund is gated by the seed pack's support.refund.execute
// decision over {{PACK}}, and agent_email names its evidence sources.
func evidenceEdit(text string) string {
	text = refundcfg.Replace(text,
		`  capabilities = ["adp_payments.issue_refund", "crm.lookup", "bank.wire"]
`, `  capabilities = ["adp_payments.issue_refund", "crm.lookup", "bank.wire"]
  evidence_sources = ["kg", "crm", "ledger", "policy_store", "idp", "memory"]
`)
	return refundcfg.EditBlock(text, "capabilities", capRefund, "adapter = \"http\"\n", `adapter = "http"
decision_key = "support.refund.execute"
context_pack = "{{PACK}}"
`)
}

// replica starts a second gateway on the same store, with its own engine
// and warm state: what another contextosd process would be.
func (e *env) replica(clock aggregates.Clock, executor string) *gateway.Gateway {
	e.t.Helper()
	sealer := &aggregates.Sealer{Signer: e.rt.Signer, Clock: clock, IDs: aggregates.NewIDs(clock, nil)}
	g := gateway.New(gateway.Options{Config: e.rt.Config, Store: e.rt.Store, Sealer: sealer, Executor: executor})
	if err := g.Start(context.Background(), nil); err != nil {
		e.t.Fatal(err)
	}
	return g
}

// opAny sends an operator verb with any body as acme's ops_alice.
func (e *env) opAny(verb string, body any) wire.OpReply {
	e.t.Helper()
	nc := e.client("acme", "ops_alice")
	b, _ := json.Marshal(body)
	msg, err := nc.Request(wire.OpSubject("acme", verb, "ops_alice"), b, 10*time.Second)
	if err != nil {
		e.t.Fatalf("op %s: %v", verb, err)
	}
	var r wire.OpReply
	if err := json.Unmarshal(msg.Data, &r); err != nil {
		e.t.Fatal(err)
	}
	return r
}

func (e *env) mustOp(verb string, body any) wire.OpReply {
	e.t.Helper()
	r := e.opAny(verb, body)
	if !r.OK {
		e.t.Fatalf("%s %+v: %s %s", verb, body, r.Code, r.Reason)
	}
	return r
}

func (e *env) admit(run, principal string, calls, amount int64) {
	e.t.Helper()
	e.mustOp("admit-run", wire.AdmitRunRequest{RunID: run, Principal: principal, Calls: calls, Amount: amount})
}

// signed reads a subject and verifies every event's signature against the
// runtime's key: what an auditor would do.
func (e *env) signed(subject string) []kernel.Event {
	e.t.Helper()
	keys := codec.Keyring{}
	keys.Add(e.rt.Signer.Key.Public().(ed25519.PublicKey))
	stored, err := e.rt.Store.Read(context.Background(), subject, 1)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []kernel.Event
	for _, s := range stored {
		if err := keys.Verify(s.Envelope); err != nil {
			e.t.Fatalf("%s seq %d: %v", subject, s.Seq, err)
		}
		ev, err := kernel.DecodeEvent(s.Envelope.Type, s.Envelope.V, s.Envelope.Body)
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}

// decision returns the last signed DecisionRecorded of an operation.
func (e *env) decision(tenant, run, key string) kernel.DecisionRecorded {
	e.t.Helper()
	subject, _ := codec.Subject(tenant, "operation", run, key)
	var rec *kernel.DecisionRecorded
	for _, ev := range e.signed(subject) {
		if d, ok := ev.(kernel.DecisionRecorded); ok {
			rec = &d
		}
	}
	if rec == nil {
		e.t.Fatalf("no decision recorded on %s", subject)
	}
	return *rec
}

// exposure returns acme's balances by resource.
func (e *env) exposure() map[string]wire.Balance {
	e.t.Helper()
	out := map[string]wire.Balance{}
	for _, r := range e.op("exposure", wire.OpRequest{}).Exposure {
		out[r.Resource] = r.Balance
	}
	return out
}

func wantRefused(t *testing.T, what string, r wire.Reply, code wire.Code) {
	t.Helper()
	if r.Status != wire.StatusRefused || r.Code != code || r.Reason == "" {
		b, _ := json.Marshal(r)
		t.Fatalf("%s: %s, want refused %s with a reason", what, b, code)
	}
}

func wantApplied(t *testing.T, what string, r wire.Reply) {
	t.Helper()
	if r.Status != wire.StatusApplied {
		b, _ := json.Marshal(r)
		t.Fatalf("%s: %s, want applied", what, b)
	}
}

func refundTo(capability, run, key, order string, amount int64) map[string]any {
	p := refund(run, key, order, amount)
	p["capability_id"] = capability
	return p
}

const (
	capRefund     = "adp_payments.issue_refund"
	capRefundHigh = "adp_payments.issue_refund_high"
)

// TestAuthzAuthority: an operator's revocation takes effect for the next
// proposal (authority_denied, signed, nothing held or called), a grant
// restores it, a grant can add a capability the configuration did not, and
// the decision records where the authority came from.
func TestAuthzAuthority(t *testing.T) {
	e, _ := authzEnv(t, authzEdit)
	chat := e.client("acme", "agent_chat")
	e.admit("run_a", "agent_chat", 10, 100000)
	wantApplied(t, "configured grant", e.propose(chat, "acme", "agent_chat", refund("run_a", "k1", "ord_1", 1000)))
	if rec := e.decision("acme", "run_a", "k1"); rec.Controls.Authority != "config:agent_chat:"+capRefund {
		t.Fatalf("authority control %q", rec.Controls.Authority)
	}

	e.mustOp("revoke", wire.GrantRequest{Principal: "agent_chat", CapabilityID: capRefund, Reason: "incident 7"})
	r := e.propose(chat, "acme", "agent_chat", refund("run_a", "k2", "ord_1", 1000))
	wantRefused(t, "after revoke", r, wire.CodeAuthorityDenied)
	if rec := e.decision("acme", "run_a", "k2"); rec.Status != wire.StatusRefused || rec.Code != wire.CodeAuthorityDenied {
		t.Fatalf("refusal record %+v", rec)
	}
	if b := e.exposure()["ord_1"]; b != (wire.Balance{Limit: 100000, Committed: 1000, Available: 99000}) || e.prov.Stats().Calls != 1 {
		t.Fatalf("a revoked proposal changed something: %+v, %d calls", b, e.prov.Stats().Calls)
	}
	// The revocation is per principal: another agent keeps the grant.
	e.admit("run_e", "agent_email", 10, 100000)
	wantApplied(t, "other principal", e.propose(e.client("acme", "agent_email"), "acme", "agent_email", refund("run_e", "k1", "ord_2", 1000)))

	e.mustOp("grant", wire.GrantRequest{Principal: "agent_chat", CapabilityID: capRefund})
	wantApplied(t, "after grant", e.propose(chat, "acme", "agent_chat", refund("run_a", "k3", "ord_1", 1000)))
	if rec := e.decision("acme", "run_a", "k3"); rec.Controls.Authority != "grant:agent_chat:"+capRefund+":operator:ops_alice" {
		t.Fatalf("authority control %q", rec.Controls.Authority)
	}

	// A grant beyond the configuration.
	lookup := map[string]any{"run_id": "run_a", "operation_key": "l1", "capability_id": "crm.lookup", "arguments": map[string]any{"q": "ord_1"}}
	wantRefused(t, "unconfigured", e.propose(chat, "acme", "agent_chat", lookup), wire.CodeAuthorityDenied)
	e.mustOp("grant", wire.GrantRequest{Principal: "agent_chat", CapabilityID: "crm.lookup"})
	lookup["operation_key"] = "l2"
	wantApplied(t, "granted lookup", e.propose(chat, "acme", "agent_chat", lookup))

	if r := e.opAny("grant", wire.GrantRequest{Principal: "agent_ghost", CapabilityID: capRefund}); r.OK || r.Code != wire.CodeRequestMalformed {
		t.Fatalf("grant to a non-agent: %+v", r)
	}
	if r := e.opAny("revoke", wire.GrantRequest{Principal: "agent_chat", CapabilityID: "adp_payments.wire_money"}); r.OK || r.Code != wire.CodeCapabilityNotSurfaced {
		t.Fatalf("revoke of an unknown capability: %+v", r)
	}
	// Agents cannot reach the operator verbs at all.
	nc, errs := e.deniedConn("acme", "agent_chat")
	b, _ := json.Marshal(wire.GrantRequest{Principal: "agent_chat", CapabilityID: capRefundHigh})
	if _, err := nc.Request(wire.OpSubject("acme", "grant", "agent_chat"), b, 300*time.Millisecond); err == nil {
		t.Fatal("an agent's grant was answered")
	}
	select {
	case err := <-errs:
		if !strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no permissions violation for an agent's grant")
	}
}

// TestAuthzAuthorityFromAnotherReplica: a replica keeps the authority it
// read last and reads only the changes since; a revocation and a grant
// appended through another replica each take effect for its very next
// proposal.
func TestAuthzAuthorityFromAnotherReplica(t *testing.T) {
	e, clock := authzEnv(t, authzEdit)
	other := e.replica(clock, "test-2")
	e.admit("run_a", "agent_chat", 10, 100000)
	propose := func(key string) wire.Reply {
		b, _ := json.Marshal(refund("run_a", key, "ord_1", 1000))
		return other.Propose(context.Background(), "acme", "agent_chat", b)
	}
	wantApplied(t, "configured grant", propose("k1"))
	for i := range 3 {
		e.mustOp("revoke", wire.GrantRequest{Principal: "agent_chat", CapabilityID: capRefund})
		wantRefused(t, "after revoke", propose(fmt.Sprintf("r%d", i)), wire.CodeAuthorityDenied)
		e.mustOp("grant", wire.GrantRequest{Principal: "agent_chat", CapabilityID: capRefund})
		wantApplied(t, "after grant", propose(fmt.Sprintf("g%d", i)))
		if rec := e.decision("acme", "run_a", fmt.Sprintf("g%d", i)); rec.Controls.Authority != "grant:agent_chat:"+capRefund+":operator:ops_alice" {
			t.Fatalf("authority control %q", rec.Controls.Authority)
		}
	}
}

// TestAuthzPolicy: the capability's declarative policy refuses an amount
// over max_amount, a currency not allowed and an id off its pattern, with
// nothing held or called; the decision names the policy's digest, which is
// also bound into the action digest.
func TestAuthzPolicy(t *testing.T) {
	e, _ := authzEnv(t, authzEdit)
	nc := e.client("acme", "agent_email")
	e.admit("run_p", "agent_email", 10, 1000000)
	over := refund("run_p", "over", "ord_1", 90001)
	usd := refund("run_p", "usd", "ord_1", 100)
	usd["arguments"].(map[string]any)["currency"] = "USD"
	badID := refund("run_p", "id", "ORD-1", 100)
	// "over" first: the first policy refusal of the window is recorded
	// whole, with its decision; the others are counted (kernel.RefusalTally).
	for _, c := range []struct {
		name string
		p    map[string]any
	}{{"over max_amount", over}, {"currency", usd}, {"id pattern", badID}} {
		wantRefused(t, c.name, e.propose(nc, "acme", "agent_email", c.p), wire.CodePolicyDenied)
	}
	if len(e.exposure()) != 0 || e.prov.Stats().Calls != 0 {
		t.Fatalf("policy refusals changed something: %+v", e.exposure())
	}
	ok := e.propose(nc, "acme", "agent_email", refund("run_p", "ok", "ord_1", 90000))
	wantApplied(t, "at max_amount", ok)
	wantBalance(t, ok, 90000, 0, 10000)

	cp, _ := e.rt.Config.Capability(capRefund)
	want := cp.CompiledPolicy().Digest()
	for _, key := range []string{"over", "ok"} {
		if rec := e.decision("acme", "run_p", key); rec.Controls.PolicyDigest != want {
			t.Fatalf("%s: policy digest %q, want %q", key, rec.Controls.PolicyDigest, want)
		}
	}
	args, _ := kernel.Canonical(json.RawMessage(`{"amount_minor":90000,"currency":"INR","order_id":"ord_1"}`))
	digest, _ := kernel.ActionDigest(kernel.ActionBinding{Tenant: "acme", Principal: "agent_email", RunID: "run_p", CapabilityID: capRefund,
		CapabilityVersion: "1", Arguments: args, PolicyDigest: want})
	if ok.ActionDigest != digest {
		t.Fatalf("action digest %s does not bind policy %s (want %s)", ok.ActionDigest, want, digest)
	}
}

// TestAuthzApproval: a high-risk capability is refused approval_required
// with the action digest; an operator's approval of exactly that digest and
// risk lets it through once (approval_redeemed after); any change to the
// amount, the destination or a nested argument, or a risk other than the
// capability's, is approval_mismatch; the decision time past expiry is
// approval_expired. A valid approval cannot manufacture capacity: exceeded
// still refuses and the approval stays unused until capacity is back.
func TestAuthzApproval(t *testing.T) {
	e, clock := authzEnv(t, authzEdit)
	nc := e.client("acme", "agent_email")
	e.admit("run_h", "agent_email", 50, 10000000)
	high := func(key, order string, amount int64, approval string) map[string]any {
		p := refundTo(capRefundHigh, "run_h", key, order, amount)
		p["arguments"].(map[string]any)["meta"] = map[string]any{"reason": "damaged", "lines": []any{"A", "B"}}
		if approval != "" {
			p["approval_id"] = approval
		}
		return p
	}
	approve := func(digest, risk, ttl string) string {
		r := e.mustOp("approve", wire.ApproveRequest{ActionDigest: digest, Risk: risk, ExpiresIn: ttl})
		return r.Data["approval_id"].(string)
	}

	first := e.propose(nc, "acme", "agent_email", high("h0", "ord_h", 50000, ""))
	wantRefused(t, "no approval", first, wire.CodeApprovalRequired)
	if len(first.ActionDigest) != 64 || !strings.Contains(first.Reason, first.ActionDigest) {
		t.Fatalf("approval_required must carry the action digest: %+v", first)
	}
	a1 := approve(first.ActionDigest, "high", "10m")
	ok := e.propose(nc, "acme", "agent_email", high("h1", "ord_h", 50000, a1))
	wantApplied(t, "approved", ok)
	if ok.ActionDigest != first.ActionDigest {
		t.Fatalf("digest changed with the operation key: %s vs %s", ok.ActionDigest, first.ActionDigest)
	}
	if rec := e.decision("acme", "run_h", "h1"); rec.Controls.ApprovalID != a1 || rec.Controls.Risk != "high" {
		t.Fatalf("controls %+v", rec.Controls)
	}
	wantRefused(t, "second use", e.propose(nc, "acme", "agent_email", high("h2", "ord_h", 50000, a1)), wire.CodeApprovalRedeemed)

	a2 := approve(first.ActionDigest, "high", "10m")
	nested := high("h4", "ord_h", 50000, a2)
	nested["arguments"].(map[string]any)["meta"] = map[string]any{"reason": "damaged", "lines": []any{"A", "C"}}
	for name, p := range map[string]map[string]any{
		"amount":      high("h3", "ord_h", 50001, a2),
		"destination": high("h5", "ord_j", 50000, a2),
		"nested":      nested,
	} {
		wantRefused(t, name, e.propose(nc, "acme", "agent_email", p), wire.CodeApprovalMismatch)
	}
	a3 := approve(first.ActionDigest, "medium", "10m")
	wantRefused(t, "risk", e.propose(nc, "acme", "agent_email", high("h6", "ord_h", 50000, a3)), wire.CodeApprovalMismatch)
	// a2 is still unused: mismatches consume nothing.
	wantApplied(t, "a2 after mismatches", e.propose(nc, "acme", "agent_email", high("h7", "ord_h", 50000, a2)))

	exp := e.propose(nc, "acme", "agent_email", high("e0", "ord_e", 1000, ""))
	a4 := approve(exp.ActionDigest, "high", "1m")
	clock.Advance(61 * time.Second)
	wantRefused(t, "expired", e.propose(nc, "acme", "agent_email", high("e1", "ord_e", 1000, a4)), wire.CodeApprovalExpired)

	// Capacity: 60000 held pending on ord_x, then an approved 50000.
	e.prov.Script(provider.Pending)
	pend := e.propose(nc, "acme", "agent_email", refund("run_h", "x0", "ord_x", 60000))
	if pend.Status != wire.StatusPending {
		t.Fatalf("pending: %+v", pend)
	}
	x1 := e.propose(nc, "acme", "agent_email", high("x1", "ord_x", 50000, ""))
	a5 := approve(x1.ActionDigest, "high", "1h")
	wantRefused(t, "approved but exceeded", e.propose(nc, "acme", "agent_email", high("x2", "ord_x", 50000, a5)), wire.CodeExceeded)
	ref, _ := gateway.ApprovalRef("acme", a5)
	st, _, err := e.rt.Gateway.Engine().Load(context.Background(), ref)
	if err != nil || st.(*kernel.Approval).RedeemedBy != "" {
		t.Fatalf("an approval was consumed by a refused proposal: %+v %v", st, err)
	}
	e.prov.Settle(pend.AttemptID, "failed")
	if rec := e.op("reconcile", wire.OpRequest{AttemptID: pend.AttemptID}); len(rec.Settled) != 1 || rec.Settled[0].Outcome != wire.OutcomeNotApplied {
		t.Fatalf("reconcile: %+v", rec)
	}
	wantApplied(t, "the same approval once capacity is back", e.propose(nc, "acme", "agent_email", high("x3", "ord_x", 50000, a5)))
	if b := e.exposure()["ord_x"]; b != (wire.Balance{Limit: 100000, Committed: 50000, Available: 50000}) {
		t.Fatalf("ord_x %+v", b)
	}
	if b := e.exposure()["ord_h"]; b != (wire.Balance{Limit: 100000, Committed: 100000}) {
		t.Fatalf("ord_h %+v", b)
	}
}

// TestAuthzApprovalRace: two replicas race one approval for the same action
// (two operation keys): exactly one is applied, the other is
// approval_redeemed, and the provider is called once.
func TestAuthzApprovalRace(t *testing.T) {
	e, clock := authzEnv(t, authzEdit)
	nc := e.client("acme", "agent_email")
	other := e.replica(clock, "test-2")
	e.admit("run_r", "agent_email", 50, 10000000)
	for round := 0; round < 3; round++ {
		order := fmt.Sprintf("ord_r%d", round)
		probe := e.propose(nc, "acme", "agent_email", refundTo(capRefundHigh, "run_r", order+"-probe", order, 30000))
		id := e.mustOp("approve", wire.ApproveRequest{ActionDigest: probe.ActionDigest, Risk: "high", ExpiresIn: "10m"}).Data["approval_id"].(string)
		replies := make([]wire.Reply, 2)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := 0; i < 2; i++ {
			p := refundTo(capRefundHigh, "run_r", fmt.Sprintf("%s-%d", order, i), order, 30000)
			p["approval_id"] = id
			wg.Add(1)
			go func(i int, p map[string]any) {
				defer wg.Done()
				<-start
				if i == 0 {
					replies[i] = e.propose(nc, "acme", "agent_email", p)
					return
				}
				b, _ := json.Marshal(p)
				replies[i] = other.Propose(context.Background(), "acme", "agent_email", b)
			}(i, p)
		}
		close(start)
		wg.Wait()
		got := map[wire.Code]int{}
		for _, r := range replies {
			if r.Status == wire.StatusApplied {
				got["applied"]++
			} else {
				got[r.Code]++
			}
		}
		if got["applied"] != 1 || got[wire.CodeApprovalRedeemed] != 1 {
			t.Fatalf("round %d: %v (%+v)", round, got, replies)
		}
		if b := e.exposure()[order]; b.Committed != 30000 || b.Held != 0 {
			t.Fatalf("round %d: %s %+v", round, order, b)
		}
	}
	if st := e.prov.Stats(); st.Calls != 3 {
		t.Fatalf("provider calls %d, want 3", st.Calls)
	}
}

// TestAuthzRunBudget: a run admitted with 2 calls and 1500 is refused
// run_budget_exhausted for the amount and then for the calls, with nothing
// held; a run never admitted is refused where the tenant says so and
// unbudgeted (but recorded) where it does not; a run belongs to its
// principal; a budget is never raised.
func TestAuthzRunBudget(t *testing.T) {
	e, _ := authzEnv(t, authzEdit)
	nc := e.client("acme", "agent_email")
	wantRefused(t, "never admitted", e.propose(nc, "acme", "agent_email", refund("run_none", "k", "ord_b", 100)), wire.CodeRunBudgetExhausted)
	e.admit("run_b", "agent_email", 2, 1500)
	wantApplied(t, "1000 of 1500", e.propose(nc, "acme", "agent_email", refund("run_b", "k1", "ord_b", 1000)))
	wantRefused(t, "600 of 500 left", e.propose(nc, "acme", "agent_email", refund("run_b", "k2", "ord_b", 600)), wire.CodeRunBudgetExhausted)
	wantRefused(t, "another principal's run", e.propose(e.client("acme", "agent_chat"), "acme", "agent_chat", refund("run_b", "c1", "ord_b", 1)), wire.CodeAuthorityDenied)
	wantApplied(t, "400 of 500 left", e.propose(nc, "acme", "agent_email", refund("run_b", "k3", "ord_b", 400)))
	wantRefused(t, "third call", e.propose(nc, "acme", "agent_email", refund("run_b", "k4", "ord_b", 1)), wire.CodeRunBudgetExhausted)
	if b := e.exposure()["ord_b"]; b != (wire.Balance{Limit: 100000, Committed: 1400, Available: 98600}) || e.prov.Stats().Calls != 2 {
		t.Fatalf("budget refusals changed something: %+v, %d calls", b, e.prov.Stats().Calls)
	}
	run := e.mustOp("run", wire.RunRequest{RunID: "run_b"}).Data["run"].(map[string]any)
	if run["used_calls"] != float64(2) || run["used_amount"] != float64(1400) {
		t.Fatalf("run %+v", run)
	}
	if rec := e.decision("acme", "run_b", "k3"); !strings.Contains(rec.Controls.RunBudget, "calls 2+0 delegated of 2, amount 1400+0 delegated of 1500") {
		t.Fatalf("run budget control %q", rec.Controls.RunBudget)
	}
	if r := e.opAny("admit-run", wire.AdmitRunRequest{RunID: "run_b", Principal: "agent_email", Calls: 100, Amount: 1500}); r.Code != wire.CodeRunAlreadyAdmitted {
		t.Fatalf("raising a budget: %+v", r)
	}

	// globex says "unlimited": unadmitted runs are unbudgeted, and recorded.
	g := e.client("globex", "agent_email")
	wantApplied(t, "globex unadmitted", e.propose(g, "globex", "agent_email", refund("run_g", "k", "ord_g", 100)))
	ref, _ := gateway.RunRef("globex", "run_g")
	st, _, err := e.rt.Gateway.Engine().Load(context.Background(), ref)
	if err != nil || st.(*kernel.Run).UsedCalls != 1 || st.(*kernel.Run).UsedAmount != 100 {
		t.Fatalf("unbudgeted usage not recorded: %+v %v", st, err)
	}
}

// TestAuthzChildRunsRace: eight child admissions race on two replicas for a
// parent of 10 calls and 10000; each child asks 2 calls and 3000. Exactly
// three are admitted, the parent keeps the rest, and the total is
// conserved. Children then spend their own budgets, never the parent's.
func TestAuthzChildRunsRace(t *testing.T) {
	e, clock := authzEnv(t, authzEdit)
	other := e.replica(clock, "test-2")
	e.admit("run_parent", "agent_email", 10, 10000)
	replies := make([]wire.OpReply, 8)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range replies {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			req := wire.AdmitRunRequest{RunID: fmt.Sprintf("run_child_%d", i), ParentRunID: "run_parent", Principal: "agent_chat", Calls: 2, Amount: 3000}
			<-start
			if i%2 == 0 {
				replies[i] = e.opAny("admit-run", req)
				return
			}
			b, _ := json.Marshal(req)
			replies[i] = other.Op(context.Background(), "acme", "admit-run", "ops_alice", b)
		}(i)
	}
	close(start)
	wg.Wait()
	var admitted []string
	for i, r := range replies {
		switch {
		case r.OK:
			admitted = append(admitted, fmt.Sprintf("run_child_%d", i))
		case r.Code != wire.CodeRunBudgetExhausted:
			t.Fatalf("child %d: %+v", i, r)
		}
	}
	if len(admitted) != 3 {
		t.Fatalf("%d children admitted, want 3: %+v", len(admitted), replies)
	}
	load := func(run string) *kernel.Run {
		ref, _ := gateway.RunRef("acme", run)
		st, _, err := e.rt.Gateway.Engine().Load(context.Background(), ref)
		if err != nil {
			t.Fatal(err)
		}
		return st.(*kernel.Run)
	}
	parent := load("run_parent")
	calls, amount := parent.Available()
	for _, c := range admitted {
		ch := load(c)
		calls += ch.Calls
		amount += ch.Amount
	}
	if calls != 10 || amount != 10000 || len(parent.Children) != 3 {
		t.Fatalf("not conserved: calls %d amount %d, parent %+v", calls, amount, parent)
	}
	chat := e.client("acme", "agent_chat")
	for _, c := range admitted {
		wantApplied(t, c+" 1", e.propose(chat, "acme", "agent_chat", refund(c, "k1", "ord_"+strings.TrimPrefix(c, "run_child_"), 2000)))
		wantRefused(t, c+" over", e.propose(chat, "acme", "agent_chat", refund(c, "k2", "ord_"+strings.TrimPrefix(c, "run_child_"), 1001)), wire.CodeRunBudgetExhausted)
	}
	if pc, pa := load("run_parent").Available(); pc != 4 || pa != 1000 {
		t.Fatalf("children spent the parent's budget: %d calls %d amount left", pc, pa)
	}
}

// TestAuthzEvidenceGate is the seed's ord_881/ord_992 conflict end to end:
// evidence comes only from the operator registry; with the conflict
// unresolved the refund is refused evidence_insufficient with the gate in
// the reply and in the signed decision record; a review in another's name
// is refused; after the operator's accountable review the same refund is
// dispatched; and once the identity evidence is stale at the gateway's
// decision time the gate closes again.
func TestAuthzEvidenceGate(t *testing.T) {
	e, clock := authzEnv(t, evidenceEdit)
	nc := e.client("acme", "agent_email")
	vec := func(dir, name string) []byte {
		b, err := os.ReadFile(filepath.Join("../testdata/context", dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var cands []json.RawMessage
	if err := json.Unmarshal(vec("conflict_unresolved", "evidence.json"), &cands); err != nil {
		t.Fatal(err)
	}
	var refs []string
	for _, c := range cands {
		r := e.mustOp("evidence", wire.EvidenceRequest{Candidate: c})
		refs = append(refs, r.Data["ref"].(string))
	}
	var markers []json.RawMessage
	if err := json.Unmarshal(vec("conflict_unresolved", "markers.json"), &markers); err != nil {
		t.Fatal(err)
	}
	e.mustOp("evidence", wire.EvidenceRequest{Marker: markers[0]})

	p := refund("run_01", "r1", "ord_881", 800)
	p["evidence_refs"] = refs
	r := e.propose(nc, "acme", "agent_email", p)
	wantRefused(t, "unresolved conflict", r, wire.CodeEvidenceInsufficient)
	var gate kernel.EvidenceGate
	if err := json.Unmarshal(r.Gate, &gate); err != nil {
		t.Fatalf("gate %s: %v", r.Gate, err)
	}
	if gate.CommitAllowed || len(gate.Unresolved) != 1 || gate.Unresolved[0] != "order_lookup" || len(gate.Conflicts) != 1 ||
		gate.Conflicts[0].ConflictID != "conflict:order:ord_881:identity" || gate.Conflicts[0].Status != kernel.ConflictUnresolved {
		t.Fatalf("gate %s", r.Gate)
	}
	rec := e.decision("acme", "run_01", "r1")
	if rec.Code != wire.CodeEvidenceInsufficient || !sameJSON(rec.Controls.EvidenceGate, r.Gate) {
		t.Fatalf("signed record %+v does not carry the reply's gate %s", rec, r.Gate)
	}
	if len(e.exposure()) != 0 || e.prov.Stats().Calls != 0 {
		t.Fatal("an insufficient proposal changed something")
	}
	// A ref the registry never saw is no evidence at all.
	forged := refund("run_01", "r2", "ord_881", 800)
	forged["evidence_refs"] = []string{"kg:order:ord_881#forged", "policy:refunds#v7", "idp:customer:c_77#session_9"}
	wantRefused(t, "forged ref", e.propose(nc, "acme", "agent_email", forged), wire.CodeEvidenceInsufficient)

	var resolved []map[string]any
	if err := json.Unmarshal(vec("conflict_resolved_review", "markers.json"), &resolved); err != nil {
		t.Fatal(err)
	}
	if r := e.opAny("evidence", wire.EvidenceRequest{Marker: mustJSON(resolved[0])}); r.OK || r.Code != wire.CodeAuthorityDenied {
		t.Fatalf("a review in ops:maria's name by ops_alice: %+v", r)
	}
	resolved[0]["resolution"].(map[string]any)["resolved_by"] = "ops_alice"
	e.mustOp("evidence", wire.EvidenceRequest{Marker: mustJSON(resolved[0])})

	p["operation_key"] = "r3"
	ok := e.propose(nc, "acme", "agent_email", p)
	wantApplied(t, "after review", ok)
	wantBalance(t, ok, 800, 0, 99200)
	if err := json.Unmarshal(ok.Gate, &gate); err != nil || !gate.CommitAllowed || gate.Conflicts[0].Status != kernel.ConflictResolved {
		t.Fatalf("gate after review %s", ok.Gate)
	}
	if rec := e.decision("acme", "run_01", "r3"); !sameJSON(rec.Controls.EvidenceGate, ok.Gate) || rec.Status != wire.StatusApplied {
		t.Fatalf("signed record %+v", rec)
	}
	clock.Advance(41 * time.Minute) // idp session evidence is valid until 12:40
	p["operation_key"] = "r4"
	wantRefused(t, "stale identity", e.propose(nc, "acme", "agent_email", p), wire.CodeEvidenceInsufficient)
	if st := e.prov.Stats(); st.Calls != 1 {
		t.Fatalf("provider calls %d, want 1", st.Calls)
	}
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func sameJSON(a, b json.RawMessage) bool {
	ca, err1 := kernel.Canonical(a)
	cb, err2 := kernel.Canonical(b)
	return err1 == nil && err2 == nil && len(a) > 0 && string(ca) == string(cb)
}

// TestAuthzDeny: an operator answers a pending approval request no, with a
// reason: the denied approval is never redeemed (approval_denied) and
// nothing is held. An approval granted and not yet used can be withdrawn
// the same way; a redeemed one cannot, and a denial needs a reason.
func TestAuthzDeny(t *testing.T) {
	e, _ := authzEnv(t, authzEdit)
	nc := e.client("acme", "agent_email")
	e.admit("run_d", "agent_email", 50, 10000000)
	high := func(key string, amount int64, approval string) map[string]any {
		p := refundTo(capRefundHigh, "run_d", key, "ord_d", amount)
		if approval != "" {
			p["approval_id"] = approval
		}
		return p
	}
	pending := e.propose(nc, "acme", "agent_email", high("d0", 40000, ""))
	wantRefused(t, "no approval", pending, wire.CodeApprovalRequired)
	if r := e.opAny("deny", wire.DenyRequest{ActionDigest: pending.ActionDigest, Risk: "high"}); r.OK || r.Code != wire.CodeRequestMalformed {
		t.Fatalf("denial without a reason: %+v", r)
	}
	denied := e.mustOp("deny", wire.DenyRequest{ActionDigest: pending.ActionDigest, Risk: "high", Reason: "duplicate of ticket 4411"})
	id := denied.Data["approval_id"].(string)
	r := e.propose(nc, "acme", "agent_email", high("d1", 40000, id))
	wantRefused(t, "denied request", r, wire.CodeApprovalDenied)
	if !strings.Contains(r.Reason, "duplicate of ticket 4411") {
		t.Fatalf("the reason is not passed on: %+v", r)
	}

	granted := e.mustOp("approve", wire.ApproveRequest{ActionDigest: pending.ActionDigest, Risk: "high", ExpiresIn: "10m"}).Data["approval_id"].(string)
	e.mustOp("deny", wire.DenyRequest{ApprovalID: granted, Reason: "approved by mistake"})
	wantRefused(t, "withdrawn approval", e.propose(nc, "acme", "agent_email", high("d2", 40000, granted)), wire.CodeApprovalDenied)

	used := e.mustOp("approve", wire.ApproveRequest{ActionDigest: pending.ActionDigest, Risk: "high", ExpiresIn: "10m"}).Data["approval_id"].(string)
	wantApplied(t, "approved", e.propose(nc, "acme", "agent_email", high("d3", 40000, used)))
	if r := e.opAny("deny", wire.DenyRequest{ApprovalID: used, Reason: "too late"}); r.OK || r.Code != wire.CodeApprovalRedeemed {
		t.Fatalf("denial of a redeemed approval: %+v", r)
	}
	if bal := e.exposure()["ord_d"]; bal.Committed != 40000 || bal.Held != 0 {
		t.Fatalf("ord_d: %+v", bal)
	}
	var kinds []string
	for _, ev := range e.signed(mustSubject(t, "acme", "approval", id)) {
		kinds = append(kinds, ev.EventType())
	}
	if strings.Join(kinds, ",") != kernel.TypeApprovalDenied {
		t.Fatalf("approval %s holds %v", id, kinds)
	}
}

func mustSubject(t *testing.T, tenant, kind string, ids ...string) string {
	t.Helper()
	s, err := codec.Subject(tenant, kind, ids...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
