package kernel

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/contextos/ledger/wire"
)

// The golden flags are shared with other kernel tests: define them only when
// no other test file already has (package-level vars are initialized before
// any init runs, so the lookup sees them).
func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite golden files in testdata/")
	}
	if flag.Lookup("rewrite") == nil {
		flag.Bool("rewrite", false, "rewrite golden files in testdata/")
	}
}

func rewriteGoldens() bool {
	for _, name := range []string{"update", "rewrite"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() == "true" {
			return true
		}
	}
	return false
}

const contextVectors = "../testdata/context"

// contextInputs is one conformance vector's inputs.
type contextInputs struct {
	pack     ContextPack
	run      RunContext
	evidence []EvidenceCandidate
	markers  []EvidenceConflictMarker
	inputs   ContextInputs // from inputs.json, when the vector has one
}

func loadContextInputs(t *testing.T, dir string) contextInputs {
	t.Helper()
	in, err := readContextInputs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// readContextInputs parses a vector's four input files with the strict
// parsers.
func readContextInputs(dir string) (contextInputs, error) {
	var in contextInputs
	read := func(name string, parse func([]byte) error) error {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		return parse(b)
	}
	var err error
	if err = read("pack.json", func(b []byte) error { in.pack, err = ParseContextPack(b); return err }); err != nil {
		return in, err
	}
	if err = read("run.json", func(b []byte) error { in.run, err = ParseRunContext(b); return err }); err != nil {
		return in, err
	}
	if err = read("evidence.json", func(b []byte) error { in.evidence, err = ParseEvidence(b); return err }); err != nil {
		return in, err
	}
	if err = read("markers.json", func(b []byte) error { in.markers, err = ParseMarkers(b); return err }); err != nil {
		return in, err
	}
	if _, serr := os.Stat(filepath.Join(dir, "inputs.json")); serr == nil {
		if err = read("inputs.json", func(b []byte) error { in.inputs, err = ParseContextInputs(b); return err }); err != nil {
			return in, err
		}
	}
	return in, nil
}

func compileInputs(in contextInputs) (CompiledContext, error) {
	return CompileContextWith(in.pack, in.run, in.evidence, in.markers, in.inputs)
}

func mustCanonical(t *testing.T, c CompiledContext) []byte {
	t.Helper()
	b, err := c.CanonicalBytes()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func contextCaseDirs(t *testing.T) []string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(contextVectors, "*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no context vectors in %s: %v", contextVectors, err)
	}
	var out []string
	for _, d := range dirs {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			out = append(out, d)
		}
	}
	return out
}

// contextExpect is what a vector must show, stated independently of its
// golden file so that a rewritten golden cannot hide a regression.
type contextExpect struct {
	sufficient bool
	satisfied  []string
	superseded []string // refs
	omitted    []string // refs
	rejected   map[string][]string
	blocking   []string // conflict ids in gate.conflicts that are unresolved
	reqReasons map[string][]string
	evReasons  map[string][]string // "req|ref" -> reasons
	dispatch   bool                // adp_payments.issue_refund dispatch_allowed
	tools      map[string]string   // capability -> "exposed|dispatch|reason" of its exposure
}

const (
	refKG     = "kg:order:ord_881#snapshot_41"
	refCRM    = "crm:order:ord_881#snapshot_19"
	refLedger = "ledger:order:ord_881#seq_1002"
	refPolicy = "policy:refunds#v7"
	refIDP    = "idp:customer:c_77#session_9"
	refMem    = "mem:run_01#note_3"
	seedID    = "conflict:order:ord_881:identity"
)

var allThree = []string{"identity_verified", "order_lookup", "policy.eval"}

var contextExpectations = map[string]contextExpect{
	"sufficient": {sufficient: true, satisfied: allThree, dispatch: true},
	// Memory claims identity_verified and the session state rides along:
	// both reach the payload as data, neither satisfies anything.
	"inputs_memory_data_only": {satisfied: []string{"order_lookup", "policy.eval"},
		reqReasons: map[string][]string{"identity_verified": {ReasonNoUsableEvidence}},
		evReasons:  map[string][]string{"identity_verified|memory:agent_email:promoted_9": {ReasonDataOnlyAuthority}},
		tools: map[string]string{"payments.void": "false|false|" + ToolReasonCapabilityNotHeld,
			"crm.lookup_order": "true|true|"}},
	// The gate is sufficient, yet a stale policy permits nothing, and
	// the registry lacks crm.lookup_order.
	"inputs_policy_stale": {sufficient: true, satisfied: allThree,
		tools: map[string]string{"adp_payments.issue_refund": "true|false|" + ToolReasonPolicyUnusable,
			"crm.lookup_order": "false|false|" + ToolReasonNotRegistered}},
	"inputs_policy_denies": {sufficient: true, satisfied: allThree,
		tools: map[string]string{"adp_payments.issue_refund": "true|false|" + ToolReasonPolicyDenied,
			"crm.lookup_order": "true|true|"}},
	"insufficient": {satisfied: []string{"order_lookup", "policy.eval"},
		reqReasons: map[string][]string{"identity_verified": {ReasonRequirementNotCovered}}},
	"stale": {satisfied: []string{"order_lookup", "policy.eval"},
		rejected: map[string][]string{refIDP: {ReasonStale}, "idp:customer:c_77#session_10": {ReasonNotYetValid}}},
	"untrusted": {satisfied: []string{"policy.eval"},
		rejected: map[string][]string{"web:forum:thread_5#post_2": {ReasonUntrustedSource}},
		evReasons: map[string][]string{
			"identity_verified|crm:customer:c_77#profile": {ReasonUntrustedForReq},
			"order_lookup|web:forum:thread_5#post_2":      {ReasonUntrustedSource},
		}},
	"unverified": {satisfied: []string{"identity_verified"},
		rejected: map[string][]string{refKG: {ReasonNotVerified}, refPolicy: {ReasonNotAdmitted}}},
	"authority_and_integrity": {satisfied: []string{"policy.eval"},
		rejected: map[string][]string{refKG: {ReasonSourceNotAuthorized}, refIDP: {ReasonContentHashMismatch},
			refMem: {ReasonInstructionTreatment}}},
	"omitted": {satisfied: []string{"identity_verified", "order_lookup"}, omitted: []string{refMem, refPolicy},
		evReasons: map[string][]string{"policy.eval|" + refPolicy: {ReasonBudgetExceeded}}},
	"cross_tenant": {satisfied: []string{"order_lookup", "policy.eval"},
		rejected: map[string][]string{refIDP: {ReasonCrossTenant}}},
	"conflict_unresolved": {satisfied: []string{"identity_verified", "policy.eval"}, blocking: []string{seedID},
		reqReasons: map[string][]string{"order_lookup": {ReasonNoUsableEvidence, ReasonUnresolvedConflict}},
		evReasons: map[string][]string{
			"order_lookup|" + refKG:  {ReasonUnresolvedConflict},
			"order_lookup|" + refCRM: {ReasonUnresolvedConflict},
		}},
	"conflict_resolved_review": {sufficient: true, satisfied: allThree, superseded: []string{refCRM}, dispatch: true,
		evReasons: map[string][]string{"order_lookup|" + refCRM: {ReasonSupersededResolution}, "order_lookup|" + refKG: {}}},
	"conflict_resolved_article": {sufficient: true, satisfied: allThree, superseded: []string{refCRM}, dispatch: true,
		evReasons: map[string][]string{"order_lookup|" + refCRM: {ReasonSupersededResolution}, "order_lookup|" + refKG: {}}},
	"no_conflict_control":               {sufficient: true, satisfied: allThree, dispatch: true},
	"conflict_resolved_source_priority": {sufficient: true, satisfied: allThree, superseded: []string{refCRM}, dispatch: true},
	"conflict_resolved_refresh": {sufficient: true, satisfied: allThree, superseded: []string{refCRM, refKG}, dispatch: true,
		evReasons: map[string][]string{"order_lookup|" + refLedger: {}}},
	"conflict_refresh_not_newer": {satisfied: []string{"identity_verified", "policy.eval"}, blocking: []string{seedID}},
	"conflict_unmapped":          {sufficient: true, satisfied: allThree, dispatch: true},
	"independence_one_family": {satisfied: []string{"identity_verified", "policy.eval"},
		reqReasons: map[string][]string{"order_lookup": {ReasonInsufficientIndependence}}},
	"independence_two_families": {sufficient: true, satisfied: allThree, dispatch: true},
}

// TestContextVectors compiles every vector in testdata/context and compares
// the indented output with want.json (regenerate with -update or
// -rewrite), then checks the vector's stated expectations.
func TestContextVectors(t *testing.T) {
	seen := map[string]bool{}
	for _, dir := range contextCaseDirs(t) {
		name := filepath.Base(dir)
		seen[name] = true
		t.Run(name, func(t *testing.T) {
			in, err := readContextInputs(dir)
			var got CompiledContext
			if err == nil {
				got, err = compileInputs(in)
			}
			errFile := filepath.Join(dir, "want_error.txt")
			if want, rerr := os.ReadFile(errFile); rerr == nil || strings.HasPrefix(name, "error_") {
				if err == nil {
					t.Fatalf("compile succeeded, want an error")
				}
				var ie *ContextInputError
				if !errors.As(err, &ie) || ie.Code() != wire.CodeContextInvalid {
					t.Fatalf("error %v is not a *ContextInputError with context_invalid", err)
				}
				if rewriteGoldens() {
					if err := os.WriteFile(errFile, []byte(err.Error()+"\n"), 0o644); err != nil {
						t.Fatal(err)
					}
					return
				}
				if strings.TrimSpace(string(want)) != err.Error() {
					t.Fatalf("error\n got: %v\nwant: %s", err, want)
				}
				return
			}
			if err != nil {
				t.Fatalf("%v", err)
			}
			indented, err := json.MarshalIndent(got, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			indented = append(indented, '\n')
			wantFile := filepath.Join(dir, "want.json")
			if rewriteGoldens() {
				if err := os.WriteFile(wantFile, indented, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(wantFile)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(indented, want) {
				t.Errorf("output differs from %s (run with -update and review the diff):\n%s", wantFile, firstDiff(want, indented))
			}
			checkGoldenDigest(t, want)
			checkExpectations(t, name, got)
		})
	}
	for name := range contextExpectations {
		if !seen[name] {
			t.Errorf("expected vector %s is missing", name)
		}
	}
}

// checkGoldenDigest recomputes the golden's digest and stage hashes from its
// own content: a hand-edited golden that keeps a stale digest fails.
func checkGoldenDigest(t *testing.T, want []byte) {
	t.Helper()
	var c CompiledContext
	if err := json.Unmarshal(want, &c); err != nil {
		t.Fatalf("golden does not decode: %v", err)
	}
	digest, stages := c.Digest, c.StageHashes
	if err := c.seal(); err != nil {
		t.Fatal(err)
	}
	if c.Digest != digest || c.StageHashes != stages {
		t.Errorf("golden digest %s / stages %+v do not match its content (%s / %+v)", digest, stages, c.Digest, c.StageHashes)
	}
}

func checkExpectations(t *testing.T, name string, got CompiledContext) {
	t.Helper()
	exp, ok := contextExpectations[name]
	if !ok {
		t.Fatalf("vector %s has no entry in contextExpectations", name)
	}
	g := got.Gate
	if g.CommitAllowed != exp.sufficient || (g.Sufficiency == Sufficient) != exp.sufficient {
		t.Errorf("commit_allowed=%v sufficiency=%s, want sufficient=%v", g.CommitAllowed, g.Sufficiency, exp.sufficient)
	}
	if !slices.Equal(g.Satisfied, exp.satisfied) {
		t.Errorf("satisfied = %v, want %v", g.Satisfied, exp.satisfied)
	}
	var wantUnresolved []string
	for _, r := range g.Required {
		if !slices.Contains(exp.satisfied, r) {
			wantUnresolved = append(wantUnresolved, r)
		}
	}
	if !slices.Equal(g.Unresolved, wantUnresolved) && !(len(g.Unresolved) == 0 && len(wantUnresolved) == 0) {
		t.Errorf("unresolved = %v, want %v", g.Unresolved, wantUnresolved)
	}
	if !slices.Equal(g.Required, allThree) {
		t.Errorf("required = %v", g.Required)
	}
	var superseded []string
	for _, s := range got.Negative.Superseded {
		superseded = append(superseded, s.Ref)
		if s.Status != "superseded_by_resolution" {
			t.Errorf("superseded status %q", s.Status)
		}
	}
	if !slices.Equal(superseded, exp.superseded) {
		t.Errorf("superseded = %v, want %v", superseded, exp.superseded)
	}
	var omitted []string
	for _, o := range got.Negative.Omissions {
		omitted = append(omitted, o.Ref)
	}
	if !slices.Equal(omitted, exp.omitted) {
		t.Errorf("omitted = %v, want %v", omitted, exp.omitted)
	}
	rejected := map[string][]string{}
	for _, r := range got.Negative.Rejected {
		rejected[r.Ref] = r.Reasons
	}
	if len(rejected) != len(exp.rejected) {
		t.Errorf("rejected = %v, want %v", rejected, exp.rejected)
	}
	for ref, reasons := range exp.rejected {
		if !slices.Equal(rejected[ref], reasons) {
			t.Errorf("rejected[%s] = %v, want %v", ref, rejected[ref], reasons)
		}
	}
	var blocking []string
	for _, m := range g.Conflicts {
		if m.Status == ConflictUnresolved {
			blocking = append(blocking, m.ConflictID)
		}
	}
	if !slices.Equal(blocking, exp.blocking) {
		t.Errorf("blocking conflicts = %v, want %v", blocking, exp.blocking)
	}
	for req, reasons := range exp.reqReasons {
		i := slices.IndexFunc(got.Requirements, func(r RequirementStatus) bool { return r.Requirement == req })
		if i < 0 || !slices.Equal(got.Requirements[i].Reasons, reasons) {
			t.Errorf("requirement %s reasons: got %+v, want %v", req, got.Requirements, reasons)
		}
	}
	for key, reasons := range exp.evReasons {
		req, ref, _ := strings.Cut(key, "|")
		i := slices.IndexFunc(got.Requirements, func(r RequirementStatus) bool { return r.Requirement == req })
		if i < 0 {
			t.Errorf("no requirement %s", req)
			continue
		}
		j := slices.IndexFunc(got.Requirements[i].Evidence, func(c RequirementCheck) bool { return c.Ref == ref })
		if j < 0 || !slices.Equal(got.Requirements[i].Evidence[j].Reasons, reasons) {
			t.Errorf("%s: got %+v, want reasons %v", key, got.Requirements[i].Evidence, reasons)
		}
	}
	i := slices.IndexFunc(got.Tools, func(x ToolExposure) bool { return x.CapabilityID == "adp_payments.issue_refund" })
	if i < 0 || got.Tools[i].DispatchAllowed != exp.dispatch {
		t.Errorf("issue_refund exposure %+v, want dispatch_allowed=%v", got.Tools, exp.dispatch)
	}
	for capID, want := range exp.tools {
		i := slices.IndexFunc(got.Tools, func(x ToolExposure) bool { return x.CapabilityID == capID })
		if i < 0 {
			t.Errorf("no tool %s", capID)
			continue
		}
		x := got.Tools[i]
		if g := fmt.Sprintf("%v|%v|%s", x.Exposed, x.DispatchAllowed, x.Reason); g != want {
			t.Errorf("tool %s = %s, want %s", capID, g, want)
		}
	}
	// Invariants that hold for every output.
	if GateRefusal(got.Gate) == nil != got.Gate.CommitAllowed {
		t.Errorf("Refusal() disagrees with commit_allowed")
	}
	for _, rs := range got.Requirements {
		for _, ref := range rs.SatisfiedBy {
			if slices.Contains(superseded, ref) || slices.Contains(omitted, ref) || rejected[ref] != nil {
				t.Errorf("%s satisfied by excluded evidence %s", rs.Requirement, ref)
			}
		}
	}
	for _, pb := range got.Payload {
		if (pb.MaxTokens > 0 && pb.UsedTokens > pb.MaxTokens) || (pb.MaxBytes > 0 && pb.UsedBytes > pb.MaxBytes) {
			t.Errorf("bucket %s over budget: %+v", pb.Bucket, pb)
		}
		for _, b := range pb.Blocks {
			if b.InstructionTreatment != TreatmentDataOnly {
				t.Errorf("block %s is not data_only", b.Ref)
			}
			if slices.Contains(superseded, b.Ref) || rejected[b.Ref] != nil {
				t.Errorf("block %s should not be in the payload", b.Ref)
			}
		}
	}
}

func firstDiff(want, got []byte) string {
	wl, gl := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
	for i := 0; i < len(wl) || i < len(gl); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return "line " + itoa(i+1) + ":\n want: " + w + "\n  got: " + g
		}
	}
	return "(no line differs)"
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// TestContextSeedConflictBothWays pins the article's ord_881 / ord_992 case:
// unresolved, the refund gate is insufficient with order_lookup unresolved;
// resolved by accountable review selecting ord_881's snapshot, it is
// sufficient and the CRM snapshot is superseded_by_resolution.
func TestContextSeedConflictBothWays(t *testing.T) {
	in := loadContextInputs(t, filepath.Join(contextVectors, "conflict_unresolved"))
	got, err := compileInputs(in)
	if err != nil {
		t.Fatal(err)
	}
	g := got.Gate
	if g.DecisionKey != "support.refund.execute" || g.CommitAllowed || g.Sufficiency != Insufficient ||
		!slices.Equal(g.Unresolved, []string{"order_lookup"}) ||
		!slices.Equal(g.Satisfied, []string{"identity_verified", "policy.eval"}) ||
		len(g.Conflicts) != 1 || g.Conflicts[0].ConflictID != seedID || g.Conflicts[0].Status != ConflictUnresolved {
		t.Fatalf("unresolved gate = %+v", g)
	}
	if r := GateRefusal(g); r == nil || r.Code != wire.CodeEvidenceInsufficient {
		t.Fatalf("refusal = %v", r)
	}

	in.markers[0].Status = ConflictResolved
	in.markers[0].Resolution = &ConflictResolution{
		ResolutionRef: "review:order-resolution:441", SelectedEvidenceRefs: []string{refKG},
		Kind: ResolutionAccountableReview, ResolvedBy: "ops:maria",
	}
	got, err = compileInputs(in)
	if err != nil {
		t.Fatal(err)
	}
	g = got.Gate
	if !g.CommitAllowed || g.Sufficiency != Sufficient || len(g.Unresolved) != 0 || !slices.Equal(g.Satisfied, allThree) {
		t.Fatalf("resolved gate = %+v", g)
	}
	if len(got.Negative.Superseded) != 1 || got.Negative.Superseded[0].Ref != refCRM ||
		got.Negative.Superseded[0].Status != "superseded_by_resolution" ||
		got.Negative.Superseded[0].ResolutionRef != "review:order-resolution:441" {
		t.Fatalf("superseded = %+v", got.Negative.Superseded)
	}
	for _, pb := range got.Payload {
		for _, b := range pb.Blocks {
			if b.Ref == refCRM {
				t.Fatalf("superseded CRM snapshot is in the payload")
			}
		}
	}
	i := slices.IndexFunc(got.Requirements, func(r RequirementStatus) bool { return r.Requirement == "order_lookup" })
	if !slices.Equal(got.Requirements[i].SatisfiedBy, []string{refKG}) {
		t.Fatalf("order_lookup satisfied by %v", got.Requirements[i].SatisfiedBy)
	}

	// Selecting the CRM snapshot instead supersedes the KG one: the gate is
	// still sufficient, now on the CRM branch.
	in.markers[0].Resolution.SelectedEvidenceRefs = []string{refCRM}
	got, err = compileInputs(in)
	if err != nil {
		t.Fatal(err)
	}
	i = slices.IndexFunc(got.Requirements, func(r RequirementStatus) bool { return r.Requirement == "order_lookup" })
	if !got.Gate.CommitAllowed || !slices.Equal(got.Requirements[i].SatisfiedBy, []string{refCRM}) ||
		got.Negative.Superseded[0].Ref != refKG {
		t.Fatalf("CRM-selected: gate %+v, requirement %+v", got.Gate, got.Requirements[i])
	}
}

// TestContextWireShapes pins the JSON field names of DESIGN section 6: the
// gate has exactly its seven fields, a marker exactly its seven plus
// resolution when resolved.
func TestContextWireShapes(t *testing.T) {
	in := loadContextInputs(t, filepath.Join(contextVectors, "conflict_resolved_review"))
	got, err := compileInputs(in)
	if err != nil {
		t.Fatal(err)
	}
	keys := func(v any) []string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		var ks []string
		for k := range m {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		return ks
	}
	wantGate := []string{"commit_allowed", "conflicts", "decision_key", "required", "satisfied", "sufficiency", "unresolved"}
	if k := keys(got.Gate); !slices.Equal(k, wantGate) {
		t.Errorf("gate keys %v, want %v", k, wantGate)
	}
	marker := []string{"conflict_id", "evidence_refs", "predicate", "requirements", "status", "subject", "values"}
	resolved := append(slices.Clone(marker), "resolution")
	slices.Sort(resolved)
	if k := keys(got.Gate.Conflicts[0]); !slices.Equal(k, resolved) {
		t.Errorf("resolved marker keys %v, want %v", k, resolved)
	}
	if k := keys(got.Gate.Conflicts[0].Resolution); !slices.Contains(k, "resolution_ref") || !slices.Contains(k, "selected_evidence_refs") {
		t.Errorf("resolution keys %v", k)
	}
	in = loadContextInputs(t, filepath.Join(contextVectors, "conflict_unresolved"))
	if k := keys(in.markers[0]); !slices.Equal(k, marker) {
		t.Errorf("unresolved marker keys %v, want %v", k, marker)
	}
	// Empty lists are [] on the wire, never null.
	got, err = compileInputs(loadContextInputs(t, filepath.Join(contextVectors, "sufficient")))
	if err != nil {
		t.Fatal(err)
	}
	if cb := mustCanonical(t, got); bytes.Contains(cb, []byte("null")) {
		t.Errorf("canonical output contains null: %s", cb)
	}
}

// shuffleInputs permutes every list of the inputs whose order must not
// matter (a source_priority rule's source_order is a ranking and stays).
func shuffleInputs(rng *rand.Rand, in contextInputs) contextInputs {
	shuf := func(n int, swap func(i, j int)) { rng.Shuffle(n, swap) }
	strs := func(xs []string) []string {
		xs = slices.Clone(xs)
		shuf(len(xs), func(i, j int) { xs[i], xs[j] = xs[j], xs[i] })
		return xs
	}
	out := in
	p := in.pack
	p.Buckets = slices.Clone(p.Buckets)
	shuf(len(p.Buckets), func(i, j int) { p.Buckets[i], p.Buckets[j] = p.Buckets[j], p.Buckets[i] })
	p.Decisions = slices.Clone(p.Decisions)
	for i := range p.Decisions {
		p.Decisions[i].RequiredEvidence = strs(p.Decisions[i].RequiredEvidence)
	}
	shuf(len(p.Decisions), func(i, j int) { p.Decisions[i], p.Decisions[j] = p.Decisions[j], p.Decisions[i] })
	p.Tools = slices.Clone(p.Tools)
	shuf(len(p.Tools), func(i, j int) { p.Tools[i], p.Tools[j] = p.Tools[j], p.Tools[i] })
	p.Trust = slices.Clone(p.Trust)
	for i := range p.Trust {
		p.Trust[i].Requirements = strs(p.Trust[i].Requirements)
	}
	shuf(len(p.Trust), func(i, j int) { p.Trust[i], p.Trust[j] = p.Trust[j], p.Trust[i] })
	p.ResolutionRules = slices.Clone(p.ResolutionRules)
	for i := range p.ResolutionRules {
		p.ResolutionRules[i].Requirements = strs(p.ResolutionRules[i].Requirements)
	}
	shuf(len(p.ResolutionRules), func(i, j int) {
		p.ResolutionRules[i], p.ResolutionRules[j] = p.ResolutionRules[j], p.ResolutionRules[i]
	})
	out.pack = p
	out.run.AllowedSources = strs(in.run.AllowedSources)
	out.run.Capabilities = strs(in.run.Capabilities)
	out.evidence = slices.Clone(in.evidence)
	for i := range out.evidence {
		out.evidence[i].Requirements = strs(out.evidence[i].Requirements)
	}
	shuf(len(out.evidence), func(i, j int) { out.evidence[i], out.evidence[j] = out.evidence[j], out.evidence[i] })
	out.markers = slices.Clone(in.markers)
	for i, m := range out.markers {
		m.EvidenceRefs, m.Requirements, m.Values = strs(m.EvidenceRefs), strs(m.Requirements), strs(m.Values)
		if m.Resolution != nil {
			r := *m.Resolution
			r.SelectedEvidenceRefs = strs(r.SelectedEvidenceRefs)
			m.Resolution = &r
		}
		out.markers[i] = m
	}
	shuf(len(out.markers), func(i, j int) { out.markers[i], out.markers[j] = out.markers[j], out.markers[i] })
	return out
}

// TestContextPermutationInvariance: the canonical bytes and digest are
// byte-identical for every permutation of every input list.
func TestContextPermutationInvariance(t *testing.T) {
	rng := rand.New(rand.NewSource(881992))
	for _, dir := range contextCaseDirs(t) {
		name := filepath.Base(dir)
		if strings.HasPrefix(name, "error_") {
			continue
		}
		t.Run(name, func(t *testing.T) {
			in := loadContextInputs(t, dir)
			base, err := compileInputs(in)
			if err != nil {
				t.Fatal(err)
			}
			want := mustCanonical(t, base)
			for i := 0; i < 40; i++ {
				got, err := compileInputs(shuffleInputs(rng, in))
				if err != nil {
					t.Fatal(err)
				}
				if got.Digest != base.Digest {
					t.Fatalf("permutation %d: digest %s, want %s", i, got.Digest, base.Digest)
				}
				if b := mustCanonical(t, got); !bytes.Equal(b, want) {
					t.Fatalf("permutation %d: bytes differ:\n%s", i, firstDiff(want, b))
				}
			}
		})
	}
}

// TestContextDoesNotMutateInputs: compiling leaves the caller's values as
// they were.
func TestContextDoesNotMutateInputs(t *testing.T) {
	for _, name := range []string{"conflict_unresolved", "conflict_resolved_review", "conflict_resolved_source_priority"} {
		in := loadContextInputs(t, filepath.Join(contextVectors, name))
		before, _ := json.Marshal([]any{in.pack, in.run, in.evidence, in.markers})
		if _, err := compileInputs(in); err != nil {
			t.Fatal(err)
		}
		after, _ := json.Marshal([]any{in.pack, in.run, in.evidence, in.markers})
		if !bytes.Equal(before, after) {
			t.Errorf("%s: inputs changed", name)
		}
	}
}

// TestContextStageDrift: a change to one input moves the inputs hash, and
// FirstDriftedStage names stages in pipeline order.
func TestContextStageDrift(t *testing.T) {
	in := loadContextInputs(t, filepath.Join(contextVectors, "sufficient"))
	a, err := compileInputs(in)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := compileInputs(in)
	if FirstDriftedStage(a.StageHashes, b.StageHashes) != "" || a.Digest != b.Digest {
		t.Fatal("same inputs drifted")
	}
	in.evidence = slices.Clone(in.evidence)
	in.evidence[0].Verified = !in.evidence[0].Verified
	c, _ := compileInputs(in)
	if got := FirstDriftedStage(a.StageHashes, c.StageHashes); got != "inputs" {
		t.Errorf("flipping verified drifted %q first, want inputs", got)
	}
	if a.StageHashes.Eligibility == c.StageHashes.Eligibility {
		t.Errorf("flipping verified did not change the eligibility stage")
	}
	h := a.StageHashes
	for _, tc := range []struct {
		mut  func(*StageHashes)
		want string
	}{
		{func(s *StageHashes) { s.Gate = "x" }, "gate"},
		{func(s *StageHashes) { s.Budgeting = "x"; s.Gate = "x" }, "budgeting"},
		{func(s *StageHashes) { s.Conflicts = "x"; s.Gate = "x" }, "conflicts"},
		{func(s *StageHashes) { s.Eligibility = "x"; s.Conflicts = "x" }, "eligibility"},
		{func(s *StageHashes) { s.Inputs = "x" }, "inputs"},
	} {
		g := h
		tc.mut(&g)
		if got := FirstDriftedStage(h, g); got != tc.want {
			t.Errorf("FirstDriftedStage = %q, want %q", got, tc.want)
		}
	}
	// Each stage hash is the digest of exactly that stage's sections: a
	// replay recomputing it from the output agrees.
	if d, _ := Digest(struct {
		Requirements []RequirementStatus `json:"requirements"`
		Tools        []ToolExposure      `json:"tools"`
		Gate         EvidenceGate        `json:"gate"`
	}{a.Requirements, a.Tools, a.Gate}); d != a.StageHashes.Gate {
		t.Errorf("gate stage hash %s, recomputed %s", a.StageHashes.Gate, d)
	}
}

// TestContextCurrencyBoundaries: current means observed_at <= t < valid_until.
func TestContextCurrencyBoundaries(t *testing.T) {
	in := loadContextInputs(t, filepath.Join(contextVectors, "sufficient"))
	idx := slices.IndexFunc(in.evidence, func(c EvidenceCandidate) bool { return c.Ref == refIDP })
	idp := in.evidence[idx]
	for _, tc := range []struct {
		name   string
		at     func() RunContext
		reason string
	}{
		{"at observed_at", func() RunContext { r := in.run; r.DecisionTime = idp.ObservedAt; return r }, ""},
		{"just before valid_until", func() RunContext { r := in.run; r.DecisionTime = idp.ValidUntil.Add(-1); return r }, ""},
		{"at valid_until", func() RunContext { r := in.run; r.DecisionTime = idp.ValidUntil; return r }, ReasonStale},
		{"before observed_at", func() RunContext { r := in.run; r.DecisionTime = idp.ObservedAt.Add(-1); return r }, ReasonNotYetValid},
	} {
		got, err := CompileContext(in.pack, tc.at(), in.evidence, in.markers)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(got.Eligibility, func(e EligibilityDecision) bool { return e.Ref == refIDP })
		e := got.Eligibility[i]
		if tc.reason == "" && !e.Eligible || tc.reason != "" && !slices.Contains(e.Reasons, tc.reason) {
			t.Errorf("%s: %+v", tc.name, e)
		}
	}
}

// TestContextConjunctive: a requirement with one candidate is satisfied
// exactly when no axis fails, for every combination of failing axes; and
// many candidates each failing a different axis never add up to one.
func TestContextConjunctive(t *testing.T) {
	in := loadContextInputs(t, filepath.Join(contextVectors, "sufficient"))
	idx := slices.IndexFunc(in.evidence, func(c EvidenceCandidate) bool { return c.Ref == refIDP })
	axes := []struct {
		name   string
		break_ func(c *EvidenceCandidate, r *RunContext, p *ContextPack)
	}{
		{"tenant", func(c *EvidenceCandidate, _ *RunContext, _ *ContextPack) { c.Tenant = "globex" }},
		{"admitted", func(c *EvidenceCandidate, _ *RunContext, _ *ContextPack) { c.Admitted = false }},
		{"verified", func(c *EvidenceCandidate, _ *RunContext, _ *ContextPack) { c.Verified = false }},
		{"current", func(c *EvidenceCandidate, r *RunContext, _ *ContextPack) { c.ValidUntil = r.DecisionTime }},
		{"authority", func(c *EvidenceCandidate, r *RunContext, _ *ContextPack) {
			r.AllowedSources = slices.DeleteFunc(slices.Clone(r.AllowedSources), func(s string) bool { return s == c.Source })
		}},
		{"trust", func(c *EvidenceCandidate, _ *RunContext, p *ContextPack) {
			p.Trust = slices.Clone(p.Trust)
			for i := range p.Trust {
				if p.Trust[i].Source == c.Source {
					p.Trust[i].Requirements = nil
				}
			}
		}},
		{"treatment", func(c *EvidenceCandidate, _ *RunContext, _ *ContextPack) {
			c.InstructionTreatment = TreatmentInstruction
		}},
		{"integrity", func(c *EvidenceCandidate, _ *RunContext, _ *ContextPack) { c.Content += "!" }},
		{"budget", func(c *EvidenceCandidate, _ *RunContext, _ *ContextPack) { c.Tokens = 100000 }},
	}
	satisfied := func(p ContextPack, r RunContext, ev []EvidenceCandidate) bool {
		got, err := CompileContext(p, r, ev, nil)
		if err != nil {
			t.Fatal(err)
		}
		return slices.Contains(got.Gate.Satisfied, "identity_verified")
	}
	for mask := 0; mask < 1<<len(axes); mask++ {
		p, r := in.pack, in.run
		ev := slices.Clone(in.evidence)
		c := ev[idx]
		for i, ax := range axes {
			if mask&(1<<i) != 0 {
				ax.break_(&c, &r, &p)
			}
		}
		ev[idx] = c
		if got := satisfied(p, r, ev); got != (mask == 0) {
			t.Fatalf("mask %b: satisfied=%v", mask, got)
		}
	}
	// One candidate per axis, each failing only that axis: still unsatisfied.
	p, r := in.pack, in.run
	ev := slices.DeleteFunc(slices.Clone(in.evidence), func(c EvidenceCandidate) bool { return c.Ref == refIDP })
	for _, ax := range axes {
		if ax.name == "authority" || ax.name == "trust" {
			continue // these break the source for every candidate alike
		}
		c := in.evidence[idx]
		c.Ref = c.Ref + "/" + ax.name
		ax.break_(&c, &r, &p)
		ev = append(ev, c)
	}
	if satisfied(p, r, ev) {
		t.Fatal("candidates each failing one axis satisfied the requirement together")
	}
}

// TestContextToolExposure derives tool exposure from the principal's
// capabilities and the gate.
func TestContextToolExposure(t *testing.T) {
	for _, tc := range []struct {
		vector string
		want   map[string]ToolExposure
	}{
		{"sufficient", map[string]ToolExposure{
			"adp_payments.issue_refund": {Exposed: true, GatedBy: "support.refund.execute", DispatchAllowed: true},
			"crm.lookup_order":          {Exposed: true, DispatchAllowed: true},
			"email.send_reply":          {Exposed: true, GatedBy: "support.reply.tone", Reason: ToolReasonGateNotCompiled},
			"payments.void":             {Reason: ToolReasonCapabilityNotHeld},
		}},
		{"conflict_unresolved", map[string]ToolExposure{
			"adp_payments.issue_refund": {Exposed: true, GatedBy: "support.refund.execute", Reason: ToolReasonGateInsufficient},
			"crm.lookup_order":          {Exposed: true, DispatchAllowed: true},
		}},
	} {
		got, err := compileInputs(loadContextInputs(t, filepath.Join(contextVectors, tc.vector)))
		if err != nil {
			t.Fatal(err)
		}
		for id, want := range tc.want {
			want.CapabilityID = id
			i := slices.IndexFunc(got.Tools, func(x ToolExposure) bool { return x.CapabilityID == id })
			if i < 0 || got.Tools[i] != want {
				t.Errorf("%s: tool %s = %+v, want %+v", tc.vector, id, got.Tools, want)
			}
		}
	}
}

// TestContextBudgetFirstFit: required-covering evidence is budgeted first,
// a block that does not fit is dropped whole and later smaller ones still
// fit.
func TestContextBudgetFirstFit(t *testing.T) {
	in := loadContextInputs(t, filepath.Join(contextVectors, "omitted"))
	got, err := compileInputs(in)
	if err != nil {
		t.Fatal(err)
	}
	pb := got.Payload[slices.IndexFunc(got.Payload, func(b PayloadBucket) bool { return b.Bucket == "evidence" })]
	var refs []string
	for _, b := range pb.Blocks {
		refs = append(refs, b.Ref)
	}
	if !slices.Equal(refs, []string{refKG, refIDP}) || !pb.Truncated || pb.UsedTokens != 60 ||
		!slices.Equal(pb.DroppedRefs, []string{refPolicy}) {
		t.Fatalf("evidence bucket = %+v", pb)
	}
	// A non-required block never displaces a required one, whatever its rank.
	in.pack.Buckets = []ContextBucket{{Name: "evidence", MaxTokens: 65}, {Name: "memory", MaxBytes: 1000}}
	extra := in.evidence[0]
	extra.Ref, extra.Requirements, extra.Rank, extra.Tokens = "kg:order:ord_881#aside", nil, 0, 5
	in.evidence = append(slices.Clone(in.evidence), extra)
	got, err = compileInputs(in)
	if err != nil {
		t.Fatal(err)
	}
	pb = got.Payload[slices.IndexFunc(got.Payload, func(b PayloadBucket) bool { return b.Bucket == "evidence" })]
	if pb.Blocks[0].Ref != refKG || pb.Blocks[len(pb.Blocks)-1].Ref != "kg:order:ord_881#aside" {
		t.Fatalf("ordering = %+v", pb.Blocks)
	}
}

// TestContextIndependence: a requirement demanding N source families is
// satisfied only by usable evidence from N distinct families; refs of one
// family count once, a source without a family is its own, unusable or
// superseded evidence counts for nothing, and a pack without the demand
// keeps the one-candidate rule.
func TestContextIndependence(t *testing.T) {
	in := loadContextInputs(t, filepath.Join(contextVectors, "independence_two_families"))
	const refCRM20 = "crm:order:ord_881#snapshot_20"
	for _, tc := range []struct {
		name     string
		mut      func(p *ContextPack, ev []EvidenceCandidate, ms *[]EvidenceConflictMarker)
		drop     []string // refs removed from the evidence
		want     bool
		families []string
		reasons  []string
	}{
		{name: "two families", want: true, families: []string{"ledger", "order_db"}, reasons: []string{}},
		{name: "one family, two refs", drop: []string{refLedger}, families: []string{"order_db"},
			reasons: []string{ReasonInsufficientIndependence}},
		{name: "family-less sources are their own", drop: []string{refLedger},
			mut: func(p *ContextPack, _ []EvidenceCandidate, _ *[]EvidenceConflictMarker) {
				for i := range p.Trust {
					p.Trust[i].Family = ""
				}
			}, want: true, families: []string{"crm", "kg"}, reasons: []string{}},
		{name: "a stale ledger is no witness",
			mut: func(_ *ContextPack, ev []EvidenceCandidate, _ *[]EvidenceConflictMarker) {
				for i := range ev {
					if ev[i].Ref == refLedger {
						ev[i].ValidUntil = in.run.DecisionTime
					}
				}
			}, families: []string{"order_db"}, reasons: []string{ReasonInsufficientIndependence}},
		{name: "a superseded ledger is no witness",
			mut: func(_ *ContextPack, _ []EvidenceCandidate, ms *[]EvidenceConflictMarker) {
				*ms = append(*ms, EvidenceConflictMarker{ConflictID: "c", EvidenceRefs: []string{refLedger, refKG},
					Requirements: []string{"order_lookup"}, Status: ConflictResolved, Subject: "order:ord_881", Predicate: "amount",
					Values: []string{"800", "900"}, Resolution: &ConflictResolution{ResolutionRef: "review:1",
						SelectedEvidenceRefs: []string{refKG}, Kind: ResolutionAccountableReview, ResolvedBy: "ops_lead"}})
			}, families: []string{"order_db"}, reasons: []string{ReasonInsufficientIndependence}},
		{name: "three families demanded",
			mut: func(p *ContextPack, _ []EvidenceCandidate, _ *[]EvidenceConflictMarker) {
				p.Decisions[0].Independence = []IndependenceDemand{{Requirement: "order_lookup", MinFamilies: 3}}
			}, families: []string{"ledger", "order_db"}, reasons: []string{ReasonInsufficientIndependence}},
		{name: "no demand: one ref suffices", drop: []string{refLedger, refCRM20},
			mut: func(p *ContextPack, _ []EvidenceCandidate, _ *[]EvidenceConflictMarker) {
				p.Decisions[0].Independence = nil
			}, want: true, reasons: []string{}},
		{name: "unresolved conflict still blocks",
			mut: func(_ *ContextPack, _ []EvidenceCandidate, ms *[]EvidenceConflictMarker) {
				*ms = append(*ms, EvidenceConflictMarker{ConflictID: "c", EvidenceRefs: []string{refLedger, refCRM20},
					Requirements: []string{"order_lookup"}, Status: ConflictUnresolved, Subject: "order:ord_881", Predicate: "amount",
					Values: []string{"800", "900"}})
			}, families: []string{"order_db"},
			reasons: []string{ReasonInsufficientIndependence, ReasonUnresolvedConflict}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := in.pack
			p.Decisions = slices.Clone(p.Decisions)
			p.Trust = slices.Clone(p.Trust)
			i := slices.IndexFunc(p.Decisions, func(d DecisionSpec) bool { return d.DecisionKey == in.run.DecisionKey })
			p.Decisions[0], p.Decisions[i] = p.Decisions[i], p.Decisions[0]
			ev := slices.DeleteFunc(slices.Clone(in.evidence), func(c EvidenceCandidate) bool { return slices.Contains(tc.drop, c.Ref) })
			var ms []EvidenceConflictMarker
			if tc.mut != nil {
				tc.mut(&p, ev, &ms)
			}
			got, err := CompileContext(p, in.run, ev, ms)
			if err != nil {
				t.Fatal(err)
			}
			j := slices.IndexFunc(got.Requirements, func(r RequirementStatus) bool { return r.Requirement == "order_lookup" })
			rs := got.Requirements[j]
			if rs.Satisfied != tc.want || got.Gate.CommitAllowed != tc.want {
				t.Errorf("satisfied=%v commit=%v, want %v", rs.Satisfied, got.Gate.CommitAllowed, tc.want)
			}
			if !slices.Equal(rs.Families, tc.families) {
				t.Errorf("families %v, want %v", rs.Families, tc.families)
			}
			if !slices.Equal(rs.Reasons, tc.reasons) {
				t.Errorf("reasons %v, want %v", rs.Reasons, tc.reasons)
			}
		})
	}
}

// TestContextIndependenceRefusals: a demand must name a requirement of its
// decision, once, with 1 to 64 families.
func TestContextIndependenceRefusals(t *testing.T) {
	base := `{"schema":"context_pack.v1","pack_id":"p","version":"1","buckets":[{"name":"b","max_bytes":1}],"decisions":[{"decision_key":"d","required_evidence":["a","b"],"independence":%s}]}`
	for _, tc := range []struct{ ind, want string }{
		{`[{"requirement":"c","min_families":2}]`, `independence names "c", which the decision does not require`},
		{`[{"requirement":"a","min_families":2},{"requirement":"a","min_families":3}]`, `independence names "a" twice`},
		{`[{"requirement":"a","min_families":0}]`, "min_families must be in [1, 64]"},
		{`[{"requirement":"a","min_families":65}]`, "min_families must be in [1, 64]"},
		{`[{"requirement":"a"}]`, "min_families must be in [1, 64]"},
	} {
		_, err := ParseContextPack([]byte(fmt.Sprintf(base, tc.ind)))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.ind, err, tc.want)
		}
	}
	if _, err := ParseContextPack([]byte(fmt.Sprintf(base, `[{"requirement":"b","min_families":64}]`))); err != nil {
		t.Fatal(err)
	}
}

// TestContextInputsPinned: the digest covers every typed input, a change to
// one drifts the inputs stage first, and the inputs are sets.
func TestContextInputsPinned(t *testing.T) {
	in := loadContextInputs(t, filepath.Join(contextVectors, "inputs_memory_data_only"))
	base, err := compileInputs(in)
	if err != nil {
		t.Fatal(err)
	}
	mutations := map[string]func(*ContextInputs){
		"policy version": func(x *ContextInputs) { p := *x.Policy; p.Version = "rev_13"; x.Policy = &p },
		"registry tool":  func(x *ContextInputs) { r := *x.ToolRegistry; r.Tools = r.Tools[1:]; x.ToolRegistry = &r },
		"memory freshness": func(x *ContextInputs) {
			x.Memory = slices.Clone(x.Memory)
			x.Memory[0].ValidUntil = x.Memory[0].ValidUntil.Add(time.Hour)
		},
		"session dropped": func(x *ContextInputs) { x.Session = nil },
	}
	for name, mutate := range mutations {
		m := in
		mutate(&m.inputs)
		got, err := compileInputs(m)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got.Digest == base.Digest {
			t.Errorf("%s: digest unchanged", name)
		}
		if s := FirstDriftedStage(base.StageHashes, got.StageHashes); s != "inputs" {
			t.Errorf("%s: first drifted stage %q, want inputs", name, s)
		}
	}
	rev := in
	rev.inputs.Policy = &PolicySnapshot{Provenance: in.inputs.Policy.Provenance, Capabilities: slices.Clone(in.inputs.Policy.Capabilities)}
	slices.Reverse(rev.inputs.Policy.Capabilities)
	rev.inputs.ToolRegistry = &ToolRegistrySnapshot{Provenance: in.inputs.ToolRegistry.Provenance, Tools: slices.Clone(in.inputs.ToolRegistry.Tools)}
	slices.Reverse(rev.inputs.ToolRegistry.Tools)
	got, err := compileInputs(rev)
	if err != nil {
		t.Fatal(err)
	}
	if got.Digest != base.Digest {
		t.Errorf("reordering snapshot lists changed the digest")
	}
	// A memory item whose bytes do not match its hash is rejected, and a
	// memory ref that repeats an evidence ref is refused.
	bad := in
	bad.inputs.Memory = slices.Clone(in.inputs.Memory)
	bad.inputs.Memory[0].Content += "!"
	got, err = compileInputs(bad)
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(got.Negative.Rejected, func(r RejectedCandidate) bool { return r.Ref == bad.inputs.Memory[0].Ref }); i < 0 ||
		!slices.Equal(got.Negative.Rejected[i].Reasons, []string{ReasonContentHashMismatch}) {
		t.Errorf("tampered memory not rejected: %+v", got.Negative.Rejected)
	}
	dup := in
	dup.inputs.Memory = slices.Clone(in.inputs.Memory)
	dup.inputs.Memory[0].Ref = in.evidence[0].Ref
	var ie *ContextInputError
	if _, err := compileInputs(dup); !errors.As(err, &ie) {
		t.Errorf("memory ref repeating an evidence ref: %v, want a *ContextInputError", err)
	}
}
