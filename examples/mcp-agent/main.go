package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/contextos/ledger/examples/internal/story"
	"github.com/contextos/ledger/internal/testing/mcpprovider"
	"github.com/contextos/ledger/mcpgw"
	"github.com/contextos/ledger/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var (
	bin     = flag.String("bin", "bin", "directory holding contextosd and ctx")
	keep    = flag.Bool("keep", false, "keep the temporary data directory")
	verbose = flag.Bool("v", false, "show the daemon's log")
)

var tokens = map[string]string{"agent_email": "demo-email-token-0123456789abcdef", "agent_chat": "demo-chat-token-0123456789abcdef",
	"agent_phone": "demo-phone-token-0123456789abcdef"}

const (
	tool          = "demo_payments.issue_refund"
	alicePassword = "alice-demo-secret"
)

type demo struct {
	*story.Story
	natsURL  string
	mcpURL   string
	provURL  string
	provider *mcpprovider.Server
}

func main() {
	flag.Parse()
	d := &demo{Story: &story.Story{Name: "mcp demo", Keep: *keep, Verbose: *verbose, Elapsed: true}, provider: mcpprovider.New()}
	d.Main(d.run)
}

func (d *demo) run() error {
	story.Step(0, "Start an MCP payments server (the provider) and contextosd with its MCP gateway")
	if err := d.startProvider(); err != nil {
		return err
	}
	fmt.Printf("   $ ctx capability import --mcp %s --tool issue_refund\n", d.provURL)
	d.ctx("capability", "import", "--mcp", d.provURL, "--tool", "issue_refund")
	if err := d.startDaemon(); err != nil {
		return err
	}
	fmt.Printf("   MCP provider %s, contextosd MCP %s, NATS %s\n", d.provURL, d.mcpURL, d.natsURL)
	for _, a := range []string{"agent_email", "agent_chat", "agent_phone"} {
		d.ctx("admit-run", "--run", "run_"+a, "--principal", a, "--calls", "5", "--amount", "200000")
	}
	fmt.Println("   the operator admitted one run per agent (ctx admit-run)")

	story.Step(1, "An agent lists its tools over MCP")
	email, chat := d.session("agent_email"), d.session("agent_chat")
	defer email.Close()
	defer chat.Close()
	for t, err := range email.Tools(context.Background(), nil) {
		if err != nil {
			return err
		}
		fmt.Printf("   tool %s: %s\n", t.Name, t.Description)
	}

	story.Step(2, "Two agents race INR 800 refunds on ord_881 over MCP (ceiling INR 1,000)")
	var wg sync.WaitGroup
	results := map[string]result{}
	var mu sync.Mutex
	for name, cs := range map[string]*mcp.ClientSession{"agent_email": email, "agent_chat": chat} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := call(cs, "run_"+name, "refund-ord_881", "ord_881", 80000)
			mu.Lock()
			results[name] = r
			mu.Unlock()
		}()
	}
	wg.Wait()
	applied, exceeded := 0, 0
	for _, name := range []string{"agent_email", "agent_chat"} {
		r := results[name]
		fmt.Printf("   %-12s %s\n", name, r)
		if !r.isError && r.reply.Status == wire.StatusApplied {
			applied++
		}
		if r.isError && strings.HasPrefix(r.text, string(wire.CodeExceeded)+":") {
			exceeded++
		}
	}
	d.Check(applied == 1 && exceeded == 1, "one refund applied, one an MCP tool error starting with shared_guarantee_exceeded")
	st := d.provider.Stats()
	d.Check(st.Calls == 1 && st.Applied == 1, "the MCP provider received exactly one issue_refund call (calls=%d applied=%d)", st.Calls, st.Applied)

	story.Step(3, "A third agent asks INR 150; the provider's tool answers pending")
	d.provider.Script(mcpprovider.Pending)
	phone := d.session("agent_phone")
	defer phone.Close()
	r3 := call(phone, "run_agent_phone", "refund-ord_881-partial", "ord_881", 15000)
	fmt.Printf("   %-12s %s\n", "agent_phone", r3)
	d.Check(r3.reply.Status == wire.StatusPending, "the result is pending, attempt %s, INR 150 held", r3.reply.AttemptID)
	d.checkExposure(80000, 15000, 5000)
	d.provider.Settle(r3.reply.AttemptID, "succeeded")
	fmt.Println("   (the provider has now completed the INR 150 refund)")
	fmt.Printf("   $ ctx reconcile --attempt %s\n", r3.reply.AttemptID)
	d.ctx("reconcile", "--attempt", r3.reply.AttemptID)
	d.checkExposure(95000, 0, 5000)

	story.Step(4, "INR 40 more; the provider applies it but the connection breaks before it answers")
	d.provider.Script(mcpprovider.Break)
	r4 := call(phone, "run_agent_phone", "refund-ord_881-late", "ord_881", 4000)
	fmt.Printf("   %-12s %s\n", "agent_phone", r4)
	d.Check(r4.reply.Status == wire.StatusUnknown, "the outcome is unknown and the INR 40 stay held")
	d.checkExposure(95000, 4000, 1000)
	fmt.Println("   $ ctx reconcile --all   (asks the provider's get_refund tool by the attempt id)")
	d.ctx("reconcile", "--all")
	d.checkExposure(99000, 0, 1000)
	st = d.provider.Stats()
	d.Check(st.Calls == 3 && st.Applied == 3, "three issue_refund calls, three refunds (calls=%d applied=%d queries=%d)", st.Calls, st.Applied, st.Queries)

	again := call(email, "run_agent_email", "refund-ord_881", "ord_881", 80000)
	first := results["agent_email"]
	d.Check(again.reply.OperationID == first.reply.OperationID && again.reply.Status == first.reply.Status,
		"agent_email resends its operation key: the same operation, still %s", first.reply.Status)
	d.Check(d.provider.Stats().Calls == 3, "still three provider calls")
	return nil
}

// result is one tool call's result as an agent sees it.
type result struct {
	isError bool
	text    string
	reply   wire.Reply
}

func (r result) String() string {
	if r.isError {
		return "error: " + r.text
	}
	s := string(r.reply.Status)
	if r.reply.Committed != nil {
		s += fmt.Sprintf(" (committed %d, held %d, available %d of %d)", *r.reply.Committed, *r.reply.Held, *r.reply.Available, *r.reply.Limit)
	}
	return s
}

func call(cs *mcp.ClientSession, run, key, order string, amount int64) result {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"run_id": run, "operation_key": key,
		"arguments": map[string]any{"order_id": order, "amount_minor": amount, "currency": "INR"}}})
	if err != nil {
		return result{isError: true, text: err.Error()}
	}
	out := result{isError: res.IsError}
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			out.text += t.Text
		}
	}
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &out.reply)
	return out
}

func (d *demo) session(agent string) *mcp.ClientSession {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := mcpgw.Connect(ctx, d.mcpURL, tokens[agent], agent)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcp demo:", err)
		os.Exit(1)
	}
	return cs
}

func (d *demo) checkExposure(committed, held, available int64) {
	out, err := d.ctxOut("exposure", "--resource", "ord_881", "--json")
	var rows []wire.ExposureRow
	if err == nil {
		err = json.Unmarshal(out, &rows)
	}
	ok := err == nil && len(rows) == 1 && rows[0].Committed == committed && rows[0].Held == held && rows[0].Available == available
	d.Check(ok, "ctx exposure: ord_881 committed %d, held %d, available %d", committed, held, available)
}

// ctx runs the ctx binary as the operator and shows its output indented.
func (d *demo) ctx(args ...string) {
	d.Show(*bin, d.natsURL, "acme", "ops_alice", alicePassword, args...)
}

func (d *demo) ctxOut(args ...string) ([]byte, error) {
	return story.Ctx(*bin, d.natsURL, "acme", "ops_alice", alicePassword, args...)
}

func (d *demo) startProvider() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	d.provURL = "http://" + ln.Addr().String() + "/mcp"
	mux := http.NewServeMux()
	mux.Handle("/mcp", d.provider.Handler())
	go func() { _ = (&http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}).Serve(ln) }()
	return nil
}

func (d *demo) startDaemon() error {
	listen, err := story.FreeAddr()
	if err != nil {
		return err
	}
	mcpListen, err := story.FreeAddr()
	if err != nil {
		return err
	}
	raw, err := os.ReadFile("examples/mcp-agent/contextos.toml")
	if err != nil {
		return err
	}
	cfg := strings.NewReplacer("{{DATA}}", filepath.Join(d.Dir, "data"), "{{LISTEN}}", listen, "{{MCP_LISTEN}}", mcpListen,
		"{{PROVIDER}}", d.provURL).Replace(string(raw))
	path := filepath.Join(d.Dir, "contextos.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return err
	}
	if err := d.Spawn(exec.Command(filepath.Join(*bin, "contextosd"), "--config", path)); err != nil {
		return err
	}
	d.natsURL, d.mcpURL = "nats://"+listen, "http://"+mcpListen+"/mcp"
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		cs, err := mcpgw.Connect(ctx, d.mcpURL, tokens["agent_email"], "probe")
		cancel()
		if err == nil {
			_ = cs.Close()
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.New("contextosd's MCP gateway did not become ready")
}
