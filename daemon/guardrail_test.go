package daemon_test

import (
	"testing"
	"time"

	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
)

// TestGuardrailWaiverExpiry: over real NATS, an operator publishes a
// guardrail capping refunds; a larger refund is refused guardrail_refused,
// a waiver for its run lets it through, and after the waiver ends the
// same run is refused again, as is a run whose waiver was revoked; the guardrail verbs are signed control events.
func TestGuardrailWaiverExpiry(t *testing.T) {
	e, clock := authzEnv(t, refusalWindow)
	agent := e.client("acme", "agent_email")
	set := e.opAny(kernel.VerbGuardrail, wire.GuardrailRequest{GuardrailID: "refund_cap", CapabilityID: "adp_payments.issue_refund",
		MaxAmount: 20000, Reason: "fleet cap while the provider is audited"})
	if !set.OK {
		t.Fatalf("guardrail: %+v", set)
	}
	if r := e.propose(agent, "acme", "agent_email", refund("run_1", "small", "ord_1", 15000)); r.Status != wire.StatusApplied {
		t.Fatalf("a refund under the cap: %+v", r)
	}
	if r := e.propose(agent, "acme", "agent_email", refund("run_1", "big-1", "ord_2", 30000)); r.Status != wire.StatusRefused || r.Code != wire.CodeGuardrailRefused {
		t.Fatalf("a refund over the cap: %+v; want guardrail_refused", r)
	}
	until := clock.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	w := e.opAny(kernel.VerbWaiver, wire.WaiverRequest{WaiverID: "w1", GuardrailID: "refund_cap", RunID: "run_1", Until: until, Reason: "INC-9: the customer's refund"})
	if !w.OK {
		t.Fatalf("waiver: %+v", w)
	}
	if r := e.propose(agent, "acme", "agent_email", refund("run_1", "big-2", "ord_3", 30000)); r.Status != wire.StatusApplied {
		t.Fatalf("a refund of the waived run: %+v", r)
	}
	if r := e.propose(agent, "acme", "agent_email", refund("run_2", "big-3", "ord_4", 30000)); r.Code != wire.CodeGuardrailRefused {
		t.Fatalf("another run is not waived: %+v", r)
	}
	clock.Advance(time.Hour)
	if r := e.propose(agent, "acme", "agent_email", refund("run_1", "big-4", "ord_5", 30000)); r.Code != wire.CodeGuardrailRefused {
		t.Fatalf("after the waiver ended: %+v; want guardrail_refused", r)
	}
	list := e.opAny(kernel.VerbGuardrails, struct{}{})
	if !list.OK || len(list.Data["guardrails"].([]any)) != 1 || len(list.Data["waivers"].([]any)) != 0 {
		t.Fatalf("guardrails: %+v", list)
	}
	if bad := e.opAny(kernel.VerbWaiver, wire.WaiverRequest{WaiverID: "w2", GuardrailID: "refund_cap", RunID: "run_1",
		Until: clock.Now().Add(30 * 24 * time.Hour).UTC().Format(time.RFC3339), Reason: "too long"}); bad.OK || bad.Code != wire.CodeRequestMalformed {
		t.Fatalf("a waiver of 30 days: %+v", bad)
	}
	// A revoked waiver lets nothing through from then on.
	if w := e.opAny(kernel.VerbWaiver, wire.WaiverRequest{WaiverID: "w3", GuardrailID: "refund_cap", RunID: "run_3",
		Until: clock.Now().Add(time.Hour).UTC().Format(time.RFC3339), Reason: "INC-10"}); !w.OK {
		t.Fatalf("waiver w3: %+v", w)
	}
	if r := e.propose(agent, "acme", "agent_email", refund("run_3", "big-5", "ord_6", 30000)); r.Status != wire.StatusApplied {
		t.Fatalf("a refund of the waived run: %+v", r)
	}
	if rv := e.opAny(kernel.VerbWaiver, wire.WaiverRequest{WaiverID: "w3", Revoke: true, Reason: "incident closed"}); !rv.OK || len(rv.Data["waivers"].([]any)) != 0 {
		t.Fatalf("revoke: %+v", rv)
	}
	if r := e.propose(agent, "acme", "agent_email", refund("run_3", "big-6", "ord_7", 30000)); r.Code != wire.CodeGuardrailRefused {
		t.Fatalf("after the waiver was revoked: %+v; want guardrail_refused", r)
	}
}
