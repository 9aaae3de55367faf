package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/contextos/ledger/client"
	"github.com/contextos/ledger/examples/internal/story"
)

var (
	bin     = flag.String("bin", "bin", "directory holding contextosd and demo-provider")
	python  = flag.String("python", "python3", "the Python interpreter of the Python agent (with contextos-ledger installed)")
	tsAgent = flag.String("ts-agent", "examples/ts-agent/agent.js", "the built TypeScript agent (with contextos-ledger installed beside it)")
	verbose = flag.Bool("v", false, "show the daemon's log")
	fwDir   = flag.String("frameworks", "", "tell the framework agents' story: the folder of their scripts (examples/frameworks)")
)

var passwords = map[string]string{"agent_email": "email-demo-secret", "agent_chat": "chat-demo-secret",
	"agent_phone": "phone-demo-secret", "ops_alice": "alice-demo-secret"}

type demo struct {
	*story.Story
	natsURL, provider string
	config, mcpURL    string
}

// result is what the scripted agents print per refund (--json).
type result struct {
	Status      string `json:"status"`
	Code        string `json:"code"`
	OperationID string `json:"operation_id"`
	Available   *int64 `json:"available"`
	Next        string `json:"next"`
}

func main() {
	flag.Parse()
	d := &demo{Story: &story.Story{Name: "demo-clients", Verbose: *verbose}, config: "examples/shared-guarantees/contextos.toml"}
	run := d.run
	if *fwDir != "" {
		d.config, run, d.Name = filepath.Join(*fwDir, "contextos.toml"), d.frameworks, "demo-frameworks"
	}
	d.Main(run)
}

func (d *demo) run() error {
	fmt.Println("── 0. contextosd (embedded NATS) and the synthetic provider; the operator admits three runs through the Go client")
	if err := d.start(); err != nil {
		return err
	}
	ops, err := d.connect("ops_alice")
	if err != nil {
		return err
	}
	defer ops.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, a := range [][2]string{{"run_py", "agent_email"}, {"run_go", "agent_chat"}, {"run_ts", "agent_phone"}} {
		if _, err := ops.AdmitRun(ctx, client.AdmitRunRequest{RunID: a[0], Principal: a[1], Calls: 5, Amount: 200000}); err != nil {
			return err
		}
	}

	fmt.Println("\n── 1. The Python agent (agent_email) and the Go agent (agent_chat) race INR 800 refunds on ord_881 (ceiling INR 1,000)")
	py := d.agentCmd(*python, []string{"examples/python-agent/agent.py", "--json", "--wait", "refund-ord_881:ord_881:80000"}, "agent_email", "run_py")
	pyIn, _ := py.StdinPipe()
	pyOut, _ := py.StdoutPipe()
	if err := py.Start(); err != nil {
		return err
	}
	lines := bufio.NewScanner(pyOut)
	if !lines.Scan() || lines.Text() != "ready" {
		return fmt.Errorf("the Python agent did not get ready: %q", lines.Text())
	}
	goAgent, err := d.connect("agent_chat")
	if err != nil {
		return err
	}
	defer goAgent.Close()
	type goOutcome struct {
		dec client.Decision
		err error
	}
	goDone := make(chan goOutcome, 1)
	_, _ = io.WriteString(pyIn, "go\n") // both start now
	go func() {
		dec, err := goAgent.Propose(ctx, client.Proposal{RunID: "run_go", OperationKey: "refund-ord_881", CapabilityID: "adp_payments.issue_refund",
			Arguments: json.RawMessage(`{"order_id":"ord_881","amount_minor":80000,"currency":"INR"}`)})
		goDone <- goOutcome{dec, err}
	}()
	var pyRes result
	if !lines.Scan() || json.Unmarshal(lines.Bytes(), &pyRes) != nil {
		return fmt.Errorf("the Python agent printed %q", lines.Text())
	}
	_ = py.Wait()
	g := <-goDone
	goRes := result{Status: string(g.dec.Status)}
	var r client.Refused
	if errors.As(g.err, &r) {
		goRes = result{Status: "refused", Code: string(r.Code), Available: r.Decision.Available}
	} else if g.err != nil {
		return g.err
	}
	fmt.Printf("   %-22s %-8s %s\n", "agent_email (Python)", pyRes.Status, pyRes.Code)
	fmt.Printf("   %-22s %-8s %s\n", "agent_chat (Go)", goRes.Status, goRes.Code)
	won := map[string]int{}
	for _, x := range []result{pyRes, goRes} {
		won[x.Status+" "+x.Code]++
	}
	d.Check(won["applied "] == 1 && won["refused shared_guarantee_exceeded"] == 1, "one refund applied, one refused shared_guarantee_exceeded")
	d.Check(d.providerCalls() == 1, "the provider received exactly one refund call")

	fmt.Println("\n── 2. The TypeScript agent (agent_phone) meets each status")
	_ = d.post("/admin/script", `{"modes":["applied","pending"]}`)
	ts := d.runAgent("node", []string{*tsAgent, "--json", "refund-ord_990:ord_990:30000", "refund-ord_991:ord_991:10000", "refund-ord_881-b:ord_881:50000"}, "agent_phone", "run_ts")
	on := true
	if _, err := ops.KillSwitch(ctx, &on, "demo: the kill switch"); err != nil {
		return err
	}
	ts = append(ts, d.runAgent("node", []string{*tsAgent, "--json", "refund-ord_993:ord_993:100"}, "agent_phone", "run_ts")...)
	off := false
	if _, err := ops.KillSwitch(ctx, &off, "demo: released"); err != nil {
		return err
	}
	want := []string{"applied ", "pending ", "refused shared_guarantee_exceeded", "refused kill_switch_engaged"}
	for i, w := range want {
		got := ""
		if i < len(ts) {
			got = ts[i].Status + " " + ts[i].Code
			fmt.Printf("   %-8s %-34s -> %s\n", ts[i].Status, ts[i].Code, ts[i].Next)
		}
		d.Check(got == w, "refund %d: %s", i+1, strings.TrimSpace(w))
	}

	fmt.Println("\n── 3. The Python agent resends its operation key from a new process (a lost reply)")
	again := d.runAgent(*python, []string{"examples/python-agent/agent.py", "--json", "refund-ord_881:ord_881:80000"}, "agent_email", "run_py")
	d.Check(len(again) == 1 && again[0].Status == pyRes.Status && again[0].Code == pyRes.Code,
		"the same answer: %s %s", pyRes.Status, pyRes.Code)
	d.Check(d.providerCalls() == 3, "no new provider call for the resend (3 calls in all: ord_881, ord_990, ord_991)")
	return nil
}

func (d *demo) connect(principal string) (*client.Client, error) {
	return client.Connect(client.Options{URL: d.natsURL, Tenant: "acme", Principal: principal, Password: passwords[principal]})
}

func (d *demo) agentCmd(name string, args []string, principal, run string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "CTX_NATS="+d.natsURL, "CTX_TENANT=acme", "AGENT="+principal, "AGENT_PASSWORD="+passwords[principal], "AGENT_RUN="+run)
	cmd.Stderr = os.Stderr
	return cmd
}

// runAgent runs a scripted agent to its end and returns its results.
func (d *demo) runAgent(name string, args []string, principal, run string) []result {
	out, err := d.agentCmd(name, args, principal, run).Output()
	if err != nil {
		d.Check(false, "%s %s: %v", name, strings.Join(args, " "), err)
	}
	var rs []result
	for _, l := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		var r result
		if json.Unmarshal(l, &r) == nil {
			rs = append(rs, r)
		}
	}
	return rs
}

func (d *demo) start() error {
	var err error
	if d.provider, err = d.StartProvider(*bin); err != nil {
		return err
	}
	listen, err := story.FreeAddr()
	if err != nil {
		return err
	}
	mcpListen, err := story.FreeAddr()
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(d.config)
	if err != nil {
		return err
	}
	if strings.Contains(string(raw), "{{MCP_LISTEN}}") {
		d.mcpURL = "http://" + mcpListen + "/mcp"
	}
	cfg := strings.NewReplacer("{{DATA}}", filepath.Join(d.Dir, "data"), "{{LISTEN}}", listen, "{{PROVIDER}}", d.provider,
		"{{MCP_LISTEN}}", mcpListen).Replace(string(raw))
	path := filepath.Join(d.Dir, "contextos.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return err
	}
	if err := d.Spawn(exec.Command(filepath.Join(*bin, "contextosd"), "--config", path)); err != nil {
		return err
	}
	d.natsURL = "nats://" + listen
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := d.connect("ops_alice"); err == nil {
			_, err = c.Exposure(context.Background(), "", "")
			c.Close()
			if err == nil {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.New("contextosd did not become ready")
}

func (d *demo) providerCalls() int {
	resp, err := http.Get(d.provider + "/admin/stats")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var s struct{ Calls int }
	_ = json.NewDecoder(resp.Body).Decode(&s)
	return s.Calls
}

func (d *demo) post(path, body string) error {
	resp, err := http.Post(d.provider+path, "application/json", strings.NewReader(body))
	if err != nil {
		return err
	}
	return resp.Body.Close()
}
