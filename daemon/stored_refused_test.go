package daemon_test

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/contextos/ledger/aggregates"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
)

// TestStoredEventRefusedReply: a proposal on a resource whose subject holds
// an event the kernel refuses to fold (an observation of an attempt the
// ledger never saw, signed by the runtime key) is answered
// stored_event_refused, a final refusal, not ledger_unavailable, which
// would have the agent resend for as long as its deadline allows.
func TestStoredEventRefusedReply(t *testing.T) {
	e := startEnv(t)
	nc := e.client("acme", "agent_email")
	wantBalance(t, e.propose(nc, "acme", "agent_email", refund("run_a", "a1", "ord_a", 100)), 100, 0, 99900)

	subject, err := codec.ExposureSubject("acme", "refunds-per-order", "ord_a")
	if err != nil {
		t.Fatal(err)
	}
	env, err := e.rt.Signer.Seal(kernel.TypeExposureObserved, kernel.EventVersion, aggregates.NewIDs(aggregates.SystemClock{}, nil).New(), "acme",
		codec.FormatTime(time.Now()), kernel.ExposureObserved{AttemptID: "01JNOBODY0000000000000000", Outcome: kernel.OutcomeApplied, Source: "forged"})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := codec.Encode(env)
	if err != nil {
		t.Fatal(err)
	}
	e.storeRaw(subject, raw)

	r := e.propose(nc, "acme", "agent_email", refund("run_a", "a2", "ord_a", 50))
	if r.Status != wire.StatusRefused || r.Code != wire.CodeStoredEventRefused {
		t.Fatalf("proposal over a refused stored event: %s %s (%s), want refused %s", r.Status, r.Code, r.Reason, wire.CodeStoredEventRefused)
	}
	if wire.RetryOf(r.Code) != wire.RetryNever {
		t.Fatalf("%s is retried as %v", r.Code, wire.RetryOf(r.Code))
	}
	// Another resource is decided as before.
	wantBalance(t, e.propose(nc, "acme", "agent_email", refund("run_a", "b1", "ord_b", 25)), 25, 0, 99975)
}

// TestOperatorVerbStoredEventRefused: operator verbs whose subject holds a
// stored message the kernel refuses (no valid event, written there
// directly) answer stored_event_refused naming that subject, and change
// nothing: the control subject for the kill switch and a limit change
// (decided on the engine's warm state, refreshed on the append's sequence
// conflict), the authority subject for a grant (read fresh).
func TestOperatorVerbStoredEventRefused(t *testing.T) {
	e := startEnv(t)
	nc := e.client("acme", "agent_email")
	wantBalance(t, e.propose(nc, "acme", "agent_email", refund("run_a", "a1", "ord_a", 100)), 100, 0, 99900)
	before := e.exposure()

	control, err := codec.Subject("acme", "control")
	if err != nil {
		t.Fatal(err)
	}
	authority, err := codec.Subject("acme", "authority")
	if err != nil {
		t.Fatal(err)
	}
	e.storeRaw(control, []byte("not an event"))
	e.storeRaw(authority, []byte("not an event"))

	engage := true
	for _, c := range []struct {
		verb    string
		body    any
		subject string
	}{
		{"kill-switch", wire.OpRequest{Engaged: &engage, Reason: "stop"}, control},
		{"guarantee-set-limit", wire.SetLimitRequest{GuaranteeID: "refunds-per-order", Limit: 50, Reason: "tighter"}, control},
		{"grant", wire.GrantRequest{Principal: "agent_chat", CapabilityID: "crm.lookup", Reason: "lookups"}, authority},
	} {
		r := e.opAny(c.verb, c.body)
		if r.OK || r.Code != wire.CodeStoredEventRefused || !strings.Contains(r.Reason, c.subject+" seq ") {
			t.Fatalf("%s over a refused stored event on %s: %+v, want %s naming the subject", c.verb, c.subject, r, wire.CodeStoredEventRefused)
		}
	}
	if r := e.op("kill-switch", wire.OpRequest{}); r.KillSwitch == nil || *r.KillSwitch {
		t.Fatalf("kill switch after the refused engage: %+v", r)
	}
	if after := e.exposure(); !maps.Equal(after, before) {
		t.Fatalf("exposure changed: %v, was %v", after, before)
	}
}

// TestOperatorVerbStoreStopped: the same verbs with the store not
// answering (JetStream stopped, NATS still serving the verbs) answer
// ledger_unavailable: their outcome is unknown, and resending learns it.
func TestOperatorVerbStoreStopped(t *testing.T) {
	e := startEnv(t)
	if err := e.rt.Embedded.Server().DisableJetStream(); err != nil {
		t.Fatal(err)
	}
	engage := true
	for _, c := range []struct {
		verb string
		body any
	}{
		{"kill-switch", wire.OpRequest{Engaged: &engage, Reason: "stop"}},
		{"guarantee-set-limit", wire.SetLimitRequest{GuaranteeID: "refunds-per-order", Limit: 50, Reason: "tighter"}},
		{"grant", wire.GrantRequest{Principal: "agent_chat", CapabilityID: "crm.lookup", Reason: "lookups"}},
	} {
		if r := e.opAny(c.verb, c.body); r.OK || r.Code != wire.CodeLedgerUnavailable {
			t.Fatalf("%s with the store stopped: %+v, want %s", c.verb, r, wire.CodeLedgerUnavailable)
		}
	}
}
