package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/contextos/ledger/client"
	"github.com/contextos/ledger/wire"
)

// TestGuardrailAndWaiverCmds: ctx guardrail set publishes a cap the
// runtime's kernel enforces (guardrail_refused), ctx waiver grant lets one
// named run through, list shows who set what until when, revoke ends the
// waiver and remove the guardrail; malformed uses exit 2.
func TestGuardrailAndWaiverCmds(t *testing.T) {
	d := boot(t)
	t.Setenv("CTX_NATS", d.rt.URL)
	t.Setenv("CTX_TENANT", "acme")
	t.Setenv("CTX_USER", "ops_alice")
	t.Setenv("CTX_PASSWORD", "alice-secret-passphrase")
	ok := func(args ...string) string {
		t.Helper()
		code, out, errOut := ctxRun(args...)
		if code != 0 {
			t.Fatalf("ctx %s: exit %d: %s%s", strings.Join(args, " "), code, out, errOut)
		}
		return out
	}
	agent, err := client.Connect(client.Options{URL: d.rt.URL, Tenant: "acme", Principal: "agent_email", Password: "email-secret-passphrase"})
	if err != nil {
		t.Fatal(err)
	}
	defer agent.Close()
	propose := func(run, key string, amount int) error {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, err := agent.Propose(ctx, client.Proposal{RunID: run, OperationKey: key, CapabilityID: "adp_payments.issue_refund",
			Arguments: json.RawMessage(fmt.Sprintf(`{"order_id":"ord_%s","amount_minor":%d,"currency":"INR"}`, key, amount))})
		return err
	}
	refusedBy := func(err error, code wire.Code) bool {
		var r client.Refused
		return errors.As(err, &r) && r.Code == code
	}

	if out := ok("guardrail", "set", "refund_cap", "--capability", "adp_payments.issue_refund", "--max-amount", "20000", "--reason", "fleet cap"); !strings.Contains(out, "at most 20000 per proposal") || !strings.Contains(out, "ops_alice") {
		t.Fatalf("guardrail set: %s", out)
	}
	if err := propose("run_a", "a1", 30000); !refusedBy(err, wire.CodeGuardrailRefused) {
		t.Fatalf("over the cap: %v", err)
	}
	if out := ok("waiver", "grant", "w1", "--guardrail", "refund_cap", "--run", "run_b", "--for", "1h", "--reason", "INC-9"); !strings.Contains(out, "run run_b") {
		t.Fatalf("waiver grant: %s", out)
	}
	if err := propose("run_b", "b1", 30000); err != nil {
		t.Fatalf("the waived run: %v", err)
	}
	if err := propose("run_a", "a2", 30000); !refusedBy(err, wire.CodeGuardrailRefused) {
		t.Fatalf("another run: %v", err)
	}
	if out := ok("waiver", "list"); !strings.Contains(out, "w1") || !strings.Contains(out, "INC-9") {
		t.Fatalf("waiver list: %s", out)
	}
	if out := ok("guardrail", "list"); !strings.Contains(out, "refund_cap") || !strings.Contains(out, "fleet cap") {
		t.Fatalf("guardrail list: %s", out)
	}
	if out := ok("waiver", "revoke", "w1", "--reason", "over"); strings.Contains(out, "w1") {
		t.Fatalf("waiver revoke: %s", out)
	}
	if err := propose("run_b", "b2", 30000); !refusedBy(err, wire.CodeGuardrailRefused) {
		t.Fatalf("the run after its waiver was revoked: %v", err)
	}
	if code, out, errOut := ctxRun("waiver", "revoke", "w1"); code != 1 || !strings.Contains(errOut, "request_malformed") {
		t.Fatalf("revoking twice: %d %s%s", code, out, errOut)
	}
	ok("guardrail", "remove", "refund_cap")
	if err := propose("run_a", "a3", 30000); err != nil {
		t.Fatalf("after the guardrail's removal: %v", err)
	}
	for _, args := range [][]string{
		{"guardrail"}, {"guardrail", "set", "x"}, {"guardrail", "set", "x", "--capability", "c", "--disabled", "--max-amount", "3"},
		{"guardrail", "remove", "x", "--disabled"}, {"guardrail", "bogus"},
		{"waiver", "grant", "w", "--guardrail", "g", "--run", "r", "--resource", "x", "--for", "1h", "--reason", "y"},
		{"waiver", "grant", "w", "--guardrail", "g", "--run", "r", "--reason", "y"}, {"waiver", "revoke", "w", "--run", "r"},
	} {
		if code, _, errOut := ctxRun(args...); code != 2 {
			t.Errorf("ctx %s: exit %d, want 2 (%s)", strings.Join(args, " "), code, errOut)
		}
	}
}
