package mcpgw_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextos/ledger/internal/testing/gatewaytest"
	"github.com/contextos/ledger/internal/testing/testenv"
	"github.com/contextos/ledger/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// withRuntime adds lines to the configuration's [runtime] table.
func withRuntime(lines string) func(string) string {
	return func(s string) string {
		return strings.Replace(s, `executor = "test-1"`, "executor = \"test-1\"\n"+lines, 1)
	}
}

// TestAdmissionSharedRate: an agent's MCP tool calls and NATS proposals
// pass one admission path, so they spend one rate limit: over both doors
// together at most burst + elapsed seconds × rate are applied, the rest
// refused rate_limited, and the MCP door reports the refusal as a tool
// error whose text starts with the code.
func TestAdmissionSharedRate(t *testing.T) {
	const burst = 2
	e := startWith(t, func(s string) string {
		return strings.Replace(s, "[mcp]", "[runtime.limits]\nproposals_per_second = 1\nproposal_burst = 2\n\n[mcp]", 1)
	}, nil)
	cs := e.session(emailToken)
	nc := gatewaytest.Connect(t, e.rt.URL, "email-secret-passphrase", "acme", "agent_email")
	applied, limited := 0, map[string]int{}
	begin := time.Now()
	for i := range 10 {
		res, r := callTool(t, cs, httpRefund, refundArgs("run_rate", fmt.Sprintf("mcp-%d", i), fmt.Sprintf("ord_m%d", i), 100))
		switch {
		case r.Status == wire.StatusApplied:
			applied++
		case r.Code == wire.CodeRateLimited:
			if !res.IsError || !strings.HasPrefix(text(res), string(wire.CodeRateLimited)+":") {
				t.Fatalf("an MCP rate_limited refusal is not a tool error with the code: %q", text(res))
			}
			limited["mcp"]++
		default:
			t.Fatalf("MCP call %d: %s %s %s", i, r.Status, r.Code, r.Reason)
		}
		p := wire.Proposal{RunID: "run_rate", OperationKey: fmt.Sprintf("nats-%d", i), CapabilityID: httpRefund,
			Arguments: []byte(fmt.Sprintf(`{"order_id":"ord_n%d","amount_minor":100,"currency":"INR"}`, i))}
		switch r := gatewaytest.Propose(t, nc, "acme", "agent_email", p); {
		case r.Status == wire.StatusApplied:
			applied++
		case r.Code == wire.CodeRateLimited:
			limited["nats"]++
		default:
			t.Fatalf("NATS proposal %d: %s %s %s", i, r.Status, r.Code, r.Reason)
		}
	}
	elapsed := time.Since(begin)
	if most := burst + int(elapsed.Seconds()); applied > most {
		t.Fatalf("%d of 20 applied over both doors in %s; the shared rate allows at most %d", applied, elapsed, most)
	}
	if limited["mcp"] == 0 || limited["nats"] == 0 {
		t.Fatalf("rate_limited per door: %v; both doors spend the one limit", limited)
	}
	if applied+limited["mcp"]+limited["nats"] != 20 {
		t.Fatalf("applied %d, limited %v: not every proposal answered", applied, limited)
	}
}

// TestMCPTokenlessHoldsNoSlot: connections that carry no valid token (or
// send nothing) hold none of the tenant's connection slots: each tokenless
// request is answered 401 and its connection closed, and an agent with a
// valid token is served while more of them than there are slots are open.
func TestMCPTokenlessHoldsNoSlot(t *testing.T) {
	e := startWith(t, withRuntime("workers = 2"), nil) // 4 connection slots per tenant
	u, err := url.Parse(e.rt.MCPURL)
	if err != nil {
		t.Fatal(err)
	}
	dial := func() net.Conn {
		c, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	for range 4 {
		dial() // silent: never sends a request
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	for i := range 12 {
		c := dial()
		auth := ""
		if i%2 == 1 {
			auth = "Authorization: Bearer not-a-token\r\n"
		}
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\n%sContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s",
			u.Path, u.Host, auth, len(body), body)
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("tokenless connection %d not answered: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("tokenless connection %d: %d, want 401", i, resp.StatusCode)
		}
		// The server closed it: it holds nothing.
		if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
			t.Fatalf("tokenless connection %d left open after its 401: %v", i, err)
		}
	}
	cs := e.session(emailToken)
	if _, r := callTool(t, cs, httpRefund, refundArgs("run_slots", "k1", "ord_slots", 100)); r.Status != wire.StatusApplied {
		t.Fatalf("valid call while tokenless connections are open: %s %s %s", r.Status, r.Code, r.Reason)
	}
}

// TestMCPSlotsPerTenant: one tenant's slow calls fill its own MCP slots
// only; past them its next call is refused 503, while another tenant's
// call is served.
func TestMCPSlotsPerTenant(t *testing.T) {
	release := make(chan struct{})
	var slow atomic.Int32
	e := startWith(t, func(s string) string {
		return strings.Replace(withRuntime("workers = 2")(s), `timeout = "500ms"`, `timeout = "20s"`, 1)
	}, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			if bytes.Contains(b, []byte("ord_slow")) {
				slow.Add(1)
				<-release
			}
			next.ServeHTTP(w, r)
		})
	})
	var once sync.Once
	done := func() { once.Do(func() { close(release) }) }
	t.Cleanup(done)
	// acme fills its 2 request slots with calls the provider holds.
	var wg sync.WaitGroup
	for i := range 2 {
		cs := e.session(emailToken)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: httpRefund, Arguments: refundArgs("run_slow", fmt.Sprintf("slow-%d", i), fmt.Sprintf("ord_slow%d", i), 100)})
		}()
	}
	testenv.Eventually(t, func() bool { return slow.Load() == 2 }, 10*time.Second, "acme's calls to reach the provider")
	req, _ := http.NewRequest(http.MethodPost, e.rt.MCPURL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Authorization", "Bearer "+chatToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("acme's third call while its slots are held: %d, want 503", resp.StatusCode)
	}
	if _, r := callTool(t, e.session(globexToken), httpRefund, refundArgs("run_g", "g1", "ord_g1", 100)); r.Status != wire.StatusApplied {
		t.Fatalf("globex's call while acme's slots are held: %s %s %s", r.Status, r.Code, r.Reason)
	}
	done()
	wg.Wait()
}

// TestOperationKeyOwnership: an operation key belongs to the principal
// that opened it. Another agent's refused proposal with the key does not
// block this agent's proposal with it; two agents' accepted operations with
// one key of one run are two operations; a resend reads its own operation;
// and an agent's own refusal does not claim the key for its next action.
func TestOperationKeyOwnership(t *testing.T) {
	e := start(t)
	email, chat := e.session(emailToken), e.session(chatToken)
	// agent_chat holds no grant for crm.lookup: refused with run_k/K.
	if _, r := callTool(t, chat, "crm.lookup", map[string]any{"run_id": "run_k", "operation_key": "K", "arguments": map[string]any{}}); r.Code != wire.CodeAuthorityDenied {
		t.Fatalf("chat's lookup: %s %s %s", r.Status, r.Code, r.Reason)
	}
	_, mine := callTool(t, email, httpRefund, refundArgs("run_k", "K", "ord_k1", 100))
	if mine.Status != wire.StatusApplied {
		t.Fatalf("email's refund after chat's refused key: %s %s %s", mine.Status, mine.Code, mine.Reason)
	}
	// The same key of the same run, another principal, a real action: its own operation.
	_, theirs := callTool(t, chat, httpRefund, refundArgs("run_k", "K", "ord_k2", 100))
	if theirs.Status != wire.StatusApplied || theirs.OperationID == mine.OperationID {
		t.Fatalf("chat's refund with email's key: %s %s %s (operation %s, email's %s)", theirs.Status, theirs.Code, theirs.Reason, theirs.OperationID, mine.OperationID)
	}
	// Resends read each principal's own operation; nothing is dispatched again.
	before := e.prov.Stats()
	if _, r := callTool(t, email, httpRefund, refundArgs("run_k", "K", "ord_k1", 100)); r.OperationID != mine.OperationID || r.Status != wire.StatusApplied {
		t.Fatalf("email's resend: %s %s operation %s, want %s", r.Status, r.Code, r.OperationID, mine.OperationID)
	}
	if _, r := callTool(t, chat, httpRefund, refundArgs("run_k", "K", "ord_k2", 100)); r.OperationID != theirs.OperationID || r.Status != wire.StatusApplied {
		t.Fatalf("chat's resend: %s %s operation %s, want %s", r.Status, r.Code, r.OperationID, theirs.OperationID)
	}
	if after := e.prov.Stats(); after != before {
		t.Fatalf("a resend reached the provider: %+v then %+v", before, after)
	}
	// A claimed key still refuses its own principal's other action.
	if _, r := callTool(t, email, httpRefund, refundArgs("run_k", "K", "ord_k3", 100)); r.Code != wire.CodeOperationConflict {
		t.Fatalf("email's other action on its key: %s %s %s", r.Status, r.Code, r.Reason)
	}
	// An agent's own refusal (over the guarantee's limit) claims nothing.
	if _, r := callTool(t, email, httpRefund, refundArgs("run_k", "K2", "ord_k4", 200000)); r.Status != wire.StatusRefused || r.Code == wire.CodeOperationConflict {
		t.Fatalf("email's refund over the limit: %s %s %s", r.Status, r.Code, r.Reason)
	}
	if _, r := callTool(t, email, httpRefund, refundArgs("run_k", "K2", "ord_k4", 100)); r.Status != wire.StatusApplied {
		t.Fatalf("email's refund after its own refusal with the key: %s %s %s", r.Status, r.Code, r.Reason)
	}
}
