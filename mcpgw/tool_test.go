package mcpgw

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/gateway"
	"github.com/contextos/ledger/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestProposalBody(t *testing.T) {
	cases := []struct{ args, want string }{
		{`{"run_id":"r","operation_key":"k","arguments":{}}`, `{"capability_id":"c","run_id":"r","operation_key":"k","arguments":{}}`},
		{` { "run_id":"r"}`, `{"capability_id":"c","run_id":"r"}`},
		{`{}`, `{"capability_id":"c"}`},
		{"{ \n}", `{"capability_id":"c"}`},
		{``, `{"capability_id":"c","arguments":null}`},
		{`[1]`, `{"capability_id":"c","arguments":[1]}`},
		{`"x"`, `{"capability_id":"c","arguments":"x"}`},
	}
	for _, c := range cases {
		if got := string(ProposalBody("c", json.RawMessage(c.args))); got != c.want {
			t.Errorf("ProposalBody(%q) = %s, want %s", c.args, got, c.want)
		}
	}
}

// FuzzProposalBody: whatever a tool call's arguments hold, the proposal the
// gateway parses from them names the tool's capability, or is refused.
func FuzzProposalBody(f *testing.F) {
	for _, s := range []string{`{"run_id":"r","operation_key":"k","arguments":{}}`, `{"capability_id":"other","run_id":"r","operation_key":"k","arguments":{}}`,
		`{}`, `[]`, `null`, `{"run_id":"r","operation_key":"k","arguments":{},"capability_id":"x"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !json.Valid([]byte(s)) {
			return // the SDK hands a handler one decoded JSON value
		}
		p, r := gateway.ParseProposal(ProposalBody("cap.one", json.RawMessage(s)))
		if r == nil && p.CapabilityID != "cap.one" {
			t.Fatalf("arguments %s chose capability %q", s, p.CapabilityID)
		}
	})
}

// TestLimit: past n requests at once the answer is 503 before the handler
// runs; a slot frees when a request ends.
// TestToolSchemaIsTheProposal: a tool's input schema has the members of
// wire.Proposal but the capability id (the tool's name), with its bounds.
func TestToolSchemaIsTheProposal(t *testing.T) {
	tool := toolOf(&config.CapabilityConfig{ID: "adp_payments.issue_refund"})
	var s struct {
		Properties map[string]struct {
			MaxLength int `json:"maxLength"`
			MaxItems  int `json:"maxItems"`
			Items     struct {
				MaxLength int `json:"maxLength"`
			} `json:"items"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(tool.InputSchema.(json.RawMessage), &s); err != nil {
		t.Fatal(err)
	}
	pt := reflect.TypeOf(wire.Proposal{})
	var want []string
	for i := range pt.NumField() {
		name, _, _ := strings.Cut(pt.Field(i).Tag.Get("json"), ",")
		if name != "capability_id" {
			want = append(want, name)
		}
	}
	if len(s.Properties) != len(want) {
		t.Errorf("tool members %v, want %v", s.Properties, want)
	}
	for _, n := range want {
		if _, ok := s.Properties[n]; !ok {
			t.Errorf("tool schema has no %q", n)
		}
	}
	for _, n := range []string{"run_id", "operation_key", "approval_id"} {
		if got := s.Properties[n].MaxLength; got != wire.MaxIDBytes {
			t.Errorf("%s maxLength %d, want %d", n, got, wire.MaxIDBytes)
		}
	}
	if e := s.Properties["evidence_refs"]; e.MaxItems != wire.MaxEvidenceRefs || e.Items.MaxLength != wire.MaxEvidenceRefBytes {
		t.Errorf("evidence_refs bounds %d/%d", e.MaxItems, e.Items.MaxLength)
	}
}

// TestResultErrors: a refusal, and an unknown the ledger left with a code
// (the store did not answer, or a stored event the kernel refuses), are
// error results whose text starts with the code; every other decision is
// the reply as JSON.
func TestResultErrors(t *testing.T) {
	for _, c := range []struct {
		r     wire.Reply
		isErr bool
	}{
		{wire.Reply{Status: wire.StatusRefused, Code: wire.CodeExceeded, Reason: "over"}, true},
		{wire.Reply{Status: wire.StatusUnknown, Code: wire.CodeLedgerUnavailable, Reason: "no answer"}, true},
		{wire.Reply{Status: wire.StatusUnknown, Code: wire.CodeStoredEventRefused, Reason: "refused event"}, true},
		{wire.Reply{Status: wire.StatusUnknown, Reason: "provider timeout"}, false},
		{wire.Reply{Status: wire.StatusPending}, false},
		{wire.Reply{Status: wire.StatusApplied}, false},
	} {
		res := Result(c.r)
		text := res.Content[0].(*mcp.TextContent).Text
		if res.IsError != c.isErr {
			t.Errorf("%s %s: isError %v", c.r.Status, c.r.Code, res.IsError)
		}
		if c.isErr && text != string(c.r.Code)+": "+c.r.Reason {
			t.Errorf("%s %s: text %q", c.r.Status, c.r.Code, text)
		}
		if !c.isErr && !strings.HasPrefix(text, "{") {
			t.Errorf("%s: text %q, want the reply as JSON", c.r.Status, text)
		}
	}
}
