package daemon_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/contextos/ledger/wire"
)

// TestDecisionRecordsAndLookup: the signed records of an evidence-gated
// refund name the compiled context, the refs cited and those that
// satisfied each obligation, the resolution read, the arguments and the
// configuration; the decisions verb finds them by run, operation,
// principal, evidence ref, resolution ref and time, a page at a time.
func TestDecisionRecordsAndLookup(t *testing.T) {
	e, clock := authzEnv(t, evidenceEdit)
	nc := e.client("acme", "agent_email")
	read := func(dir, name string, v any) {
		b, err := os.ReadFile(filepath.Join("../testdata/context", dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatal(err)
		}
	}
	var cands, markers []json.RawMessage
	read("conflict_unresolved", "evidence.json", &cands)
	read("conflict_unresolved", "markers.json", &markers)
	var refs []string
	for _, c := range cands {
		refs = append(refs, e.mustOp("evidence", wire.EvidenceRequest{Candidate: c}).Data["ref"].(string))
	}
	e.mustOp("evidence", wire.EvidenceRequest{Marker: markers[0]})
	start := clock.Now()

	p := refund("run_01", "r1", "ord_881", 800)
	p["evidence_refs"] = refs
	refused := e.propose(nc, "acme", "agent_email", p)
	wantRefused(t, "unresolved conflict", refused, wire.CodeEvidenceInsufficient)
	rec := e.decision("acme", "run_01", "r1")
	if !slices.Equal(rec.EvidenceRefs, refs) || len(rec.ContextDigest) != 64 || len(rec.ArgumentsDigest) != 64 || rec.ArgumentsOmitted ||
		rec.ManifestDigest != e.rt.Config.Digest || len(rec.ManifestDigest) != 64 || len(rec.ResolutionRefs) != 0 {
		t.Fatalf("refused record's trace %+v", rec.DecisionTrace)
	}
	var args map[string]any
	if err := json.Unmarshal(rec.Arguments, &args); err != nil || args["order_id"] != "ord_881" {
		t.Fatalf("recorded arguments %s", rec.Arguments)
	}
	unsatisfied := 0
	for _, o := range rec.Obligations {
		if len(o.SatisfiedBy) == 0 {
			unsatisfied++
			if o.Requirement != "order_lookup" {
				t.Fatalf("obligation %s unsatisfied, want only order_lookup: %+v", o.Requirement, rec.Obligations)
			}
		}
	}
	if unsatisfied != 1 || len(rec.Obligations) < 2 {
		t.Fatalf("obligations %+v", rec.Obligations)
	}

	var resolved []map[string]any
	read("conflict_resolved_review", "markers.json", &resolved)
	res := resolved[0]["resolution"].(map[string]any)
	res["resolved_by"] = "ops_alice"
	resolution := res["resolution_ref"].(string)
	e.mustOp("evidence", wire.EvidenceRequest{Marker: mustJSON(resolved[0])})
	clock.Advance(time.Minute)
	mid := clock.Now()
	p["operation_key"] = "r3"
	applied := e.propose(nc, "acme", "agent_email", p)
	wantApplied(t, "after review", applied)
	rec = e.decision("acme", "run_01", "r3")
	if rec.Status != wire.StatusApplied || !slices.Equal(rec.ResolutionRefs, []string{resolution}) || !slices.Equal(rec.EvidenceRefs, refs) ||
		len(rec.ContextDigest) != 64 {
		t.Fatalf("applied record %+v", rec)
	}
	for _, o := range rec.Obligations {
		if len(o.SatisfiedBy) == 0 {
			t.Fatalf("applied with obligation %s unsatisfied: %+v", o.Requirement, rec.Obligations)
		}
	}

	ids := func(rows []map[string]any) []string {
		var out []string
		for _, r := range rows {
			out = append(out, r["operation_id"].(string)+"/"+r["status"].(string))
		}
		return out
	}
	lookup := func(req map[string]any) []string {
		req["limit"] = 1 // a page per row: the cursor carries every filter's walk
		return ids(walk(t, e.client("acme", "ops_alice"), wire.VerbDecisions, req, "decisions"))
	}
	r1, r3 := refused.OperationID+"/refused", applied.OperationID+"/applied"
	for _, c := range []struct {
		name string
		req  map[string]any
		want int
		has  []string
	}{
		{"by run", map[string]any{"run_id": "run_01"}, 2, []string{r1, r3}},
		{"by operation", map[string]any{"operation_id": applied.OperationID}, 1, []string{r3}},
		{"by principal", map[string]any{"principal": "agent_email"}, 2, []string{r1, r3}},
		{"by another principal", map[string]any{"principal": "agent_other"}, 0, nil},
		{"by evidence ref", map[string]any{"evidence_ref": refs[0]}, 2, []string{r1, r3}},
		{"by resolution", map[string]any{"resolution_ref": resolution}, 1, []string{r3}},
		{"since the review", map[string]any{"since": mid.Format(time.RFC3339Nano)}, 1, []string{r3}},
		{"until the review", map[string]any{"until": mid.Format(time.RFC3339Nano), "since": start.Format(time.RFC3339Nano)}, 1, []string{r1}},
		{"all", map[string]any{}, 2, []string{r1, r3}},
	} {
		got := lookup(c.req)
		if len(got) != c.want {
			t.Fatalf("%s: %v, want %d rows", c.name, got, c.want)
		}
		for _, h := range c.has {
			if !slices.Contains(got, h) {
				t.Fatalf("%s: %v lacks %s", c.name, got, h)
			}
		}
	}
	for _, bad := range []map[string]any{{"since": "yesterday"}, {"cursor": "i.MDAwMDAwMDAwMDAwMDAwMDAwMDE.MDAwMDAwMDAwMDAwMDAwMDAwMDA"}, {"limit": -1}, {"run": "x"}} {
		if r := e.opAny(wire.VerbDecisions, bad); r.OK || r.Code != wire.CodeRequestMalformed {
			t.Fatalf("decisions %v: %+v", bad, r)
		}
	}
}
