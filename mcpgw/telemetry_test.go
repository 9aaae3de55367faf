package mcpgw_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"sync"
	"testing"

	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/daemon"
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
	logs := &syncBuf{}
	var format config.Config
	format.Runtime.LogFormat = "json"
	e := startOpts(t, nil, nil, daemon.BootOptions{Logger: config.NewLogger(&format, logs)})
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
