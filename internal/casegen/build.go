package casegen

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/contextos/ledger/internal/evalcase"
	"github.com/contextos/ledger/internal/grader"
	"github.com/contextos/ledger/kernel"
)

// DecisionTime is the instant every generated case is decided at.
var DecisionTime = time.Date(2026, 10, 26, 12, 0, 0, 0, time.UTC)

// The encoding of the labels into compiler inputs.
const (
	tenant      = "acme"
	bucket      = "evidence"
	budget      = 4000 // max_tokens of the one bucket
	staleBefore = time.Hour
	validFor    = 30 * 24 * time.Hour
)

// Snap is a labelled snapshot with the text the compiler receives.
type Snap struct {
	evalcase.Snapshot
	Content string
}

// Spec is a case before encoding: its labels, the snapshots' texts, and
// the subject and predicate a conflict marker names.
type Spec struct {
	CaseID, Slice, Variant string
	Risk                   evalcase.Risk
	Provenance             evalcase.Provenance
	Agent                  string
	Decision               evalcase.Decision
	Snaps                  []Snap
	Policy                 evalcase.ResolutionPolicy
	Resolution             *evalcase.Resolution
	Subject, Predicate     string
}

// Build encodes a spec as a case: labels, compiler inputs, and the
// grader's verdict as the expected outcome. The encoding:
//
//   - a snapshot is a candidate of tenant acme, verified, admitted and
//     data_only, whose requirements are its claims; current: valid for 30
//     days from observed_at; stale: valid until an hour before the
//     decision; in budget: its declared tokens are a word count; out of
//     budget: it declares more tokens than the one bucket holds;
//   - trusted sources get a trust rule for the claims of their snapshots
//     and the snapshot's family; untrusted sources get none; the run may
//     read every source;
//   - the obligations are the decision's required evidence, and a
//     min_families above one is its independence demand;
//   - claimants of an obligation that give different answers get one
//     marker; it is resolved when the policy is an accountable review and
//     the case carries a review, and otherwise unresolved, with the pack
//     holding the policy's rule when the policy is a rule.
func Build(s Spec) (evalcase.Case, error) {
	c := evalcase.Case{
		Schema: evalcase.Schema, CaseID: s.CaseID, Slice: s.Slice, Variant: s.Variant, Risk: s.Risk,
		Provenance: s.Provenance, Agent: s.Agent, Decision: s.Decision, ResolutionPolicy: s.Policy, Resolution: s.Resolution,
		Snapshots: []evalcase.Snapshot{},
	}
	pack := kernel.ContextPack{
		Schema: kernel.ContextPackSchema, PackID: "eval." + s.Slice, Version: "1",
		Buckets: []kernel.ContextBucket{{Name: bucket, MaxTokens: budget}},
	}
	spec := kernel.DecisionSpec{DecisionKey: s.Decision.DecisionKey}
	for _, o := range s.Decision.Obligations {
		spec.RequiredEvidence = append(spec.RequiredEvidence, o.Requirement)
		if o.MinFamilies > 1 {
			spec.Independence = append(spec.Independence, kernel.IndependenceDemand{Requirement: o.Requirement, MinFamilies: int64(o.MinFamilies)})
		}
	}
	pack.Decisions = []kernel.DecisionSpec{spec}
	run := kernel.RunContext{Tenant: tenant, Principal: s.Agent, RunID: "eval", DecisionKey: s.Decision.DecisionKey, DecisionTime: DecisionTime}

	trust := map[string]*kernel.TrustRule{}
	untrusted := map[string]bool{}
	var sources []string
	evidence := []kernel.EvidenceCandidate{}
	for _, sn := range s.Snaps {
		c.Snapshots = append(c.Snapshots, sn.Snapshot)
		if !slices.Contains(sources, sn.Source) {
			sources = append(sources, sn.Source)
		}
		if sn.Trusted {
			t := trust[sn.Source]
			if t == nil {
				t = &kernel.TrustRule{Source: sn.Source, Family: sn.Family}
				trust[sn.Source] = t
			}
			if t.Family != sn.Family {
				return c, fmt.Errorf("%s: source %s has two families", s.CaseID, sn.Source)
			}
			for _, q := range sn.Claims {
				if !slices.Contains(t.Requirements, q) {
					t.Requirements = append(t.Requirements, q)
				}
			}
		} else {
			untrusted[sn.Source] = true
		}
		sum := sha256.Sum256([]byte(sn.Content))
		cand := kernel.EvidenceCandidate{
			Ref: sn.Ref, Source: sn.Source, Tenant: tenant, ContentHash: hex.EncodeToString(sum[:]), Content: sn.Content,
			Tokens: int64(len(strings.Fields(sn.Content))), Bucket: bucket, Requirements: sn.Claims,
			ObservedAt: sn.ObservedAt, ValidUntil: sn.ObservedAt.Add(validFor),
			Verified: true, Admitted: true, InstructionTreatment: kernel.TreatmentDataOnly,
		}
		if !sn.Current {
			cand.ValidUntil = DecisionTime.Add(-staleBefore)
			if !cand.ValidUntil.After(sn.ObservedAt) {
				return c, fmt.Errorf("%s: stale snapshot %s must be observed before %s", s.CaseID, sn.Ref, cand.ValidUntil)
			}
		} else if !cand.ValidUntil.After(DecisionTime) || sn.ObservedAt.After(DecisionTime) {
			return c, fmt.Errorf("%s: current snapshot %s is not current at the decision time", s.CaseID, sn.Ref)
		}
		if !sn.InBudget {
			cand.Tokens += budget
		}
		evidence = append(evidence, cand)
	}
	var used int64
	for _, e := range evidence {
		if e.Tokens <= budget {
			used += e.Tokens
		}
	}
	if used > budget {
		return c, fmt.Errorf("%s: in-budget snapshots declare %d tokens, more than the budget %d", s.CaseID, used, budget)
	}
	for _, src := range sources {
		if t := trust[src]; t != nil {
			if untrusted[src] {
				return c, fmt.Errorf("%s: source %s is both trusted and untrusted", s.CaseID, src)
			}
			pack.Trust = append(pack.Trust, *t)
		}
	}
	run.AllowedSources = sources

	markers := []kernel.EvidenceConflictMarker{}
	for _, o := range s.Decision.Obligations {
		var refs, values []string
		for _, sn := range s.Snaps {
			if slices.Contains(sn.Claims, o.Requirement) {
				refs = append(refs, sn.Ref)
				if !slices.Contains(values, sn.Answer) {
					values = append(values, sn.Answer)
				}
			}
		}
		if len(values) < 2 {
			continue
		}
		m := kernel.EvidenceConflictMarker{
			ConflictID: "conflict:" + s.CaseID + ":" + o.Requirement, EvidenceRefs: refs, Requirements: []string{o.Requirement},
			Status: kernel.ConflictUnresolved, Subject: s.Subject, Predicate: s.Predicate, Values: values,
		}
		switch s.Policy.Kind {
		case evalcase.KindAccountableReview:
			if r := s.Resolution; r != nil {
				var sel []string
				for _, ref := range r.Selects {
					if slices.Contains(refs, ref) {
						sel = append(sel, ref)
					}
				}
				m.Status = kernel.ConflictResolved
				m.Resolution = &kernel.ConflictResolution{
					ResolutionRef: "review:" + s.CaseID, SelectedEvidenceRefs: sel,
					Kind: kernel.ResolutionAccountableReview, ResolvedBy: r.By,
				}
			}
		case evalcase.KindSourcePriority:
			pack.ResolutionRules = append(pack.ResolutionRules, kernel.ResolutionRule{
				RuleID: "priority." + o.Requirement, Kind: kernel.ResolutionSourcePriority,
				Requirements: []string{o.Requirement}, SourceOrder: s.Policy.SourceOrder,
			})
		case evalcase.KindAuthoritativeRefresh:
			pack.ResolutionRules = append(pack.ResolutionRules, kernel.ResolutionRule{
				RuleID: "refresh." + o.Requirement, Kind: kernel.ResolutionAuthoritativeRefresh,
				Requirements: []string{o.Requirement}, SystemOfRecord: s.Policy.SystemOfRecord,
			})
		}
		markers = append(markers, m)
	}

	var err error
	for _, in := range []struct {
		dst *json.RawMessage
		v   any
	}{{&c.Inputs.Pack, pack}, {&c.Inputs.Run, run}, {&c.Inputs.Evidence, evidence}, {&c.Inputs.Markers, markers}} {
		if *in.dst, err = json.Marshal(in.v); err != nil {
			return c, err
		}
	}
	v := grader.Grade(c)
	c.Expected = evalcase.Expected{Outcome: v.Outcome, Reason: v.Reason}
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("%s: %w", s.CaseID, err)
	}
	return c, nil
}

// Write writes each case to dir/<case_id>.json (a case id's slashes make
// directories), after removing the *.json files dir held, so that a case
// dropped from the generator does not linger.
func Write(dir string, cases []evalcase.Case) error {
	old, _ := filepath.Glob(filepath.Join(dir, "*", "*.json"))
	for _, p := range old {
		if err := os.Remove(p); err != nil {
			return err
		}
	}
	for _, c := range cases {
		b, err := evalcase.Encode(c)
		if err != nil {
			return err
		}
		p := filepath.Join(dir, filepath.FromSlash(c.CaseID)+".json")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// All returns every shipped case: the RAMDocs conversion of the dataset r
// holds, then the adversarial slice.
func All(r io.Reader) ([]evalcase.Case, error) {
	recs, err := ParseRAMDocs(r)
	if err != nil {
		return nil, err
	}
	cases, err := FromRAMDocs(recs)
	if err != nil {
		return nil, err
	}
	adv, err := Adversarial()
	if err != nil {
		return nil, err
	}
	return append(cases, adv...), nil
}
