package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/contextos/ledger/client"
	"github.com/contextos/ledger/gateway"
	"github.com/contextos/ledger/wire"
	"github.com/nats-io/nats.go"
)

// lookupPack governs crm.lookup: a decision that requires no evidence, so
// its gate is sufficient, and the lookup tool gated by it.
const lookupPack = `{"schema":"context_pack.v1","pack_id":"crm","version":"1",
 "buckets":[{"name":"evidence","max_tokens":100}],
 "decisions":[{"decision_key":"crm.read"}],
 "tools":[{"capability_id":"crm.lookup","gated_by":"crm.read"}]}`

// bootPacked boots the client tests' daemon with crm.lookup under
// lookupPack.
func bootPacked(t *testing.T) *testDaemon {
	t.Helper()
	pack := filepath.Join(t.TempDir(), "crm-pack.json")
	if err := os.WriteFile(pack, []byte(lookupPack), 0o644); err != nil {
		t.Fatal(err)
	}
	return bootEdited(t, gateway.Hooks{}, func(s string) string {
		const id = "id = \"crm.lookup\"\n"
		if !strings.Contains(s, id) {
			t.Fatal("the client tests' configuration has no crm.lookup")
		}
		return strings.Replace(s, id, id+"decision_key = \"crm.read\"\ncontext_pack = \""+pack+"\"\n", 1)
	})
}

// compiled is the part of a CompiledContext these tests read.
type compiled struct {
	Digest string `json:"digest"`
	Run    struct {
		Principal string `json:"principal"`
		RunID     string `json:"run_id"`
	} `json:"run"`
	Gate struct {
		DecisionKey   string `json:"decision_key"`
		CommitAllowed bool   `json:"commit_allowed"`
	} `json:"gate"`
	Tools []struct {
		CapabilityID string `json:"capability_id"`
		Exposed      bool   `json:"exposed"`
	} `json:"tools"`
}

// TestCompileContext: an agent fetches its run's compiled context through
// the client: the digest is the context's own, the gate is the
// capability's decision, and the tool the pack gates is exposed to the
// agent that holds it; a request the daemon refuses comes back as a
// Refused with its stable code.
func TestCompileContext(t *testing.T) {
	d := bootPacked(t)
	agent := d.connect(t, "agent_email")
	got, err := agent.CompileContext(ctxT(t), client.ContextRequest{RunID: "run_ctx", CapabilityID: "crm.lookup"})
	if err != nil {
		t.Fatal(err)
	}
	var cc compiled
	if err := json.Unmarshal(got.Context, &cc); err != nil {
		t.Fatal(err)
	}
	if len(got.Digest) != 64 || cc.Digest != got.Digest {
		t.Fatalf("digest %q, context says %q", got.Digest, cc.Digest)
	}
	if cc.Run.Principal != "agent_email" || cc.Run.RunID != "run_ctx" || cc.Gate.DecisionKey != "crm.read" || !cc.Gate.CommitAllowed {
		t.Fatalf("compiled context: %+v", cc)
	}
	if len(cc.Tools) != 1 || cc.Tools[0].CapabilityID != "crm.lookup" || !cc.Tools[0].Exposed {
		t.Fatalf("tools: %+v", cc.Tools)
	}

	for name, c := range map[string]struct {
		req  client.ContextRequest
		code client.Code
	}{
		"unknown capability": {client.ContextRequest{RunID: "run_ctx", CapabilityID: "no.such"}, client.CodeCapabilityNotSurfaced},
		"no context pack":    {client.ContextRequest{RunID: "run_ctx", CapabilityID: "bank.wire"}, client.CodeContextInvalid},
		"no run":             {client.ContextRequest{CapabilityID: "crm.lookup"}, client.CodeRequestMalformed},
		"empty ref":          {client.ContextRequest{RunID: "run_ctx", CapabilityID: "crm.lookup", EvidenceRefs: []string{""}}, client.CodeRequestMalformed},
	} {
		got, err := agent.CompileContext(ctxT(t), c.req)
		var r client.Refused
		if !errors.As(err, &r) || r.Code != c.code || r.Reason == "" || got.Context != nil {
			t.Errorf("%s: %+v %v, want refused %s", name, got, err, c.code)
		}
	}
}

// TestContextSubjectIsTheAgentsOwn: an agent cannot ask on another agent's
// context subject: the NATS server refuses the publish (a permissions
// violation naming the subject), no reply comes, and the other agent's
// context is never returned.
func TestContextSubjectIsTheAgentsOwn(t *testing.T) {
	d := bootPacked(t)
	// The violation ends the request: no reply will ever come.
	ctx, cancel := context.WithTimeoutCause(context.Background(), 10*time.Second, errors.New("no permissions violation reported"))
	defer cancel()
	violation := make(chan error, 4)
	nc, err := nats.Connect(d.rt.URL, nats.UserInfo(wire.UserName("acme", "agent_chat"), passwords["agent_chat"]),
		nats.CustomInboxPrefix(wire.InboxPrefix("acme", "agent_chat")),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { violation <- err; cancel() }))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	other := wire.ContextSubject("acme", "agent_email")
	m, err := nc.RequestWithContext(ctx, other, []byte(`{"run_id":"run_ctx","capability_id":"crm.lookup"}`))
	if err == nil {
		t.Fatalf("agent_chat got a reply on agent_email's context subject: %s", m.Data)
	}
	select {
	case v := <-violation:
		if !errors.Is(v, nats.ErrPermissionViolation) || !strings.Contains(v.Error(), other) {
			t.Fatalf("server error %v, want a permissions violation on %s", v, other)
		}
	default:
		t.Fatalf("request ended with %v (%v) and the server reported no permissions violation", err, context.Cause(ctx))
	}

	// Its own subject answers, with its own context: the refusal above is
	// the subject's permission, not a dead daemon.
	chat := d.connect(t, "agent_chat")
	own, err := chat.CompileContext(ctxT(t), client.ContextRequest{RunID: "run_ctx", CapabilityID: "crm.lookup"})
	if err != nil {
		t.Fatal(err)
	}
	var cc compiled
	if err := json.Unmarshal(own.Context, &cc); err != nil {
		t.Fatal(err)
	}
	if cc.Run.Principal != "agent_chat" || len(cc.Tools) != 1 || cc.Tools[0].Exposed {
		t.Fatalf("agent_chat's context: %+v (it does not hold crm.lookup)", cc)
	}
}
