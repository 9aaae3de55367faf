package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReplayPacket: every decision kind of the packet story replays equal;
// a packet with a changed signed event is refused; a changed input names
// the stage that differs; both exit 1.
func TestReplayPacket(t *testing.T) {
	dir := t.TempDir()
	golden := func(name string) string { return filepath.Join("../../packet/testdata", name+".packet.json") }
	for _, name := range []string{"applied", "unknown", "fenced", "policy-denied", "exceeded"} {
		code, out := runStdout(t, "replay", "--packet", golden(name))
		if code != 0 || !strings.HasPrefix(string(out), "equal: ") {
			t.Fatalf("%s: exit %d: %s", name, code, out)
		}
	}
	b := string(mustReadFile(t, golden("exceeded")))
	write := func(name, s string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// The signed record says another code.
	tampered := strings.Replace(b, `"code":"shared_guarantee_exceeded"`, `"code":"policy_denied"`, 1)
	if tampered == b {
		t.Fatal("no refusal code in the packet")
	}
	if code, _ := runStdout(t, "replay", "--packet", write("tampered.json", tampered)); code != 1 {
		t.Fatalf("a tampered packet: exit %d, want 1", code)
	}
	// The proposal's amount changed: its action is another.
	head, proposal, _ := strings.Cut(b, `"proposal":`)
	changed := head + `"proposal":` + strings.Replace(proposal, `"amount_minor":40000`, `"amount_minor":10000`, 1)
	if changed == b {
		t.Fatal("no proposal amount in the packet")
	}
	code, out := runStdout(t, "replay", "--packet", write("changed.json", changed), "--json")
	if code != 1 || !strings.Contains(string(out), `"stage": "binding"`) || !strings.Contains(string(out), `"field": "action_digest"`) {
		t.Fatalf("a changed input: exit %d: %s", code, out)
	}
	if code, _ := runStdout(t, "replay", "--packet", golden("applied"), "--events", "x"); code != 2 {
		t.Fatalf("--packet with --events: exit %d, want 2", code)
	}
}
