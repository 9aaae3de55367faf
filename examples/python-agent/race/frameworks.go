package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/contextos/ledger/client"
)

// frameworkAgent is one agent of examples/frameworks: its script, the
// principal it runs as and its run.
type frameworkAgent struct {
	script, principal, run, mcpToken string
}

var frameworkAgents = []frameworkAgent{
	{"openai_agents_agent.py", "agent_email", "run_openai_agents", ""},
	{"langgraph_agent.py", "agent_chat", "run_langgraph", ""},
	{"mcp_agent.py", "agent_phone", "run_mcp", "demo-phone-token-0123456789abcdef"},
}

// frameworks tells the framework agents' story: contextosd with the MCP
// gateway on and the synthetic provider, a run admitted per agent, then each
// agent's script (from the installed wheel's virtualenv, --python), which
// checks its own outcomes and exits non-zero if one differs; the driver
// checks the provider's call count across them (four refunds and credits
// reach the provider per agent; resends and refusals none).
func (d *demo) frameworks() error {
	fmt.Println("── 0. contextosd (embedded NATS, the MCP gateway on) and the synthetic provider; the operator admits a run per agent")
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
	for _, a := range frameworkAgents {
		if _, err := ops.AdmitRun(ctx, client.AdmitRunRequest{RunID: a.run, Principal: a.principal, Calls: 20, Amount: 500000}); err != nil {
			return err
		}
	}
	for _, a := range frameworkAgents {
		fmt.Println()
		cmd := exec.Command(*python, filepath.Join(*fwDir, a.script))
		cmd.Env = append(os.Environ(), "CTX_NATS="+d.natsURL, "CTX_TENANT=acme", "AGENT="+a.principal,
			"AGENT_PASSWORD="+passwords[a.principal], "AGENT_RUN="+a.run, "OPS=ops_alice", "OPS_PASSWORD="+passwords["ops_alice"],
			"PROVIDER="+d.provider, "CTX_MCP_URL="+d.mcpURL, "AGENT_MCP_TOKEN="+a.mcpToken)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			d.Check(false, "%s: %v", a.script, err)
		} else {
			d.Check(true, "%s: every check of its story held", a.script)
		}
	}
	fmt.Println()
	want := 4 * len(frameworkAgents)
	d.Check(d.providerCalls() == want, "the provider received %d calls in all: no resend or refusal reached it", want)
	return nil
}
