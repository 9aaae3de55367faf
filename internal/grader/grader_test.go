package grader

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/contextos/ledger/internal/evalcase"
)

var t0 = time.Date(2026, 10, 26, 11, 0, 0, 0, time.UTC)

func sn(ref, source, answer string, mins int, mut ...func(*evalcase.Snapshot)) evalcase.Snapshot {
	s := evalcase.Snapshot{Ref: ref, Source: source, ObservedAt: t0.Add(time.Duration(mins) * time.Minute),
		Truth: evalcase.TruthCorrect, Current: true, Trusted: true, InBudget: true}
	if answer != "" {
		s.Claims, s.Answer = []string{"q"}, answer
	}
	for _, m := range mut {
		m(&s)
	}
	return s
}

func stale(s *evalcase.Snapshot)     { s.Current = false }
func untrusted(s *evalcase.Snapshot) { s.Trusted = false }
func omitted(s *evalcase.Snapshot)   { s.InBudget = false }
func family(f string) func(*evalcase.Snapshot) {
	return func(s *evalcase.Snapshot) { s.Family = f }
}

// TestGrade states the policy case by case: each row is one rule of the
// package comment.
func TestGrade(t *testing.T) {
	none := evalcase.ResolutionPolicy{Kind: evalcase.KindNone}
	review := evalcase.ResolutionPolicy{Kind: evalcase.KindAccountableReview}
	priority := evalcase.ResolutionPolicy{Kind: evalcase.KindSourcePriority, SourceOrder: []string{"a", "b"}}
	refresh := evalcase.ResolutionPolicy{Kind: evalcase.KindAuthoritativeRefresh, SystemOfRecord: "a"}
	for _, tc := range []struct {
		name     string
		snaps    []evalcase.Snapshot
		policy   evalcase.ResolutionPolicy
		res      *evalcase.Resolution
		families int
		want     evalcase.Outcome
		reason   string
	}{
		{"one usable claimant", []evalcase.Snapshot{sn("r1", "a", "x", 0)}, none, nil, 0, evalcase.Commit, "every obligation closes"},
		{"nothing claims", []evalcase.Snapshot{sn("r1", "a", "", 0)}, none, nil, 0, evalcase.Abstain, "q: not covered"},
		{"stale", []evalcase.Snapshot{sn("r1", "a", "x", 0, stale)}, none, nil, 0, evalcase.Abstain, "q: no usable evidence"},
		{"untrusted", []evalcase.Snapshot{sn("r1", "a", "x", 0, untrusted)}, none, nil, 0, evalcase.Abstain, "q: no usable evidence"},
		{"omitted", []evalcase.Snapshot{sn("r1", "a", "x", 0, omitted)}, none, nil, 0, evalcase.Abstain, "q: no usable evidence"},
		{"one usable among unusable", []evalcase.Snapshot{sn("r1", "a", "x", 0, stale), sn("r2", "b", "x", 0)}, none, nil, 0, evalcase.Commit, "every obligation closes"},
		{"agreeing sources", []evalcase.Snapshot{sn("r1", "a", "x", 0), sn("r2", "b", "x", 1)}, none, nil, 0, evalcase.Commit, "every obligation closes"},
		{"conflict", []evalcase.Snapshot{sn("r1", "a", "x", 0), sn("r2", "b", "y", 1)}, none, nil, 0, evalcase.Abstain,
			"q: unresolved conflict (the policy accepts no resolution)"},
		{"a stale contradiction still contests", []evalcase.Snapshot{sn("r1", "a", "x", 0), sn("r2", "b", "y", 1, stale)}, none, nil, 0, evalcase.Abstain,
			"q: unresolved conflict (the policy accepts no resolution)"},
		{"review", []evalcase.Snapshot{sn("r1", "a", "x", 0), sn("r2", "b", "y", 1)}, review, &evalcase.Resolution{By: "lead", Selects: []string{"r1"}}, 0,
			evalcase.Commit, "every obligation closes"},
		{"review of an unusable branch", []evalcase.Snapshot{sn("r1", "a", "x", 0, stale), sn("r2", "b", "y", 1)}, review, &evalcase.Resolution{By: "lead", Selects: []string{"r1"}}, 0,
			evalcase.Abstain, "q: no usable evidence"},
		{"self review", []evalcase.Snapshot{sn("r1", "a", "x", 0), sn("r2", "b", "y", 1)}, review, &evalcase.Resolution{By: "agent", Selects: []string{"r1"}}, 0,
			evalcase.Abstain, "q: unresolved conflict (the agent reviewed its own conflict)"},
		{"review selecting everything", []evalcase.Snapshot{sn("r1", "a", "x", 0), sn("r2", "b", "y", 1)}, review, &evalcase.Resolution{By: "lead", Selects: []string{"r1", "r2"}}, 0,
			evalcase.Abstain, "q: unresolved conflict (the review selects none or every claimant)"},
		{"review policy, no review", []evalcase.Snapshot{sn("r1", "a", "x", 0), sn("r2", "b", "y", 1)}, review, nil, 0,
			evalcase.Abstain, "q: unresolved conflict (no review)"},
		{"a review leaving a conflict", []evalcase.Snapshot{sn("r1", "a", "x", 0), sn("r2", "b", "y", 1), sn("r3", "c", "z", 2)}, review,
			&evalcase.Resolution{By: "lead", Selects: []string{"r1", "r2"}}, 0, evalcase.Abstain, "q: the resolution leaves a conflict"},
		{"priority", []evalcase.Snapshot{sn("r1", "b", "x", 0), sn("r2", "a", "y", 1)}, priority, nil, 0, evalcase.Commit, "every obligation closes"},
		{"priority tie", []evalcase.Snapshot{sn("r1", "a", "x", 0), sn("r2", "a", "y", 1)}, priority, nil, 0, evalcase.Abstain,
			"q: unresolved conflict (no single usable best-ranked source)"},
		{"priority winner stale", []evalcase.Snapshot{sn("r1", "a", "x", 0, stale), sn("r2", "b", "y", 1)}, priority, nil, 0, evalcase.Abstain,
			"q: unresolved conflict (no single usable best-ranked source)"},
		{"priority unranked source", []evalcase.Snapshot{sn("r1", "a", "x", 0), sn("r2", "c", "y", 1)}, priority, nil, 0, evalcase.Abstain,
			"q: unresolved conflict (a claimant's source is not ranked)"},
		{"refresh", []evalcase.Snapshot{sn("r1", "a", "x", 5), sn("r2", "b", "y", 1)}, refresh, nil, 0, evalcase.Commit, "every obligation closes"},
		{"refresh not newest", []evalcase.Snapshot{sn("r1", "a", "x", 0), sn("r2", "b", "y", 1)}, refresh, nil, 0, evalcase.Abstain,
			"q: unresolved conflict (the system of record is not the single newest usable claimant)"},
		{"two families", []evalcase.Snapshot{sn("r1", "a", "x", 0), sn("r2", "b", "x", 1)}, none, nil, 2, evalcase.Commit, "every obligation closes"},
		{"one family twice", []evalcase.Snapshot{sn("r1", "a", "x", 0, family("f")), sn("r2", "b", "x", 1, family("f"))}, none, nil, 2,
			evalcase.Abstain, "q: 2 independent source families needed, 1 usable"},
		{"an unusable family does not count", []evalcase.Snapshot{sn("r1", "a", "x", 0), sn("r2", "b", "x", 1, stale)}, none, nil, 2,
			evalcase.Abstain, "q: 2 independent source families needed, 1 usable"},
		{"a superseded family does not count", []evalcase.Snapshot{sn("r1", "a", "x", 0), sn("r2", "b", "x", 1), sn("r3", "c", "y", 2)}, review,
			&evalcase.Resolution{By: "lead", Selects: []string{"r1"}}, 2, evalcase.Abstain, "q: 2 independent source families needed, 1 usable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := evalcase.Case{Agent: "agent", Snapshots: tc.snaps, ResolutionPolicy: tc.policy, Resolution: tc.res,
				Decision: evalcase.Decision{DecisionKey: "d", Obligations: []evalcase.Obligation{{Requirement: "q", MinFamilies: tc.families}}}}
			got := Grade(c)
			if got.Outcome != tc.want || got.Reason != tc.reason {
				t.Fatalf("got %s %q, want %s %q", got.Outcome, got.Reason, tc.want, tc.reason)
			}
		})
	}
}

// TestGradeSupersededEverywhere: a ref a resolution did not select counts
// for no obligation, as in the kernel.
func TestGradeSupersededEverywhere(t *testing.T) {
	a := sn("r1", "a", "x", 0)
	b := sn("r2", "b", "y", 1)
	b.Claims = []string{"q", "p"}
	c := evalcase.Case{Agent: "agent", Snapshots: []evalcase.Snapshot{a, b},
		ResolutionPolicy: evalcase.ResolutionPolicy{Kind: evalcase.KindAccountableReview},
		Resolution:       &evalcase.Resolution{By: "lead", Selects: []string{"r1"}},
		Decision:         evalcase.Decision{DecisionKey: "d", Obligations: []evalcase.Obligation{{Requirement: "q"}, {Requirement: "p"}}}}
	if got := Grade(c); got.Outcome != evalcase.Abstain || got.Reason != "p: no usable evidence" {
		t.Fatalf("got %+v", got)
	}
}

// TestGraderIsIndependent: the grader cannot reach the compiler.
func TestGraderIsIndependent(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/contextos/ledger/") && dep != "github.com/contextos/ledger/internal/grader" &&
			dep != "github.com/contextos/ledger/internal/evalcase" {
			t.Errorf("the grader depends on %s", dep)
		}
	}
}
