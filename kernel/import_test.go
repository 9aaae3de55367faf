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
