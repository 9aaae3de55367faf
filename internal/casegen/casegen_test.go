package casegen

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextos/ledger/internal/contexteval"
	"github.com/contextos/ledger/internal/evalcase"
)

const shipped = "../../testdata/context-eval"

// findRAMDocs looks for shared/data/ramdocs beside the repository or one of
// its parents (where the workplace and CI keep the shared data).
func findRAMDocs(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for {
		p := filepath.Join(dir, "shared", "data", "ramdocs", "RAMDocs_test.jsonl")
		if _, err := os.Stat(p); err == nil {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// TestShippedCasesAreGenerated: the committed cases are exactly what the
// converter writes from RAMDocs and the adversarial specs.
func TestShippedCasesAreGenerated(t *testing.T) {
	path := findRAMDocs(t)
	if path == "" {
		t.Skip("RAMDocs not found beside the repository (shared/data/ramdocs)")
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cases, err := All(f)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{}
	for _, c := range cases {
		b, err := evalcase.Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		want[filepath.FromSlash(c.CaseID)+".json"] = b
	}
	got, _ := filepath.Glob(filepath.Join(shipped, "*", "*.json"))
	if len(got) != len(want) {
		t.Errorf("%d case files, the generator writes %d (run go run ./cmd/ctxcases)", len(got), len(want))
	}
	for _, p := range got {
		rel, _ := filepath.Rel(shipped, p)
		b, _ := os.ReadFile(p)
		if w, ok := want[rel]; !ok {
			t.Errorf("%s is not generated", rel)
		} else if !bytes.Equal(b, w) {
			t.Errorf("%s differs from the generator's output (run go run ./cmd/ctxcases)", rel)
		}
	}
}

// record is a RAMDocs record with two correct, two misinfo and one noise
// document.
func record(q string) RAMDocsRecord {
	return RAMDocsRecord{Question: q, GoldAnswers: []string{"Paris"}, WrongAnswers: []string{"Lyon"}, Documents: []RAMDocsDoc{
		{Text: "The capital of France is Paris.", Type: "correct", Answer: "Paris"},
		{Text: "Paris has been the French capital since 987.", Type: "correct", Answer: "Paris"},
		{Text: "Lyon became the capital of France in 2020.", Type: "misinfo", Answer: "Lyon"},
		{Text: "France moved its capital to Lyon.", Type: "misinfo", Answer: "Lyon"},
		{Text: "France borders Spain.", Type: "noise", Answer: "unknown"},
	}}
}

// TestFromRAMDocs: the variants of each risk class, their expected outcome
// stated here (not taken from the grader), and the gate agreeing.
func TestFromRAMDocs(t *testing.T) {
	recs := []RAMDocsRecord{record("q0"), {Question: "skipped: one correct document", GoldAnswers: []string{"x"},
		Documents: []RAMDocsDoc{{Text: "x", Type: "correct", Answer: "x"}, {Text: "y", Type: "misinfo", Answer: "y"}}}, record("q2"), record("q3")}
	cases, err := FromRAMDocs(recs)
	if err != nil {
		t.Fatal(err)
	}
	commits := map[string]bool{"sufficient": true, "resolved": true, "control": true}
	risks := map[string]evalcase.Risk{"q000": evalcase.RiskLow, "q002": evalcase.RiskMedium, "q003": evalcase.RiskHigh}
	n := map[string]int{}
	for _, c := range cases {
		q, variant, _ := strings.Cut(strings.TrimPrefix(c.CaseID, "ramdocs/"), "-")
		n[q]++
		if c.Risk != risks[q] || c.Variant != variant {
			t.Errorf("%s: risk %s variant %s", c.CaseID, c.Risk, c.Variant)
		}
		if want := map[bool]evalcase.Outcome{true: evalcase.Commit, false: evalcase.Abstain}[commits[variant]]; c.Expected.Outcome != want {
			t.Errorf("%s: expected %s, want %s", c.CaseID, c.Expected.Outcome, want)
		}
		if c.Provenance.Dataset != "RAMDocs" || c.Provenance.Licence != "MIT" {
			t.Errorf("%s: provenance %+v", c.CaseID, c.Provenance)
		}
	}
	if n["q000"] != 8 || n["q002"] != 8 || n["q003"] != 9 || len(n) != 3 {
		t.Fatalf("cases per record %v: want 8, 8 and 9 (the high-risk record adds correlated)", n)
	}
	rep, err := contexteval.Run(cases, contexteval.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Total.FalseClosures != 0 || rep.Total.FalseAbstentions != 0 {
		t.Fatalf("the gate disagrees with the grader: %+v", rep.Disagreements)
	}
}

// TestAdversarialOutcomes states each hand-written case's outcome.
func TestAdversarialOutcomes(t *testing.T) {
	want := map[string]evalcase.Outcome{
		"refund-conflicting": evalcase.Abstain, "refund-resolved-review": evalcase.Commit, "refund-self-review": evalcase.Abstain,
		"refund-control": evalcase.Commit, "bank-conflicting": evalcase.Abstain, "bank-resolved-refresh": evalcase.Commit,
		"bank-refresh-not-newest": evalcase.Abstain, "limit-conflicting": evalcase.Abstain, "limit-resolved-priority": evalcase.Commit,
		"limit-control": evalcase.Commit, "access-correlated": evalcase.Abstain, "access-sufficient": evalcase.Commit,
		"access-conflicting": evalcase.Abstain, "ship-conflicting": evalcase.Abstain, "ship-resolved-review": evalcase.Commit,
		"ship-stale": evalcase.Abstain, "renew-conflicting": evalcase.Abstain, "renew-untrusted": evalcase.Abstain,
	}
	cases, err := Adversarial()
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) != len(want) {
		t.Fatalf("%d cases, want %d", len(cases), len(want))
	}
	for _, c := range cases {
		if w := want[strings.TrimPrefix(c.CaseID, "adversarial/")]; c.Expected.Outcome != w {
			t.Errorf("%s: %s (%s), want %s", c.CaseID, c.Expected.Outcome, c.Expected.Reason, w)
		}
	}
}

func TestParseRAMDocs(t *testing.T) {
	good := `{"question":"q","documents":[{"text":"t","type":"correct","answer":"a"}],"disambig_entity":[],"gold_answers":["a"],"wrong_answers":[]}`
	if recs, err := ParseRAMDocs(strings.NewReader(good + "\n" + good + "\n")); err != nil || len(recs) != 2 {
		t.Fatalf("good records: %v %d", err, len(recs))
	}
	for _, tc := range []struct{ in, want string }{
		{"", "no records"},
		{strings.Replace(good, `"correct"`, `"opinion"`, 1), `document type "opinion"`},
		{strings.Replace(good, `"question":"q",`, `"question":"q","extra":1,`, 1), "unknown field"},
		{good + ` {}`, "trailing data"},
		{`{"question":"","documents":[]}`, "a question and documents are required"},
	} {
		if _, err := ParseRAMDocs(strings.NewReader(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.in, err, tc.want)
		}
	}
}

// FuzzParseRAMDocs: the dataset reader never panics, and whatever it
// accepts converts without panicking.
func FuzzParseRAMDocs(f *testing.F) {
	f.Add([]byte(`{"question":"q","documents":[{"text":"t","type":"correct","answer":"a"},{"text":"u","type":"correct","answer":"a"},{"text":"v","type":"misinfo","answer":"b"}],"disambig_entity":[],"gold_answers":["a"],"wrong_answers":["b"]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, err := ParseRAMDocs(bytes.NewReader(data))
		if err != nil {
			return
		}
		_, _ = FromRAMDocs(recs)
	})
}
