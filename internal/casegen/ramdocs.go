package casegen

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/contextos/ledger/internal/evalcase"
)

// RAMDocsRecord is one line of RAMDocs (Wang, Prasad, Stengel-Eskin and
// Bansal, "Retrieval-Augmented Generation with Conflicting Evidence",
// arXiv 2504.13079; MIT licence): a question, its retrieved documents
// labelled correct, misinfo or noise, and its gold and wrong answers.
type RAMDocsRecord struct {
	Question       string       `json:"question"`
	Documents      []RAMDocsDoc `json:"documents"`
	DisambigEntity []string     `json:"disambig_entity"`
	GoldAnswers    []string     `json:"gold_answers"`
	WrongAnswers   []string     `json:"wrong_answers"`
}

// RAMDocsDoc is one retrieved document of a RAMDocs question.
type RAMDocsDoc struct {
	Text   string `json:"text"`
	Type   string `json:"type"`
	Answer string `json:"answer"`
}

// maxRAMDocsLine bounds one line of the dataset (its longest is under 20 KiB).
const maxRAMDocsLine = 1 << 20

// ParseRAMDocs reads RAMDocs JSON lines strictly: every line one record,
// no unknown fields, document types among correct, misinfo and noise.
func ParseRAMDocs(r io.Reader) ([]RAMDocsRecord, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), maxRAMDocsLine)
	var out []RAMDocsRecord
	for n := 0; sc.Scan(); n++ {
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		var rec RAMDocsRecord
		if err := dec.Decode(&rec); err != nil {
			return nil, fmt.Errorf("ramdocs line %d: %w", n+1, err)
		}
		if dec.More() {
			return nil, fmt.Errorf("ramdocs line %d: trailing data", n+1)
		}
		if rec.Question == "" || len(rec.Documents) == 0 {
			return nil, fmt.Errorf("ramdocs line %d: a question and documents are required", n+1)
		}
		for _, d := range rec.Documents {
			switch d.Type {
			case "correct", "misinfo", "noise":
			default:
				return nil, fmt.Errorf("ramdocs line %d: document type %q", n+1, d.Type)
			}
		}
		out = append(out, rec)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("ramdocs: %w", err)
	}
	if len(out) == 0 {
		return nil, errors.New("ramdocs: no records")
	}
	return out, nil
}

// Selected reports whether a record is in the converted subset: exactly one
// gold answer (a question about one entity, so that correct documents
// agree), at least two correct documents and at least one misinfo document.
// Of the 500 records of the test split, 33 are.
func Selected(rec RAMDocsRecord) bool {
	var correct, misinfo int
	for _, d := range rec.Documents {
		switch d.Type {
		case "correct":
			correct++
		case "misinfo":
			misinfo++
		}
	}
	return len(rec.GoldAnswers) == 1 && correct >= 2 && misinfo >= 1
}

// The decision of each risk class: the answer is one obligation, and a
// high-risk decision needs it from two independent source families.
var ramdocsDecisions = map[evalcase.Risk]string{
	evalcase.RiskLow:    "qa.answer.draft",
	evalcase.RiskMedium: "qa.answer.send",
	evalcase.RiskHigh:   "qa.answer.record",
}

const (
	ramdocsAgent    = "agent_qa"
	ramdocsReviewer = "reviewer_qa"
	obligation      = "answer"
)

// FromRAMDocs converts the selected records, in file order, into cases. The
// k-th selected record gets risk low, medium, high in turn, and these
// variants, each a deterministic choice of its documents (C: correct, M:
// misinfo, N: noise, background without a claim; every document its own
// source, observed minutes before the decision):
//
//	sufficient    C0, C1, N0
//	insufficient  N0 (no document answers)
//	stale         M0, expired: an outdated value is all there is
//	untrusted     M0, from a source the pack does not trust
//	omitted       C0, too large for the context budget, N0
//	conflicting   C0, M0: an unresolved conflict
//	resolved      C0, M0 (and C1 at high risk), an accountable review selecting the correct ones
//	control       C0, C1 under M0's source: the conflicting variant's shape without the conflict
//	correlated    the first two misinfo documents that agree, from two sources of one
//	              family: one corrupted export seen twice (high risk only, when they exist)
func FromRAMDocs(recs []RAMDocsRecord) ([]evalcase.Case, error) {
	var cases []evalcase.Case
	k := 0
	for i, rec := range recs {
		if !Selected(rec) {
			continue
		}
		risk := evalcase.Risks[k%len(evalcase.Risks)]
		k++
		cs, err := ramdocsCases(i, rec, risk)
		if err != nil {
			return nil, err
		}
		cases = append(cases, cs...)
	}
	return cases, nil
}

func ramdocsCases(i int, rec RAMDocsRecord, risk evalcase.Risk) ([]evalcase.Case, error) {
	var C, M, N []Snap
	for j, d := range rec.Documents {
		s := Snap{Content: d.Text, Snapshot: evalcase.Snapshot{
			Ref:        fmt.Sprintf("ramdocs:%d#doc%d", i, j),
			Source:     fmt.Sprintf("doc%d", j),
			ObservedAt: DecisionTime.Add(-time.Duration(10+j) * time.Minute),
			Truth:      evalcase.Truth(d.Type),
			Current:    true, Trusted: true, InBudget: true,
		}}
		switch d.Type {
		case "correct":
			s.Claims, s.Answer = []string{obligation}, d.Answer
			C = append(C, s)
		case "misinfo":
			s.Claims, s.Answer = []string{obligation}, d.Answer
			M = append(M, s)
		default:
			N = append(N, s)
		}
	}
	noise := func() []Snap {
		if len(N) == 0 {
			return nil
		}
		return N[:1]
	}
	minFamilies := 1
	if risk == evalcase.RiskHigh {
		minFamilies = 2
	}
	base := Spec{
		Slice: "ramdocs", Risk: risk, Agent: ramdocsAgent,
		Provenance: evalcase.Provenance{Dataset: "RAMDocs", Licence: "MIT", Record: i, Note: rec.Question},
		Decision: evalcase.Decision{DecisionKey: ramdocsDecisions[risk],
			Obligations: []evalcase.Obligation{{Requirement: obligation, MinFamilies: minFamilies}}},
		Policy:  evalcase.ResolutionPolicy{Kind: evalcase.KindNone},
		Subject: fmt.Sprintf("ramdocs:%d", i), Predicate: "answer",
	}
	variant := func(name string, snaps []Snap, mut func(*Spec)) Spec {
		s := base
		s.CaseID = fmt.Sprintf("ramdocs/q%03d-%s", i, name)
		s.Variant = name
		s.Snaps = snaps
		if mut != nil {
			mut(&s)
		}
		return s
	}
	with := func(s Snap, f func(*Snap)) Snap { f(&s); return s }
	stale := with(M[0], func(s *Snap) { s.Current = false; s.ObservedAt = DecisionTime.Add(-48 * time.Hour) })
	untrusted := with(M[0], func(s *Snap) { s.Trusted = false; s.Source = "forum" })
	omitted := with(C[0], func(s *Snap) { s.InBudget = false })
	asM0 := with(C[1], func(s *Snap) { s.Source, s.ObservedAt = M[0].Source, M[0].ObservedAt })
	resolved := []Snap{C[0], M[0]}
	selects := []string{C[0].Ref}
	if risk == evalcase.RiskHigh {
		resolved = []Snap{C[0], C[1], M[0]}
		selects = append(selects, C[1].Ref)
	}
	specs := []Spec{
		variant("sufficient", append([]Snap{C[0], C[1]}, noise()...), nil),
		variant("insufficient", noise(), nil),
		variant("stale", []Snap{stale}, nil),
		variant("untrusted", []Snap{untrusted}, nil),
		variant("omitted", append([]Snap{omitted}, noise()...), nil),
		variant("conflicting", []Snap{C[0], M[0]}, nil),
		variant("resolved", resolved, func(s *Spec) {
			s.Policy = evalcase.ResolutionPolicy{Kind: evalcase.KindAccountableReview}
			s.Resolution = &evalcase.Resolution{By: ramdocsReviewer, Selects: selects}
		}),
		variant("control", []Snap{C[0], asM0}, nil),
	}
	if a, b, ok := sameAnswer(M); ok && risk == evalcase.RiskHigh {
		mirror := func(s Snap) Snap { s.Family = "mirror"; return s }
		specs = append(specs, variant("correlated", []Snap{mirror(a), mirror(b)}, nil))
	}
	out := make([]evalcase.Case, 0, len(specs))
	for _, s := range specs {
		c, err := Build(s)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// sameAnswer returns the first two snapshots, in order, that give the same
// answer.
func sameAnswer(ss []Snap) (Snap, Snap, bool) {
	for i := range ss {
		for j := i + 1; j < len(ss); j++ {
			if ss[i].Answer == ss[j].Answer {
				return ss[i], ss[j], true
			}
		}
	}
	return Snap{}, Snap{}, false
}
