package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
