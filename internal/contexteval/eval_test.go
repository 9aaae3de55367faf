package contexteval

import (
	"bytes"
	"errors"
	"fmt"
	"image/png"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/contextos/ledger/internal/evalcase"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
)

const shipped = "../../testdata/context-eval"

func load(t *testing.T, dir string) []evalcase.Case {
	t.Helper()
	cases, err := evalcase.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return cases
}

// TestShippedCases: the shipped gate makes no false closure and no false
// abstention on the shipped cases, and every level's commits include the
// next, stronger level's.
func TestShippedCases(t *testing.T) {
	rep, err := Run(load(t, shipped), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Total.FalseClosures != 0 || rep.Total.FalseAbstentions != 0 {
		t.Fatalf("gate disagrees with the grader: %+v", rep.Disagreements)
	}
	for _, c := range rep.Cases {
		for i := 1; i < len(Levels); i++ {
			if c.Levels[Levels[i]].Outcome == evalcase.Commit && c.Levels[Levels[i-1]].Outcome != evalcase.Commit {
				t.Errorf("%s commits at %s but not at the weaker %s", c.CaseID, Levels[i], Levels[i-1])
			}
		}
		if g := c.Levels[Gate]; g.Outcome == evalcase.Commit && !g.Accurate {
			t.Errorf("%s: the gate commits on a basis labelled incorrect", c.CaseID)
		}
	}
}

// TestCandidatePack: a candidate pack that trusts the forum and knows no
// source families closes the untrusted cases (but the high-risk ones, which
// still lack a second family) and the correlated ones: the eval counts each
// as a false closure, and nothing else.
func TestCandidatePack(t *testing.T) {
	cases := load(t, filepath.Join(shipped, "ramdocs"))
	p := kernel.ContextPack{Schema: kernel.ContextPackSchema, PackID: "candidate", Version: "2",
		Buckets: []kernel.ContextBucket{{Name: "evidence", MaxTokens: 4000}},
		Decisions: []kernel.DecisionSpec{
			{DecisionKey: "qa.answer.draft", RequiredEvidence: []string{"answer"}},
			{DecisionKey: "qa.answer.send", RequiredEvidence: []string{"answer"}},
			{DecisionKey: "qa.answer.record", RequiredEvidence: []string{"answer"},
				Independence: []kernel.IndependenceDemand{{Requirement: "answer", MinFamilies: 2}}},
		},
		Trust: []kernel.TrustRule{{Source: "forum", Requirements: []string{"answer"}}},
	}
	for i := range 20 {
		p.Trust = append(p.Trust, kernel.TrustRule{Source: fmt.Sprintf("doc%d", i), Requirements: []string{"answer"}})
	}
	rep, err := Run(cases, Options{Pack: &p})
	if err != nil {
		t.Fatal(err)
	}
	var want, got []string
	for _, c := range cases {
		// A high-risk untrusted case has one source family of two needed.
		if (c.Variant == "untrusted" && c.Risk != evalcase.RiskHigh) || c.Variant == "correlated" {
			want = append(want, c.CaseID)
		}
	}
	for _, d := range rep.Disagreements {
		if d.Levels[Gate].Outcome != evalcase.Commit {
			t.Errorf("%s: unexpected false abstention", d.CaseID)
		}
		got = append(got, d.CaseID)
	}
	if !slices.Equal(got, want) || rep.Total.FalseClosures != len(want) {
		t.Fatalf("false closures %d %v, want %v", rep.Total.FalseClosures, got, want)
	}
	if !strings.Contains(rep.Markdown(""), fmt.Sprintf("**%d false closures**", len(want))) {
		t.Fatalf("report:\n%s", rep.Markdown(""))
	}
}

// TestStaleExpectation: a case whose stored outcome is not the grader's is
// refused, naming it.
func TestStaleExpectation(t *testing.T) {
	cases := load(t, filepath.Join(shipped, "adversarial"))
	cases[0].Expected.Outcome = evalcase.Commit
	cases[0].Expected.Reason = "every obligation closes"
	_, err := Run(cases, Options{})
	if !errors.Is(err, ErrStaleExpectation) || !strings.Contains(err.Error(), cases[0].CaseID) {
		t.Fatalf("got %v", err)
	}
}

// TestRefusedInputsAbstain: inputs the kernel refuses keep the decision
// open, as the daemon refuses the dispatch.
func TestRefusedInputsAbstain(t *testing.T) {
	cases := load(t, filepath.Join(shipped, "adversarial"))
	i := slices.IndexFunc(cases, func(c evalcase.Case) bool { return c.CaseID == "adversarial/refund-self-review" })
	rep, err := Run(cases[i:i+1], Options{})
	if err != nil {
		t.Fatal(err)
	}
	g := rep.Cases[0].Levels[Gate]
	if g.Outcome != evalcase.Abstain || !strings.Contains(g.Reason, string(wire.CodeContextInvalid)) {
		t.Fatalf("gate %+v", g)
	}
	// The weaker levels drop the markers, and with them the self-review.
	if rep.Cases[0].Levels[Eligibility].Outcome != evalcase.Commit {
		t.Fatalf("eligibility %+v", rep.Cases[0].Levels[Eligibility])
	}
}

// TestChart: the chart is a PNG of the stated size, the same bytes every
// time.
func TestChart(t *testing.T) {
	rep, err := Run(load(t, filepath.Join(shipped, "adversarial")), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var a, b bytes.Buffer
	if err := rep.WriteChart(&a); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteChart(&b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("chart bytes differ between two renderings")
	}
	img, err := png.Decode(&a)
	if err != nil {
		t.Fatal(err)
	}
	if s := img.Bounds().Size(); s.X != 720 || s.Y != 470 {
		t.Fatalf("chart size %v", s)
	}
}
