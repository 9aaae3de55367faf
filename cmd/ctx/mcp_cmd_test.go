package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/daemon"
	"github.com/contextos/ledger/internal/testing/daemontest"
	"github.com/contextos/ledger/internal/testing/mcpprovider"
	"github.com/contextos/ledger/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMain lets a test run this binary as the ctx command itself
// (CTX_TEST_AS_CTX=1), so that ctx mcp-stdio is tested as a real process
// speaking stdio.
func TestMain(m *testing.M) {
	if os.Getenv("CTX_TEST_AS_CTX") == "1" {
		os.Exit(run(os.Args[1:]))
	}
	os.Exit(m.Run())
}

const stdioToken = "acme-stdio-token-0123456789abcdef"

// bootMCP boots the refund configuration with the MCP gateway on and
// agent_email holding stdioToken.
func bootMCP(t *testing.T) *daemon.Runtime {
	t.Helper()
	return daemontest.Boot(t, daemontest.Options{Edit: strings.NewReplacer(
		"[[tenants]]\nid = \"acme\"", "[mcp]\nlisten = \"127.0.0.1:0\"\n\n[[tenants]]\nid = \"acme\"",
		`password = "email-secret-passphrase"`, `password = "email-secret-passphrase"`+"\n  mcp_token = \""+stdioToken+"\"",
	).Replace}).RT
}

// TestMCPStdio runs ctx mcp-stdio as a process with the token in a file and
// drives it with the Go SDK's client over its stdin/stdout.
func TestMCPStdio(t *testing.T) {
	rt := bootMCP(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(stdioToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "mcp-stdio", "--url", rt.MCPURL, "--token-file", tokenFile)
	cmd.Env = append(os.Environ(), "CTX_TEST_AS_CTX=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "stdio-agent", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v (stderr %s)", err, stderr.String())
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "adp_payments.issue_refund", Arguments: map[string]any{
		"run_id": "run_s", "operation_key": "refund-s", "arguments": map[string]any{"order_id": "ord_s", "amount_minor": 80000}}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var r wire.Reply
	_ = json.Unmarshal(b, &r)
	if res.IsError || r.Status != "applied" || r.Available == nil || *r.Available != 20000 {
		t.Fatalf("bridged call: %s", b)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "adp_payments.issue_refund", Arguments: map[string]any{
		"run_id": "run_s", "operation_key": "refund-s2", "arguments": map[string]any{"order_id": "ord_s", "amount_minor": 80000}}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.HasPrefix(res.Content[0].(*mcp.TextContent).Text, "shared_guarantee_exceeded:") {
		t.Fatalf("over the ceiling through the bridge: %+v", res.Content)
	}
	if err := cs.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 0 {
		t.Fatalf("the bridge did not exit 0 when its client closed stdin: %v, stderr %s", cmd.ProcessState, stderr.String())
	}
	if strings.Contains(stderr.String(), stdioToken) {
		t.Fatal("the bridge printed its token")
	}
}

// TestMCPStdioErrors: usage errors exit 2 and an unreachable gateway 3,
// and no message quotes the token.
func TestMCPStdioErrors(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty")
	_ = os.WriteFile(empty, nil, 0o600)
	cases := []struct {
		args []string
		env  []string
		code int
	}{
		{[]string{"mcp-stdio"}, []string{"CTX_MCP_TOKEN=" + stdioToken}, 2},
		{[]string{"mcp-stdio", "--url", "http://127.0.0.1:1/mcp"}, []string{"CTX_MCP_TOKEN="}, 2},
		{[]string{"mcp-stdio", "--url", "http://127.0.0.1:1/mcp", "--token-file", empty}, nil, 2},
		{[]string{"mcp-stdio", "--url", "http://127.0.0.1:1/mcp"}, []string{"CTX_MCP_TOKEN=" + stdioToken}, 3},
	}
	for _, c := range cases {
		cmd := exec.Command(os.Args[0], c.args...)
		cmd.Env = append(append(os.Environ(), "CTX_TEST_AS_CTX=1", "CTX_MCP_URL="), c.env...)
		cmd.Stdin = strings.NewReader("")
		out, _ := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != c.code {
			t.Errorf("ctx %v: exit %d, want %d: %s", c.args, code, c.code, out)
		}
		if bytes.Contains(out, []byte(stdioToken)) {
			t.Errorf("ctx %v printed the token", c.args)
		}
	}
}

// TestCapabilityImport drafts the manifest of a Go SDK server's tools: the
// draft parses as TOML, its arguments schema is the tool's less the
// idempotency argument, and effectful follows the read-only annotation.
func TestCapabilityImport(t *testing.T) {
	hs := httptest.NewServer(mcpprovider.New().Handler())
	defer hs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	type draft struct {
		Capabilities []config.CapabilityConfig `toml:"capabilities"`
	}
	parse := func(t *testing.T, s string) config.CapabilityConfig {
		t.Helper()
		var d draft
		if _, err := toml.Decode(s, &d); err != nil || len(d.Capabilities) != 1 {
			t.Fatalf("draft does not parse (%v):\n%s", err, s)
		}
		return d.Capabilities[0]
	}

	s, err := importTool(ctx, hs.URL, "issue_refund", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	cp := parse(t, s)
	if cp.ID != "demo-payments.issue_refund" || !cp.Effectful || cp.Adapter != "mcp" || cp.MCP.Tool != "issue_refund" ||
		cp.MCP.URL != hs.URL || cp.MCP.IdempotencyArgument != "idempotency_key" {
		t.Fatalf("draft %+v\n%s", cp, s)
	}
	var schema struct {
		Type       string                     `json:"type"`
		Required   []string                   `json:"required"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal([]byte(cp.ArgumentsSchema), &schema); err != nil {
		t.Fatal(err)
	}
	if schema.Type != "object" || schema.Properties["order_id"] == nil || schema.Properties["idempotency_key"] != nil ||
		strings.Contains(strings.Join(schema.Required, ","), "idempotency_key") {
		t.Fatalf("arguments schema %s", cp.ArgumentsSchema)
	}
	for _, want := range []string{`# query_tool = "get_refund"`, `# completion = "/refund/status"`} {
		if !strings.Contains(s, want) {
			t.Fatalf("draft lacks %s:\n%s", want, s)
		}
	}

	s, err = importTool(ctx, hs.URL, "get_refund", "payments.lookup", nil)
	if err != nil {
		t.Fatal(err)
	}
	if cp := parse(t, s); cp.ID != "payments.lookup" || cp.Effectful {
		t.Fatalf("read-only tool drafted as %+v", cp)
	}

	if _, err := importTool(ctx, hs.URL, "no_such_tool", "", nil); err == nil || !strings.Contains(err.Error(), "issue_refund") {
		t.Fatalf("unknown tool: %v", err)
	}
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"capability", "import", "--mcp", hs.URL, "--tool", "get_refund"}, 0},
		{[]string{"capability", "import", "--mcp", hs.URL, "--tool", "no_such_tool"}, 1},
		{[]string{"capability", "import", "--mcp", hs.URL}, 2},
		{[]string{"capability", "import", "--mcp", "http://127.0.0.1:1/mcp", "--tool", "x"}, 3},
	} {
		if code := run(c.args); code != c.code {
			t.Errorf("ctx %v: exit %d, want %d", c.args, code, c.code)
		}
	}
}
