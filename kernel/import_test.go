package kernel

import "testing"

func TestCheckWindowKey(t *testing.T) {
	for _, c := range []struct {
		window, key string
		ok          bool
	}{
		{"", "", true},
		{"", "2026-12-05", false},
		{WindowRolling, "", true},
		{WindowDay, "2026-12-05", true},
		{WindowDay, "2026-12-5", false},
		{WindowDay, "2026-02-30", false},
		{WindowDay, "", false},
		{WindowWeek, "2026-W49", true},
		{WindowWeek, "2026-W53", true},
		{WindowWeek, "2025-W53", false},
		{WindowWeek, "2026-W00", false},
		{WindowWeek, "2026-W49 ", false},
		{WindowMonth, "2026-12", true},
		{WindowMonth, "2026-13", false},
		{WindowMonth, "2026-12-01", false},
	} {
		d := Definition{ID: "g", Window: c.window}
		if r := d.CheckWindowKey(c.key); (r == nil) != c.ok {
			t.Errorf("window %q key %q: refusal %v, want ok=%v", c.window, c.key, r, c.ok)
		}
	}
}

// TestDecideImportRow: the step checks the pin and the row's window
// against the definition, and imports under the latest version's limit.
func TestDecideImportRow(t *testing.T) {
	def := demoDefinition()
	def.Window, def.TimeZone = WindowDay, ""
	pin := &Pin{}
	for _, ev := range DecidePin(nil, "acme", def).Events {
		if err := pin.Apply(ev); err != nil {
			t.Fatal(err)
		}
	}
	row := ImportRow{GuaranteeID: def.ID, Resource: "ord_1", Window: "2026-12-05", Amount: 70000, Reference: "crm-1", Operator: "ops", Now: scenarioNow}
	if d := DecideImportRow(ImportState{Pin: &Pin{}, Control: &Control{}}, row); d.Refusal == nil || d.Refusal.Code != "shared_guarantee_definition_mismatch" {
		t.Fatalf("unpinned: %+v", d)
	}
	bad := row
	bad.Window = ""
	if d := DecideImportRow(ImportState{Pin: pin, Control: &Control{}}, bad); d.Refusal == nil || d.Refusal.Code != "request_malformed" {
		t.Fatalf("a day guarantee's row without its window: %+v", d)
	}
	ctl := &Control{}
	if err := ctl.applyRedefined(GuaranteeRedefined{GuaranteeID: def.ID, Version: 2, Limit: 60000, Operator: "ops", Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	if d := DecideImportRow(ImportState{Pin: pin, Control: ctl}, row); d.Refusal == nil || d.Refusal.Code != "shared_guarantee_exceeded" {
		t.Fatalf("over the latest version's limit: %+v", d)
	}
	d := DecideImportRow(ImportState{Pin: pin, Control: &Control{}}, row)
	if d.Refusal != nil || len(d.Events) != 1 {
		t.Fatalf("import: %+v", d)
	}
	l := &Ledger{}
	if err := l.Apply(d.Events[0]); err != nil || l.Window != "2026-12-05" || l.Committed != 70000 || l.Imported != 70000 {
		t.Fatalf("applied: %+v %v", l, err)
	}
}
