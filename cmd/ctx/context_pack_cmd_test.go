package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/contextos/ledger/kernel"
)

// TestContextDiffFiles: `ctx context diff` on files: equal inputs exit 0,
// different ones print the diff and exit 1, a pack against a compiled
// context is a usage error, an invalid input exits 1.
func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o644) }

func TestContextDiffFiles(t *testing.T) {
	vec := func(p string) string { return filepath.Join("../../testdata/context", p) }
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := writeFile(bad, `{"schema":"compiled_context.v1","nope":1}`); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		a, b string
		code int
	}{
		{vec("sufficient/want.json"), vec("sufficient/want.json"), 0},
		{vec("conflict_unresolved/want.json"), vec("conflict_resolved_review/want.json"), 1},
		{vec("sufficient/pack.json"), vec("sufficient/want.json"), 2},
		{bad, vec("sufficient/want.json"), 1},
	} {
		var out, errOut bytes.Buffer
		if code := runIO([]string{"context", "diff", c.a, c.b}, &out, &errOut); code != c.code {
			t.Fatalf("diff %s %s: exit %d, want %d: %s", c.a, c.b, code, c.code, errOut.String())
		}
		if c.code == 1 && c.a != bad {
			var d kernel.ContextDiff
			if err := json.Unmarshal(out.Bytes(), &d); err != nil || len(d.Superseded) != 1 || len(d.Obligations) != 1 ||
				d.Obligations[0].To != kernel.ObligationSatisfied {
				t.Fatalf("diff output %s: %v", out.String(), err)
			}
		}
	}
}
