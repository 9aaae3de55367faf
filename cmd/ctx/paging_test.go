package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/contextos/ledger/internal/testing/gatewaytest"
	"github.com/contextos/ledger/internal/testing/provider"
	"github.com/contextos/ledger/wire"
)

var cursorRE = regexp.MustCompile(`continue with --cursor (\S+)`)

// TestListsPageThrough: ctx attempts, exposure, approvals and incidents
// read page after page up to --limit, say on stderr how to continue, and
// continue from --cursor; a resource id over 256 bytes is printed
// shortened with its SHA-256, and --resource-digest selects it.
func TestListsPageThrough(t *testing.T) {
	d := boot(t)
	const n = 7
	modes := make([]provider.Mode, n)
	for i := range modes {
		modes[i] = provider.Pending
	}
	d.prov.Script(modes...)
	nc := gatewaytest.Connect(t, d.rt.URL, "email-secret-passphrase", "acme", "agent_email")
	long := strings.Repeat("o", 1000)
	for i := 0; i < n; i++ {
		order := fmt.Sprintf("ord_p%d", i)
		if i == 0 {
			order = long
		}
		r := gatewaytest.Propose(t, nc, "acme", "agent_email", map[string]any{"run_id": "run_p", "operation_key": fmt.Sprint("p", i),
			"capability_id": "adp_payments.issue_refund", "arguments": map[string]any{"order_id": order, "amount_minor": 10, "currency": "INR"}})
		if r.Status != wire.StatusPending {
			t.Fatalf("%+v", r)
		}
	}
	conn := []string{"--nats", d.rt.URL, "--tenant", "acme", "--user", "ops_alice", "--password", "alice-secret-passphrase"}
	for _, verb := range []string{"attempts", "exposure"} {
		code, out, errOut := ctxRun(append([]string{verb, "-o", "json", "--limit", "3"}, conn...)...)
		var first []map[string]any
		if code != 0 || json.Unmarshal([]byte(out), &first) != nil || len(first) != 3 {
			t.Fatalf("%s --limit 3: %d %s %s", verb, code, out, errOut)
		}
		m := cursorRE.FindStringSubmatch(errOut)
		if m == nil {
			t.Fatalf("%s --limit 3 says nothing of the rows left: %q", verb, errOut)
		}
		code, out, errOut = ctxRun(append([]string{verb, "-o", "json", "--cursor", m[1]}, conn...)...)
		var rest []map[string]any
		if code != 0 || json.Unmarshal([]byte(out), &rest) != nil || len(rest) != n-3 || errOut != "" {
			t.Fatalf("%s --cursor: %d %s %s", verb, code, out, errOut)
		}
		seen := map[string]bool{}
		for _, r := range append(first, rest...) {
			seen[fmt.Sprint(r["resource"], r["resource_digest"])] = true
		}
		if len(seen) != n {
			t.Fatalf("%s: %d distinct rows in two runs", verb, len(seen))
		}
	}
	d64 := wire.Digest(long)
	code, out, _ := ctxRun(append([]string{"attempts"}, conn...)...)
	if code != 0 || strings.Contains(out, long) || !strings.Contains(out, "sha256:"+d64) {
		t.Fatalf("ctx attempts table: %d\n%s", code, out)
	}
	code, out, _ = ctxRun(append([]string{"exposure", "--resource-digest", d64}, conn...)...)
	if code != 0 || strings.Count(out, "\n") != 2 || !strings.Contains(out, "sha256:"+d64) {
		t.Fatalf("ctx exposure --resource-digest: %d\n%s", code, out)
	}
	for _, args := range [][]string{{"approvals", "--limit", "0"}, {"incidents", "--limit", "10001"}} {
		if code, _, _ := ctxRun(append(args, conn...)...); code != exitUsage {
			t.Fatalf("%v: exit %d", args, code)
		}
	}
	if code, _, errOut := ctxRun(append([]string{"attempts", "--cursor", "junk"}, conn...)...); code != exitRefused || !strings.Contains(errOut, "request_malformed") {
		t.Fatalf("a bad cursor: %d %s", code, errOut)
	}
	if code, _, _ := ctxRun(append([]string{"guarantee", "history", "refunds-per-order", "--limit", "1"}, conn...)...); code != 0 {
		t.Fatalf("guarantee history --limit 1: %d", code)
	}
}
