package grader

import (
	"fmt"
	"slices"

	"github.com/contextos/ledger/internal/evalcase"
)

// Verdict is the grader's outcome for a case, with the first reason it
// abstains (or "every obligation closes").
type Verdict struct {
	Outcome evalcase.Outcome
	Reason  string
}

// Grade applies the policy to the case's labels.
func Grade(c evalcase.Case) Verdict {
	claimants := map[string][]evalcase.Snapshot{}
	for _, s := range c.Snapshots {
		for _, q := range s.Claims {
			claimants[q] = append(claimants[q], s)
		}
	}
	// Conflicts first: a superseded snapshot counts for no obligation.
	superseded := map[string]bool{}
	open := map[string]string{}
	for _, o := range c.Decision.Obligations {
		cl := claimants[o.Requirement]
		if distinct(cl) < 2 {
			continue
		}
		sel, why := resolve(c, cl)
		if sel == nil {
			open[o.Requirement] = why
			continue
		}
		for _, s := range cl {
			if !slices.Contains(sel, s.Ref) {
				superseded[s.Ref] = true
			}
		}
	}
	for _, o := range c.Decision.Obligations {
		q := o.Requirement
		cl := claimants[q]
		if len(cl) == 0 {
			return abstain("%s: not covered", q)
		}
		if why, ok := open[q]; ok {
			return abstain("%s: unresolved conflict (%s)", q, why)
		}
		var rest []evalcase.Snapshot
		for _, s := range cl {
			if !superseded[s.Ref] {
				rest = append(rest, s)
			}
		}
		if distinct(rest) > 1 {
			return abstain("%s: the resolution leaves a conflict", q)
		}
		families := map[string]bool{}
		for _, s := range rest {
			if usable(s) {
				families[s.FamilyName()] = true
			}
		}
		if len(families) == 0 {
			return abstain("%s: no usable evidence", q)
		}
		if need := max(1, o.MinFamilies); len(families) < need {
			return abstain("%s: %d independent source families needed, %d usable", q, need, len(families))
		}
	}
	return Verdict{Outcome: evalcase.Commit, Reason: "every obligation closes"}
}

func abstain(format string, args ...any) Verdict {
	return Verdict{Outcome: evalcase.Abstain, Reason: fmt.Sprintf(format, args...)}
}

func usable(s evalcase.Snapshot) bool { return s.Current && s.Trusted && s.InBudget }

func distinct(ss []evalcase.Snapshot) int {
	answers := map[string]bool{}
	for _, s := range ss {
		answers[s.Answer] = true
	}
	return len(answers)
}

// resolve returns the refs the case's policy selects among conflicting
// claimants, or nil and why the conflict stays open.
func resolve(c evalcase.Case, cl []evalcase.Snapshot) ([]string, string) {
	p := c.ResolutionPolicy
	switch p.Kind {
	case evalcase.KindAccountableReview:
		r := c.Resolution
		switch {
		case r == nil:
			return nil, "no review"
		case r.By == c.Agent:
			return nil, "the agent reviewed its own conflict"
		}
		var sel []string
		for _, s := range cl {
			if slices.Contains(r.Selects, s.Ref) {
				sel = append(sel, s.Ref)
			}
		}
		if len(sel) == 0 || len(sel) == len(cl) {
			return nil, "the review selects none or every claimant"
		}
		return sel, ""
	case evalcase.KindSourcePriority:
		best, bestRank, tie := -1, len(p.SourceOrder), false
		for i, s := range cl {
			rank := slices.Index(p.SourceOrder, s.Source)
			switch {
			case rank < 0:
				return nil, "a claimant's source is not ranked"
			case rank < bestRank:
				best, bestRank, tie = i, rank, false
			case rank == bestRank:
				tie = true
			}
		}
		if tie || !usable(cl[best]) {
			return nil, "no single usable best-ranked source"
		}
		return []string{cl[best].Ref}, ""
	case evalcase.KindAuthoritativeRefresh:
		best, tie := 0, false
		for i, s := range cl[1:] {
			switch {
			case s.ObservedAt.After(cl[best].ObservedAt):
				best, tie = i+1, false
			case s.ObservedAt.Equal(cl[best].ObservedAt):
				tie = true
			}
		}
		if tie || cl[best].Source != p.SystemOfRecord || !usable(cl[best]) {
			return nil, "the system of record is not the single newest usable claimant"
		}
		return []string{cl[best].Ref}, ""
	}
	return nil, "the policy accepts no resolution"
}
