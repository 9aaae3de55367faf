package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/contextos/ledger/client"
)

// TestGuaranteeVerbs: ctx guarantee set-limit records versions with the
// operator and reason, history shows them in order, and a change without a
// reason is a usage error.
func TestGuaranteeVerbs(t *testing.T) {
	d := boot(t)
	run := asOperator(t, d).all
	run(2, "guarantee", "set-limit", "--guarantee", "refunds-per-order", "--limit", "150000")
	run(2, "guarantee", "set-limit", "--guarantee", "refunds-per-order", "--reason", "no change named")
	if out := run(0, "guarantee", "set-limit", "--guarantee", "refunds-per-order", "--limit", "150000", "--reason", "festival season"); !strings.Contains(out, "version 2") {
		t.Fatalf("set-limit: %s", out)
	}
	run(0, "guarantee", "set-limit", "--guarantee", "refunds-per-order", "--resource", "ord_vip", "--limit", "500000", "--reason", "enterprise customer")
	if out := run(1, "guarantee", "set-limit", "--guarantee", "refunds-per-order", "--mode", "sometimes", "--reason", "r"); !strings.Contains(out, "shared_guarantee_definition_invalid") {
		t.Fatalf("a bad mode: %s", out)
	}
	out := run(0, "guarantee", "history", "refunds-per-order")
	for _, want := range []string{"VERSION", "festival season", "ord_vip", "500000", "ops_alice", "pinned at first use"} {
		if !strings.Contains(out, want) {
			t.Fatalf("history lacks %q:\n%s", want, out)
		}
	}
	var rows []client.VersionRow
	if err := json.Unmarshal([]byte(run(0, "guarantee", "history", "refunds-per-order", "-o", "json")), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 || rows[1].Limit != 150000 || rows[2].Resource != "ord_vip" || rows[1].Operator != "ops_alice" {
		t.Fatalf("history: %+v", rows)
	}
	run(1, "guarantee", "history", "no-such-guarantee")
}
