package kernel

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestContextDiffGolden: diffs of two compiled contexts (the conformance
// vectors' goldens) and of two packs, against golden files in
// testdata/diff. Regenerate with go test ./kernel -run TestContextDiffGolden -rewrite.
func TestContextDiffGolden(t *testing.T) {
	read := func(path string) []byte {
		b, err := os.ReadFile(filepath.Join(contextVectors, path))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	side := func(path string) ([]byte, *ContextPack, *CompiledContext) {
		b := read(path)
		p, c, err := ParseDiffInput(b)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return b, p, c
	}
	mutated := func() []byte {
		// The refund decision demands a new obligation the ledger source
		// is trusted for; the memory trust rule goes, a bucket grows.
		p, err := ParseContextPack(read("sufficient/pack.json"))
		if err != nil {
			t.Fatal(err)
		}
		p.Version = "2026-11-01.1"
		p.Decisions = append([]DecisionSpec(nil), p.Decisions...)
		p.Decisions[0].RequiredEvidence = []string{"order_lookup", "policy.eval", "identity_verified", "refund_history"}
		p.Trust = append([]TrustRule(nil), p.Trust[:len(p.Trust)-1]...)
		p.Trust[2].Requirements = []string{"order_lookup", "refund_history"}
		p.Buckets = append([]ContextBucket(nil), p.Buckets...)
		p.Buckets[0].MaxTokens *= 2
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cases := []struct{ name, a, b string }{
		{"compiled_unresolved_to_resolved", "conflict_unresolved/want.json", "conflict_resolved_review/want.json"},
		{"compiled_sufficient_to_stale", "sufficient/want.json", "stale/want.json"},
		{"compiled_same", "sufficient/want.json", "sufficient/want.json"},
		{"pack_same", "sufficient/pack.json", "sufficient/pack.json"},
		{"pack_changed", "sufficient/pack.json", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, pa, ca := side(c.a)
			var d ContextDiff
			if pa != nil {
				pb := pa
				if c.b == "" {
					p, _, err := ParseDiffInput(mutated())
					if err != nil || p == nil {
						t.Fatalf("mutated pack: %v", err)
					}
					pb = p
				} else {
					_, pb, _ = side(c.b)
				}
				var err error
				if d, err = DiffPacks(*pa, *pb); err != nil {
					t.Fatal(err)
				}
			} else {
				_, _, cb := side(c.b)
				d = DiffCompiled(*ca, *cb)
			}
			got, err := json.MarshalIndent(d, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			golden := filepath.Join("testdata/diff", c.name+".json")
			if rewriteGoldens() {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (go test ./kernel -run TestContextDiffGolden -rewrite)", err)
			}
			if !bytes.Equal(want, got) {
				t.Fatalf("%s differs from the golden:\n%s", c.name, got)
			}
			if (c.a == c.b) != d.Empty() {
				t.Fatalf("%s: empty %v for inputs a=%s b=%s", c.name, d.Empty(), c.a, c.b)
			}
		})
	}
}

// TestParseDiffInputRefuses: neither a pack nor a compiled context.
func TestParseDiffInputRefuses(t *testing.T) {
	for _, in := range []string{`[]`, `{"schema":"other.v1"}`, `{"schema":"compiled_context.v1","bogus":1}`, `not json`} {
		if _, _, err := ParseDiffInput([]byte(in)); err == nil {
			t.Errorf("%s: accepted", in)
		}
	}
}

// FuzzParseDiffInput: any bytes give a side or an error, never a panic,
// and a side diffs against itself to nothing.
func FuzzParseDiffInput(f *testing.F) {
	for _, p := range []string{"sufficient/pack.json", "sufficient/want.json", "conflict_resolved_review/want.json"} {
		if b, err := os.ReadFile(filepath.Join(contextVectors, p)); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, c, err := ParseDiffInput(b)
		switch {
		case err != nil:
			return
		case p != nil:
			d, err := DiffPacks(*p, *p)
			if err != nil || !d.Empty() {
				t.Fatalf("a pack against itself: %+v %v", d, err)
			}
		case c != nil:
			if d := DiffCompiled(*c, *c); !d.Empty() {
				t.Fatalf("a compiled context against itself: %+v", d)
			}
		}
	})
}
