package kernel

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextos/ledger/wire"
)

func seedMarker() EvidenceConflictMarker {
	return EvidenceConflictMarker{
		ConflictID:   seedID,
		EvidenceRefs: []string{refKG, refCRM},
		Requirements: []string{"order_lookup"},
		Status:       ConflictUnresolved,
		Subject:      "order:ord_881",
		Predicate:    "canonical_order_id",
		Values:       []string{"ord_881", "ord_992"},
	}
}

func resolvedSeed(mut func(r *ConflictResolution)) EvidenceConflictMarker {
	m := seedMarker()
	m.Status = ConflictResolved
	m.Resolution = &ConflictResolution{
		ResolutionRef: "review:order-resolution:441", SelectedEvidenceRefs: []string{refKG},
		Kind: ResolutionAccountableReview, ResolvedBy: "ops:maria",
	}
	if mut != nil {
		mut(m.Resolution)
	}
	return m
}

func withMarker(mut func(m *EvidenceConflictMarker)) EvidenceConflictMarker {
	m := seedMarker()
	mut(&m)
	return m
}

// TestMarkerValidation refuses every malformed or inconsistent marker with a
// *ContextInputError naming the marker's index and id, code context_invalid.
// Structural refusals also come out of ParseMarkers; pack- and run-dependent
// ones only out of CompileContext.
func TestMarkerValidation(t *testing.T) {
	other := withMarker(func(m *EvidenceConflictMarker) { m.ConflictID = "conflict:other" })
	for _, tc := range []struct {
		name       string
		markers    []EvidenceConflictMarker
		index      int
		id         string
		reason     string // substring
		structural bool
	}{
		{"missing conflict_id", []EvidenceConflictMarker{withMarker(func(m *EvidenceConflictMarker) { m.ConflictID = "" })},
			0, "", "conflict_id is required", true},
		{"missing subject", []EvidenceConflictMarker{withMarker(func(m *EvidenceConflictMarker) { m.Subject = "" })},
			0, seedID, "subject and predicate are required", true},
		{"missing predicate", []EvidenceConflictMarker{withMarker(func(m *EvidenceConflictMarker) { m.Predicate = "" })},
			0, seedID, "subject and predicate are required", true},
		{"one evidence ref", []EvidenceConflictMarker{withMarker(func(m *EvidenceConflictMarker) { m.EvidenceRefs = []string{refKG} })},
			0, seedID, "evidence_refs needs at least 2", true},
		{"repeated evidence ref", []EvidenceConflictMarker{withMarker(func(m *EvidenceConflictMarker) { m.EvidenceRefs = []string{refKG, refKG} })},
			0, seedID, "evidence_refs repeats", true},
		{"empty evidence ref", []EvidenceConflictMarker{withMarker(func(m *EvidenceConflictMarker) { m.EvidenceRefs = []string{refKG, ""} })},
			0, seedID, "evidence_refs has an empty element", true},
		{"no requirements", []EvidenceConflictMarker{withMarker(func(m *EvidenceConflictMarker) { m.Requirements = nil })},
			0, seedID, "requirements needs at least 1", true},
		{"one value", []EvidenceConflictMarker{withMarker(func(m *EvidenceConflictMarker) { m.Values = []string{"ord_881"} })},
			0, seedID, "values needs at least 2", true},
		{"unknown status", []EvidenceConflictMarker{withMarker(func(m *EvidenceConflictMarker) { m.Status = "pending" })},
			0, seedID, "status must be", true},
		{"missing status", []EvidenceConflictMarker{withMarker(func(m *EvidenceConflictMarker) { m.Status = "" })},
			0, seedID, "status must be", true},
		{"duplicate conflict id", []EvidenceConflictMarker{other, seedMarker(), seedMarker()},
			2, seedID, "duplicate conflict_id (first at markers[1])", true},
		{"unresolved carrying a resolution", []EvidenceConflictMarker{withMarker(func(m *EvidenceConflictMarker) {
			m.Resolution = resolvedSeed(nil).Resolution
		})}, 0, seedID, "unresolved marker must not carry a resolution", true},
		{"resolved without resolution", []EvidenceConflictMarker{withMarker(func(m *EvidenceConflictMarker) { m.Status = ConflictResolved })},
			0, seedID, "resolved marker needs a resolution", true},
		{"resolved without resolution_ref", []EvidenceConflictMarker{other, resolvedSeed(func(r *ConflictResolution) { r.ResolutionRef = "" })},
			1, seedID, "needs resolution.resolution_ref", true},
		{"selection outside refs", []EvidenceConflictMarker{resolvedSeed(func(r *ConflictResolution) {
			r.SelectedEvidenceRefs = []string{"kg:order:ord_992#snapshot_2"}
		})}, 0, seedID, "not one of the marker's evidence_refs", true},
		{"empty selection", []EvidenceConflictMarker{resolvedSeed(func(r *ConflictResolution) { r.SelectedEvidenceRefs = nil })},
			0, seedID, "selected_evidence_refs needs at least 1", true},
		{"repeated selection", []EvidenceConflictMarker{resolvedSeed(func(r *ConflictResolution) {
			r.SelectedEvidenceRefs = []string{refKG, refKG}
		})}, 0, seedID, "selected_evidence_refs repeats", true},
		{"selects every ref", []EvidenceConflictMarker{resolvedSeed(func(r *ConflictResolution) {
			r.SelectedEvidenceRefs = []string{refCRM, refKG}
		})}, 0, seedID, "selects every evidence ref", true},
		{"model resolution", []EvidenceConflictMarker{resolvedSeed(func(r *ConflictResolution) { r.Kind = "model"; r.ResolvedBy = "" })},
			0, seedID, "a model's output is never a resolution", true},
		{"llm resolution", []EvidenceConflictMarker{resolvedSeed(func(r *ConflictResolution) { r.Kind = "llm_judgement" })},
			0, seedID, "a model's output is never a resolution", true},
		{"unknown resolution kind", []EvidenceConflictMarker{resolvedSeed(func(r *ConflictResolution) { r.Kind = "vote" })},
			0, seedID, "resolution kind must be", true},
		{"reviewer without a kind", []EvidenceConflictMarker{resolvedSeed(func(r *ConflictResolution) { r.Kind = "" })},
			0, seedID, "resolved_by and rule_id refine a resolution of a kind", true},
		{"rule without a kind", []EvidenceConflictMarker{resolvedSeed(func(r *ConflictResolution) {
			r.Kind, r.ResolvedBy, r.RuleID = "", "", "order-identity-precedence"
		})}, 0, seedID, "resolved_by and rule_id refine a resolution of a kind", true},
		{"review without reviewer", []EvidenceConflictMarker{resolvedSeed(func(r *ConflictResolution) { r.ResolvedBy = "" })},
			0, seedID, "needs resolved_by", true},
		{"review with rule", []EvidenceConflictMarker{resolvedSeed(func(r *ConflictResolution) { r.RuleID = "order-identity-precedence" })},
			0, seedID, "has no rule_id", true},
		{"rule resolution without rule id", []EvidenceConflictMarker{resolvedSeed(func(r *ConflictResolution) {
			r.Kind, r.ResolvedBy = ResolutionSourcePriority, ""
		})}, 0, seedID, "needs the rule_id", true},
		{"rule resolution with reviewer", []EvidenceConflictMarker{resolvedSeed(func(r *ConflictResolution) {
			r.Kind, r.RuleID = ResolutionSourcePriority, "order-identity-precedence"
		})}, 0, seedID, "has no resolved_by", true},
		// Pack- and run-dependent refusals.
		{"unknown requirement", []EvidenceConflictMarker{other, withMarker(func(m *EvidenceConflictMarker) {
			m.Requirements = []string{"order_lookup", "refund_reason"}
		})}, 1, seedID, `names requirement "refund_reason"`, false},
		{"self review by the run's principal", []EvidenceConflictMarker{resolvedSeed(func(r *ConflictResolution) { r.ResolvedBy = "agent_email" })},
			0, seedID, "run's own principal", false},
		{"unknown rule", []EvidenceConflictMarker{resolvedSeed(func(r *ConflictResolution) {
			r.Kind, r.ResolvedBy, r.RuleID = ResolutionSourcePriority, "", "no-such-rule"
		})}, 0, seedID, `unknown rule "no-such-rule"`, false},
		{"rule of another kind", []EvidenceConflictMarker{resolvedSeed(func(r *ConflictResolution) {
			r.Kind, r.ResolvedBy, r.RuleID = ResolutionAuthoritativeRefresh, "", "order-identity-precedence"
		})}, 0, seedID, "is a source_priority rule", false},
		{"rule selection mismatch", []EvidenceConflictMarker{resolvedSeed(func(r *ConflictResolution) {
			r.Kind, r.ResolvedBy, r.RuleID = ResolutionSourcePriority, "", "order-identity-precedence"
			r.SelectedEvidenceRefs = []string{refCRM}
		})}, 0, seedID, "does not select", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := loadContextInputs(t, filepath.Join(contextVectors, "conflict_resolved_source_priority"))
			check := func(err error, via string) {
				t.Helper()
				var ie *ContextInputError
				if !errors.As(err, &ie) {
					t.Fatalf("%s: error %v (%T), want *ContextInputError", via, err, err)
				}
				if ie.Code() != wire.CodeContextInvalid || ie.Input != "markers" || ie.Index != tc.index || ie.ID != tc.id ||
					!strings.Contains(ie.Reason, tc.reason) || !strings.HasPrefix(ie.Error(), "context_invalid: markers[") {
					t.Fatalf("%s: got %+v (%v), want index %d id %q reason ~ %q", via, ie, ie, tc.index, tc.id, tc.reason)
				}
				if r := ie.Refusal(); r.Code != wire.CodeContextInvalid || !strings.Contains(r.Reason, tc.reason) {
					t.Fatalf("%s: refusal %v", via, r)
				}
			}
			_, err := CompileContext(in.pack, in.run, in.evidence, tc.markers)
			check(err, "CompileContext")
			err = ValidateMarkers(tc.markers)
			if tc.structural {
				check(err, "ValidateMarkers")
			} else if err != nil {
				t.Fatalf("ValidateMarkers refused a structurally valid marker: %v", err)
			}
		})
	}
}

// TestMarkerAccepted: the good shapes pass, including a rule-based
// resolution that matches what the rule selects.
func TestMarkerAccepted(t *testing.T) {
	in := loadContextInputs(t, filepath.Join(contextVectors, "conflict_resolved_source_priority"))
	for name, ms := range map[string][]EvidenceConflictMarker{
		"unresolved":             {seedMarker()},
		"review":                 {resolvedSeed(nil)},
		"article shape, no kind": {resolvedSeed(func(r *ConflictResolution) { r.Kind, r.ResolvedBy = "", "" })},
		"rule": {resolvedSeed(func(r *ConflictResolution) {
			r.Kind, r.ResolvedBy, r.RuleID, r.ResolutionRef = ResolutionSourcePriority, "", "order-identity-precedence", "rule-receipt:1"
		})},
		"refs unknown to the candidates": {withMarker(func(m *EvidenceConflictMarker) {
			m.EvidenceRefs = []string{"kg:x", "crm:y"}
		})},
	} {
		got, err := CompileContext(in.pack, in.run, in.evidence, ms)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if name == "refs unknown to the candidates" && got.Gate.CommitAllowed {
			t.Errorf("%s: a conflict over evidence we do not hold still blocks", name)
		}
	}
}

// TestRuleResolution: the pack's deterministic rules resolve only when they
// decide; otherwise the marker stays unresolved and blocks.
func TestRuleResolution(t *testing.T) {
	in := loadContextInputs(t, filepath.Join(contextVectors, "conflict_resolved_source_priority"))
	for _, tc := range []struct {
		name     string
		order    []string
		resolved bool
	}{
		{"kg over crm", []string{"ledger", "kg", "crm"}, true},
		{"crm over kg", []string{"crm", "kg"}, true},
		{"crm unranked", []string{"ledger", "kg"}, false},
	} {
		p := in.pack
		p.ResolutionRules = []ResolutionRule{{RuleID: "r", Kind: ResolutionSourcePriority, SourceOrder: tc.order}}
		got, err := CompileContext(p, in.run, in.evidence, in.markers)
		if err != nil {
			t.Fatal(err)
		}
		m := got.Conflicts[0]
		if (m.Status == ConflictResolved) != tc.resolved || got.Gate.CommitAllowed != tc.resolved {
			t.Errorf("%s: marker %+v, gate %+v", tc.name, m, got.Gate)
		}
		if tc.resolved && (m.Resolution.Kind != ResolutionSourcePriority || m.Resolution.RuleID != "r" ||
			m.Resolution.ResolutionRef != "pack:support.refund@2026-10-01.1#r" || !strings.HasPrefix(m.Resolution.SelectedEvidenceRefs[0], tc.order[len(tc.order)-2]+":")) {
			t.Errorf("%s: resolution %+v", tc.name, m.Resolution)
		}
	}
	// Two refs from the best-ranked source: the rule does not decide.
	p := in.pack
	p.ResolutionRules = []ResolutionRule{{RuleID: "r", Kind: ResolutionSourcePriority, SourceOrder: []string{"kg", "crm"}}}
	ev := append([]EvidenceCandidate(nil), in.evidence...)
	kg2 := ev[0]
	kg2.Ref = "kg:order:ord_881#snapshot_42"
	ev = append(ev, kg2)
	m := seedMarker()
	m.EvidenceRefs = append(m.EvidenceRefs, kg2.Ref)
	got, err := CompileContext(p, in.run, ev, []EvidenceConflictMarker{m})
	if err != nil {
		t.Fatal(err)
	}
	if got.Conflicts[0].Status != ConflictUnresolved || got.Gate.CommitAllowed {
		t.Errorf("tied top source resolved: %+v", got.Conflicts[0])
	}
	// A rule scoped to another predicate does not apply.
	p.ResolutionRules = []ResolutionRule{{RuleID: "r", Kind: ResolutionSourcePriority, Predicate: "preferred_tone", SourceOrder: []string{"kg", "crm"}}}
	got, err = CompileContext(p, in.run, in.evidence, in.markers)
	if err != nil {
		t.Fatal(err)
	}
	if got.Conflicts[0].Status != ConflictUnresolved {
		t.Errorf("out-of-scope rule resolved: %+v", got.Conflicts[0])
	}
}

// TestRefreshNeedsEligibleRecord: an authoritative refresh that is stale,
// unverified or from another tenant does not resolve the conflict.
func TestRefreshNeedsEligibleRecord(t *testing.T) {
	in := loadContextInputs(t, filepath.Join(contextVectors, "conflict_resolved_refresh"))
	for name, mut := range map[string]func(c *EvidenceCandidate){
		"eligible":   func(*EvidenceCandidate) {},
		"unverified": func(c *EvidenceCandidate) { c.Verified = false },
		"foreign":    func(c *EvidenceCandidate) { c.Tenant = "globex" },
		"stale":      func(c *EvidenceCandidate) { c.ValidUntil = in.run.DecisionTime },
	} {
		ev := append([]EvidenceCandidate(nil), in.evidence...)
		for i := range ev {
			if ev[i].Ref == refLedger {
				mut(&ev[i])
			}
		}
		got, err := CompileContext(in.pack, in.run, ev, in.markers)
		if err != nil {
			t.Fatal(err)
		}
		resolved := got.Conflicts[0].Status == ConflictResolved
		if resolved != (name == "eligible") || got.Gate.CommitAllowed != resolved {
			t.Errorf("%s: marker %+v gate %+v", name, got.Conflicts[0], got.Gate)
		}
	}
}

// TestSupersededNeverSatisfies: evidence superseded by one resolution does
// not satisfy any requirement, even one the resolved marker does not name.
func TestSupersededNeverSatisfies(t *testing.T) {
	in := loadContextInputs(t, filepath.Join(contextVectors, "conflict_resolved_review"))
	// Make the CRM snapshot the only evidence for identity_verified too.
	p := in.pack
	p.Trust = append([]TrustRule(nil), p.Trust...)
	for i := range p.Trust {
		if p.Trust[i].Source == "crm" {
			p.Trust[i].Requirements = []string{"customer_tone", "identity_verified", "order_lookup"}
		}
	}
	var ev []EvidenceCandidate
	for _, c := range in.evidence {
		switch c.Ref {
		case refIDP:
			continue
		case refCRM:
			c.Requirements = []string{"identity_verified", "order_lookup"}
		}
		ev = append(ev, c)
	}
	got, err := CompileContext(p, in.run, ev, in.markers)
	if err != nil {
		t.Fatal(err)
	}
	if got.Gate.CommitAllowed || len(got.Gate.Unresolved) != 1 || got.Gate.Unresolved[0] != "identity_verified" {
		t.Fatalf("gate %+v", got.Gate)
	}
}
