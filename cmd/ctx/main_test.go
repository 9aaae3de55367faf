package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextos/ledger/audit"
)

// TestHelpEveryCommand runs --help on the root and on every command,
// including nested ones: each must exit 0.
func TestHelpEveryCommand(t *testing.T) {
	root := newRoot()
	paths := [][]string{{}}
	for _, c := range root.Commands() {
		paths = append(paths, []string{c.Name()})
		for _, sub := range c.Commands() {
			paths = append(paths, []string{c.Name(), sub.Name()})
		}
	}
	if len(paths) < 8 {
		t.Fatalf("only %d commands registered", len(paths))
	}
	for _, p := range paths {
		if code, _, _ := ctxRun(append(p, "--help")...); code != 0 {
			t.Errorf("ctx %s --help exited %d", strings.Join(p, " "), code)
		}
	}
}

// TestAuditConsistencyOffline: from the verifier's vector export, the proof
// that its checkpoint of 5 records is a prefix of its latest verifies (also
// against the kept note); a fork's checkpoint, a note one did not keep and a
// size the export has no checkpoint of are refused (exit 1); a missing flag
// is a usage error (exit 2).
func TestAuditConsistencyOffline(t *testing.T) {
	dir := t.TempDir()
	vec := func(name string) string { return filepath.Join("../../testdata/verifier", name) }
	out := filepath.Join(dir, "consistency.json")
	if c := run([]string{"audit", "prove-consistency", "--entries", vec("ok.entries.json"), "--old-size", "5", "--out", out}); c != 0 {
		t.Fatalf("prove-consistency exited %d", c)
	}
	if c := run([]string{"audit", "verify-consistency", out, "--keys", vec("keys.json")}); c != 0 {
		t.Fatalf("verify-consistency exited %d", c)
	}
	e, err := audit.ParseEntries(mustReadFile(t, vec("ok.entries.json")))
	if err != nil {
		t.Fatal(err)
	}
	kept := filepath.Join(dir, "kept.note")
	other := filepath.Join(dir, "other.note")
	if err := os.WriteFile(kept, e.Checkpoints[0], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, e.Checkpoints[1], 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		code int
	}{
		{[]string{"audit", "verify-consistency", out, "--keys", vec("keys.json"), "--old", kept}, 0},
		{[]string{"audit", "verify-consistency", out, "--keys", vec("keys.json"), "--old", other}, 1},
		{[]string{"audit", "verify-consistency", vec("consistency-fork.json"), "--keys", vec("keys.json")}, 1},
		{[]string{"audit", "verify-consistency", out, "--keys", vec("other-keys.json")}, 1},
		{[]string{"audit", "prove-consistency", "--entries", vec("ok.entries.json"), "--old-size", "7", "--out", out}, 1},
		{[]string{"audit", "prove-consistency", "--entries", vec("ok.entries.json"), "--out", out}, 2},
		{[]string{"audit", "verify-consistency", out}, 2},
	}
	for _, c := range cases {
		if got := run(c.args); got != c.code {
			t.Errorf("ctx %s: exit %d, want %d", strings.Join(c.args, " "), got, c.code)
		}
	}
}

func mustReadFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
