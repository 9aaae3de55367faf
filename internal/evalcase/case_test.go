package evalcase

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const shipped = "../../testdata/context-eval"

func goodCase(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(shipped, "adversarial", "refund-resolved-review.json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestParseRefusals: every label the grader relies on is checked.
func TestParseRefusals(t *testing.T) {
	good := string(goodCase(t))
	if _, err := Parse([]byte(good)); err != nil {
		t.Fatalf("shipped case refused: %v", err)
	}
	for _, tc := range []struct{ name, old, new, want string }{
		{"schema", `"context_eval_case.v1"`, `"context_eval_case.v2"`, "schema must be"},
		{"unknown field", `"slice": "adversarial",`, `"slice": "adversarial", "weight": 2,`, "unknown field"},
		{"variant", `"variant": "resolved"`, `"variant": "weird"`, "variant \"weird\""},
		{"risk", `"risk": "high"`, `"risk": "extreme"`, "risk \"extreme\""},
		{"truth", `"truth": "misinfo"`, `"truth": "maybe"`, "truth \"maybe\""},
		{"claim outside the obligations", `"claims": [
        "order_lookup"`, `"claims": [
        "order_lookpu"`, "which is not an obligation"},
		{"selection outside the snapshots", `"selects": [
      "kg:order:ord_881#snapshot_41"`, `"selects": [
      "kg:order:ord_881#snapshot_99"`, "which is not a snapshot"},
		{"policy kind", `"kind": "accountable_review"`, `"kind": "model_vote"`, "resolution_policy.kind"},
		{"outcome", `"outcome": "commit"`, `"outcome": "maybe"`, "expected.outcome"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(good, tc.old) {
				t.Fatalf("the shipped case has no %q", tc.old)
			}
			_, err := Parse([]byte(strings.Replace(good, tc.old, tc.new, 1)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if _, err := Parse([]byte(good + "{}")); err == nil || !strings.Contains(err.Error(), "trailing data") {
		t.Fatalf("trailing data: %v", err)
	}
	if _, err := Parse(bytes.Repeat([]byte(" "), MaxCaseBytes+1)); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("oversized case: %v", err)
	}
}

// TestLoad reads a tree of cases in path order and refuses a repeated id.
func TestLoad(t *testing.T) {
	cases, err := Load(shipped)
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) < 100 {
		t.Fatalf("%d shipped cases", len(cases))
	}
	for i := 1; i < len(cases); i++ {
		if cases[i-1].Path >= cases[i].Path {
			t.Fatalf("cases out of path order: %s, %s", cases[i-1].Path, cases[i].Path)
		}
	}
	dir := t.TempDir()
	for _, name := range []string{"a.json", "b.json"} {
		if err := os.WriteFile(filepath.Join(dir, name), goodCase(t), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "repeats") {
		t.Fatalf("repeated case id: %v", err)
	}
	if _, err := Load(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no *.json") {
		t.Fatalf("empty dir: %v", err)
	}
}

// FuzzParse: Parse never panics, and a parsed case re-encodes to bytes
// that parse again to the same bytes.
func FuzzParse(f *testing.F) {
	f.Add(goodCase(f))
	paths, _ := filepath.Glob(filepath.Join(shipped, "ramdocs", "q002-*.json"))
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			return
		}
		enc, err := Encode(c)
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		d, err := Parse(enc)
		if err != nil {
			t.Fatalf("re-parse of %s: %v", enc, err)
		}
		enc2, err := Encode(d)
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("re-encoding is not stable (%v):\n%s\n%s", err, enc, enc2)
		}
	})
}
