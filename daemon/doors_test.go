package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/internal/testing/daemontest"
	"github.com/contextos/ledger/internal/testing/gatewaytest"
	"github.com/contextos/ledger/internal/testing/testenv"
	"github.com/contextos/ledger/mcpgw"
	"github.com/contextos/ledger/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
)

const doorsToken = "agent-email-mcp-token-0123456789"

// bootDoors boots the gateway test configuration with the MCP gateway (a
// token for acme's agent_email) and the console listening, its limits set
// by set, and the provider's handler wrapped by wrap (nil: as is).
func bootDoors(t *testing.T, set func(*config.Config), wrap func(http.Handler) http.Handler) *env {
	t.Helper()
	return startEnvWith(t, daemontest.Options{Provider: wrap, Config: func(cfg *config.Config) {
		cfg.MCP.Listen, cfg.Console.Listen = "127.0.0.1:0", "127.0.0.1:0"
		cfg.Console.MaxSessions, cfg.Console.SessionIdle.Duration = 4, time.Minute
		tc, _ := cfg.Tenant("acme")
		a, _ := tc.Agent("agent_email")
		a.MCPToken = doorsToken
		set(cfg)
	}})
}

// consoleDoor is an operator logged into the console.
type consoleDoor struct {
	t    *testing.T
	base string
	hc   *http.Client
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func (c *consoleDoor) csrf(path string) string {
	c.t.Helper()
	resp, err := c.hc.Get(c.base + path)
	if err != nil {
		c.t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := csrfField.FindSubmatch(page)
	if m == nil {
		c.t.Fatalf("no CSRF token in %s:\n%s", path, page)
	}
	return string(m[1])
}

// loginConsole logs acme's ops_alice into the console.
func loginConsole(t *testing.T, e *env) *consoleDoor {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &consoleDoor{t: t, base: e.rt.ConsoleURL, hc: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	resp, err := c.hc.PostForm(c.base+"/login", url.Values{"csrf": {c.csrf("/login")}, "tenant": {"acme"}, "operator": {"ops_alice"},
		"password": {passwords["acme.ops_alice"]}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther && resp.StatusCode != http.StatusFound {
		t.Fatalf("console login: %s", resp.Status)
	}
	return c
}

var flashCode = regexp.MustCompile(`(?s)id="flash" class="flash (ok|refused)"`)

// releaseKillSwitch runs the console's kill-switch-release action and
// returns the code of its result ("" when it was applied), read from the
// flash of the page it returns to.
func (c *consoleDoor) releaseKillSwitch() string {
	c.t.Helper()
	resp, err := c.hc.PostForm(c.base+"/act/kill-switch-release", url.Values{"csrf": {c.csrf("/confirm/kill-switch-release")}, "reason": {"doors test"}})
	if err != nil {
		c.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther && resp.StatusCode != http.StatusFound {
		c.t.Fatalf("console action: %s", resp.Status)
	}
	resp, err = c.hc.Get(c.base + "/kill-switch")
	if err != nil {
		c.t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := flashCode.FindSubmatch(page)
	if m == nil {
		c.t.Fatalf("the console shows no result of its action:\n%s", page)
	}
	if string(m[1]) == "ok" {
		return ""
	}
	i := bytes.Index(page, []byte(`id="flash"`))
	for _, code := range []wire.Code{wire.CodeRateLimited, wire.CodeOverloaded} {
		if bytes.Contains(page[i:min(len(page), i+2000)], []byte(code)) {
			return string(code)
		}
	}
	c.t.Fatalf("the console's action was refused for another reason:\n%s", page[i:min(len(page), i+2000)])
	return ""
}

// ctxOp sends an operator verb as ctx does: on the operator's subject.
func ctxOp(t *testing.T, nc *nats.Conn, verb string, req any) wire.OpReply {
	t.Helper()
	b, _ := json.Marshal(req)
	msg, err := nc.Request(wire.OpSubject("acme", verb, "ops_alice"), b, 10*time.Second)
	if err != nil {
		t.Fatalf("op %s: %v", verb, err)
	}
	var r wire.OpReply
	if err := json.Unmarshal(msg.Data, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// mcpRefund calls the refund tool through the MCP gateway.
func mcpRefund(t *testing.T, cs *mcp.ClientSession, key, order string) wire.Reply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "adp_payments.issue_refund", Arguments: map[string]any{"run_id": "run_doors", "operation_key": key,
		"arguments": map[string]any{"order_id": order, "amount_minor": 100, "currency": "INR"}}})
	if err != nil {
		t.Fatalf("MCP call: %v", err)
	}
	var r wire.Reply
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("MCP reply: %v", err)
	}
	return r
}

func mcpSession(t *testing.T, e *env) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := mcpgw.Connect(ctx, e.rt.MCPURL, doorsToken, "doors-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// TestDoorsShareRate: with a rate of 1/s and a burst of 2, a principal's
// requests spend one token bucket whichever door they come through. The
// agent's NATS proposals and MCP tool calls together, and the operator's
// ctx verbs and console actions together, get at most burst + elapsed
// seconds answered; the rest are refused rate_limited, on every door.
// Agent and operator are distinct principals (a name is one or the
// other), so each has a bucket of its own.
func TestDoorsShareRate(t *testing.T) {
	e := bootDoors(t, func(c *config.Config) {
		c.Runtime.Limits.ProposalsPerSecond, c.Runtime.Limits.ProposalBurst = 1, 2
	}, nil)
	// The agent: NATS, MCP, NATS, MCP, ...
	nc := e.client("acme", "agent_email")
	cs := mcpSession(t, e)
	applied, limited := 0, map[string]int{}
	begin := time.Now()
	for i := range 4 {
		r := e.propose(nc, "acme", "agent_email", refund("run_doors", fmt.Sprintf("nats-%d", i), fmt.Sprintf("ord_dn%d", i), 100))
		m := mcpRefund(t, cs, fmt.Sprintf("mcp-%d", i), fmt.Sprintf("ord_dm%d", i))
		for door, r := range map[string]wire.Reply{"nats": r, "mcp": m} {
			switch {
			case r.Status == wire.StatusApplied:
				applied++
			case r.Code == wire.CodeRateLimited:
				limited[door]++
			default:
				t.Fatalf("%s proposal %d: %s %s %s", door, i, r.Status, r.Code, r.Reason)
			}
		}
	}
	if most := 2 + int(time.Since(begin).Seconds()); applied > most || limited["nats"] == 0 || limited["mcp"] == 0 {
		t.Fatalf("agent: %d applied (at most %d), rate_limited by door %v; NATS and MCP spend one bucket", applied, most, limited)
	}

	// The operator: ctx, console, ctx, console, ... The console's pages
	// read through the same bucket, so they only lower what is answered.
	c := loginConsole(t, e)
	ops := e.client("acme", "ops_alice")
	answered, limited := 0, map[string]int{}
	begin = time.Now()
	for range 4 {
		switch r := ctxOp(t, ops, "exposure", wire.OpRequest{}); {
		case r.OK:
			answered++
		case r.Code == wire.CodeRateLimited:
			limited["ctx"]++
		default:
			t.Fatalf("ctx exposure: %s %s", r.Code, r.Reason)
		}
		switch code := c.releaseKillSwitch(); code {
		case "":
			answered++
		case string(wire.CodeRateLimited):
			limited["console"]++
		default:
			t.Fatalf("console action refused %s", code)
		}
	}
	if most := 2 + int(time.Since(begin).Seconds()); answered > most || limited["ctx"] == 0 || limited["console"] == 0 {
		t.Fatalf("operator: %d answered (at most %d), rate_limited by door %v; ctx and the console spend one bucket", answered, most, limited)
	}
}

// TestDoorsShareLane: a tenant's agents share its lane's agent share
// whichever their door: with one worker and a queue of one, a NATS
// proposal the provider holds and an MCP call queued behind it fill it,
// and the next proposal is refused overloaded with nothing stored. The
// operators' share stays free: a console action and a ctx verb of the
// same tenant are answered meanwhile, so no agent can keep an operator
// from the kill switch.
func TestDoorsShareLane(t *testing.T) {
	release := make(chan struct{})
	var held atomic.Int32
	e := bootDoors(t, func(c *config.Config) {
		c.Runtime.Limits.TenantWorkers, c.Runtime.Limits.TenantQueue = 1, 1
		for i := range c.Capabilities {
			c.Capabilities[i].HTTP.Timeout.Duration = 20 * time.Second
		}
	}, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			if bytes.Contains(b, []byte("ord_hold")) {
				held.Add(1)
				<-release
			}
			next.ServeHTTP(w, r)
		})
	})
	var once sync.Once
	done := func() { once.Do(func() { close(release) }) }
	t.Cleanup(done)

	nc := e.client("acme", "agent_email")
	cs := mcpSession(t, e)
	var wg sync.WaitGroup
	replies := make([]wire.Reply, 2)
	wg.Add(2)
	go func() {
		defer wg.Done()
		replies[0] = gatewaytest.Propose(t, nc, "acme", "agent_email", refund("run_lane", "held", "ord_hold", 100))
	}()
	testenv.Eventually(t, func() bool { return held.Load() == 1 }, 10*time.Second, "the NATS proposal to reach the provider")
	go func() {
		defer wg.Done()
		replies[1] = mcpRefund(t, cs, "queued", "ord_queued")
	}()
	testenv.Eventually(t, func() bool { return e.rt.Gateway.Proposing() == 2 }, 10*time.Second, "the MCP call to queue behind it")

	if r := e.propose(nc, "acme", "agent_email", refund("run_lane", "third", "ord_third", 100)); r.Code != wire.CodeOverloaded {
		t.Fatalf("a third proposal while the agents' share is full: %s %s %s", r.Status, r.Code, r.Reason)
	}
	if code := loginConsole(t, e).releaseKillSwitch(); code != "" {
		t.Fatalf("a console action while the agents' share is full: refused %s", code)
	}
	if r := ctxOp(t, e.client("acme", "ops_alice"), "exposure", wire.OpRequest{}); !r.OK {
		t.Fatalf("a ctx verb while the agents' share is full: %s %s", r.Code, r.Reason)
	}
	done()
	wg.Wait()
	for i, r := range replies {
		if r.Status != wire.StatusApplied {
			t.Fatalf("admitted proposal %d: %s %s %s", i, r.Status, r.Code, r.Reason)
		}
	}
	if strings.Contains(fmt.Sprint(e.prov.Refunds()), "ord_third") {
		t.Fatal("the overloaded proposal reached the provider")
	}
}
