package kernel

import (
	"strings"
	"testing"

	"github.com/contextos/ledger/wire"
)

// TestVerbStep: a verb's step reads its one subject for writing, appends
// its decision's events to it even with a refusal, and carries its reply's
// data; a read step reads it guarded and appends nothing.
func TestVerbStep(t *testing.T) {
	k := KeyApproval("ap_1")
	ev := ApprovalDenied{ApprovalID: "ap_1", Operator: "ops_alice", Reason: "no"}
	var seen *Approval
	step := VerbStep(k, func(a *Approval) (Decision, any) {
		seen = a
		return Decision{Events: []Event{ev}, Refusal: refuse(wire.CodeRequestMalformed, "refused")}, "data"
	})
	if r := step.Reads(); len(r) != 1 || r[0] != (Read{Key: k, Access: Write}) {
		t.Fatalf("reads %v", r)
	}
	eff := step.Decide(Loaded{})
	if seen == nil {
		t.Fatal("an empty subject is decided on its empty state, not nil")
	}
	if evs := eff.Events(k); len(evs) != 1 || evs[0] != Event(ev) || eff.Refusal == nil || eff.Reply.Data != "data" {
		t.Fatalf("effects %+v", eff)
	}
	if c := step.Contended(eff.Refusal); c.Refusal != eff.Refusal || len(c.Append) != 0 {
		t.Fatalf("contended %+v", c)
	}
	st := &LogIntegrity{Incidents: 2}
	read := ReadStep(KeyIntegrity, func(s *LogIntegrity) any { return s.Incidents })
	if r := read.Reads(); len(r) != 1 || r[0] != (Read{Key: KeyIntegrity, Access: Guard}) {
		t.Fatalf("reads %v", r)
	}
	if eff := read.Decide(Loaded{KeyIntegrity: st}); len(eff.Append) != 0 || eff.Refusal != nil || eff.Reply.Data != 2 {
		t.Fatalf("read effects %+v", eff)
	}
}

// TestAfterOfLeavesTheState: what a verb reports of the state its decision
// leaves is folded on a copy; the state handed to the step is unchanged,
// and the copies share no slice with it.
func TestAfterOfLeavesTheState(t *testing.T) {
	digest := strings.Repeat("ab", 32)
	a := &Approval{}
	after := AfterOf(a, []Event{ApprovalDenied{ApprovalID: "ap_1", ActionDigest: digest, Risk: "high", Operator: "ops_alice", Reason: "no"}},
		func(a Approval) Approval { return a })
	if a.DeniedBy != "" || a.ActionDigest != "" || after.DeniedBy != "ops_alice" || after.ActionDigest != digest {
		t.Fatalf("state %+v, after %+v", a, after)
	}
	run := Run{RunID: "r1", Children: make([]string, 1, 4)}
	c := run.Copy()
	c.Children = append(c.Children, "c2")
	c.Children[0] = "changed"
	if run.Children[0] != "" || len(run.Children[:2]) == 2 && run.Children[:2][1] == "c2" {
		t.Fatalf("the run's copy shares its children: %v", run.Children[:2])
	}
	cat := PackCatalog{Versions: make([]PackVersion, 1, 4), Promotions: []string{"p"}}
	cc := cat.Copy()
	cc.Promotions[0] = "changed"
	cc.Versions[0].Digest = "changed"
	if cat.Promotions[0] != "p" || cat.Versions[0].Digest != "" {
		t.Fatalf("the catalog's copy shares its slices: %+v", cat)
	}
}

// TestVerbStepReads: each multi-subject verb names what it reads, and how.
func TestVerbStepReads(t *testing.T) {
	lk := LedgerKey{GuaranteeID: "g2", Resource: "ord_1", Window: "2026-12"}
	old := LedgerKey{GuaranteeID: "g1", Resource: "ord_1", Window: "2026-12"}
	for _, c := range []struct {
		name string
		step Step
		want Reads
	}{
		{"admission", AdmitRunInput{AdmitRun: AdmitRun{RunID: "r1"}}.Step(), Reads{{KeyRun("r1"), Write}}},
		{"admission under itself", AdmitRunInput{AdmitRun: AdmitRun{RunID: "r1", ParentRunID: "r1"}}.Step(), Reads{{KeyRun("r1"), Write}}},
		{"admission under a parent", AdmitRunInput{AdmitRun: AdmitRun{RunID: "r1", ParentRunID: "r0"}}.Step(),
			Reads{{KeyRun("r1"), Write}, {KeyRun("r0"), Write}}},
		{"marker", MarkInput{Marker: EvidenceConflictMarker{EvidenceRefs: []string{"e1", "e2"}}}.Step(),
			Reads{{KeyEvidence("e1"), Write}, {KeyEvidence("e2"), Write}}},
		{"import", ImportInput{Row: ImportRow{GuaranteeID: "g2", Resource: "ord_1", Window: "2026-12"}, Replaced: []LedgerKey{old}}.Step(),
			Reads{{lk.Key(), Write}, {KeyControl, Stale}, {old.Key(), Stale}}},
		{"enroll", EnrollStep("acme", Definition{ID: "g2"}), Reads{{KeyPin("g2"), Write}, {KeyControl, Write}}},
		{"backfill", BackfillStep("g2"), Reads{{KeyPin("g2"), Write}, {KeyControl, Write}}},
		{"exposure", ExposureStep(lk, Close{AttemptID: "a"}), Reads{{lk.Key(), Write}}},
	} {
		got := c.step.Reads()
		if len(got) != len(c.want) {
			t.Errorf("%s: reads %v, want %v", c.name, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%s: reads %v, want %v", c.name, got, c.want)
			}
		}
	}
}

// TestEnrollStep: the first use of a guarantee pins it and enrolls it in
// one decision over both subjects; once applied, the same step appends
// nothing.
func TestEnrollStep(t *testing.T) {
	def := demoDefinition()
	w := subjects{}
	step := EnrollStep("acme", def)
	eff := step.Decide(w.load(step.Reads()))
	if eff.Refusal != nil || len(eff.Events(KeyPin(def.ID))) == 0 || len(eff.Events(KeyControl)) == 0 {
		t.Fatalf("first use: %+v", eff)
	}
	for k, evs := range eff.Append {
		for _, ev := range evs {
			if err := w[k].Apply(ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	if eff := step.Decide(w.load(step.Reads())); eff.Refusal != nil || len(eff.Append) != 0 {
		t.Fatalf("again: %+v", eff)
	}
}

// TestExposureStepBalance: the balance an exposure step answers is the
// ledger's once its decision applies, and the ledger it decided on is
// unchanged.
func TestExposureStepBalance(t *testing.T) {
	def := demoDefinition()
	lk := LedgerKey{GuaranteeID: def.ID, Resource: "ord_1"}
	l := &Ledger{}
	eff := ExposureStep(lk, Reserve{GuaranteeID: def.ID, Resource: "ord_1", AttemptID: "a", OperationID: "o", Amount: 300,
		Limit: def.Limit, DefinitionDigest: def.Digest()}).Decide(Loaded{lk.Key(): l})
	if eff.Refusal != nil || len(eff.Events(lk.Key())) == 0 {
		t.Fatalf("effects %+v", eff)
	}
	if b := eff.Reply.Data.(Balance); b.Held != 300 || b.Available != def.Limit-300 || l.Held != 0 {
		t.Fatalf("balance %+v; the ledger decided on holds %d", b, l.Held)
	}
}
