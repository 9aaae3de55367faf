package kernel

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestTraceOf: the trace names the compiled context, the refs that satisfied
// each obligation and the resolutions read; arguments up to the bound are
// recorded, past it only their digest.
func TestTraceOf(t *testing.T) {
	pack, unresolved := seedEvidence(t)
	resolved := seedResolved(t, unresolved)
	run := RunContext{Tenant: "acme", Principal: "agent_a", RunID: "r1", DecisionKey: "support.refund.execute",
		DecisionTime: time.Date(2026, 10, 26, 9, 0, 0, 0, time.UTC), AllowedSources: []string{"kg", "crm", "policy_store", "idp"},
		Capabilities: []string{"refund"}}
	cc, _ := CheckEvidenceContext(pack, run, resolved)
	if cc == nil {
		t.Fatal("the seed does not compile")
	}
	var refs []string
	for _, r := range resolved {
		refs = append(refs, r.Ref)
	}
	args := json.RawMessage(`{"amount":30000,"order_id":"ord_881"}`)
	tr := TraceOf(TraceInput{Context: cc, EvidenceRefs: refs, Arguments: args, ManifestDigest: "m", TraceID: "t"})
	if tr.ContextDigest == "" || tr.ContextDigest != cc.Digest {
		t.Fatalf("context digest %q, compiled %q", tr.ContextDigest, cc.Digest)
	}
	if len(tr.Obligations) != len(cc.Gate.Required) {
		t.Fatalf("obligations %+v, required %v", tr.Obligations, cc.Gate.Required)
	}
	satisfied := 0
	for _, o := range tr.Obligations {
		if len(o.SatisfiedBy) > 0 {
			satisfied++
		}
	}
	if satisfied != len(cc.Gate.Satisfied) || satisfied == 0 {
		t.Fatalf("obligations with refs %d, gate satisfied %v", satisfied, cc.Gate.Satisfied)
	}
	if !reflect.DeepEqual(tr.ResolutionRefs, []string{"review:order-resolution:441"}) {
		t.Fatalf("resolution refs %v", tr.ResolutionRefs)
	}
	if string(tr.Arguments) != string(args) || tr.ArgumentsOmitted || len(tr.ArgumentsDigest) != 64 {
		t.Fatalf("arguments %s omitted %v digest %q", tr.Arguments, tr.ArgumentsOmitted, tr.ArgumentsDigest)
	}
	if tr.ManifestDigest != "m" || tr.TraceID != "t" || !reflect.DeepEqual(tr.EvidenceRefs, refs) {
		t.Fatalf("trace %+v", tr)
	}

	big := json.RawMessage(`{"note":"` + strings.Repeat("x", MaxRecordedArguments) + `"}`)
	tb := TraceOf(TraceInput{Arguments: big})
	if tb.Arguments != nil || !tb.ArgumentsOmitted || tb.ArgumentsDigest == tr.ArgumentsDigest || len(tb.ArgumentsDigest) != 64 {
		t.Fatalf("over the bound: arguments %d bytes, omitted %v, digest %q", len(tb.Arguments), tb.ArgumentsOmitted, tb.ArgumentsDigest)
	}
	at := json.RawMessage(`"` + strings.Repeat("y", MaxRecordedArguments-2) + `"`)
	if ta := TraceOf(TraceInput{Arguments: at}); ta.ArgumentsOmitted || len(ta.Arguments) != MaxRecordedArguments {
		t.Fatalf("at the bound: %d bytes recorded, omitted %v", len(ta.Arguments), ta.ArgumentsOmitted)
	}
	// A number no signed event can carry is recorded by its digest alone.
	huge := json.RawMessage(`{"amount":1e400}`)
	if th := TraceOf(TraceInput{Arguments: huge}); th.Arguments != nil || !th.ArgumentsOmitted || len(th.ArgumentsDigest) != 64 {
		t.Fatalf("unsealable arguments: recorded %s, omitted %v", th.Arguments, th.ArgumentsOmitted)
	}
	if ts := TraceOf(TraceInput{Arguments: json.RawMessage(`{"order_id":"s_\ud800"}`)}); ts.Arguments != nil || !ts.ArgumentsOmitted {
		t.Fatalf("lone surrogate: recorded %s, omitted %v", ts.Arguments, ts.ArgumentsOmitted)
	}
	frac := json.RawMessage(`{"amount":12.5,"note":"caf\u00e9"}`)
	if tf := TraceOf(TraceInput{Arguments: frac}); tf.ArgumentsOmitted || string(tf.Arguments) != string(frac) {
		t.Fatalf("sealable arguments outside the fast subset: recorded %s, omitted %v", tf.Arguments, tf.ArgumentsOmitted)
	}
}

// TestDecisionRecordFormat: a record stored before the trace existed
// decodes with an empty trace; a record with one keeps it at its top level
// through the strict decoder, and the controls do not repeat it.
func TestDecisionRecordFormat(t *testing.T) {
	old := `{"operation_id":"op1","principal":"agent_a","run_id":"r1","capability_id":"refund","action_digest":"d","status":"refused",` +
		`"code":"policy_denied","reason":"no","controls_active":{"authority":"config","capability_version":"1","risk":"low","executor":"a","generation":1}}`
	ev, err := DecodeEvent(TypeDecisionRecorded, EventVersion, []byte(old))
	if err != nil {
		t.Fatalf("old record: %v", err)
	}
	if rec := ev.(DecisionRecorded); !reflect.DeepEqual(rec.DecisionTrace, DecisionTrace{}) || rec.OperationID != "op1" {
		t.Fatalf("old record decoded as %+v", rec)
	}
	tr := DecisionTrace{ContextDigest: "c", EvidenceRefs: []string{"kg:1"}, Obligations: []ObligationRefs{{Requirement: "q", SatisfiedBy: []string{"kg:1"}}},
		ArgumentsDigest: "a", Arguments: json.RawMessage(`{"x":1}`), ManifestDigest: "m", TraceID: "t", ResolutionRefs: []string{"rv"}}
	rec := decisionRecord(OperationOpened{OperationID: "op1", Principal: "agent_a", RunID: "r1", CapabilityID: "refund", ActionDigest: "d"},
		"", "refused", "policy_denied", "no", Controls{Authority: "config", Trace: tr})
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"context_digest", "evidence_refs", "obligations", "resolution_refs", "arguments_digest", "arguments", "manifest_digest", "trace_id"} {
		if _, ok := top[k]; !ok {
			t.Errorf("record lacks %s: %s", k, b)
		}
	}
	if strings.Contains(string(top["controls_active"]), "trace") {
		t.Errorf("controls repeat the trace: %s", top["controls_active"])
	}
	ev, err = DecodeEvent(TypeDecisionRecorded, EventVersion, b)
	if err != nil {
		t.Fatal(err)
	}
	if got := ev.(DecisionRecorded).DecisionTrace; !reflect.DeepEqual(got, tr) {
		t.Fatalf("round trip: %+v, want %+v", got, tr)
	}
}
