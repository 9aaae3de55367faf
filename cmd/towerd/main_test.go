package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/contextos/ledger/console/tower"
	"github.com/contextos/ledger/kernel"
)

// TestExitCodes: usage is 2; a configuration error or a log that cannot be
// verified is 1, with the table naming the log.
func TestExitCodes(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "tower.toml")
	if err := os.WriteFile(cfg, []byte("[[runtimes]]\nname = \"eu-1\"\n[[runtimes.tenants]]\nid = \"acme\"\nkeys = \"missing.keys.json\"\nentries = \"missing.entries.json\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		out  string
	}{
		{nil, 2, ""},
		{[]string{"--config", cfg, "--engage", "a", "--release", "b"}, 2, ""},
		{[]string{"--config", filepath.Join(dir, "nope.toml")}, 1, ""},
		{[]string{"--config", cfg, "--once"}, 1, "unreadable: trusted keys"},
		{[]string{"--config", cfg, "--engage", "drill"}, 1, "no operator configured"},
		{[]string{"--config", cfg, "--engage", "a", "--guardrail", "g"}, 2, ""},
		{[]string{"--config", cfg, "--guardrail", "g"}, 2, ""},
		{[]string{"--config", cfg, "--guardrail", "g", "--capability", "c", "--disabled", "--max-amount", "5"}, 2, ""},
		{[]string{"--config", cfg, "--guardrail", "g", "--remove", "--capability", "c"}, 2, ""},
		{[]string{"--config", cfg, "--guardrail", "g", "--capability", "c", "--max-amount", "5"}, 1, "no operator configured"},
		{[]string{"--config", cfg, "--guardrail", "g", "--remove"}, 1, "no operator configured"},
		{[]string{"--config", cfg, "--waiver", "w", "--of", "g", "--run", "r", "--for", "1h"}, 2, ""},
		{[]string{"--config", cfg, "--waiver", "w", "--of", "g", "--run", "r", "--resource", "x", "--for", "1h", "--reason", "y"}, 2, ""},
		{[]string{"--config", cfg, "--waiver", "w", "--of", "g", "--run", "r", "--for", "1h", "--reason", "y"}, 1, "no operator configured"},
	} {
		var out, errb bytes.Buffer
		if code := run(tc.args, &out, &errb); code != tc.code || !strings.Contains(out.String(), tc.out) {
			t.Fatalf("towerd %v: exit %d (want %d)\n%s%s", tc.args, code, tc.code, out.String(), errb.String())
		}
	}
}

// TestFleetReviewTables: --once prints, beside the fleet and its resources,
// the two-person requests waiting for a second operator, the guardrails and
// the waivers in force of every verified log, and leaves out a table with no
// row.
func TestFleetReviewTables(t *testing.T) {
	until := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	f := &tower.Fleet{Logs: []tower.LogView{{Runtime: "eu-1", Tenant: "acme", Verified: true,
		Requests: []tower.Request{{RequestID: "req_1", Operator: "ops_alice", Verb: "kill-switch", Scope: "acme/*",
			Body: `{"engaged":false}`, RequestedAt: "2026-12-06T10:00:00Z"}},
		MoreRequests: 2,
		Guardrails: []tower.GuardrailView{{GuardrailSet: kernel.GuardrailSet{GuardrailID: "g_refund_cap", CapabilityID: "adp_payments.issue_refund",
			MaxAmount: 5000, Operator: "ops_alice", Reason: "chargeback wave"}, At: "2026-12-06T09:00:00Z"}},
		Waivers: []tower.WaiverView{{WaiverGranted: kernel.WaiverGranted{WaiverID: "w_1", GuardrailID: "g_refund_cap", RunID: "run_vip",
			Until: until, Operator: "ops_bob", Reason: "vip"}}},
	}, {Runtime: "us-1", Tenant: "globex", Verified: true}}}
	var out bytes.Buffer
	printFleet(&out, f)
	text := out.String()
	for _, want := range []string{
		"REQUEST", "req_1", "kill-switch", "ops_alice", "acme/*", "never", `"{\"engaged\":false}"`, "(2 more)",
		"GUARDRAIL", "g_refund_cap", "adp_payments.issue_refund", "at most 5000 per proposal", `"chargeback wave"`,
		"WAIVER", "w_1", `"run run_vip"`, "2026-12-07T09:00:00Z", "ops_bob",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the table lacks %q:\n%s", want, text)
		}
	}
	out.Reset()
	printFleet(&out, &tower.Fleet{Logs: f.Logs[1:]})
	for _, absent := range []string{"REQUEST", "GUARDRAIL", "WAIVER"} {
		if strings.Contains(out.String(), absent) {
			t.Errorf("a fleet with no %s rows prints the table:\n%s", absent, out.String())
		}
	}
}
