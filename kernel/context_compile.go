package kernel

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// CompileContext compiles a pack, a run, evidence candidates and conflict
// markers into a CompiledContext. It is pure and total: every input is
// validated (a *ContextInputError with CodeContextInvalid on refusal), and
// the result depends on the inputs as sets, never on their order.
//
// The stages, each hashed into StageHashes:
//
//  1. eligibility: per candidate, every failed axis among tenant, admission,
//     verification, currency at run.DecisionTime (observed_at <= t <
//     valid_until), the principal's allowed sources, pack trust, data_only
//     treatment, content hash and bucket;
//  2. conflicts: markers are validated against the pack and run, unresolved
//     ones are offered to the pack's deterministic rules (a rule decides only
//     for an eligible winner), and the refs a resolution did not select
//     become superseded_by_resolution;
//  3. budgeting: eligible, non-superseded candidates fill their bucket in
//     order (covers a required obligation first, then rank, then ref); a
//     candidate that does not fit is omitted whole and recorded;
//  4. gate: each required obligation of run.DecisionKey is satisfied when
//     some claiming candidate is eligible, trusted for it, in the payload and
//     not superseded, and no unresolved marker names it.
func CompileContext(pack ContextPack, run RunContext, candidates []EvidenceCandidate, markers []EvidenceConflictMarker) (CompiledContext, error) {
	return CompileContextWith(pack, run, candidates, markers, ContextInputs{})
}

// CompileContextWith is CompileContext with the typed inputs beside
// evidence (context_inputs.go): the policy snapshot narrows which tools may
// dispatch, the tool registry snapshot which are exposed, and memory and
// session state join the payload as data_only blocks that satisfy no
// obligation. Every input is pinned in dependencies.inputs and so covered
// by the digest. Empty inputs give CompileContext's bytes exactly.
func CompileContextWith(pack ContextPack, run RunContext, candidates []EvidenceCandidate, markers []EvidenceConflictMarker, inputs ContextInputs) (CompiledContext, error) {
	pack = normalizePack(pack)
	run = normalizeRun(run)
	cands := make([]EvidenceCandidate, len(candidates))
	for i, c := range candidates {
		cands[i] = normalizeCandidate(c)
	}
	ms := make([]EvidenceConflictMarker, len(markers))
	for i, m := range markers {
		ms[i] = normalizeMarker(m)
	}
	if err := validatePack(pack); err != nil {
		return CompiledContext{}, err
	}
	if err := validateRun(run); err != nil {
		return CompiledContext{}, err
	}
	if err := validateEvidence(cands); err != nil {
		return CompiledContext{}, err
	}
	if err := ValidateMarkers(ms); err != nil {
		return CompiledContext{}, err
	}
	inputs = normalizeInputs(inputs)
	if err := validateInputs(inputs); err != nil {
		return CompiledContext{}, err
	}
	data, kinds := dataOnlyCandidates(inputs)
	snapshots := map[string]bool{}
	if inputs.Policy != nil {
		snapshots[inputs.Policy.Ref] = true
	}
	if inputs.ToolRegistry != nil {
		snapshots[inputs.ToolRegistry.Ref] = true
	}
	for i, c := range cands {
		if _, dup := kinds[c.Ref]; dup || snapshots[c.Ref] {
			return CompiledContext{}, inputErr("evidence", i, c.Ref, "ref repeats the ref of a typed input")
		}
	}
	ix, err := newCompileIndex(pack, run, append(cands, data...))
	if err != nil {
		return CompiledContext{}, err
	}
	ix.dataOnly = kinds
	ix.inputs = inputs
	elig := eligibilityStage(ix)
	for ref, e := range elig {
		ix.eligible[ref] = e.Eligible
	}
	if err := checkMarkersAgainst(ms, ix); err != nil {
		return CompiledContext{}, err
	}

	out := CompiledContext{Schema: CompiledContextSchema}
	out.Run = run
	out.Run.AllowedSources = nilIfEmpty(sortedCopy(run.AllowedSources))
	out.Run.Capabilities = nilIfEmpty(sortedCopy(run.Capabilities))
	if out.Dependencies, err = dependencies(pack, ix, ms); err != nil {
		return CompiledContext{}, err
	}
	if out.Dependencies.Inputs, err = inputDependencies(inputs); err != nil {
		return CompiledContext{}, err
	}

	out.Eligibility = make([]EligibilityDecision, 0, len(ix.sorted))
	out.Negative.Rejected = []RejectedCandidate{}
	for _, c := range ix.sorted {
		e := elig[c.Ref]
		out.Eligibility = append(out.Eligibility, *e)
		if !e.Eligible {
			out.Negative.Rejected = append(out.Negative.Rejected, RejectedCandidate{Ref: c.Ref, Reasons: e.Reasons})
		}
	}

	out.Conflicts = resolveMarkers(ms, ix)
	superseded, unresolvedBy := conflictStage(out.Conflicts, ix, &out.Negative)

	omitted := budgetStage(ix, elig, superseded, &out)

	gateStage(ix, elig, superseded, omitted, unresolvedBy, &out)

	if err := out.seal(); err != nil {
		return CompiledContext{}, err
	}
	return out, nil
}

// CanonicalBytes returns the RFC 8785 encoding of the compiled context,
// digest included: the bytes a replay compares.
func (c CompiledContext) CanonicalBytes() ([]byte, error) { return Canonical(c) }

// compileIndex holds the lookups every stage shares.
type compileIndex struct {
	pack        ContextPack
	run         RunContext
	decision    DecisionSpec
	required    []string // sorted
	isRequired  map[string]bool
	vocab       map[string]bool
	buckets     map[string]ContextBucket
	trust       map[string]map[string]bool // source -> requirements
	family      map[string]string          // trusted source -> its family
	minFamilies map[string]int64           // requirement -> declared independence
	rules       map[string]ResolutionRule
	sortedRules []ResolutionRule
	cands       map[string]*EvidenceCandidate
	sorted      []*EvidenceCandidate // by ref
	allowed     map[string]bool
	eligible    map[string]bool   // filled after the eligibility stage
	dataOnly    map[string]string // memory/session ref -> its kind
	inputs      ContextInputs
}

func newCompileIndex(pack ContextPack, run RunContext, cands []EvidenceCandidate) (*compileIndex, error) {
	ix := &compileIndex{
		pack:        pack,
		run:         run,
		isRequired:  map[string]bool{},
		vocab:       map[string]bool{},
		buckets:     map[string]ContextBucket{},
		trust:       map[string]map[string]bool{},
		family:      map[string]string{},
		minFamilies: map[string]int64{},
		rules:       map[string]ResolutionRule{},
		cands:       map[string]*EvidenceCandidate{},
		allowed:     map[string]bool{},
		eligible:    map[string]bool{},
	}
	found := false
	for _, d := range pack.Decisions {
		for _, r := range d.RequiredEvidence {
			ix.vocab[r] = true
		}
		if d.DecisionKey == run.DecisionKey {
			ix.decision, found = d, true
		}
	}
	if !found {
		return nil, inputErr("run", -1, run.RunID, "decision_key %q is not a decision of pack %s@%s", run.DecisionKey, pack.PackID, pack.Version)
	}
	ix.required = sortedCopy(ix.decision.RequiredEvidence)
	for _, r := range ix.required {
		ix.isRequired[r] = true
	}
	for _, ind := range ix.decision.Independence {
		ix.minFamilies[ind.Requirement] = ind.MinFamilies
	}
	for _, b := range pack.Buckets {
		ix.buckets[b.Name] = b
	}
	for _, t := range pack.Trust {
		set := map[string]bool{}
		for _, r := range t.Requirements {
			set[r] = true
		}
		ix.trust[t.Source] = set
		ix.family[t.Source] = cmp.Or(t.Family, t.Source)
	}
	for _, r := range pack.ResolutionRules {
		ix.rules[r.RuleID] = r
		ix.sortedRules = append(ix.sortedRules, r)
	}
	slices.SortFunc(ix.sortedRules, func(a, b ResolutionRule) int { return strings.Compare(a.RuleID, b.RuleID) })
	for i := range cands {
		ix.cands[cands[i].Ref] = &cands[i]
		ix.sorted = append(ix.sorted, &cands[i])
	}
	slices.SortFunc(ix.sorted, func(a, b *EvidenceCandidate) int { return strings.Compare(a.Ref, b.Ref) })
	for _, s := range run.AllowedSources {
		ix.allowed[s] = true
	}
	return ix, nil
}

func dependencies(pack ContextPack, ix *compileIndex, ms []EvidenceConflictMarker) (ContextDependencies, error) {
	pd, err := Digest(canonicalPack(pack))
	if err != nil {
		return ContextDependencies{}, fmt.Errorf("context: pack digest: %w", err)
	}
	deps := ContextDependencies{
		Pack:     PackDependency{PackID: pack.PackID, Version: pack.Version, Digest: pd},
		Evidence: make([]EvidenceDependency, 0, len(ix.sorted)),
		Markers:  make([]MarkerDependency, 0, len(ms)),
	}
	for _, c := range ix.sorted {
		if ix.dataOnly[c.Ref] != "" {
			continue // pinned in dependencies.inputs
		}
		cc := *c
		cc.Requirements = nilIfEmpty(sortedCopy(c.Requirements))
		d, err := Digest(cc)
		if err != nil {
			return ContextDependencies{}, fmt.Errorf("context: evidence digest: %w", err)
		}
		deps.Evidence = append(deps.Evidence, EvidenceDependency{
			Ref: c.Ref, Source: c.Source, Version: c.Version, ContentHash: c.ContentHash, ObservedAt: c.ObservedAt, Digest: d,
		})
	}
	for _, m := range ms {
		d, err := Digest(canonicalMarker(m))
		if err != nil {
			return ContextDependencies{}, fmt.Errorf("context: marker digest: %w", err)
		}
		deps.Markers = append(deps.Markers, MarkerDependency{ConflictID: m.ConflictID, Digest: d})
	}
	slices.SortFunc(deps.Markers, func(a, b MarkerDependency) int { return strings.Compare(a.ConflictID, b.ConflictID) })
	return deps, nil
}

// canonicalPack returns a deep copy of p with every set sorted. Source
// order of a source_priority rule is a ranking and keeps its order.
func canonicalPack(p ContextPack) ContextPack {
	q := p
	q.Buckets = slices.Clone(p.Buckets)
	slices.SortFunc(q.Buckets, func(a, b ContextBucket) int { return strings.Compare(a.Name, b.Name) })
	q.Decisions = make([]DecisionSpec, len(p.Decisions))
	for i, d := range p.Decisions {
		d.RequiredEvidence = nilIfEmpty(sortedCopy(d.RequiredEvidence))
		d.Independence = slices.Clone(d.Independence)
		slices.SortFunc(d.Independence, func(a, b IndependenceDemand) int { return strings.Compare(a.Requirement, b.Requirement) })
		q.Decisions[i] = d
	}
	slices.SortFunc(q.Decisions, func(a, b DecisionSpec) int { return strings.Compare(a.DecisionKey, b.DecisionKey) })
	q.Tools = slices.Clone(p.Tools)
	slices.SortFunc(q.Tools, func(a, b ToolRule) int { return strings.Compare(a.CapabilityID, b.CapabilityID) })
	q.Trust = make([]TrustRule, len(p.Trust))
	for i, t := range p.Trust {
		t.Requirements = nilIfEmpty(sortedCopy(t.Requirements))
		q.Trust[i] = t
	}
	slices.SortFunc(q.Trust, func(a, b TrustRule) int { return strings.Compare(a.Source, b.Source) })
	q.ResolutionRules = make([]ResolutionRule, len(p.ResolutionRules))
	for i, r := range p.ResolutionRules {
		r.Requirements = nilIfEmpty(sortedCopy(r.Requirements))
		r.SourceOrder = slices.Clone(r.SourceOrder)
		q.ResolutionRules[i] = r
	}
	slices.SortFunc(q.ResolutionRules, func(a, b ResolutionRule) int { return strings.Compare(a.RuleID, b.RuleID) })
	return normalizePack(q)
}

// eligibilityStage decides every candidate on its own axes.
func eligibilityStage(ix *compileIndex) map[string]*EligibilityDecision {
	t := ix.run.DecisionTime
	out := make(map[string]*EligibilityDecision, len(ix.sorted))
	for _, c := range ix.sorted {
		var reasons []string
		kind := ix.dataOnly[c.Ref]
		if c.Tenant != ix.run.Tenant {
			reasons = append(reasons, ReasonCrossTenant)
		}
		if kind != "" {
			// Memory and session state are data: no source authority or
			// trust to check, since they satisfy nothing.
			if t.Before(c.ObservedAt) {
				reasons = append(reasons, ReasonNotYetValid)
			}
			if !t.Before(c.ValidUntil) {
				reasons = append(reasons, ReasonStale)
			}
			sum := sha256.Sum256([]byte(c.Content))
			if hex.EncodeToString(sum[:]) != c.ContentHash {
				reasons = append(reasons, ReasonContentHashMismatch)
			}
			if _, ok := ix.buckets[c.Bucket]; !ok {
				reasons = append(reasons, ReasonUnknownBucket)
			}
			slices.Sort(reasons)
			if reasons == nil {
				reasons = []string{}
			}
			out[c.Ref] = &EligibilityDecision{
				Ref: c.Ref, Kind: kind, Source: c.Source, Eligible: len(reasons) == 0, Reasons: reasons,
				Requirements: sortedCopy(c.Requirements), TrustedFor: []string{},
			}
			continue
		}
		if !c.Admitted {
			reasons = append(reasons, ReasonNotAdmitted)
		}
		if !c.Verified {
			reasons = append(reasons, ReasonNotVerified)
		}
		if t.Before(c.ObservedAt) {
			reasons = append(reasons, ReasonNotYetValid)
		}
		if !t.Before(c.ValidUntil) {
			reasons = append(reasons, ReasonStale)
		}
		if !ix.allowed[c.Source] {
			reasons = append(reasons, ReasonSourceNotAuthorized)
		}
		trusted, known := ix.trust[c.Source]
		if !known {
			reasons = append(reasons, ReasonUntrustedSource)
		}
		if c.InstructionTreatment != TreatmentDataOnly {
			reasons = append(reasons, ReasonInstructionTreatment)
		}
		sum := sha256.Sum256([]byte(c.Content))
		if hex.EncodeToString(sum[:]) != c.ContentHash {
			reasons = append(reasons, ReasonContentHashMismatch)
		}
		if _, ok := ix.buckets[c.Bucket]; !ok {
			reasons = append(reasons, ReasonUnknownBucket)
		}
		slices.Sort(reasons)
		trustedFor := []string{}
		for _, r := range sortedCopy(c.Requirements) {
			if trusted[r] {
				trustedFor = append(trustedFor, r)
			}
		}
		if reasons == nil {
			reasons = []string{}
		}
		out[c.Ref] = &EligibilityDecision{
			Ref: c.Ref, Source: c.Source, Eligible: len(reasons) == 0, Reasons: reasons,
			Requirements: sortedCopy(c.Requirements), TrustedFor: trustedFor,
		}
	}
	return out
}

// conflictStage fills the unresolved and superseded negative state and
// returns the superseded refs (ref -> superseding conflict ids) and, per
// requirement, the unresolved markers naming it.
func conflictStage(ms []EvidenceConflictMarker, ix *compileIndex, neg *NegativeState) (map[string]bool, map[string][]EvidenceConflictMarker) {
	superseded := map[string]bool{}
	unresolvedBy := map[string][]EvidenceConflictMarker{}
	neg.UnresolvedConflicts = []UnresolvedConflict{}
	neg.Superseded = []SupersededEvidence{}
	for _, m := range ms {
		switch m.Status {
		case ConflictUnresolved:
			blocks := []string{}
			for _, q := range m.Requirements {
				unresolvedBy[q] = append(unresolvedBy[q], m)
				if ix.isRequired[q] {
					blocks = append(blocks, q)
				}
			}
			neg.UnresolvedConflicts = append(neg.UnresolvedConflicts, UnresolvedConflict{
				ConflictID: m.ConflictID, Requirements: m.Requirements, Blocks: blocks,
			})
		case ConflictResolved:
			for _, ref := range m.EvidenceRefs {
				if slices.Contains(m.Resolution.SelectedEvidenceRefs, ref) {
					continue
				}
				superseded[ref] = true
				neg.Superseded = append(neg.Superseded, SupersededEvidence{
					Ref: ref, ConflictID: m.ConflictID, ResolutionRef: m.Resolution.ResolutionRef,
					Status: ReasonSupersededResolution,
				})
			}
		}
	}
	slices.SortFunc(neg.Superseded, func(a, b SupersededEvidence) int {
		return cmp.Or(strings.Compare(a.Ref, b.Ref), strings.Compare(a.ConflictID, b.ConflictID))
	})
	return superseded, unresolvedBy
}

// budgetStage fills the payload and omissions and returns the omitted refs.
func budgetStage(ix *compileIndex, elig map[string]*EligibilityDecision, superseded map[string]bool, out *CompiledContext) map[string]bool {
	byBucket := map[string][]*EvidenceCandidate{}
	for _, c := range ix.sorted {
		if elig[c.Ref].Eligible && !superseded[c.Ref] {
			byBucket[c.Bucket] = append(byBucket[c.Bucket], c)
		}
	}
	coversRequired := func(c *EvidenceCandidate) bool {
		for _, r := range elig[c.Ref].TrustedFor {
			if ix.isRequired[r] {
				return true
			}
		}
		return false
	}
	names := make([]string, 0, len(ix.buckets))
	for name := range ix.buckets {
		names = append(names, name)
	}
	slices.Sort(names)
	omitted := map[string]bool{}
	out.Payload = make([]PayloadBucket, 0, len(names))
	out.Negative.Omissions = []Omission{}
	for _, name := range names {
		b := ix.buckets[name]
		pb := PayloadBucket{Bucket: name, MaxTokens: b.MaxTokens, MaxBytes: b.MaxBytes, Blocks: []PayloadBlock{}, DroppedRefs: []string{}}
		list := byBucket[name]
		slices.SortStableFunc(list, func(x, y *EvidenceCandidate) int {
			cx, cy := coversRequired(x), coversRequired(y)
			if cx != cy {
				if cx {
					return -1
				}
				return 1
			}
			return cmp.Or(cmp.Compare(x.Rank, y.Rank), strings.Compare(x.Ref, y.Ref))
		})
		for _, c := range list {
			size := int64(len(c.Content))
			fits := (b.MaxTokens == 0 || c.Tokens <= b.MaxTokens-pb.UsedTokens) &&
				(b.MaxBytes == 0 || size <= b.MaxBytes-pb.UsedBytes)
			if !fits {
				pb.Truncated = true
				pb.DroppedRefs = append(pb.DroppedRefs, c.Ref)
				omitted[c.Ref] = true
				out.Negative.Omissions = append(out.Negative.Omissions, Omission{Ref: c.Ref, Bucket: name, Reason: ReasonBudgetExceeded})
				continue
			}
			pb.UsedTokens += c.Tokens
			pb.UsedBytes += size
			pb.Blocks = append(pb.Blocks, PayloadBlock{
				Ref: c.Ref, Kind: ix.dataOnly[c.Ref], Source: c.Source, ContentHash: c.ContentHash, InstructionTreatment: TreatmentDataOnly,
				Tokens: c.Tokens, Bytes: size, Requirements: sortedCopy(c.Requirements), Content: c.Content,
			})
		}
		slices.Sort(pb.DroppedRefs)
		out.Payload = append(out.Payload, pb)
	}
	slices.SortFunc(out.Negative.Omissions, func(a, b Omission) int { return strings.Compare(a.Ref, b.Ref) })
	return omitted
}

// gateStage decides every required obligation, the gate and tool exposure.
func gateStage(ix *compileIndex, elig map[string]*EligibilityDecision, superseded, omitted map[string]bool,
	unresolvedBy map[string][]EvidenceConflictMarker, out *CompiledContext) {
	g := EvidenceGate{
		DecisionKey: ix.run.DecisionKey, Required: slices.Clone(ix.required),
		Satisfied: []string{}, Unresolved: []string{}, Conflicts: []EvidenceConflictMarker{},
	}
	out.Requirements = make([]RequirementStatus, 0, len(ix.required))
	for _, req := range ix.required {
		rs := RequirementStatus{Requirement: req, Reasons: []string{}, SatisfiedBy: []string{}, BlockingConflicts: []string{}, Evidence: []RequirementCheck{}}
		inConflict := map[string]bool{}
		for _, m := range unresolvedBy[req] {
			rs.BlockingConflicts = append(rs.BlockingConflicts, m.ConflictID)
			for _, ref := range m.EvidenceRefs {
				inConflict[ref] = true
			}
		}
		usable := []string{}
		for _, c := range ix.sorted {
			if !slices.Contains(c.Requirements, req) {
				continue
			}
			e := elig[c.Ref]
			reasons := slices.Clone(e.Reasons)
			if ix.dataOnly[c.Ref] != "" {
				reasons = append(reasons, ReasonDataOnlyAuthority)
			} else if _, known := ix.trust[c.Source]; known && !slices.Contains(e.TrustedFor, req) {
				reasons = append(reasons, ReasonUntrustedForReq)
			}
			if superseded[c.Ref] {
				reasons = append(reasons, ReasonSupersededResolution)
			}
			if omitted[c.Ref] {
				reasons = append(reasons, ReasonBudgetExceeded)
			}
			if inConflict[c.Ref] {
				reasons = append(reasons, ReasonUnresolvedConflict)
			}
			slices.Sort(reasons)
			ok := len(reasons) == 0
			if ok {
				usable = append(usable, c.Ref)
			}
			rs.Evidence = append(rs.Evidence, RequirementCheck{Ref: c.Ref, Usable: ok, Reasons: reasons})
		}
		// Two usable refs of one family are one witness.
		independent := len(usable) > 0
		if minF, declared := ix.minFamilies[req]; declared {
			fams := map[string]bool{}
			for _, ref := range usable {
				fams[ix.family[ix.cands[ref].Source]] = true
			}
			rs.MinFamilies = minF
			rs.Families = nilIfEmpty(slices.Sorted(maps.Keys(fams)))
			independent = int64(len(fams)) >= minF
		}
		switch {
		case len(rs.Evidence) == 0:
			rs.Reasons = append(rs.Reasons, ReasonRequirementNotCovered)
		case len(usable) == 0:
			rs.Reasons = append(rs.Reasons, ReasonNoUsableEvidence)
		case !independent:
			rs.Reasons = append(rs.Reasons, ReasonInsufficientIndependence)
		}
		if len(rs.BlockingConflicts) > 0 {
			rs.Reasons = append(rs.Reasons, ReasonUnresolvedConflict)
		}
		slices.Sort(rs.Reasons)
		rs.Satisfied = independent && len(rs.BlockingConflicts) == 0
		if rs.Satisfied {
			rs.SatisfiedBy = usable
			g.Satisfied = append(g.Satisfied, req)
		} else {
			g.Unresolved = append(g.Unresolved, req)
		}
		out.Requirements = append(out.Requirements, rs)
	}
	for _, m := range out.Conflicts {
		if slices.ContainsFunc(m.Requirements, func(q string) bool { return ix.isRequired[q] }) {
			g.Conflicts = append(g.Conflicts, m)
		}
	}
	g.CommitAllowed = len(g.Unresolved) == 0
	g.Sufficiency = Insufficient
	if g.CommitAllowed {
		g.Sufficiency = Sufficient
	}
	out.Gate = g

	held := map[string]bool{}
	for _, c := range ix.run.Capabilities {
		held[c] = true
	}
	// The snapshots only narrow: a tool the policy permits or the
	// registry lists still needs the run's capability and its gate.
	var policy, registry *InputStatus
	permitted, registered := map[string]bool{}, map[string]string{}
	if p := ix.inputs.Policy; p != nil {
		st := snapshotStatus(InputKindPolicy, p.Provenance, ix.run)
		policy = &st
		for _, c := range p.Capabilities {
			permitted[c] = true
		}
	}
	if r := ix.inputs.ToolRegistry; r != nil {
		st := snapshotStatus(InputKindToolRegistry, r.Provenance, ix.run)
		registry = &st
		for _, t := range r.Tools {
			registered[t.CapabilityID] = t.Version
		}
	}
	for _, st := range []*InputStatus{policy, registry} {
		if st != nil {
			out.Inputs = append(out.Inputs, *st)
		}
	}
	out.Tools = make([]ToolExposure, 0, len(ix.pack.Tools))
	for _, t := range ix.pack.Tools {
		te := ToolExposure{CapabilityID: t.CapabilityID, Exposed: held[t.CapabilityID], GatedBy: t.GatedBy}
		version, isRegistered := registered[t.CapabilityID]
		if registry != nil {
			te.Version = version
		}
		switch {
		case !te.Exposed:
			te.Reason = ToolReasonCapabilityNotHeld
		case registry != nil && !registry.Usable:
			te.Exposed, te.Reason = false, ToolReasonRegistryUnusable
		case registry != nil && !isRegistered:
			te.Exposed, te.Reason = false, ToolReasonNotRegistered
		case policy != nil && !policy.Usable:
			te.Reason = ToolReasonPolicyUnusable
		case policy != nil && !permitted[t.CapabilityID]:
			te.Reason = ToolReasonPolicyDenied
		case t.GatedBy == "":
			te.DispatchAllowed = true
		case t.GatedBy != ix.run.DecisionKey:
			te.Reason = ToolReasonGateNotCompiled
		case !g.CommitAllowed:
			te.Reason = ToolReasonGateInsufficient
		default:
			te.DispatchAllowed = true
		}
		out.Tools = append(out.Tools, te)
	}
	slices.SortFunc(out.Tools, func(a, b ToolExposure) int { return strings.Compare(a.CapabilityID, b.CapabilityID) })
}

// seal computes the stage hashes and the digest.
func (c *CompiledContext) seal() error {
	stages := []struct {
		dst *string
		v   any
	}{
		{&c.StageHashes.Inputs, struct {
			Run          RunContext          `json:"run"`
			Dependencies ContextDependencies `json:"dependencies"`
		}{c.Run, c.Dependencies}},
		{&c.StageHashes.Eligibility, struct {
			Eligibility []EligibilityDecision `json:"eligibility"`
			Rejected    []RejectedCandidate   `json:"rejected"`
		}{c.Eligibility, c.Negative.Rejected}},
		{&c.StageHashes.Conflicts, struct {
			Conflicts  []EvidenceConflictMarker `json:"conflicts"`
			Unresolved []UnresolvedConflict     `json:"unresolved_conflicts"`
			Superseded []SupersededEvidence     `json:"superseded"`
		}{c.Conflicts, c.Negative.UnresolvedConflicts, c.Negative.Superseded}},
		{&c.StageHashes.Budgeting, struct {
			Payload   []PayloadBucket `json:"payload"`
			Omissions []Omission      `json:"omissions"`
		}{c.Payload, c.Negative.Omissions}},
		{&c.StageHashes.Gate, struct {
			Requirements []RequirementStatus `json:"requirements"`
			Tools        []ToolExposure      `json:"tools"`
			Inputs       []InputStatus       `json:"inputs,omitempty"`
			Gate         EvidenceGate        `json:"gate"`
		}{c.Requirements, c.Tools, c.Inputs, c.Gate}},
	}
	for _, s := range stages {
		d, err := Digest(s.v)
		if err != nil {
			return fmt.Errorf("context: stage digest: %w", err)
		}
		*s.dst = d
	}
	c.Digest = ""
	d, err := Digest(c)
	if err != nil {
		return fmt.Errorf("context: digest: %w", err)
	}
	c.Digest = d
	return nil
}
