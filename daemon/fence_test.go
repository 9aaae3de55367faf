package daemon_test

import (
	"testing"
	"time"

	"github.com/contextos/ledger/internal/testing/provider"
	"github.com/contextos/ledger/wire"
)

// TestSameActionFence: the provider applies a refund and answers late, so
// its outcome is unknown. The same refund under a fresh operation key (by
// the same agent, and by another agent in its own run) is refused
// shared_guarantee_unresolved_attempt and never reaches the provider,
// whose own count stays at one call; another amount is another action and
// is dispatched; the original key still answers with its operation. Once
// reconciliation finds the first refund applied, the same refund under a
// new key is a new refund and is dispatched.
func TestSameActionFence(t *testing.T) {
	e := startEnv(t)
	e.prov.Delay = 2 * time.Second // past the capability's 500ms timeout
	email, chat := e.client("acme", "agent_email"), e.client("acme", "agent_chat")

	e.prov.Script(provider.Timeout)
	first := e.propose(email, "acme", "agent_email", refund("run_1", "refund-1", "ord_fence", 30000))
	if first.Status != wire.StatusUnknown {
		t.Fatalf("first: %s %s %s, want unknown", first.Status, first.Code, first.Reason)
	}
	if n, amount := appliedOn(t, e.prov, "ord_fence"); n != 1 || amount != 30000 {
		t.Fatalf("the provider applied %d refunds of %d, want the first", n, amount)
	}

	for _, c := range []struct{ principal, run, key string }{
		{"agent_email", "run_1", "refund-1-again"},
		{"agent_chat", "run_chat", "refund-chat"},
	} {
		nc := email
		if c.principal == "agent_chat" {
			nc = chat
		}
		r := e.propose(nc, "acme", c.principal, refund(c.run, c.key, "ord_fence", 30000))
		if r.Status != wire.StatusRefused || r.Code != wire.CodeUnresolvedAttempt {
			t.Fatalf("%s under %s: %s %s %s, want refused %s", c.principal, c.key, r.Status, r.Code, r.Reason, wire.CodeUnresolvedAttempt)
		}
		wantBalance(t, r, 0, 30000, 70000)
		if st := e.prov.Stats(); st.Calls != 1 {
			t.Fatalf("the provider saw %d calls after the fenced resend, want 1", st.Calls)
		}
	}
	if wire.RetryOf(wire.CodeUnresolvedAttempt) != wire.RetryOperator {
		t.Fatalf("retry class %s", wire.RetryOf(wire.CodeUnresolvedAttempt))
	}

	// The original key is the operation: its status, no call.
	again := e.propose(email, "acme", "agent_email", refund("run_1", "refund-1", "ord_fence", 30000))
	if again.Status != wire.StatusUnknown || again.OperationID != first.OperationID || e.prov.Stats().Calls != 1 {
		t.Fatalf("original key: %+v, %d calls", again, e.prov.Stats().Calls)
	}

	// Another amount is another action: decided on the ceiling.
	other := e.propose(email, "acme", "agent_email", refund("run_1", "refund-2", "ord_fence", 20000))
	if other.Status != wire.StatusApplied {
		t.Fatalf("another amount: %s %s %s", other.Status, other.Code, other.Reason)
	}
	wantBalance(t, other, 20000, 30000, 50000)

	// Reconciliation asks the provider by the attempt's key and seals the
	// first refund applied.
	rec := e.op("reconcile", wire.OpRequest{All: true})
	settled := false
	for _, s := range rec.Settled {
		if s.AttemptID == first.AttemptID {
			settled = s.Outcome == wire.OutcomeApplied && s.Code == ""
		}
	}
	if !settled {
		t.Fatalf("reconcile did not settle %s applied: %+v", first.AttemptID, rec)
	}
	calls := e.prov.Stats().Calls
	after := e.propose(email, "acme", "agent_email", refund("run_1", "refund-3", "ord_fence", 30000))
	if after.Status != wire.StatusApplied {
		t.Fatalf("after reconciliation: %s %s %s", after.Status, after.Code, after.Reason)
	}
	wantBalance(t, after, 80000, 0, 20000)
	if st := e.prov.Stats(); st.Calls != calls+1 {
		t.Fatalf("the provider saw %d calls, want %d", st.Calls, calls+1)
	}
	if n, amount := appliedOn(t, e.prov, "ord_fence"); n != 3 || amount != 80000 {
		t.Fatalf("the provider applied %d refunds of %d in all, want 3 of 80000", n, amount)
	}
}
