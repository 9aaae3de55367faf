package kernel

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ValidateMarkers applies the structural checks to conflict markers and
// returns the first failure as a *ContextInputError (Input "markers", the
// marker's index and conflict id). It refuses: a missing conflict_id,
// subject or predicate; fewer than two distinct evidence refs or values; no
// requirements; repeated or empty list elements; an unknown status;
// duplicate conflict ids; an unresolved marker carrying a resolution; a
// resolved marker without a resolution or without a resolution_ref; a
// selection that is empty, repeats a ref, names a ref outside the marker's
// refs or selects every ref; a resolution whose kind is not a known kind
// (a model is never a resolution source); an accountable review without
// its reviewer; a rule-based resolution without its rule id; a resolution
// without a kind (the article's shape, accepted) that names a reviewer or
// a rule.
func ValidateMarkers(ms []EvidenceConflictMarker) error {
	first := make(map[string]int, len(ms))
	for i, m := range ms {
		if err := validateMarker(m); err != nil {
			return inputErr("markers", i, m.ConflictID, "%v", err)
		}
		if j, dup := first[m.ConflictID]; dup {
			return inputErr("markers", i, m.ConflictID, "duplicate conflict_id (first at markers[%d])", j)
		}
		first[m.ConflictID] = i
	}
	return nil
}

func validateMarker(m EvidenceConflictMarker) error {
	if m.ConflictID == "" {
		return errors.New("conflict_id is required")
	}
	if m.Subject == "" || m.Predicate == "" {
		return errors.New("subject and predicate are required")
	}
	if err := checkSet("evidence_refs", m.EvidenceRefs, 2); err != nil {
		return err
	}
	if err := checkSet("requirements", m.Requirements, 1); err != nil {
		return err
	}
	if err := checkSet("values", m.Values, 2); err != nil {
		return err
	}
	switch m.Status {
	case ConflictUnresolved:
		if m.Resolution != nil {
			return errors.New("an unresolved marker must not carry a resolution")
		}
		return nil
	case ConflictResolved:
	default:
		return fmt.Errorf("status must be %q or %q, got %q", ConflictUnresolved, ConflictResolved, m.Status)
	}
	r := m.Resolution
	if r == nil {
		return errors.New("a resolved marker needs a resolution")
	}
	if r.ResolutionRef == "" {
		return errors.New("a resolved marker needs resolution.resolution_ref")
	}
	if err := checkSet("resolution.selected_evidence_refs", r.SelectedEvidenceRefs, 1); err != nil {
		return err
	}
	for _, s := range r.SelectedEvidenceRefs {
		if !slices.Contains(m.EvidenceRefs, s) {
			return fmt.Errorf("resolution selects %q, which is not one of the marker's evidence_refs", s)
		}
	}
	if len(r.SelectedEvidenceRefs) == len(m.EvidenceRefs) {
		return errors.New("resolution selects every evidence ref, which resolves nothing")
	}
	switch r.Kind {
	case ResolutionAccountableReview:
		if r.ResolvedBy == "" {
			return errors.New("an accountable_review resolution needs resolved_by (the reviewing principal)")
		}
		if r.RuleID != "" {
			return errors.New("an accountable_review resolution has no rule_id")
		}
	case ResolutionSourcePriority, ResolutionAuthoritativeRefresh:
		if r.RuleID == "" {
			return fmt.Errorf("a %s resolution needs the rule_id of the pack rule", r.Kind)
		}
		if r.ResolvedBy != "" {
			return fmt.Errorf("a %s resolution has no resolved_by", r.Kind)
		}
	case "":
		// The article's own shape, {resolution_ref, selected_evidence_refs}:
		// a resolution made outside the pack's rules and not attributed to a
		// named reviewer. It resolves as selected and is recorded as given;
		// kind, resolved_by and rule_id only refine a resolution, so they
		// are not half-given either.
		if r.ResolvedBy != "" || r.RuleID != "" {
			return errors.New("resolved_by and rule_id refine a resolution of a kind: name its kind")
		}
	default:
		if strings.Contains(strings.ToLower(string(r.Kind)), "model") || strings.Contains(strings.ToLower(string(r.Kind)), "llm") {
			return fmt.Errorf("resolution kind %q: a model's output is never a resolution", r.Kind)
		}
		return fmt.Errorf("resolution kind must be %q, %q or %q, got %q",
			ResolutionSourcePriority, ResolutionAuthoritativeRefresh, ResolutionAccountableReview, r.Kind)
	}
	return nil
}

// checkMarkersAgainst runs the checks that need the pack and the run: every
// requirement a marker names must be required by some decision of the pack;
// a rule-based resolution must name a pack rule of its kind, and that rule
// must select exactly the claimed refs; an accountable review must not be
// by the run's own principal (an agent resolving its own conflict is a model
// resolution).
func checkMarkersAgainst(ms []EvidenceConflictMarker, ix *compileIndex) error {
	for i, m := range ms {
		for _, q := range m.Requirements {
			if !ix.vocab[q] {
				return inputErr("markers", i, m.ConflictID, "names requirement %q that no decision of pack %s requires", q, ix.pack.PackID)
			}
		}
		r := m.Resolution
		if m.Status != ConflictResolved || r == nil {
			continue
		}
		switch r.Kind {
		case ResolutionAccountableReview:
			if r.ResolvedBy == ix.run.Principal {
				return inputErr("markers", i, m.ConflictID,
					"accountable review by the run's own principal %q is not accountable", r.ResolvedBy)
			}
		case ResolutionSourcePriority, ResolutionAuthoritativeRefresh:
			rule, ok := ix.rules[r.RuleID]
			if !ok {
				return inputErr("markers", i, m.ConflictID, "resolution names unknown rule %q", r.RuleID)
			}
			if rule.Kind != r.Kind {
				return inputErr("markers", i, m.ConflictID, "rule %q is a %s rule, not %s", r.RuleID, rule.Kind, r.Kind)
			}
			sel, ok := applyRule(rule, m, ix)
			if !ok || !sameSet(sel, r.SelectedEvidenceRefs) {
				return inputErr("markers", i, m.ConflictID, "rule %q does not select %v", r.RuleID, sortedCopy(r.SelectedEvidenceRefs))
			}
		}
	}
	return nil
}

// ruleApplies reports whether a rule's scope covers the marker.
func ruleApplies(rule ResolutionRule, m EvidenceConflictMarker) bool {
	if rule.Predicate != "" && rule.Predicate != m.Predicate {
		return false
	}
	if len(rule.Requirements) == 0 {
		return true
	}
	for _, q := range rule.Requirements {
		if slices.Contains(m.Requirements, q) {
			return true
		}
	}
	return false
}

// applyRule evaluates a deterministic rule on a marker and returns the single
// selected ref, or false when the rule does not apply, does not decide (a
// tie at the top) or would select an ineligible candidate (a stale,
// unverified or foreign "refresh" is no refresh).
func applyRule(rule ResolutionRule, m EvidenceConflictMarker, ix *compileIndex) ([]string, bool) {
	if !ruleApplies(rule, m) {
		return nil, false
	}
	cands := make([]*EvidenceCandidate, 0, len(m.EvidenceRefs))
	for _, ref := range m.EvidenceRefs {
		c, ok := ix.cands[ref]
		if !ok {
			return nil, false // an unknown ref could outrank or outdate the others
		}
		cands = append(cands, c)
	}
	var best *EvidenceCandidate
	tie := false
	switch rule.Kind {
	case ResolutionSourcePriority:
		bestRank := len(rule.SourceOrder)
		for _, c := range cands {
			rank := slices.Index(rule.SourceOrder, c.Source)
			if rank < 0 {
				return nil, false
			}
			switch {
			case rank < bestRank:
				best, bestRank, tie = c, rank, false
			case rank == bestRank:
				tie = true
			}
		}
	case ResolutionAuthoritativeRefresh:
		for _, c := range cands {
			switch {
			case best == nil || c.ObservedAt.After(best.ObservedAt):
				best, tie = c, false
			case c.ObservedAt.Equal(best.ObservedAt):
				tie = true
			}
		}
		if best != nil && best.Source != rule.SystemOfRecord {
			return nil, false
		}
	default:
		return nil, false
	}
	if best == nil || tie || !ix.eligible[best.Ref] {
		return nil, false // no rule resolves towards evidence that could not satisfy anything
	}
	return []string{best.Ref}, true
}

// resolveMarkers returns the normalized markers (sorted lists, sorted by
// conflict id) after applying the pack's rules, in rule id order, to each
// unresolved marker; the first rule that decides resolves it, with the
// resolution_ref "pack:<pack_id>@<version>#<rule_id>".
func resolveMarkers(ms []EvidenceConflictMarker, ix *compileIndex) []EvidenceConflictMarker {
	out := make([]EvidenceConflictMarker, 0, len(ms))
	for _, m := range ms {
		m = canonicalMarker(m)
		if m.Status == ConflictUnresolved {
			for _, rule := range ix.sortedRules {
				sel, ok := applyRule(rule, m, ix)
				if !ok {
					continue
				}
				m.Status = ConflictResolved
				m.Resolution = &ConflictResolution{
					ResolutionRef:        fmt.Sprintf("pack:%s@%s#%s", ix.pack.PackID, ix.pack.Version, rule.RuleID),
					SelectedEvidenceRefs: sel,
					Kind:                 rule.Kind,
					RuleID:               rule.RuleID,
				}
				break
			}
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b EvidenceConflictMarker) int { return strings.Compare(a.ConflictID, b.ConflictID) })
	return out
}

// canonicalMarker returns a deep copy of m with every list sorted.
func canonicalMarker(m EvidenceConflictMarker) EvidenceConflictMarker {
	m.EvidenceRefs = sortedCopy(m.EvidenceRefs)
	m.Requirements = sortedCopy(m.Requirements)
	m.Values = sortedCopy(m.Values)
	if m.Resolution != nil {
		r := *m.Resolution
		r.SelectedEvidenceRefs = sortedCopy(r.SelectedEvidenceRefs)
		m.Resolution = &r
	}
	return m
}

func sortedCopy(xs []string) []string {
	out := make([]string, len(xs))
	copy(out, xs)
	slices.Sort(out)
	return out
}

func sameSet(a, b []string) bool {
	return slices.Equal(sortedCopy(a), sortedCopy(b))
}
