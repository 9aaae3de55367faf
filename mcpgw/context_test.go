package mcpgw_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/contextos/ledger/daemon"
	"github.com/contextos/ledger/internal/testing/gatewaytest"
	"github.com/contextos/ledger/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
)

// frozen is a clock that stands still, so two compilations of one run
// give one digest (the decision time is in it).
type frozen struct{ t time.Time }

func (f frozen) Now() time.Time { return f.t }

// crmPack governs crm.lookup and adp_payments.issue_refund; the MCP refund
// is under no pack.
const crmPack = `{"schema":"context_pack.v1","pack_id":"crm","version":"1",
 "buckets":[{"name":"evidence","max_tokens":100}],
 "decisions":[{"decision_key":"crm.read"}],
 "tools":[{"capability_id":"crm.lookup","gated_by":"crm.read"},{"capability_id":"adp_payments.issue_refund"}]}`

// startPacked boots the MCP test runtime with crm.lookup under crmPack and
// a frozen clock.
func startPacked(t *testing.T, edit func(string) string) *env {
	t.Helper()
	pack := filepath.Join(t.TempDir(), "crm-pack.json")
	if err := os.WriteFile(pack, []byte(crmPack), 0o644); err != nil {
		t.Fatal(err)
	}
	return startOpts(t, func(s string) string {
		s = strings.Replace(s, "id = \"crm.lookup\"\n", "id = \"crm.lookup\"\ndecision_key = \"crm.read\"\ncontext_pack = \""+pack+"\"\n", 1)
		if edit != nil {
			s = edit(s)
		}
		return s
	}, nil, daemon.BootOptions{Clock: frozen{time.Date(2026, 10, 26, 12, 0, 0, 0, time.UTC)}})
}

func listTools(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	var names []string
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

func natsContext(t *testing.T, nc *nats.Conn, principal string, body string) wire.ContextReply {
	t.Helper()
	m, err := nc.Request(wire.ContextSubject("acme", principal), []byte(body), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var r wire.ContextReply
	if err := json.Unmarshal(m.Data, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func mcpContext(t *testing.T, cs *mcp.ClientSession, args any) (*mcp.CallToolResult, wire.ContextReply) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: wire.ContextTool, Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	var r wire.ContextReply
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return res, r
}

// TestContextServedOverBothDoors: an agent fetches its run's compiled
// context over NATS and over MCP and gets one context, one digest, with
// the derived tool exposure; a hostile request is refused with a stable
// code and compiles nothing.
func TestContextServedOverBothDoors(t *testing.T) {
	e := startPacked(t, nil)
	nc := gatewaytest.Connect(t, e.rt.URL, "email-secret-passphrase", "acme", "agent_email")
	byNATS := natsContext(t, nc, "agent_email", `{"run_id":"run_ctx","capability_id":"crm.lookup"}`)
	if byNATS.Status != wire.ContextCompiled || len(byNATS.Digest) != 64 {
		t.Fatalf("NATS: %+v", byNATS)
	}
	cs := e.session(emailToken)
	res, byMCP := mcpContext(t, cs, map[string]any{"run_id": "run_ctx", "capability_id": "crm.lookup"})
	var viaNATS, viaMCP any
	_ = json.Unmarshal(byNATS.Context, &viaNATS)
	_ = json.Unmarshal(byMCP.Context, &viaMCP)
	if res.IsError || byMCP.Digest != byNATS.Digest || viaNATS == nil || !reflect.DeepEqual(viaMCP, viaNATS) {
		t.Fatalf("MCP %+v differs from NATS digest %s", byMCP, byNATS.Digest)
	}
	var cc struct {
		Digest string `json:"digest"`
		Gate   struct {
			CommitAllowed bool `json:"commit_allowed"`
		} `json:"gate"`
		Tools []struct {
			CapabilityID    string `json:"capability_id"`
			Exposed         bool   `json:"exposed"`
			DispatchAllowed bool   `json:"dispatch_allowed"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(byNATS.Context, &cc); err != nil {
		t.Fatal(err)
	}
	if cc.Digest != byNATS.Digest || !cc.Gate.CommitAllowed || len(cc.Tools) != 2 || !cc.Tools[1].Exposed || !cc.Tools[1].DispatchAllowed {
		t.Fatalf("compiled context: %+v", cc)
	}

	for name, c := range map[string]struct {
		body string
		code wire.Code
	}{
		"unknown field": {`{"run_id":"r","capability_id":"crm.lookup","tenant":"globex"}`, wire.CodeRequestMalformed},
		"no pack":       {`{"run_id":"r","capability_id":"mcp_payments.issue_refund"}`, wire.CodeContextInvalid},
		"unknown":       {`{"run_id":"r","capability_id":"nope"}`, wire.CodeCapabilityNotSurfaced},
		"oversized":     {`{"run_id":"r","capability_id":"crm.lookup","evidence_refs":["` + strings.Repeat("x", 70<<10) + `"]}`, wire.CodeRequestMalformed},
		"too many refs": {`{"run_id":"r","capability_id":"crm.lookup","evidence_refs":[` + strings.Repeat(`"a",`, wire.MaxEvidenceRefs) + `"a"]}`, wire.CodeRequestMalformed},
		"not an object": {`[]`, wire.CodeRequestMalformed},
	} {
		if r := natsContext(t, nc, "agent_email", c.body); r.Status != wire.ContextRefused || r.Code != c.code || r.Context != nil {
			t.Errorf("%s: %+v, want refused %s", name, r, c.code)
		}
	}
	res, r := mcpContext(t, cs, map[string]any{"run_id": "r", "capability_id": "nope"})
	if !res.IsError || r.Code != wire.CodeCapabilityNotSurfaced {
		t.Fatalf("MCP refusal: %+v", r)
	}
}

// TestMCPToolsFollowExposure: tools/list is each agent's derived tool
// exposure: agent_chat does not hold crm.lookup and does not see it;
// agent_email does. Discovery grants nothing: agent_chat's call to the
// hidden tool is still decided, and refused, as a proposal.
func TestMCPToolsFollowExposure(t *testing.T) {
	e := startPacked(t, nil)
	email := listTools(t, e.session(emailToken))
	chat := listTools(t, e.session(chatToken))
	wantEmail := []string{httpRefund, wire.ContextTool, "crm.lookup", mcpRefund}
	wantChat := []string{httpRefund, wire.ContextTool, mcpRefund}
	slices.Sort(wantEmail)
	slices.Sort(wantChat)
	if !slices.Equal(email, wantEmail) || !slices.Equal(chat, wantChat) {
		t.Fatalf("tools: email %v (want %v), chat %v (want %v)", email, wantEmail, chat, wantChat)
	}
	_, r := callTool(t, e.session(chatToken), "crm.lookup", map[string]any{"run_id": "run_h", "operation_key": "k1", "arguments": map[string]any{}})
	if r.Status != wire.StatusRefused || r.Code != wire.CodeAuthorityDenied {
		t.Fatalf("hidden tool call: %+v, want refused authority_denied", r)
	}
}

// TestContextSharesTheProposalRate: compile requests and proposals spend
// one rate limit.
func TestContextSharesTheProposalRate(t *testing.T) {
	e := startPacked(t, func(s string) string {
		return strings.Replace(s, "[mcp]", "[runtime.limits]\nproposals_per_second = 1\nproposal_burst = 2\n\n[mcp]", 1)
	})
	nc := gatewaytest.Connect(t, e.rt.URL, "email-secret-passphrase", "acme", "agent_email")
	for i := range 2 {
		if r := natsContext(t, nc, "agent_email", `{"run_id":"run_r","capability_id":"crm.lookup"}`); r.Status != wire.ContextCompiled {
			t.Fatalf("compile %d: %+v", i, r)
		}
	}
	p := wire.Proposal{RunID: "run_r", OperationKey: "after", CapabilityID: httpRefund,
		Arguments: []byte(`{"order_id":"ord_r","amount_minor":100,"currency":"INR"}`)}
	if r := gatewaytest.Propose(t, nc, "acme", "agent_email", p); r.Code != wire.CodeRateLimited {
		t.Fatalf("proposal after the burst went to compile requests: %+v, want rate_limited", r)
	}
}
