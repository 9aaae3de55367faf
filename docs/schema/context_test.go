package schema

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextos/ledger/internal/evalcase"
	"github.com/contextos/ledger/kernel"
)

// TestContextSchemasHoldTheVectors: every input and output of the context
// conformance vectors fits its schema, and so does each gate on its own.
func TestContextSchemasHoldTheVectors(t *testing.T) {
	s := schemas(t)
	dirs, _ := filepath.Glob("../../testdata/context/*")
	n := 0
	for _, dir := range dirs {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			continue
		}
		n++
		name := filepath.Base(dir)
		read := func(f string) []byte {
			b, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		fits := func(what, schema string, b []byte) {
			t.Helper()
			if err := validate(s[schema], b); err != nil {
				t.Errorf("%s %s does not fit %s: %v", name, what, schema, err)
			}
		}
		fits("pack", "context-pack", read("pack.json"))
		fits("run", "context-run", read("run.json"))
		for i, c := range items(t, read("evidence.json")) {
			fits("evidence["+itoa(i)+"]", "evidence-candidate", c)
		}
		for i, m := range items(t, read("markers.json")) {
			err := validate(s["conflict-marker"], m)
			if name == "error_model_resolution" {
				if err == nil {
					t.Errorf("%s: a model resolution fits the marker schema", name)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s markers[%d] does not fit: %v", name, i, err)
			}
		}
		if b, err := os.ReadFile(filepath.Join(dir, "inputs.json")); err == nil {
			err := validate(s["context-inputs"], b)
			if name == "error_memory_authority" {
				if err == nil {
					t.Errorf("%s: memory with authority fits the inputs schema", name)
				}
			} else if err != nil {
				t.Errorf("%s inputs.json does not fit: %v", name, err)
			}
		}
		if strings.HasPrefix(name, "error_") {
			continue
		}
		want := read("want.json")
		fits("want.json", "compiled-context", want)
		var cc struct {
			Gate json.RawMessage `json:"gate"`
		}
		if err := json.Unmarshal(want, &cc); err != nil {
			t.Fatal(err)
		}
		fits("gate", "evidence-gate", cc.Gate)
		// The decision reply carries the gate as is.
		fits("decision reply", "decision", []byte(`{"status":"refused","code":"evidence_insufficient","evidence_gate":`+string(cc.Gate)+`}`))
		if validate(s["decision"], []byte(`{"status":"refused","code":"evidence_insufficient","evidence_gate":{"commit_allowed":true}}`)) == nil {
			t.Fatal("a gate without its fields fits decision.json")
		}
	}
	if n < 20 {
		t.Fatalf("%d vectors", n)
	}
}

// TestContextSchemasHoldTheEvalCases: every shipped evaluation case fits
// the case schema, and the context the kernel compiles from it fits the
// compiled-context schema.
func TestContextSchemasHoldTheEvalCases(t *testing.T) {
	s := schemas(t)
	cases, err := evalcase.Load("../../testdata/context-eval")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		b, err := os.ReadFile(c.Path)
		if err != nil {
			t.Fatal(err)
		}
		if err := validate(s["context-eval-case"], b); err != nil {
			t.Errorf("%s does not fit: %v", c.CaseID, err)
		}
		pack, err1 := kernel.ParseContextPack(c.Inputs.Pack)
		run, err2 := kernel.ParseRunContext(c.Inputs.Run)
		ev, err3 := kernel.ParseEvidence(c.Inputs.Evidence)
		ms, err4 := kernel.ParseMarkers(c.Inputs.Markers)
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil {
			t.Fatalf("%s: %v %v %v %v", c.CaseID, err1, err2, err3, err4)
		}
		cc, err := kernel.CompileContext(pack, run, ev, ms)
		if err != nil {
			continue // a refused input (the self-review case) has no output
		}
		out, err := json.Marshal(cc)
		if err != nil {
			t.Fatal(err)
		}
		if err := validate(s["compiled-context"], out); err != nil {
			t.Errorf("%s: compiled context does not fit: %v", c.CaseID, err)
		}
	}
}

// TestContextSchemasAgreeWithTheParsers: the schemas accept what the
// kernel's strict parsers accept and refuse what they refuse, for each
// rule a schema can state.
func TestContextSchemasAgreeWithTheParsers(t *testing.T) {
	s := schemas(t)
	const marker = `{"conflict_id":"c","evidence_refs":["a","b"],"requirements":["r"],"status":"%s","subject":"s","predicate":"p","values":["1","2"]%s}`
	for _, tc := range []struct {
		name, status, tail string
		ok                 bool
	}{
		{"unresolved", "unresolved", ``, true},
		{"article resolution", "resolved", `,"resolution":{"resolution_ref":"t","selected_evidence_refs":["a"]}`, true},
		{"review", "resolved", `,"resolution":{"resolution_ref":"t","selected_evidence_refs":["a"],"kind":"accountable_review","resolved_by":"lead"}`, true},
		{"rule", "resolved", `,"resolution":{"resolution_ref":"t","selected_evidence_refs":["a"],"kind":"source_priority","rule_id":"r1"}`, true},
		{"resolved without resolution", "resolved", ``, false},
		{"unresolved with resolution", "unresolved", `,"resolution":{"resolution_ref":"t","selected_evidence_refs":["a"]}`, false},
		{"no resolution_ref", "resolved", `,"resolution":{"selected_evidence_refs":["a"]}`, false},
		{"empty selection", "resolved", `,"resolution":{"resolution_ref":"t","selected_evidence_refs":[]}`, false},
		{"model kind", "resolved", `,"resolution":{"resolution_ref":"t","selected_evidence_refs":["a"],"kind":"model_judgement"}`, false},
		{"review without reviewer", "resolved", `,"resolution":{"resolution_ref":"t","selected_evidence_refs":["a"],"kind":"accountable_review"}`, false},
		{"rule without rule id", "resolved", `,"resolution":{"resolution_ref":"t","selected_evidence_refs":["a"],"kind":"authoritative_refresh"}`, false},
		{"kindless with reviewer", "resolved", `,"resolution":{"resolution_ref":"t","selected_evidence_refs":["a"],"resolved_by":"lead"}`, false},
		{"unknown status", "disputed", ``, false},
		{"unknown field", "unresolved", `,"confidence":0.9`, false},
	} {
		b := []byte(strings.Replace(strings.Replace(marker, "%s", tc.status, 1), "%s", tc.tail, 1))
		schemaOK := validate(s["conflict-marker"], b) == nil
		_, perr := kernel.ParseMarkers([]byte("[" + string(b) + "]"))
		if schemaOK != tc.ok || (perr == nil) != tc.ok {
			t.Errorf("marker %s: schema ok=%v, parser err=%v, want ok=%v", tc.name, schemaOK, perr, tc.ok)
		}
	}
	const pack = `{"schema":"context_pack.v1","pack_id":"p","version":"1","buckets":[{"name":"b","max_tokens":10}],"decisions":[{"decision_key":"d","required_evidence":["r"]%s}],"trust":[{"source":"s"%s,"requirements":["r"]}]}`
	for _, tc := range []struct {
		name, ind, fam string
		ok             bool
	}{
		{"no independence", ``, ``, true},
		{"two families", `,"independence":[{"requirement":"r","min_families":2}]`, `,"family":"f"`, true},
		{"zero families", `,"independence":[{"requirement":"r","min_families":0}]`, ``, false},
		{"too many families", `,"independence":[{"requirement":"r","min_families":65}]`, ``, false},
		{"no min_families", `,"independence":[{"requirement":"r"}]`, ``, false},
		{"empty family: the source itself", ``, `,"family":""`, true},
	} {
		b := []byte(strings.Replace(strings.Replace(pack, "%s", tc.ind, 1), "%s", tc.fam, 1))
		schemaOK := validate(s["context-pack"], b) == nil
		_, perr := kernel.ParseContextPack(b)
		if schemaOK != tc.ok || (perr == nil) != tc.ok {
			t.Errorf("pack %s: schema ok=%v, parser err=%v, want ok=%v", tc.name, schemaOK, perr, tc.ok)
		}
	}
}

func items(t *testing.T, b []byte) [][]byte {
	t.Helper()
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	out := make([][]byte, len(raw))
	for i, r := range raw {
		out[i] = r
	}
	return out
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }
