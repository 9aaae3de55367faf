package client

import (
	"encoding/json"
	"testing"

	"github.com/contextos/ledger/wire"
)

func TestParseImportFile(t *testing.T) {
	csvFile := "reference,guarantee,resource,amount,window\n" +
		"crm-1,refunds-per-order,ord_1,60000,\n" +
		"crm-2,refunds-per-order,\"ord,2\",12.5,\n" +
		"crm-3,refunds-per-order,ord_3,007,\n" +
		"crm-4,refunds-per-order,ord_4,9007199254740991,2026-12-05\n"
	f, err := ParseImportFile([]byte(csvFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Rows) != 2 || f.Rows[0] != (ImportRow{GuaranteeID: "refunds-per-order", Resource: "ord_1", Amount: 60000, Reference: "crm-1"}) ||
		f.Rows[1].Window != "2026-12-05" || f.Lines[1] != 5 {
		t.Fatalf("rows %+v lines %v", f.Rows, f.Lines)
	}
	if len(f.Refused) != 2 || f.Refused[0].Row != 3 || f.Refused[0].Code != wire.CodeAmountInvalid || f.Refused[1].Reference != "crm-3" {
		t.Fatalf("refused %+v", f.Refused)
	}
	js := `[{"guarantee_id":"g","resource":"r","amount":5,"reference":"x"},{"guarantee_id":"g","resource":"r","amount":-1,"reference":"y"}]`
	f, err = ParseImportFile([]byte(js))
	if err != nil || len(f.Rows) != 1 || f.Rows[0].Amount != 5 || len(f.Refused) != 1 || f.Refused[0].Row != 2 {
		t.Fatalf("json: %+v %v", f, err)
	}
	for name, bad := range map[string]string{
		"no header columns": "a,b\n1,2\n",
		"unknown column":    "guarantee,resource,amount,reference,extra\n",
		"unknown member":    `[{"guarantee_id":"g","resource":"r","amount":5,"reference":"x","limit":1}]`,
		"trailing data":     `[] []`,
		"empty":             "",
		"no rows":           "guarantee,resource,amount,reference\n",
	} {
		if _, err := ParseImportFile([]byte(bad)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	big := make([]byte, wire.MaxImportFileBytes+1)
	if _, err := ParseImportFile(big); err == nil {
		t.Error("a file over the byte bound is read")
	}
	var many []byte
	many = append(many, "guarantee,resource,amount,reference\n"...)
	for i := 0; i <= wire.MaxImportRows; i++ {
		many = append(many, "g,r,1,x\n"...)
	}
	if _, err := ParseImportFile(many); err == nil {
		t.Error("a file over the row bound is read")
	}
}

// FuzzParseImportFile: the parser never panics, keeps its bounds, and
// every row it keeps survives the wire's encoding unchanged.
func FuzzParseImportFile(f *testing.F) {
	f.Add([]byte("guarantee,resource,window,amount,reference\ng,r,,5,x\n"))
	f.Add([]byte(`[{"guarantee_id":"g","resource":"r","amount":5,"reference":"x"}]`))
	f.Add([]byte("guarantee,resource,amount,reference\ng,\"r\"\"x\",1e3,y\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := ParseImportFile(b)
		if err != nil {
			return
		}
		if len(file.Rows)+len(file.Refused) > wire.MaxImportRows || len(file.Rows) != len(file.Lines) {
			t.Fatalf("bounds: %d rows, %d refused, %d lines", len(file.Rows), len(file.Refused), len(file.Lines))
		}
		for _, r := range file.Rows {
			if r.Amount <= 0 || r.Amount > 1<<53-1 {
				t.Fatalf("amount %d kept", r.Amount)
			}
			enc, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			var back ImportRow
			if err := json.Unmarshal(enc, &back); err != nil || back != r {
				t.Fatalf("round trip %+v -> %+v (%v)", r, back, err)
			}
		}
	})
}
