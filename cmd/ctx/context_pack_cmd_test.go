package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
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

// TestContextPackVerbs: the pack commands against a real runtime: publish,
// promote through the release gate with the evaluation ctx runs on
// held-out cases (a candidate that abstains more is refused
// release_gate_failed), rollback, packs, and diff of two published
// versions.
func TestContextPackVerbs(t *testing.T) {
	d := boot(t)
	run := asOperator(t, d).all
	dir := t.TempDir()
	v1 := "../../testdata/context/sufficient/pack.json"
	p, err := kernel.ParseContextPack(mustReadFile(t, v1))
	if err != nil {
		t.Fatal(err)
	}
	version := func(name string, mut func(*kernel.ContextPack)) string {
		q := p
		q.Version = name
		q.Decisions = append([]kernel.DecisionSpec(nil), p.Decisions...)
		mut(&q)
		b, _ := json.Marshal(q)
		path := filepath.Join(dir, name+".json")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	v2 := version("v2", func(q *kernel.ContextPack) {
		q.Buckets = []kernel.ContextBucket{{Name: "evidence", MaxTokens: 800}, p.Buckets[1]}
	})
	// v3 requires an obligation no source can satisfy: it abstains on
	// every refund the grader commits.
	v3 := version("v3", func(q *kernel.ContextPack) {
		q.Decisions[0].RequiredEvidence = append(append([]string(nil), q.Decisions[0].RequiredEvidence...), "manager_signoff")
	})
	cases := filepath.Join(dir, "cases")
	if err := os.Mkdir(cases, 0o755); err != nil {
		t.Fatal(err)
	}
	matches, _ := filepath.Glob("../../testdata/context-eval/adversarial/refund-*.json")
	for _, m := range matches {
		if err := os.WriteFile(filepath.Join(cases, filepath.Base(m)), mustReadFile(t, m), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	for _, f := range []string{v1, v2, v3} {
		if out := run(0, "context", "publish", f); !strings.Contains(out, "published support.refund@") {
			t.Fatalf("publish %s: %s", f, out)
		}
	}
	run(0, "context", "promote", "support.refund@2026-10-01.1")
	run(2, "context", "promote", "support.refund@v2") // a promotion over one needs --cases
	if out := run(1, "context", "promote", "support.refund@v3", "--cases", cases); !strings.Contains(out, "release_gate_failed") {
		t.Fatalf("promote v3: %s", out)
	}
	if out := run(0, "context", "promote", "support.refund@v2", "--cases", cases); !strings.Contains(out, "promoted support.refund@v2") {
		t.Fatalf("promote v2: %s", out)
	}
	if out := run(0, "context", "packs"); !strings.Contains(out, "* support.refund@v2") {
		t.Fatalf("packs: %s", out)
	}
	if out := run(0, "context", "rollback"); !strings.Contains(out, "promoted support.refund@2026-10-01.1") {
		t.Fatalf("rollback: %s", out)
	}
	if out := run(1, "context", "diff", "support.refund@2026-10-01.1", "support.refund@v3"); !strings.Contains(out, "manager_signoff") {
		t.Fatalf("diff: %s", out)
	}
	if out := run(0, "admit-run", "--run", "run_p", "--principal", "agent_email", "--calls", "1", "--amount", "1", "--pack", "support.refund@v3"); !strings.Contains(out, "pinned context pack support.refund@v3") {
		t.Fatalf("admit-run --pack: %s", out)
	}
}
