package contexteval

import (
	"fmt"
	"slices"
	"strings"

	"github.com/contextos/ledger/internal/evalcase"
)

// Tally counts one group of cases at one level.
type Tally struct {
	Cases            int `json:"cases"`
	Expected         int `json:"expected_commits"` // the grader's commits
	Commits          int `json:"commits"`
	Accurate         int `json:"accurate_commits"`
	FalseClosures    int `json:"false_closures"`
	FalseAbstentions int `json:"false_abstentions"`
}

func (t *Tally) add(expected evalcase.Outcome, r Result) {
	t.Cases++
	if expected == evalcase.Commit {
		t.Expected++
	}
	if r.Outcome == evalcase.Commit {
		t.Commits++
		if r.Accurate {
			t.Accurate++
		}
		if expected == evalcase.Abstain {
			t.FalseClosures++
		}
	} else if expected == evalcase.Commit {
		t.FalseAbstentions++
	}
}

// Coverage is the share of cases that commit.
func (t Tally) Coverage() float64 { return ratio(t.Commits, t.Cases) }

// Accuracy is the share of commits on a basis labelled correct, or -1
// when nothing commits.
func (t Tally) Accuracy() float64 {
	if t.Commits == 0 {
		return -1
	}
	return ratio(t.Accurate, t.Commits)
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// Row is a labelled tally.
type Row struct {
	Slice   string        `json:"slice,omitempty"`
	Variant string        `json:"variant,omitempty"`
	Risk    evalcase.Risk `json:"risk,omitempty"`
	Level   Level         `json:"level,omitempty"`
	Tally
}

// Report is the outcome of an evaluation. Total is the shipped gate over
// every case; ByVariant splits it by slice and variant; Frontier has every
// level by risk class, and every level over all cases (Risk empty).
// Disagreements are the gate's false closures and false abstentions.
type Report struct {
	Total         Tally        `json:"total"`
	ByVariant     []Row        `json:"by_variant"`
	Frontier      []Row        `json:"frontier"`
	Disagreements []CaseResult `json:"disagreements"`
	Cases         []CaseResult `json:"cases"`
}

func newReport(results []CaseResult) Report {
	var rep Report
	rep.Cases = results
	rep.Disagreements = []CaseResult{}
	byVariant := map[[2]string]*Tally{}
	frontier := map[[2]string]*Tally{}
	for _, r := range results {
		g := r.Levels[Gate]
		rep.Total.add(r.Expected, g)
		if g.Outcome != r.Expected {
			rep.Disagreements = append(rep.Disagreements, r)
		}
		k := [2]string{r.Slice, r.Variant}
		if byVariant[k] == nil {
			byVariant[k] = &Tally{}
		}
		byVariant[k].add(r.Expected, g)
		for _, l := range Levels {
			for _, risk := range []string{string(r.Risk), ""} {
				k := [2]string{risk, string(l)}
				if frontier[k] == nil {
					frontier[k] = &Tally{}
				}
				frontier[k].add(r.Expected, r.Levels[l])
			}
		}
	}
	var slicesSeen []string
	for k := range byVariant {
		if !slices.Contains(slicesSeen, k[0]) {
			slicesSeen = append(slicesSeen, k[0])
		}
	}
	slices.Sort(slicesSeen)
	for _, s := range slicesSeen {
		for _, v := range evalcase.Variants {
			if t := byVariant[[2]string{s, v}]; t != nil {
				rep.ByVariant = append(rep.ByVariant, Row{Slice: s, Variant: v, Tally: *t})
			}
		}
	}
	for _, risk := range append(slices.Clone(evalcase.Risks), "") {
		for _, l := range Levels {
			if t := frontier[[2]string{string(risk), string(l)}]; t != nil {
				rep.Frontier = append(rep.Frontier, Row{Risk: risk, Level: l, Tally: *t})
			}
		}
	}
	return rep
}

func pct(f float64) string {
	if f < 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f%%", 100*f)
}

// Markdown renders the report as the reference in docs/context.md: the
// headline figures, the table by slice and variant, the frontier table by
// risk, the chart (linked as chart) and every disagreement.
func (r Report) Markdown(chart string) string {
	var b strings.Builder
	t := r.Total
	fmt.Fprintf(&b, "%d cases. The gate: **%d false closures**, **%d false abstentions**, coverage %s (%d commits; the grader expects %d), accuracy %s.\n\n",
		t.Cases, t.FalseClosures, t.FalseAbstentions, pct(t.Coverage()), t.Commits, t.Expected, pct(t.Accuracy()))
	b.WriteString("| slice | variant | cases | grader commits | gate commits | false closures | false abstentions |\n")
	b.WriteString("| --- | --- | ---: | ---: | ---: | ---: | ---: |\n")
	for _, row := range r.ByVariant {
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %d | %d |\n", row.Slice, row.Variant, row.Cases, row.Expected, row.Commits, row.FalseClosures, row.FalseAbstentions)
	}
	b.WriteString("\nAccuracy-coverage frontier by action risk (every level runs every case of its class):\n\n")
	b.WriteString("| risk | level | cases | coverage | accuracy | false closures | false abstentions |\n")
	b.WriteString("| --- | --- | ---: | ---: | ---: | ---: | ---: |\n")
	for _, row := range r.Frontier {
		risk := string(row.Risk)
		if risk == "" {
			risk = "all"
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %d | %d |\n", risk, row.Level, row.Cases, pct(row.Coverage()), pct(row.Accuracy()), row.FalseClosures, row.FalseAbstentions)
	}
	if chart != "" {
		fmt.Fprintf(&b, "\n![accuracy against coverage, one line per risk class, one point per level](%s)\n", chart)
	}
	if len(r.Disagreements) > 0 {
		b.WriteString("\nDisagreements of the gate with the grader:\n\n")
		for _, d := range r.Disagreements {
			fmt.Fprintf(&b, "- `%s`: gate %s (%s), grader %s (%s)\n", d.CaseID, d.Levels[Gate].Outcome, d.Levels[Gate].Reason, d.Expected, d.Grader)
		}
	}
	return b.String()
}
