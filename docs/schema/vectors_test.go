package schema

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/contextos/ledger/wire"
)

// The wire vectors are the golden requests and replies every client's
// tests read (testdata/wire/README.md). They are written from the wire
// structs by this test: go test ./docs/schema -run TestWireVectors -update.
var update = flag.Bool("update", false, "rewrite testdata/wire from the wire structs")

const vectorDir = "../../testdata/wire"

// vectorFile is one file of testdata/wire: what the message is and what a
// client must make of it, then the message as the daemon encodes it.
type vectorFile struct {
	// Schema is the docs/schema file (without .json) the message holds to.
	Schema string `json:"schema"`
	// Status is a decision's status.
	Status wire.Status `json:"status,omitempty"`
	// Code and Retry are a refusal's code and the code's retry class.
	Code  wire.Code  `json:"code,omitempty"`
	Retry wire.Retry `json:"retry,omitempty"`
	// Verb, Member and Rows say which operator verb answered, which member
	// holds its rows and how many it holds.
	Verb   string `json:"verb,omitempty"`
	Member string `json:"member,omitempty"`
	Rows   int    `json:"rows,omitempty"`
	// Message is the request or reply itself.
	Message any `json:"message"`
}

type vector struct {
	name string // the path under testdata/wire, without .json
	file vectorFile
}

func yes() *bool { b := true; return &b }

var (
	at          = time.Date(2026, 3, 14, 9, 26, 53, 0, time.UTC)
	atText      = at.Format(time.RFC3339)
	digest      = hex.EncodeToString(func() []byte { s := sha256.Sum256([]byte(refundArgs)); return s[:] }())
	operationID = "op_01JPB7Q4ZK3M6V8N2R5T9W1X4Y"
	attemptID   = "att_01JPB7Q4ZK3M6V8N2R5T9W1X4Y"
	refundRows  = []wire.GuaranteeRow{
		{GuaranteeID: "refunds_daily", Resource: "tenant:acme/refunds/INR", Balance: wire.Balance{Limit: 100000, Committed: 60000, Held: 30000, Available: 10000}},
		{GuaranteeID: "refunds_per_order", Resource: "order:ord_1", Balance: wire.Balance{Limit: 80000, Committed: 0, Held: 0, Available: 80000}},
	}
)

func gate(sufficient bool) json.RawMessage {
	g := wire.EvidenceGate{
		DecisionKey: "refund_allowed",
		Required:    []string{"customer_identity", "order_lookup"},
		Satisfied:   []string{"customer_identity", "order_lookup"},
		Unresolved:  []string{},
		Conflicts:   []wire.EvidenceConflictMarker{},
		Sufficiency: wire.Sufficient, CommitAllowed: true,
	}
	if !sufficient {
		g.Satisfied = []string{"customer_identity"}
		g.Unresolved = []string{"order_lookup"}
		g.Conflicts = []wire.EvidenceConflictMarker{{
			ConflictID: "cf_order_amount", EvidenceRefs: []string{"ev_crm_1", "ev_oms_1"},
			Requirements: []string{"order_lookup"}, Status: wire.ConflictUnresolved,
			Subject: "order:ord_1", Predicate: "amount_minor", Values: []string{"60000", "6000"},
		}}
		g.Sufficiency, g.CommitAllowed = wire.Insufficient, false
	}
	b, err := json.Marshal(g)
	if err != nil {
		panic(err)
	}
	return b
}

// refusedDecision is the decision of a refusal with code, with the members
// the daemon fills for that kind of refusal.
func refusedDecision(code wire.Code) wire.Reply {
	r := wire.Reply{Status: wire.StatusRefused, Code: code, Reason: "refused " + string(code) + " (see docs/errors.md)"}
	switch wire.RetryOf(code) {
	case wire.RetryLater, wire.RetrySame:
		// Refused before an operation was stored: nothing to name.
		return r
	}
	r.OperationID = operationID
	switch code {
	case wire.CodeApprovalRequired, wire.CodeApprovalMismatch, wire.CodeApprovalRedeemed,
		wire.CodeApprovalExpired, wire.CodeApprovalDenied:
		r.ActionDigest = digest
	case wire.CodeExceeded, wire.CodeAmountInvalid:
		r.SetGuarantees(refundRows)
	case wire.CodeEvidenceInsufficient:
		r.Gate = gate(false)
	}
	return r
}

func vectors() []vector {
	var vs []vector
	add := func(name string, f vectorFile) { vs = append(vs, vector{name, f}) }
	args := json.RawMessage(refundArgs)

	add("proposal/minimal", vectorFile{Schema: "proposal", Message: wire.Proposal{
		RunID: "run_s", OperationKey: "refund-ord_1", CapabilityID: "adp_payments.issue_refund", Arguments: args}})
	add("proposal/evidence-refs", vectorFile{Schema: "proposal", Message: wire.Proposal{
		RunID: "run_s", OperationKey: "refund-ord_1", CapabilityID: "adp_payments.issue_refund", Arguments: args,
		EvidenceRefs: []string{"ev_crm_1", "ev_oms_1"}}})
	add("proposal/approval-id", vectorFile{Schema: "proposal", Message: wire.Proposal{
		RunID: "run_s", OperationKey: "refund-ord_1", CapabilityID: "adp_payments.issue_refund", Arguments: args,
		EvidenceRefs: []string{"ev_crm_1"}, ApprovalID: "apr_01JPB7S0D2F4H6K8M0P2R4T6V8"}})

	applied := wire.Reply{Status: wire.StatusApplied, OperationID: operationID, AttemptID: attemptID}
	applied.SetGuarantees(refundRows)
	add("decision/applied", vectorFile{Schema: "decision", Status: wire.StatusApplied, Message: applied})
	gated := applied
	gated.Gate = gate(true)
	add("decision/applied-gate", vectorFile{Schema: "decision", Status: wire.StatusApplied, Message: gated})
	add("decision/not_applied", vectorFile{Schema: "decision", Status: wire.StatusNotApplied, Message: wire.Reply{
		Status: wire.StatusNotApplied, Reason: "provider declined: order already refunded", OperationID: operationID, AttemptID: attemptID}})
	add("decision/pending", vectorFile{Schema: "decision", Status: wire.StatusPending, Message: wire.Reply{
		Status: wire.StatusPending, Reason: "provider accepted the request; settlement follows", OperationID: operationID, AttemptID: attemptID}})
	add("decision/unknown", vectorFile{Schema: "decision", Status: wire.StatusUnknown, Message: wire.Reply{
		Status: wire.StatusUnknown, Reason: "provider unreachable: resend the same operation key", OperationID: operationID, AttemptID: attemptID}})
	// An unknown that resending cannot learn: propose ends with the code's
	// refusal instead of resending.
	add("decision/unknown-stored_event_refused", vectorFile{Schema: "decision", Status: wire.StatusUnknown, Code: wire.CodeStoredEventRefused,
		Retry: wire.RetryNever, Message: wire.Reply{Status: wire.StatusUnknown, Code: wire.CodeStoredEventRefused,
			Reason:      "the stored event ctx.ev.acme.operation.run_s.refund-ord_1 seq 14 is refused by the kernel; nothing is decided on that subject until an operator looks",
			OperationID: operationID, AttemptID: attemptID}})
	for _, c := range wire.Codes {
		add("decision/refused/"+string(c), vectorFile{Schema: "decision", Status: wire.StatusRefused, Code: c, Retry: wire.RetryOf(c), Message: refusedDecision(c)})
	}

	add("op-request/exposure-page", vectorFile{Schema: "exposure-request", Verb: "exposure",
		Message: wire.OpRequest{GuaranteeID: "refunds_daily", Limit: 2, Cursor: "c2VxOjQy"}})
	add("op-request/approvals-page", vectorFile{Schema: "list-request", Verb: wire.VerbApprovals,
		Message: wire.ListRequest{Limit: 1, Cursor: "c2VxOjQy"}})

	page := func(verb, member string, rows int, reply wire.OpReply) {
		reply.OK = true
		name := "op-reply/" + verb + "-last"
		if reply.NextCursor != "" {
			name = "op-reply/" + verb + "-page"
		}
		add(name, vectorFile{Schema: "op-reply", Verb: verb, Member: member, Rows: rows, Message: reply})
	}
	exposure := []wire.ExposureRow{
		{Tenant: "acme", GuaranteeID: "refunds_daily", Resource: "tenant:acme/refunds/INR", OpenAttempts: 1,
			Balance: wire.Balance{Limit: 100000, Committed: 60000, Held: 30000, Available: 10000}, Window: "2026-03-14",
			Archived: wire.ArchivedReceipts{Committed: 3, CommittedAmount: 42000, Released: 1}},
		{Tenant: "acme", GuaranteeID: "refunds_rolling", Resource: "tenant:acme/refunds/INR", OpenAttempts: 0,
			Balance: wire.Balance{Limit: 500000, Committed: 120000, Available: 380000}, ReturnsAt: at.Add(time.Hour), Returns: 60000},
	}
	page("exposure", "exposure", 2, wire.OpReply{Exposure: exposure, NextCursor: "c2VxOjQy"})
	page("exposure", "exposure", 1, wire.OpReply{Exposure: []wire.ExposureRow{{Tenant: "acme", GuaranteeID: "refunds_per_order",
		Resource: strings.Repeat("r", 64) + "…", ResourceDigest: digest, Balance: wire.Balance{Limit: 80000, Available: 80000}, OverLimit: 2}}})
	attempt := wire.AttemptRow{AttemptID: attemptID, OperationID: operationID, Principal: "agent_7", RunID: "run_s",
		GuaranteeID: "refunds_daily", Resource: "tenant:acme/refunds/INR", Amount: 30000, State: "dispatched",
		Last: wire.OutcomeUnknown, LastReason: "provider unreachable: connection refused", NextStep: "reconcile", ReservedAt: at}
	page("attempts", "attempts", 1, wire.OpReply{Attempts: []wire.AttemptRow{attempt}, NextCursor: "YXR0XzAx"})
	page("attempts", "attempts", 0, wire.OpReply{})
	approval := wire.PendingApproval{OperationID: operationID, OperationKey: "refund-ord_1", RunID: "run_s", Principal: "agent_7",
		CapabilityID: "adp_payments.issue_refund", ActionDigest: digest, Arguments: args, RequestedAt: atText}
	page(wire.VerbApprovals, "approvals", 1, wire.OpReply{Approvals: []wire.PendingApproval{approval}, NextCursor: "c2VxOjc"})
	page(wire.VerbApprovals, "approvals", 1, wire.OpReply{Approvals: []wire.PendingApproval{{OperationID: operationID,
		OperationKey: "refund-ord_2", RunID: "run_s", Principal: "agent_7", CapabilityID: "adp_payments.issue_refund",
		ActionDigest: digest, Arguments: json.RawMessage("null"), RequestedAt: atText, ArgumentsDigest: digest, ArgumentsBytes: 70000}}})
	incidents := []wire.Incident{
		{Kind: "observation_contradicts_seal", AttemptID: attemptID, OperationID: operationID, Code: wire.CodeObservationContradictsSeal,
			Reason: "provider reported applied after absence was asserted", At: atText},
		{Kind: "executor_fenced", AttemptID: attemptID, OperationID: operationID, Code: wire.CodeExecutorFenced,
			Reason: "executor epoch 3 superseded by 4", At: atText},
	}
	page(wire.VerbIncidents, "incidents", 2, wire.OpReply{Incidents: incidents, NextCursor: "c2VxOjk6MQ"})
	page(wire.VerbIncidents, "incidents", 1, wire.OpReply{Incidents: []wire.Incident{{Kind: "stored_event_refused",
		Code: wire.CodeStoredEventRefused, Reason: strings.Repeat("x", 64) + "…", ReasonDigest: digest, At: atText}}})
	versions := []wire.VersionRow{
		{Version: 1, At: atText, Operator: "ops_1", Resource: "tenant:acme/refunds/INR", Limit: 100000, Mode: "enforce"},
		{Version: 2, At: atText, Operator: "ops_1", Reason: "festival season", Limit: 150000},
	}
	page("guarantee-history", "versions", 2, wire.OpReply{Versions: versions, NextCursor: "djoy"})
	page("guarantee-history", "versions", 1, wire.OpReply{Versions: []wire.VersionRow{{Version: 3, At: atText,
		Operator: "ops_2", Reason: "observe first", Mode: "observe"}}})

	add("op-reply/breaker", vectorFile{Schema: "op-reply", Verb: wire.VerbBreaker, Member: "breakers", Rows: 2, Message: wire.OpReply{OK: true,
		Breakers: []wire.BreakerRow{
			{CapabilityID: "adp_payments.issue_refund", Open: true, Threshold: 5, WindowMillis: 60000, Trip: &wire.BreakerTrip{
				CapabilityID: "adp_payments.issue_refund", Failures: 5, Threshold: 5, WindowMillis: 60000,
				FirstFailure: at.Add(-time.Minute / 2).Format(time.RFC3339), LastFailure: atText, LastReason: "503 Service Unavailable"}},
			{CapabilityID: "crm.update_contact", Threshold: 10, WindowMillis: 30000},
		}}})
	add("op-reply/reconcile", vectorFile{Schema: "op-reply", Verb: "reconcile", Member: "settled", Rows: 2, Message: wire.OpReply{OK: true,
		Settled: []wire.SettleRow{
			{AttemptID: attemptID, Outcome: wire.OutcomeApplied, Status: wire.StatusApplied},
			{AttemptID: "att_01JPB7R9C1E3G5J7L9N1Q3S5U7", Outcome: wire.OutcomeUnknown, Status: wire.StatusUnknown,
				Code: wire.CodeLedgerUnavailable, Reason: "provider unreachable: timeout"},
		}}})
	add("op-reply/kill-switch", vectorFile{Schema: "op-reply", Verb: "kill-switch", Message: wire.OpReply{OK: true, KillSwitch: yes()}})
	add("op-reply/approve", vectorFile{Schema: "op-reply", Verb: "approve", Message: wire.OpReply{OK: true, Data: map[string]any{
		"approval_id": "apr_01JPB7S0D2F4H6K8M0P2R4T6V8", "action_digest": digest, "risk": "high", "expires_at": at.Add(15 * time.Minute).Format(time.RFC3339)}}})
	for _, c := range []wire.Code{wire.CodeRequestMalformed, wire.CodeAuthorityDenied, wire.CodeAuditNotFound, wire.CodeProjectionUnavailable, wire.CodeReplyTooLarge} {
		add("op-reply/refused/"+string(c), vectorFile{Schema: "op-reply", Code: c, Retry: wire.RetryOf(c),
			Message: wire.Refused(c, "refused %s (see docs/errors.md)", c)})
	}
	return vs
}

// encodeVector is a vector file's bytes: two-space indented, members in
// the order of the structs, a final newline.
func encodeVector(f vectorFile) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(f); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// TestWireVectors writes (-update) or checks testdata/wire: every file is
// what the wire structs encode, every message holds to its schema, every
// status and code has its decision, every list verb a page with a cursor
// and a last page, and no other file lies there.
func TestWireVectors(t *testing.T) {
	s := schemas(t)
	vs := vectors()
	want := map[string][]byte{}
	for _, v := range vs {
		b, err := encodeVector(v.file)
		if err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		var f struct {
			Message json.RawMessage `json:"message"`
		}
		if err := json.Unmarshal(b, &f); err != nil {
			t.Fatal(err)
		}
		sch, ok := s[v.file.Schema]
		if !ok {
			t.Fatalf("%s: no schema %s", v.name, v.file.Schema)
		}
		if err := validate(sch, f.Message); err != nil {
			t.Errorf("%s: does not hold to %s.json: %v", v.name, v.file.Schema, err)
		}
		want[v.name+".json"] = b
	}

	has := func(name string) bool { _, ok := want[name+".json"]; return ok }
	for _, st := range []wire.Status{wire.StatusApplied, wire.StatusNotApplied, wire.StatusPending, wire.StatusUnknown} {
		if !has("decision/" + string(st)) {
			t.Errorf("no vector of status %s", st)
		}
	}
	for _, c := range wire.Codes {
		if !has("decision/refused/" + string(c)) {
			t.Errorf("no refused decision of code %s", c)
		}
		if wire.RetryOf(c) == "" {
			t.Errorf("code %s has no retry class", c)
		}
	}
	for _, verb := range []string{"exposure", "attempts", wire.VerbApprovals, wire.VerbIncidents, "guarantee-history"} {
		if !has("op-reply/"+verb+"-page") || !has("op-reply/"+verb+"-last") {
			t.Errorf("list verb %s lacks a page with next_cursor or its last page", verb)
		}
	}

	if *update {
		if err := os.RemoveAll(filepath.Join(vectorDir, "decision")); err != nil {
			t.Fatal(err)
		}
		for _, d := range []string{"proposal", "op-request", "op-reply"} {
			if err := os.RemoveAll(filepath.Join(vectorDir, d)); err != nil {
				t.Fatal(err)
			}
		}
		for name, b := range want {
			p := filepath.Join(vectorDir, filepath.FromSlash(name))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}

	var got []string
	err := filepath.WalkDir(vectorDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".json") {
			return err
		}
		rel, _ := filepath.Rel(vectorDir, p)
		got = append(got, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range got {
		b, err := os.ReadFile(filepath.Join(vectorDir, name))
		if err != nil {
			t.Fatal(err)
		}
		w, ok := want[name]
		switch {
		case !ok:
			t.Errorf("testdata/wire/%s is no vector of the wire structs (go test ./docs/schema -run TestWireVectors -update)", name)
		case !bytes.Equal(b, w):
			t.Errorf("testdata/wire/%s differs from what the wire structs encode (go test ./docs/schema -run TestWireVectors -update):\n%s", name, firstDiff(b, w))
		}
	}
	for name := range want {
		if !slices.Contains(got, name) {
			t.Errorf("testdata/wire/%s is missing (go test ./docs/schema -run TestWireVectors -update)", name)
		}
	}
}

// firstDiff shows the first line where got and want differ.
func firstDiff(got, want []byte) string {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := range min(len(g), len(w)) {
		if g[i] != w[i] {
			return fmt.Sprintf("line %d:\n got  %s\n want %s", i+1, g[i], w[i])
		}
	}
	return fmt.Sprintf("%d lines, want %d", len(g), len(w))
}
