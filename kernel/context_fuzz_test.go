package kernel

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/contextos/ledger/wire"
)

// addVectorSeeds adds the named file of every context vector to the corpus.
func addVectorSeeds(f *testing.F, file string) {
	f.Helper()
	paths, _ := filepath.Glob(filepath.Join(contextVectors, "*", file))
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
}

// fuzzRoundTrip is the shared property of every context parser: it never
// panics, every refusal is a *ContextInputError, and a parsed value
// re-encodes to bytes that parse back to the same value and the same bytes.
func fuzzRoundTrip[T any](t *testing.T, data []byte, parse func([]byte) (T, error)) {
	v, err := parse(data)
	if err != nil {
		var ie *ContextInputError
		if !errors.As(err, &ie) || ie.Code() != wire.CodeContextInvalid {
			t.Fatalf("refusal %v (%T) is not a *ContextInputError", err, err)
		}
		return
	}
	enc, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("re-encode: %v", err)
	}
	w, err := parse(enc)
	if err != nil {
		t.Fatalf("re-parse of %s: %v", enc, err)
	}
	if !reflect.DeepEqual(v, w) {
		t.Fatalf("round trip changed the value:\n%#v\n%#v", v, w)
	}
	enc2, _ := json.Marshal(w)
	if !bytes.Equal(enc, enc2) {
		t.Fatalf("re-encoding is not stable:\n%s\n%s", enc, enc2)
	}
}

func FuzzParseContextPack(f *testing.F) {
	addVectorSeeds(f, "pack.json")
	f.Add([]byte(goodPack))
	f.Add([]byte(`{"schema":"context_pack.v1","pack_id":"p","version":"1","buckets":[{"name":"b","max_bytes":1}],"decisions":[{"decision_key":"d"}],"resolution_rules":[{"rule_id":"r","kind":"authoritative_refresh","system_of_record":"s"}]}`))
	f.Add([]byte(`{"schema":"context_pack.v1","pack_id":"p","version":"1","buckets":[{"name":"b","max_bytes":1}],"decisions":[{"decision_key":"d","required_evidence":["a"],"independence":[{"requirement":"a","min_families":2}]}],"trust":[{"source":"s","family":"f","requirements":["a"]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRoundTrip(t, data, ParseContextPack) })
}

func FuzzParseEvidence(f *testing.F) {
	addVectorSeeds(f, "evidence.json")
	f.Add([]byte(`[` + goodCandidate + `]`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRoundTrip(t, data, ParseEvidence) })
}

func FuzzParseMarkers(f *testing.F) {
	addVectorSeeds(f, "markers.json")
	f.Add([]byte(`[{"conflict_id":"c","evidence_refs":["a","b"],"requirements":["r"],"status":"resolved","subject":"s","predicate":"p","values":["1","2"],"resolution":{"resolution_ref":"x","selected_evidence_refs":["a"],"kind":"source_priority","rule_id":"r"}}]`))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRoundTrip(t, data, ParseMarkers) })
}

func FuzzParseRunContext(f *testing.F) {
	addVectorSeeds(f, "run.json")
	f.Add([]byte(goodRun))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRoundTrip(t, data, ParseRunContext) })
}

// FuzzCompileContext mutates the evidence and markers of the seed case
// against its fixed pack and run: compiling never panics, refuses only with
// *ContextInputError, is deterministic, and never lets a commit through
// while a required obligation is unresolved or a blocking conflict is open.
func FuzzCompileContext(f *testing.F) {
	dir := filepath.Join(contextVectors, "conflict_resolved_source_priority")
	pack, _ := os.ReadFile(filepath.Join(dir, "pack.json"))
	run, _ := os.ReadFile(filepath.Join(dir, "run.json"))
	for _, name := range []string{"conflict_unresolved", "conflict_resolved_review", "conflict_resolved_refresh", "omitted", "stale"} {
		ev, _ := os.ReadFile(filepath.Join(contextVectors, name, "evidence.json"))
		ms, _ := os.ReadFile(filepath.Join(contextVectors, name, "markers.json"))
		f.Add(ev, ms)
	}
	p, err := ParseContextPack(pack)
	if err != nil {
		f.Fatal(err)
	}
	r, err := ParseRunContext(run)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, evidence, markers []byte) {
		ev, err := ParseEvidence(evidence)
		if err != nil {
			return
		}
		ms, err := ParseMarkers(markers)
		if err != nil {
			return
		}
		a, err := CompileContext(p, r, ev, ms)
		if err != nil {
			var ie *ContextInputError
			if !errors.As(err, &ie) {
				t.Fatalf("compile refused with %T: %v", err, err)
			}
			return
		}
		b, err := CompileContext(p, r, ev, ms)
		if err != nil || a.Digest != b.Digest {
			t.Fatalf("compile is not deterministic: %v", err)
		}
		g := a.Gate
		if g.CommitAllowed != (len(g.Unresolved) == 0) || len(g.Satisfied)+len(g.Unresolved) != len(g.Required) {
			t.Fatalf("inconsistent gate %+v", g)
		}
		for _, m := range g.Conflicts {
			if m.Status == ConflictUnresolved && g.CommitAllowed {
				t.Fatalf("commit allowed with unresolved conflict %s", m.ConflictID)
			}
		}
	})
}

func FuzzParseContextInputs(f *testing.F) {
	addVectorSeeds(f, "inputs.json")
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"session":{"ref":"s","source":"x","version":"1","tenant":"t","observed_at":"2026-01-01T00:00:00Z","valid_until":"2026-01-02T00:00:00Z","authority":"data_only","content_hash":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855","content":"","bucket":"b"}}`))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRoundTrip(t, data, ParseContextInputs) })
}
