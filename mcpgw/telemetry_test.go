package mcpgw_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/daemon"
	"github.com/contextos/ledger/internal/testing/provider"
	"github.com/contextos/ledger/wire"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// TestMCPProposalLogged: a proposal through the MCP gateway gets the same
// decision log line as one over NATS.
func TestMCPProposalLogged(t *testing.T) {
	hs := httptest.NewServer(provider.New().Handler())
	defer hs.Close()
	raw, err := os.ReadFile("testdata/mcp.toml")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.NewReplacer("{{DATA}}", t.TempDir(), "{{PROVIDER}}", hs.URL, "{{MCP_PROVIDER}}", "http://127.0.0.1:9/mcp").Replace(string(raw))
	cfg, err := config.Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Runtime.LogFormat = "json"
	logs := &syncBuf{}
	rt, err := daemon.Boot(cfg, daemon.BootOptions{Logger: config.NewLogger(cfg, logs)})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	e := &env{t: t, rt: rt}
	_, r := callTool(t, e.session(emailToken), httpRefund, refundArgs("run_mcp_log", "k1", "ord_mcp_log", 500))
	if r.Status != wire.StatusApplied {
		t.Fatalf("status %s %s", r.Status, r.Reason)
	}
	logs.mu.Lock()
	defer logs.mu.Unlock()
	sc := bufio.NewScanner(bytes.NewReader(logs.b.Bytes()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		if m["msg"] == "decision" && m["attempt"] == r.AttemptID && m["status"] == "applied" && m["capability"] == httpRefund {
			return
		}
	}
	t.Fatalf("no decision line for attempt %s:\n%s", r.AttemptID, logs.b.String())
}
