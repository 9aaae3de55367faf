package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updateEvalReference = flag.Bool("update-eval", false, "rewrite the evaluation report in docs/context.md and docs/context-eval.png")

const (
	evalCases  = "../../testdata/context-eval"
	contextDoc = "../../docs/context.md"
	evalChart  = "../../docs/context-eval.png"
	beginEval  = "<!-- context-eval:begin (ctx context eval --cases testdata/context-eval; go test ./cmd/ctx -run TestContextEvalReference -update-eval rewrites it) -->\n"
	endEval    = "<!-- context-eval:end -->\n"
)

// TestContextEvalReference runs `ctx context eval` on the shipped cases:
// it exits 0 (no false closure), and its report and chart are the ones
// committed in docs/context.md and docs/context-eval.png.
func TestContextEvalReference(t *testing.T) {
	chart := filepath.Join(t.TempDir(), "chart.png")
	var out, errOut bytes.Buffer
	code := runIO([]string{"context", "eval", "--cases", evalCases, "--chart", chart, "--chart-link", "context-eval.png"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut.String(), out.String())
	}
	report := out.String()
	if !strings.Contains(report, "**0 false closures**") {
		t.Fatalf("report:\n%s", report)
	}
	png, err := os.ReadFile(chart)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(contextDoc)
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok1 := strings.Cut(string(doc), beginEval)
	committed, after, ok2 := strings.Cut(rest, endEval)
	if !ok1 || !ok2 {
		t.Fatalf("%s has no evaluation block (%q ... %q)", contextDoc, beginEval, endEval)
	}
	if *updateEvalReference {
		if err := os.WriteFile(contextDoc, []byte(before+beginEval+report+endEval+after), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(evalChart, png, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if committed != report {
		t.Errorf("docs/context.md holds another report than ctx context eval prints (rerun with -update-eval):\n%s", report)
	}
	if want, err := os.ReadFile(evalChart); err != nil || !bytes.Equal(want, png) {
		t.Errorf("docs/context-eval.png is not the chart ctx context eval draws (rerun with -update-eval): %v", err)
	}
}

// TestContextEvalExitCodes: 2 without --cases, 1 for a case set that does
// not load, 1 when a candidate pack makes a false closure.
func TestContextEvalExitCodes(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := runIO([]string{"context", "eval"}, &out, &errOut); code != exitUsage {
		t.Fatalf("no --cases: exit %d", code)
	}
	if code := runIO([]string{"context", "eval", "--cases", t.TempDir()}, &out, &errOut); code != exitRefused {
		t.Fatalf("empty case dir: exit %d", code)
	}
	// Trusting the forum closes the low and medium-risk untrusted cases.
	pack := filepath.Join(t.TempDir(), "pack.json")
	if err := os.WriteFile(pack, []byte(`{"schema":"context_pack.v1","pack_id":"candidate","version":"2",
		"buckets":[{"name":"evidence","max_tokens":4000}],
		"decisions":[{"decision_key":"qa.answer.draft","required_evidence":["answer"]}],
		"trust":[{"source":"forum","requirements":["answer"]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errOut.Reset()
	code := runIO([]string{"context", "eval", "--cases", filepath.Join(evalCases, "ramdocs"), "--pack", pack, "--json"}, &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "false closure") || !strings.Contains(out.String(), `"false_closures": 11`) {
		t.Fatalf("exit %d: %s\n%.400s", code, errOut.String(), out.String())
	}
}
