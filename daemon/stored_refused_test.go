package daemon

import (
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
