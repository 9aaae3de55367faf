package kernel

import (
	"testing"
	"time"

	"github.com/contextos/ledger/wire"
)

// TestRefusalTally: within a window the first refusal of each key is
// recorded whole and the rest counted; the window's aggregates stand for
// exactly the counted ones, per key; untallied codes are always whole; a
// closed window starts afresh.
func TestRefusalTally(t *testing.T) {
	var tally RefusalTally
	exceeded := RefusalKey{Principal: "agent_email", Code: wire.CodeExceeded, CapabilityID: "refund"}
	other := RefusalKey{Principal: "agent_email", Code: wire.CodeExceeded, CapabilityID: "lookup"}
	approval := RefusalKey{Principal: "agent_email", Code: wire.CodeApprovalRequired, CapabilityID: "refund"}
	add := func(k RefusalKey, digest string) bool {
		whole := tally.Whole(k)
		tally.Add(k, ProposalRefused{Principal: k.Principal, Code: k.Code, Reason: "r " + digest, BodyDigest: digest, BodyBytes: 3}, whole)
		return whole
	}
	steps := []struct {
		key   RefusalKey
		whole bool
	}{
		{exceeded, true}, {exceeded, false}, {exceeded, false}, {other, true}, {exceeded, false},
		{approval, true}, {approval, true}, {other, false},
	}
	for i, s := range steps {
		if got := add(s.key, string(rune('a'+i))); got != s.whole {
			t.Fatalf("step %d %+v: whole %v, want %v", i, s.key, got, s.whole)
		}
	}
	aggs := tally.Close("1m0s")
	if len(aggs) != 2 {
		t.Fatalf("aggregates %+v, want 2", aggs)
	}
	want := []struct {
		capability, digest string
		count              int
	}{{"lookup", "h", 1}, {"refund", "e", 3}}
	for i, w := range want {
		a := aggs[i]
		if a.CapabilityID != w.capability || a.Count != w.count || a.BodyDigest != w.digest || a.Code != wire.CodeExceeded || a.Principal != "agent_email" {
			t.Errorf("aggregate %d: %+v, want %+v", i, a, w)
		}
		var log RefusalLog
		if err := log.Apply(a); err != nil || log.Count != w.count {
			t.Errorf("aggregate %d folds to %d (%v), want %d", i, log.Count, err, w.count)
		}
	}
	if !add(exceeded, "x") || add(exceeded, "y") {
		t.Fatal("a closed window does not start afresh")
	}
	if aggs := tally.Close("1m0s"); len(aggs) != 1 || aggs[0].Count != 1 {
		t.Fatalf("second window: %+v", aggs)
	}
	if aggs := tally.Close("1m0s"); len(aggs) != 0 {
		t.Fatalf("empty window: %+v", aggs)
	}
}

// TestProposeCounted: a refusal of a tallied code that the refusal window
// does not record whole appends nothing and is counted (Effects.Tally, not
// whole), with the reply a recorded one would give but the operation; one
// it records whole appends the operation's record; an untallied one
// (approval_required), an accepted proposal and a runtime without a window
// carry no tally.
func TestProposeCounted(t *testing.T) {
	m := storyManifest()
	killed := &Control{}
	_ = killed.Apply(KillSwitchSet{Engaged: true, Operator: "op"})
	propose := func(window RefusalWindow, ctl *Control, approval string) Effects {
		in := ProposeInput{Manifest: m, Tenant: "acme", Principal: "agent_email", Now: time.Date(2026, 10, 26, 9, 0, 0, 0, time.UTC),
			Body: proposalBody("run_1", "k1", storyCapability.ID, refundArgs("ord_1", 1000), approval), OperationID: "op_1", AttemptID: "att_1",
			Refusals: window}
		s := ProposeState{Control: ctl, Run: &Run{}}
		_ = s.Run.Apply(RunAdmitted{RunID: "run_1", Principal: "agent_email", Operator: "op", Calls: 5, Amount: 100000})
		if approval != "" {
			s.Approval = &Approval{}
			_ = s.Approval.Apply(ApprovalGranted{ApprovalID: approval, ActionDigest: storyDigest(t, "agent_email", "run_1", "ord_1", 1000), Risk: "high",
				Operator: "op", GrantedAt: in.Now, ExpiresAt: in.Now.Add(time.Hour)})
		}
		return ProposeStep(s, in)
	}
	counted := &RefusalTally{}
	k := RefusalKey{Principal: "agent_email", Code: wire.CodeKillSwitchEngaged, CapabilityID: storyCapability.ID}
	counted.Add(k, ProposalRefused{}, true)

	e := propose(counted, killed, "ap_1")
	if e.Tally == nil || e.Tally.Whole || e.Tally.Key != k || len(e.Append) != 0 || e.Refusal == nil || e.Refusal.Code != wire.CodeKillSwitchEngaged {
		t.Fatalf("counted: %+v", e)
	}
	if e.Reply.Status != wire.StatusRefused || e.Reply.OperationID != "" || e.Reply.ActionDigest == "" || len(e.Reply.Guarantees) != 1 {
		t.Fatalf("counted reply: %+v", e.Reply)
	}
	if e.Tally.Refused.Principal != "agent_email" || e.Tally.Refused.BodyDigest == "" || e.Tally.Refused.Code != wire.CodeKillSwitchEngaged {
		t.Fatalf("counted refusal: %+v", e.Tally.Refused)
	}
	whole := propose(&RefusalTally{}, killed, "ap_1")
	if whole.Tally == nil || !whole.Tally.Whole || len(whole.Append[KeyOperation("run_1", "k1")]) != 3 || whole.Reply.OperationID != "op_1" {
		t.Fatalf("recorded whole: %+v", whole)
	}
	if e := propose(counted, nil, "ap_1"); e.Dispatch == nil {
		t.Fatalf("not accepted: %+v", e.Refusal)
	}
	for name, e := range map[string]Effects{
		"approval required": propose(counted, nil, ""),
		"accepted":          propose(counted, nil, "ap_1"),
		"no window":         propose(nil, killed, "ap_1"),
	} {
		if e.Tally != nil || len(e.Append) == 0 {
			t.Errorf("%s: %+v", name, e)
		}
	}
}
