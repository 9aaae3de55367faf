package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/contextos/ledger/client"
	"github.com/contextos/ledger/internal/testing/provider"
	"github.com/contextos/ledger/wire"
)

// TestGuaranteeImportAndReport: ctx guarantee import against a real daemon
// counts prior exposure as committed (a proposal above the remaining
// headroom is refused, one within it applies), reports each bad row with
// its code, and imports nothing twice when run again; ctx report then
// shows the figures of that known sequence of proposals.
func TestGuaranteeImportAndReport(t *testing.T) {
	d := boot(t)
	run := asOperator(t, d).out
	file := filepath.Join(t.TempDir(), "prior.csv")
	if err := os.WriteFile(file, []byte("guarantee,resource,amount,reference\n"+
		"refunds-per-order,ord_i1,60000,crm-1\n"+
		"refunds-per-order,ord_i2,12.5,crm-2\n"+
		"refunds-per-order,ord_i3,100001,crm-3\n"+
		"no-such-guarantee,ord_i1,5,crm-4\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var first []client.ImportResult
	if err := json.Unmarshal([]byte(run(1, "guarantee", "import", "--file", file, "-o", "json")), &first); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		status string
		code   wire.Code
	}{{wire.ImportImported, ""}, {wire.ImportRefused, wire.CodeAmountInvalid}, {wire.ImportRefused, wire.CodeExceeded}, {wire.ImportRefused, wire.CodeDefinitionMismatch}}
	if len(first) != len(want) {
		t.Fatalf("results: %+v", first)
	}
	for i, w := range want {
		if r := first[i]; r.Row != i+2 || r.Status != w.status || r.Code != w.code {
			t.Fatalf("row %d: %+v, want %s %s", i+2, r, w.status, w.code)
		}
	}

	agent, err := client.Connect(client.Options{URL: d.rt.URL, Tenant: "acme", Principal: "agent_email", Password: "email-secret-passphrase"})
	if err != nil {
		t.Fatal(err)
	}
	defer agent.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	refund := func(key, order string, amount int) (client.Decision, error) {
		b, _ := json.Marshal(map[string]any{"order_id": order, "amount_minor": amount, "currency": "INR"})
		return agent.Propose(ctx, client.Proposal{RunID: "run_i", OperationKey: key, CapabilityID: "adp_payments.issue_refund", Arguments: b})
	}
	calls := d.prov.Stats().Calls
	if _, err := refund("i1", "ord_i1", 50000); !errors.Is(err, client.Refused{Code: client.CodeExceeded}) {
		t.Fatalf("a proposal above the headroom the import left: %v", err)
	}
	if d.prov.Stats().Calls != calls {
		t.Fatal("a refused proposal reached the provider")
	}
	if dec, err := refund("i2", "ord_i1", 40000); err != nil || dec.Status != client.StatusApplied || *dec.Committed != 100000 {
		t.Fatalf("within the headroom: %+v %v", dec, err)
	}

	// The same file again imports nothing twice.
	var again []client.ImportResult
	if err := json.Unmarshal([]byte(run(1, "guarantee", "import", "--file", file, "-o", "json")), &again); err != nil {
		t.Fatal(err)
	}
	if again[0].Status != wire.ImportAlready {
		t.Fatalf("re-run: %+v", again[0])
	}
	var exp []client.ExposureRow
	if err := json.Unmarshal([]byte(run(0, "exposure", "--guarantee", "refunds-per-order", "--resource", "ord_i1", "-o", "json")), &exp); err != nil {
		t.Fatal(err)
	}
	if len(exp) != 1 || exp[0].Committed != 100000 || exp[0].Available != 0 {
		t.Fatalf("exposure after the re-run: %+v", exp)
	}

	// One attempt left pending by the provider holds exposure.
	d.prov.Script(provider.Pending)
	if dec, err := refund("i3", "ord_i5", 30000); err != nil || dec.Status != client.StatusPending {
		t.Fatalf("pending: %+v %v", dec, err)
	}
	var rows []client.OutcomeRow
	if err := json.Unmarshal([]byte(run(0, "report", "--guarantee", "refunds-per-order", "-o", "json")), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 {
		t.Fatalf("report: %+v", rows)
	}
	r := rows[0]
	if r.Applied != 1 || r.AppliedAmount != 40000 || r.Pending != 1 || r.Unknown != 0 || r.Imported != 60000 ||
		len(r.Denials) != 1 || r.Denials[0] != (wire.DenialCount{Code: wire.CodeExceeded, Count: 1}) ||
		r.Stranded[0] != (wire.StrandedBucket{Age: wire.AgeUnderMinute, Attempts: 1, Amount: 30000}) {
		t.Fatalf("report: %+v", r)
	}
	out := run(0, "report")
	for _, w := range []string{"GUARANTEE", "refunds-per-order", "shared_guarantee_exceeded=1", "30000 (1)", "60000"} {
		if !strings.Contains(out, w) {
			t.Fatalf("report table lacks %q:\n%s", w, out)
		}
	}
}
