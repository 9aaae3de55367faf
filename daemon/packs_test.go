package daemon_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
)

// TestPacksPinPromoteRollback: two pack versions published to a real
// runtime, a run admitted without a version pins the promoted one and a
// run admitted with one pins it, each decision records the version its
// gate was compiled under, a promotion whose figures fail the release gate
// is refused and recorded, a passing one and a rollback are signed events,
// and the read model lists the versions and the promoted one.
func TestPacksPinPromoteRollback(t *testing.T) {
	e, _ := authzEnv(t, evidenceEdit)
	raw, err := os.ReadFile("../testdata/context/conflict_unresolved/pack.json")
	if err != nil {
		t.Fatal(err)
	}
	v1, err := kernel.ParseContextPack(raw)
	if err != nil {
		t.Fatal(err)
	}
	v2 := v1
	v2.Version = "2026-11-01.1"
	v2.Buckets = append([]kernel.ContextBucket(nil), v1.Buckets...)
	v2.Buckets[0].MaxTokens++
	d1, _ := kernel.PackDigest(v1)
	d2, _ := kernel.PackDigest(v2)

	e.mustOp(wire.VerbPackPublish, wire.PackPublishRequest{Pack: raw})
	e.mustOp(wire.VerbPackPublish, wire.PackPublishRequest{Pack: mustJSON(v2)})
	if r := e.mustOp(wire.VerbPackPublish, wire.PackPublishRequest{Pack: raw}); r.Data["recorded"] != false {
		t.Fatalf("a re-publish of the same content recorded something: %+v", r.Data)
	}
	changed := v2
	changed.Buckets = append([]kernel.ContextBucket(nil), v2.Buckets...)
	changed.Buckets[0].MaxTokens++
	if r := e.opAny(wire.VerbPackPublish, wire.PackPublishRequest{Pack: mustJSON(changed)}); r.OK || r.Code != wire.CodePackVersionConflict {
		t.Fatalf("other content under a published version: %+v", r)
	}
	e.mustOp(wire.VerbPackPromote, wire.PackPromoteRequest{Version: v1.PackID + "@" + v1.Version})

	// run_a pins the promoted version, run_b the one it names.
	e.mustOp("admit-run", wire.AdmitRunRequest{RunID: "run_a", Principal: "agent_email", Calls: 5, Amount: 100000})
	rb := e.mustOp("admit-run", wire.AdmitRunRequest{RunID: "run_b", Principal: "agent_email", Calls: 5, Amount: 100000, Pack: d2})
	if b, _ := json.Marshal(rb.Data["run"]); !json.Valid(b) || !strings.Contains(string(b), d2) {
		t.Fatalf("run_b's admission %s does not pin %s", b, d2)
	}
	if r := e.opAny("admit-run", wire.AdmitRunRequest{RunID: "run_c", Principal: "agent_email", Calls: 5, Amount: 100000, Pack: "support.refund@never"}); r.OK || r.Code != wire.CodePackUnknown {
		t.Fatalf("a run pinning an unpublished version: %+v", r)
	}

	// Sufficient evidence: both proposals are dispatched and settled, and
	// the settlement's record names the pack too.
	var cands []json.RawMessage
	var refs []string
	b, err := os.ReadFile("../testdata/context/conflict_unresolved/evidence.json")
	if err != nil || json.Unmarshal(b, &cands) != nil {
		t.Fatal(err)
	}
	for _, c := range cands {
		refs = append(refs, e.mustOp("evidence", wire.EvidenceRequest{Candidate: c}).Data["ref"].(string))
	}
	var resolved []map[string]any
	if b, err = os.ReadFile("../testdata/context/conflict_resolved_review/markers.json"); err != nil || json.Unmarshal(b, &resolved) != nil {
		t.Fatal(err)
	}
	resolved[0]["resolution"].(map[string]any)["resolved_by"] = "ops_alice"
	e.mustOp("evidence", wire.EvidenceRequest{Marker: mustJSON(resolved[0])})
	nc := e.client("acme", "agent_email")
	for i, c := range []struct {
		run, digest, version string
	}{{"run_a", d1, v1.Version}, {"run_b", d2, v2.Version}} {
		p := refund(c.run, "k1", "ord_881", int64(800+i))
		p["evidence_refs"] = refs
		wantApplied(t, c.run, e.propose(nc, "acme", "agent_email", p))
		rec := e.decision("acme", c.run, "k1")
		if rec.PackID != v1.PackID || rec.PackVersion != c.version || rec.PackDigest != c.digest {
			t.Fatalf("%s's decision records pack %s@%s %s, want %s %s", c.run, rec.PackID, rec.PackVersion, rec.PackDigest, c.version, c.digest)
		}
	}

	// The release gate: one more false closure than the promoted version.
	eval := kernel.ReleaseEval{CasesDigest: d1, // any 64-hex digest names the case set
		Candidate: kernel.EvalFigures{Digest: d2, Cases: 40, FalseClosures: 1, FalseAbstentions: 2},
		Current:   &kernel.EvalFigures{Digest: d1, Cases: 40, FalseClosures: 0, FalseAbstentions: 2}}
	r := e.opAny(wire.VerbPackPromote, wire.PackPromoteRequest{Version: d2, Eval: mustJSON(eval)})
	if r.OK || r.Code != wire.CodeReleaseGateFailed {
		t.Fatalf("a promotion with more false closures: %+v", r)
	}
	var refused bool
	for _, ev := range e.signed(mustSubject(t, "acme", "refusal", "ops_alice")) {
		if o, ok := ev.(kernel.OperatorRefused); ok && o.Verb == wire.VerbPackPromote && o.Code == wire.CodeReleaseGateFailed {
			refused = true
		}
	}
	if !refused {
		t.Fatal("the refused promotion is not a signed operator.refused event")
	}
	eval.Candidate.FalseClosures = 0
	e.mustOp(wire.VerbPackPromote, wire.PackPromoteRequest{Version: d2, Eval: mustJSON(eval)})
	packs := e.mustOp(wire.VerbPacks, wire.PacksRequest{})
	if got := packsOf(t, packs); len(got.Versions) != 2 || got.Promoted == nil || got.Promoted.Digest != d2 {
		t.Fatalf("packs after the promotion: %+v", got)
	}
	e.mustOp(wire.VerbPackRollback, struct{}{})

	subject, _ := codec.Subject("acme", "pack")
	var types []string
	for _, ev := range e.signed(subject) {
		types = append(types, ev.EventType())
		if rb, ok := ev.(kernel.PackRolledBack); ok && (rb.Digest != d1 || rb.From != d2 || rb.Operator != "ops_alice") {
			t.Fatalf("rollback %+v", rb)
		}
	}
	want := []string{kernel.TypePackPublished, kernel.TypePackPublished, kernel.TypePackPromoted, kernel.TypePackPromoted, kernel.TypePackRolledBack}
	if len(types) != len(want) {
		t.Fatalf("pack subject holds %v, want %v", types, want)
	}
	for i := range want {
		if types[i] != want[i] {
			t.Fatalf("pack subject holds %v, want %v", types, want)
		}
	}
	packs = e.mustOp(wire.VerbPacks, wire.PacksRequest{Version: d1})
	if got := packsOf(t, packs); len(got.Versions) != 2 || got.Promoted == nil || got.Promoted.Digest != d1 {
		t.Fatalf("packs after the rollback: %+v", got)
	}
	if _, ok := packs.Data["pack"]; !ok {
		t.Fatal("packs with a version does not carry its pack")
	}
}

// packsOf decodes the packs of a reply's data.
func packsOf(t *testing.T, r wire.OpReply) wire.Packs {
	t.Helper()
	var p wire.Packs
	if err := json.Unmarshal(mustJSON(r.Data["packs"]), &p); err != nil {
		t.Fatal(err)
	}
	return p
}
