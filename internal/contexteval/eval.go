package contexteval

import (
	"errors"
	"fmt"
	"slices"

	"github.com/contextos/ledger/internal/evalcase"
	"github.com/contextos/ledger/internal/grader"
	"github.com/contextos/ledger/kernel"
)

// Level is one gate on the frontier, from the weakest to the shipped one.
type Level string

// The levels. Each but Retrieval compiles the case with the kernel; the
// weaker ones first neutralize the axes they ignore in the inputs.
const (
	// Retrieval commits whatever was retrieved: a prompt with no gate.
	Retrieval Level = "retrieval"
	// Coverage commits when every obligation is claimed by some snapshot:
	// every candidate is made verified, admitted, current, authorized,
	// trusted for every obligation and unbounded by budget; no markers, no
	// independence demand.
	Coverage Level = "coverage"
	// Eligibility is the compiler without conflict markers and without
	// independence demands: the evidence gate before conflicts.
	Eligibility Level = "eligibility"
	// Gate is the compiler on the case's inputs as given.
	Gate Level = "gate"
)

// Levels lists the levels, weakest first.
var Levels = []Level{Retrieval, Coverage, Eligibility, Gate}

// Options change how cases run.
type Options struct {
	// Pack, when set, replaces every case's pack: the candidate policy a
	// release gate evaluates on held-out cases. The cases' labels, and so
	// the grader, do not change with it.
	Pack *kernel.ContextPack
}

// Result is one case at one level.
type Result struct {
	Outcome  evalcase.Outcome `json:"outcome"`
	Accurate bool             `json:"accurate"`         // a commit on a basis labelled correct
	Reason   string           `json:"reason,omitempty"` // why the compiler abstained
}

// CaseResult is a case's grader verdict and its result at every level.
type CaseResult struct {
	CaseID   string           `json:"case_id"`
	Slice    string           `json:"slice"`
	Variant  string           `json:"variant"`
	Risk     evalcase.Risk    `json:"risk"`
	Expected evalcase.Outcome `json:"expected"`
	Grader   string           `json:"grader_reason"`
	Levels   map[Level]Result `json:"levels"`
}

// ErrStaleExpectation is returned (wrapped, naming the cases) when a
// case's stored expected outcome is not the grader's verdict on its labels.
var ErrStaleExpectation = errors.New("expected outcome is not the grader's verdict")

// Run evaluates every case at every level and returns the report. A case
// whose inputs the kernel refuses (context_invalid) abstains, as the
// daemon would refuse its dispatch.
func Run(cases []evalcase.Case, opt Options) (Report, error) {
	var stale []string
	results := make([]CaseResult, 0, len(cases))
	for _, c := range cases {
		v := grader.Grade(c)
		if v.Outcome != c.Expected.Outcome || v.Reason != c.Expected.Reason {
			stale = append(stale, fmt.Sprintf("%s (stored %s %q, grader %s %q)", c.CaseID, c.Expected.Outcome, c.Expected.Reason, v.Outcome, v.Reason))
			continue
		}
		r := CaseResult{CaseID: c.CaseID, Slice: c.Slice, Variant: c.Variant, Risk: c.Risk,
			Expected: v.Outcome, Grader: v.Reason, Levels: map[Level]Result{}}
		truth := map[string]evalcase.Truth{}
		for _, s := range c.Snapshots {
			truth[s.Ref] = s.Truth
		}
		r.Levels[Retrieval] = retrieval(c)
		in, err := parse(c, opt)
		for _, l := range Levels[1:] {
			if err != nil {
				r.Levels[l] = Result{Outcome: evalcase.Abstain, Reason: err.Error()}
				continue
			}
			r.Levels[l] = compile(weaken(in, l), truth)
		}
		results = append(results, r)
	}
	if len(stale) > 0 {
		return Report{}, fmt.Errorf("%w: %v", ErrStaleExpectation, stale)
	}
	return newReport(results), nil
}

// retrieval commits always; its commit is accurate when every obligation
// is claimed and every claim is labelled correct.
func retrieval(c evalcase.Case) Result {
	ok := true
	for _, o := range c.Decision.Obligations {
		n := 0
		for _, s := range c.Snapshots {
			if slices.Contains(s.Claims, o.Requirement) {
				n++
				ok = ok && s.Truth == evalcase.TruthCorrect
			}
		}
		ok = ok && n > 0
	}
	return Result{Outcome: evalcase.Commit, Accurate: ok}
}

type inputs struct {
	pack     kernel.ContextPack
	run      kernel.RunContext
	evidence []kernel.EvidenceCandidate
	markers  []kernel.EvidenceConflictMarker
}

// parse reads a case's inputs with the kernel's strict parsers.
func parse(c evalcase.Case, opt Options) (inputs, error) {
	var in inputs
	var err error
	if in.pack, err = kernel.ParseContextPack(c.Inputs.Pack); err != nil {
		return in, err
	}
	if opt.Pack != nil {
		in.pack = *opt.Pack
	}
	if in.run, err = kernel.ParseRunContext(c.Inputs.Run); err != nil {
		return in, err
	}
	if in.evidence, err = kernel.ParseEvidence(c.Inputs.Evidence); err != nil {
		return in, err
	}
	if in.markers, err = kernel.ParseMarkers(c.Inputs.Markers); err != nil {
		return in, err
	}
	return in, nil
}

// weaken returns the inputs with the axes a level ignores neutralized.
func weaken(in inputs, l Level) inputs {
	if l == Gate {
		return in
	}
	out := in
	out.markers = nil
	out.pack.ResolutionRules = nil
	out.pack.Decisions = slices.Clone(in.pack.Decisions)
	for i := range out.pack.Decisions {
		out.pack.Decisions[i].Independence = nil
	}
	if l == Eligibility {
		return out
	}
	var vocab, sources []string
	for _, d := range in.pack.Decisions {
		for _, q := range d.RequiredEvidence {
			if !slices.Contains(vocab, q) {
				vocab = append(vocab, q)
			}
		}
	}
	t := in.run.DecisionTime
	out.evidence = make([]kernel.EvidenceCandidate, len(in.evidence))
	for i, e := range in.evidence {
		e.Tenant, e.Verified, e.Admitted = in.run.Tenant, true, true
		e.InstructionTreatment = kernel.TreatmentDataOnly
		if e.ObservedAt.After(t) {
			e.ObservedAt = t
		}
		if !e.ValidUntil.After(t) {
			e.ValidUntil = t.Add(1)
		}
		e.Bucket = "all"
		e.Tokens = 0
		out.evidence[i] = e
		if !slices.Contains(sources, e.Source) {
			sources = append(sources, e.Source)
		}
	}
	// Integrity stays checked: a hash mismatch is a broken snapshot, not
	// a policy axis.
	out.pack.Buckets = []kernel.ContextBucket{{Name: "all", MaxTokens: 1}}
	out.pack.Trust = nil
	for _, s := range sources {
		out.pack.Trust = append(out.pack.Trust, kernel.TrustRule{Source: s, Requirements: vocab})
	}
	out.run.AllowedSources = sources
	return out
}

func compile(in inputs, truth map[string]evalcase.Truth) Result {
	cc, err := kernel.CompileContext(in.pack, in.run, in.evidence, in.markers)
	if err != nil {
		return Result{Outcome: evalcase.Abstain, Reason: err.Error()}
	}
	if !cc.Gate.CommitAllowed {
		return Result{Outcome: evalcase.Abstain, Reason: fmt.Sprintf("unresolved %v", cc.Gate.Unresolved)}
	}
	accurate := true
	for _, rs := range cc.Requirements {
		for _, ref := range rs.SatisfiedBy {
			accurate = accurate && truth[ref] == evalcase.TruthCorrect
		}
	}
	return Result{Outcome: evalcase.Commit, Accurate: accurate}
}
