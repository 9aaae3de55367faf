package mcpgw_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/contextos/ledger/gateway"
	"github.com/contextos/ledger/internal/testing/gatewaytest"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/mcpgw"
	"github.com/contextos/ledger/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Two published versions of the crm pack. crm@2 keeps the configured
// pack's tools; crm@3 drops the HTTP refund, names the MCP refund, and
// names crm.export, which no manifest capability (so no registry entry)
// backs.
const (
	crmPackV2 = `{"schema":"context_pack.v1","pack_id":"crm","version":"2",
 "buckets":[{"name":"evidence","max_tokens":100}],
 "decisions":[{"decision_key":"crm.read"}],
 "tools":[{"capability_id":"crm.lookup","gated_by":"crm.read"},{"capability_id":"adp_payments.issue_refund"}]}`
	crmPackV3 = `{"schema":"context_pack.v1","pack_id":"crm","version":"3",
 "buckets":[{"name":"evidence","max_tokens":100}],
 "decisions":[{"decision_key":"crm.read"}],
 "tools":[{"capability_id":"crm.lookup","gated_by":"crm.read"},{"capability_id":"mcp_payments.issue_refund"},{"capability_id":"crm.export"}]}`
)

// mustOp runs an operator verb as ops_alice and fails the test on a refusal.
func (e *env) mustOp(tenant, verb string, req any) wire.OpReply {
	e.t.Helper()
	b, err := json.Marshal(req)
	if err != nil {
		e.t.Fatal(err)
	}
	r := e.rt.Gateway.Op(context.Background(), tenant, verb, "ops_alice", b)
	if !r.OK {
		e.t.Fatalf("%s refused: %s %s", verb, r.Code, r.Reason)
	}
	return r
}

// runSession connects the Go SDK's client as the agent token names, naming
// run in mcpgw.RunHeader ("" names none).
func (e *env) runSession(token, run string) *mcp.ClientSession {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := mcpgw.ConnectRun(ctx, e.rt.MCPURL, token, run, "run-agent")
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// startPinned boots the packed runtime, publishes crm@2 and crm@3 and
// admits run_v2 and run_v3 for agent_email pinned to each.
func startPinned(t *testing.T) *env {
	t.Helper()
	e := startPacked(t, nil)
	for _, p := range []string{crmPackV2, crmPackV3} {
		e.mustOp("acme", wire.VerbPackPublish, wire.PackPublishRequest{Pack: json.RawMessage(p)})
	}
	for run, pack := range map[string]string{"run_v2": "crm@2", "run_v3": "crm@3"} {
		e.mustOp("acme", "admit-run", wire.AdmitRunRequest{RunID: run, Principal: "agent_email", Calls: 10, Amount: 1 << 20, Pack: pack})
	}
	return e
}

func sorted(s ...string) []string { slices.Sort(s); return s }

// TestMCPToolsFollowRunPack: two runs of one agent pinned to different pack
// versions see different tool lists through a real MCP client naming each
// run in the Contextos-Run-Id header; without the header the list is the
// configured packs' exposure. A capability the pinned pack names but the
// tool registry snapshot lacks is never listed. Discovery grants nothing:
// the refund hidden from run_v3 is still a proposal, decided as before.
func TestMCPToolsFollowRunPack(t *testing.T) {
	e := startPinned(t)
	v2 := listTools(t, e.runSession(emailToken, "run_v2"))
	v3 := listTools(t, e.runSession(emailToken, "run_v3"))
	none := listTools(t, e.runSession(emailToken, ""))
	if want := sorted(wire.ContextTool, "crm.lookup", httpRefund, mcpRefund); !slices.Equal(v2, want) {
		t.Errorf("run_v2 (crm@2) lists %v, want %v", v2, want)
	}
	if want := sorted(wire.ContextTool, "crm.lookup", mcpRefund); !slices.Equal(v3, want) {
		t.Errorf("run_v3 (crm@3) lists %v, want %v", v3, want)
	}
	if want := sorted(wire.ContextTool, "crm.lookup", httpRefund, mcpRefund); !slices.Equal(none, want) {
		t.Errorf("no run named lists %v, want %v", none, want)
	}
	// A run that pins nothing is shown what no run named is shown.
	if got := listTools(t, e.runSession(emailToken, "run_unpinned")); !slices.Equal(got, none) {
		t.Errorf("unpinned run lists %v, want %v", got, none)
	}
	// Another agent cannot read run_v2's list.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := e.runSession(chatToken, "run_v2").ListTools(ctx, nil); err == nil {
		t.Error("agent_chat listed the tools of agent_email's run")
	}
	res, r := callTool(t, e.runSession(emailToken, "run_v3"), httpRefund, refundArgs("run_v3", "hidden-1", "ord_h", 100))
	if res.IsError || r.Status != wire.StatusApplied {
		t.Fatalf("call of a tool run_v3 does not list: %+v %s, want decided as any proposal (applied)", r, text(res))
	}
}

// TestContextInputsFollowConfigAndPin: a compile request's context is
// compiled under the run's pinned pack, and its typed inputs are the
// configuration's policy and tool registry snapshots, versioned by the
// configuration's digest (the manifest_digest decision records name); a
// tool the registry does not list is not exposed, and an exposed one
// carries the registry's version.
func TestContextInputsFollowConfigAndPin(t *testing.T) {
	e := startPinned(t)
	nc := gatewaytest.Connect(t, e.rt.URL, "email-secret-passphrase", "acme", "agent_email")
	type compiled struct {
		Dependencies struct {
			Pack struct {
				Version string `json:"version"`
			} `json:"pack"`
			Inputs []struct {
				Kind, Ref, Source, Version, Authority string
			} `json:"inputs"`
		} `json:"dependencies"`
		Inputs []struct {
			Kind   string `json:"kind"`
			Usable bool   `json:"usable"`
		} `json:"inputs"`
		Tools []struct {
			CapabilityID string `json:"capability_id"`
			Exposed      bool   `json:"exposed"`
			Version      string `json:"version"`
			Reason       string `json:"reason"`
		} `json:"tools"`
	}
	compile := func(run string) compiled {
		t.Helper()
		r := natsContext(t, nc, "agent_email", `{"run_id":"`+run+`","capability_id":"crm.lookup"}`)
		if r.Status != wire.ContextCompiled {
			t.Fatalf("%s: %+v", run, r)
		}
		var cc compiled
		if err := json.Unmarshal(r.Context, &cc); err != nil {
			t.Fatal(err)
		}
		return cc
	}
	digest := e.rt.Config.Digest
	for run, pack := range map[string]string{"run_v3": "3", "run_unpinned": "1"} {
		cc := compile(run)
		if cc.Dependencies.Pack.Version != pack {
			t.Errorf("%s compiled under crm version %q, want %q", run, cc.Dependencies.Pack.Version, pack)
		}
		deps := cc.Dependencies.Inputs
		if len(deps) != 2 || deps[0].Kind != "policy" || deps[1].Kind != "tool_registry" {
			t.Fatalf("%s inputs %+v, want the policy and tool registry snapshots", run, deps)
		}
		for _, d := range deps {
			if d.Version != digest || d.Source != gateway.ConfigInputSource || d.Authority != "authoritative" {
				t.Errorf("%s input %+v, want version %s (the configuration's digest) from %s", run, d, digest, gateway.ConfigInputSource)
			}
		}
		for _, st := range cc.Inputs {
			if !st.Usable {
				t.Errorf("%s: snapshot %s unusable", run, st.Kind)
			}
		}
	}
	tools := map[string]int{}
	cc := compile("run_v3")
	for i, tl := range cc.Tools {
		tools[tl.CapabilityID] = i
	}
	if i, ok := tools["crm.export"]; !ok || cc.Tools[i].Exposed {
		t.Errorf("crm.export, absent from the registry: %+v, want listed and not exposed", cc.Tools)
	}
	if i, ok := tools[mcpRefund]; !ok || !cc.Tools[i].Exposed || cc.Tools[i].Version != "1" {
		t.Errorf("%s: %+v, want exposed with the registry's version 1", mcpRefund, cc.Tools)
	}
}

// TestProposalGatePinsRunPack: the evidence gate of a proposal is compiled
// under the run's pinned pack from what the proposal step reads alone (no
// configuration snapshots: the step checks the configuration itself, and a
// replay packet rebuilds the gate from its own inputs): its decision
// record's context digest is the digest of that compilation, rebuilt here,
// and not the digest of one under the configured pack.
func TestProposalGatePinsRunPack(t *testing.T) {
	e := startPinned(t)
	res, r := callTool(t, e.runSession(emailToken, "run_v3"), "crm.lookup", map[string]any{"run_id": "run_v3", "operation_key": "look-1", "arguments": map[string]any{}})
	if res.IsError || r.Status != wire.StatusApplied {
		t.Fatalf("crm.lookup: %+v %s", r, text(res))
	}
	rows := e.mustOp("acme", wire.VerbDecisions, wire.DecisionsRequest{RunID: "run_v3"})
	got := rows.Decisions
	if len(got) != 1 || got[0].ContextDigest == "" {
		t.Fatalf("decisions of run_v3: %+v", got)
	}
	now := time.Date(2026, 10, 26, 12, 0, 0, 0, time.UTC) // startPacked's frozen clock
	run := kernel.RunContext{Tenant: "acme", Principal: "agent_email", RunID: "run_v3", DecisionKey: "crm.read",
		DecisionTime: now, Capabilities: []string{"crm.lookup"}}
	digest := func(src string) string {
		pack, err := kernel.ParseContextPack([]byte(src))
		if err != nil {
			t.Fatal(err)
		}
		cc, err := kernel.CompileContext(pack, run, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return cc.Digest
	}
	pinned, configured := digest(crmPackV3), digest(crmPackV2)
	if got[0].ContextDigest != pinned || pinned == configured {
		t.Fatalf("decision context digest %s, want %s (crm@3, the run's pin; crm@2 gives %s)", got[0].ContextDigest, pinned, configured)
	}
}

// TestMCPBridgeServesRunTools: the stdio bridge started for a run serves
// that run's tools (ctx mcp-stdio --run).
func TestMCPBridgeServesRunTools(t *testing.T) {
	e := startPinned(t)
	clientR, bridgeW := pipe(t)
	bridgeR, clientW := pipe(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- mcpgw.Bridge(ctx, e.rt.MCPURL, emailToken, "run_v3", &mcp.IOTransport{Reader: bridgeR, Writer: bridgeW})
	}()
	c := mcp.NewClient(&mcp.Implementation{Name: "stdio-agent", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.IOTransport{Reader: clientR, Writer: clientW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := listTools(t, cs), sorted(wire.ContextTool, "crm.lookup", mcpRefund); !slices.Equal(got, want) {
		t.Fatalf("bridge for run_v3 serves %v, want %v", got, want)
	}
	_ = cs.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the bridge did not stop when its client closed")
	}
}
