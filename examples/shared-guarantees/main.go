package main

import (
	"bytes"
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
	"syscall"
	"time"

	"github.com/contextos/ledger/wire"
	"github.com/nats-io/nats.go"
)

var (
	bin     = flag.String("bin", "bin", "directory holding contextosd, ctx and demo-provider")
	keep    = flag.Bool("keep", false, "keep the temporary data directory")
	verbose = flag.Bool("v", false, "show the daemon's log")
)

var passwords = map[string]string{"agent_email": "email-demo-secret", "agent_chat": "chat-demo-secret",
	"agent_phone": "phone-demo-secret", "ops_alice": "alice-demo-secret"}

type demo struct {
	dir      string
	natsURL  string
	provider string
	procs    []*exec.Cmd
	failures int
}

func main() {
	flag.Parse()
	start := time.Now()
	d := &demo{}
	code := 0
	if err := d.run(); err != nil {
		fmt.Fprintln(os.Stderr, "\ndemo: FAILED:", err)
		code = 1
	}
	d.cleanup()
	if code == 0 && d.failures > 0 {
		fmt.Fprintf(os.Stderr, "\ndemo: FAILED: %d check(s) did not hold\n", d.failures)
		code = 1
	}
	if code == 0 {
		fmt.Printf("\ndemo: every check held (%.1fs)\n", time.Since(start).Seconds())
	}
	os.Exit(code)
}

func step(n int, title string) {
	if fi, err := os.Stdout.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		fmt.Printf("\n\033[1m── %d. %s\033[0m\n", n, title)
		return
	}
	fmt.Printf("\n── %d. %s\n", n, title)
}

func (d *demo) check(ok bool, format string, args ...any) {
	mark := "✓"
	if !ok {
		mark = "✗"
		d.failures++
	}
	fmt.Printf("   %s %s\n", mark, fmt.Sprintf(format, args...))
}

func (d *demo) run() error {
	var err error
	d.dir, err = os.MkdirTemp("", "contextos-demo-")
	if err != nil {
		return err
	}
	step(0, "Start the synthetic payment provider and contextosd (embedded NATS, fsync on)")
	if err := d.startProvider(); err != nil {
		return err
	}
	if err := d.prepareWitness(); err != nil {
		return err
	}
	if err := d.startDaemon(); err != nil {
		return err
	}
	if err := d.startWitness(); err != nil {
		return err
	}
	fmt.Printf("   provider %s, contextosd NATS %s, data %s\n", d.provider, d.natsURL, d.dir)
	fmt.Println("   the operator admits each agent's run with a budget (a run nobody admitted is refused):")
	for _, a := range [][2]string{{"run_agent_email", "agent_email"}, {"run_agent_chat", "agent_chat"}, {"run_phone", "agent_phone"}} {
		args := []string{"admit-run", "--run", a[0], "--principal", a[1], "--calls", "5", "--amount", "200000"}
		fmt.Printf("   $ ctx %s\n", strings.Join(args, " "))
		d.ctx(args...)
	}

	step(1, "Two agents race INR 800 refunds on ord_881 (ceiling INR 1,000)")
	email, chat := d.agent("agent_email"), d.agent("agent_chat")
	defer email.Close()
	defer chat.Close()
	var wg sync.WaitGroup
	replies := map[string]wire.Reply{}
	var mu sync.Mutex
	for _, a := range []struct {
		nc   *nats.Conn
		name string
	}{{email, "agent_email"}, {chat, "agent_chat"}} {
		wg.Add(1)
		go func(nc *nats.Conn, name string) {
			defer wg.Done()
			r, err := propose(nc, name, "run_"+name, "refund-ord_881", "ord_881", 80000)
			if err != nil {
				r = wire.Reply{Status: "error", Reason: err.Error()}
			}
			mu.Lock()
			replies[name] = r
			mu.Unlock()
		}(a.nc, a.name)
	}
	wg.Wait()
	applied, exceeded := 0, 0
	for _, name := range []string{"agent_email", "agent_chat"} {
		r := replies[name]
		fmt.Printf("   %-12s %-8s %s\n", name, r.Status, describe(r))
		if r.Status == wire.StatusApplied {
			applied++
		}
		if r.Status == wire.StatusRefused && r.Code == wire.CodeExceeded {
			exceeded++
		}
	}
	d.check(applied == 1 && exceeded == 1, "one refund applied, one refused shared_guarantee_exceeded")
	st := d.providerStats()
	d.check(st.Calls == 1 && st.Applied == 1, "the provider received exactly one refund call (calls=%d applied=%d)", st.Calls, st.Applied)

	step(2, "A third agent asks INR 150; the provider answers pending")
	if err := d.providerPost("/admin/script", `{"modes":["pending"]}`); err != nil {
		return err
	}
	phone := d.agent("agent_phone")
	defer phone.Close()
	r3, err := propose(phone, "agent_phone", "run_phone", "refund-ord_881-partial", "ord_881", 15000)
	if err != nil {
		return err
	}
	fmt.Printf("   %-12s %-8s %s\n", "agent_phone", r3.Status, describe(r3))
	d.check(r3.Status == wire.StatusPending, "the reply is pending, attempt %s", r3.AttemptID)
	fmt.Println("   $ ctx exposure")
	d.ctx("exposure")
	d.checkExposure(80000, 15000, 5000)

	step(3, "The operator looks at the hold, queries the provider with ctx reconcile, and the hold settles")
	fmt.Println("   $ ctx attempts")
	d.ctx("attempts")
	if err := d.providerPost("/admin/settle", fmt.Sprintf(`{"idempotency_key":%q,"status":"succeeded"}`, r3.AttemptID)); err != nil {
		return err
	}
	fmt.Println("   (the provider has now completed the INR 150 refund)")
	fmt.Printf("   $ ctx reconcile --attempt %s\n", r3.AttemptID)
	d.ctx("reconcile", "--attempt", r3.AttemptID)
	fmt.Println("   $ ctx exposure")
	d.ctx("exposure")
	d.checkExposure(95000, 0, 5000)
	st = d.providerStats()
	d.check(st.Calls == 2 && st.Applied == 2, "the provider applied exactly two refunds in two calls (calls=%d applied=%d)", st.Calls, st.Applied)

	r4, err := propose(email, "agent_email", "run_agent_email", "refund-ord_881", "ord_881", 80000)
	if err != nil {
		return err
	}
	first := replies["agent_email"]
	d.check(r4.Status == first.Status && r4.Code == first.Code && r4.OperationID == first.OperationID,
		"agent_email resends its operation key: the same operation %s, still %s %s", r4.OperationID, r4.Status, r4.Code)
	d.check(d.providerStats().Calls == 2, "still two provider calls")

	step(4, "Finance raises the order's ceiling at runtime: a signed, versioned definition change")
	args := []string{"guarantee", "set-limit", "--guarantee", "refunds-per-order", "--limit", "200000", "--reason", "festival season: refunds up to INR 2,000 per order"}
	fmt.Printf("   $ ctx %s\n", strings.Join(args, " "))
	d.ctx(args...)
	fmt.Println("   $ ctx guarantee history refunds-per-order")
	d.ctx("guarantee", "history", "refunds-per-order")
	loser := "agent_chat"
	if replies["agent_email"].Status != wire.StatusApplied {
		loser = "agent_email"
	}
	r5, err := propose(d.agent(loser), loser, "run_"+loser, "refund-ord_881-raised", "ord_881", 80000)
	if err != nil {
		return err
	}
	fmt.Printf("   %-12s %-8s %s\n", loser, r5.Status, describe(r5))
	d.check(r5.Status == wire.StatusApplied && r5.Limit != nil && *r5.Limit == 200000,
		"%s's INR 800 now fits under the new version's ceiling of INR 2,000", loser)
	d.checkExposureUnder(175000, 0, 25000)
	winner := replies["agent_email"]
	if winner.Status != wire.StatusApplied {
		winner = replies["agent_chat"]
	}
	if err := d.auditStory(winner.AttemptID, loser, r5.AttemptID); err != nil {
		return err
	}
	return d.outcomes()
}

// outcomes prints the outcome report the run leaves: per guarantee and
// window, what applied, what was denied by code, and what is still open.
func (d *demo) outcomes() error {
	step(6, "Outcomes: applied, denials by code, pending, unknown and stranded exposure, side by side")
	fmt.Println("   $ ctx report")
	d.ctx("report")
	out, err := d.ctxOut("report", "--guarantee", "refunds-per-order", "-o", "json")
	if err != nil {
		d.check(false, "ctx report -o json: %v: %s", err, out)
		return nil
	}
	var rows []wire.OutcomeRow
	if err := json.Unmarshal(out, &rows); err != nil {
		return fmt.Errorf("ctx report -o json: %w", err)
	}
	var applied, exceeded int64
	for _, r := range rows {
		applied += r.AppliedAmount
		for _, dn := range r.Denials {
			if dn.Code == wire.CodeExceeded {
				exceeded += dn.Count
			}
		}
	}
	d.check(applied == 175000 && exceeded >= 1, "the report counts INR 1,750 applied and the refusal over the ceiling (applied %d, exceeded %d)", applied, exceeded)
	return nil
}

func describe(r wire.Reply) string {
	s := ""
	if r.Code != "" {
		s = string(r.Code) + " "
	}
	if r.Committed != nil {
		s += fmt.Sprintf("(committed %d, held %d, available %d of %d)", *r.Committed, *r.Held, *r.Available, *r.Limit)
	}
	return s
}

// checkExposureUnder checks the exposure of ord_881 as a proposal reply
// reports it under the guarantee's latest version.
func (d *demo) checkExposureUnder(committed, held, available int64) {
	out, err := d.ctxOut("exposure", "--resource", "ord_881", "--json")
	var rows []wire.ExposureRow
	if err == nil {
		err = json.Unmarshal(out, &rows)
	}
	ok := err == nil && len(rows) == 1 && rows[0].Committed == committed && rows[0].Held == held
	d.check(ok, "exposure of ord_881: committed %d, held %d (available %d under the new limit)", committed, held, available)
}

func (d *demo) checkExposure(committed, held, available int64) {
	out, err := d.ctxOut("exposure", "--resource", "ord_881", "--json")
	var rows []wire.ExposureRow
	if err == nil {
		err = json.Unmarshal(out, &rows)
	}
	ok := err == nil && len(rows) == 1 && rows[0].Committed == committed && rows[0].Held == held && rows[0].Available == available
	d.check(ok, "exposure of ord_881: committed %d, held %d, available %d", committed, held, available)
}

func propose(nc *nats.Conn, principal, run, key, order string, amount int64) (wire.Reply, error) {
	b, _ := json.Marshal(map[string]any{"run_id": run, "operation_key": key, "capability_id": "adp_payments.issue_refund",
		"arguments": map[string]any{"order_id": order, "amount_minor": amount, "currency": "INR"}})
	msg, err := nc.Request(wire.ProposeSubject("acme", principal), b, 15*time.Second)
	if err != nil {
		return wire.Reply{}, fmt.Errorf("%s propose: %w", principal, err)
	}
	var r wire.Reply
	return r, json.Unmarshal(msg.Data, &r)
}

func (d *demo) agent(name string) *nats.Conn {
	nc, err := nats.Connect(d.natsURL, nats.UserInfo(wire.UserName("acme", name), passwords[name]),
		nats.CustomInboxPrefix(wire.InboxPrefix("acme", name)))
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
	return nc
}

// ctx runs the ctx binary as the operator and shows its output indented.
func (d *demo) ctx(args ...string) {
	out, err := d.ctxOut(args...)
	for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		fmt.Println("     " + l)
	}
	if err != nil {
		d.check(false, "ctx %s: %v", strings.Join(args, " "), err)
	}
}

func (d *demo) ctxOut(args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(*bin, "ctx"), args...)
	cmd.Env = append(os.Environ(), "CTX_NATS="+d.natsURL, "CTX_TENANT=acme", "CTX_USER=ops_alice", "CTX_PASSWORD="+passwords["ops_alice"])
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return append(out, stderr.Bytes()...), err
	}
	return out, nil
}

func (d *demo) startProvider() error {
	portFile := filepath.Join(d.dir, "provider.addr")
	cmd := exec.Command(filepath.Join(*bin, "demo-provider"), "--port-file", portFile)
	if err := d.spawn(cmd); err != nil {
		return err
	}
	addr, err := waitFile(portFile, 10*time.Second)
	if err != nil {
		return fmt.Errorf("provider did not start: %w", err)
	}
	d.provider = "http://" + addr
	return nil
}

func (d *demo) startDaemon() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	listen := ln.Addr().String()
	ln.Close()
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(os.Args[0]), "contextos.toml"))
	if err != nil {
		raw, err = os.ReadFile("examples/shared-guarantees/contextos.toml")
	}
	if err != nil {
		return err
	}
	cfg := strings.NewReplacer("{{DATA}}", filepath.Join(d.dir, "data"), "{{LISTEN}}", listen, "{{PROVIDER}}", d.provider).Replace(string(raw)) + witnessConfig()
	path := filepath.Join(d.dir, "contextos.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(*bin, "contextosd"), "--config", path)
	if err := d.spawn(cmd); err != nil {
		return err
	}
	d.natsURL = "nats://" + listen
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		nc, err := nats.Connect(d.natsURL, nats.UserInfo("acme.ops_alice", passwords["ops_alice"]), nats.CustomInboxPrefix(wire.InboxPrefix("acme", "ops_alice")))
		if err == nil {
			_, err = nc.Request(wire.OpSubject("acme", "exposure", "ops_alice"), nil, time.Second)
			nc.Close()
			if err == nil {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.New("contextosd did not become ready")
}

func (d *demo) spawn(cmd *exec.Cmd) error {
	if *verbose {
		cmd.Stderr = os.Stderr
	} else {
		f, err := os.Create(filepath.Join(d.dir, filepath.Base(cmd.Path)+".log"))
		if err != nil {
			return err
		}
		cmd.Stderr = f
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	d.procs = append(d.procs, cmd)
	return nil
}

func (d *demo) cleanup() {
	for i := len(d.procs) - 1; i >= 0; i-- {
		p := d.procs[i]
		_ = p.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = p.Process.Kill()
			<-done
		}
	}
	if d.dir != "" && !*keep {
		os.RemoveAll(d.dir)
	} else if d.dir != "" {
		fmt.Println("   data kept in", d.dir)
	}
}

func waitFile(path string, limit time.Duration) (string, error) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return string(b), nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return "", fmt.Errorf("%s did not appear", path)
}

type providerStats struct{ Calls, Queries, Applied, Keys int }

func (d *demo) providerStats() providerStats {
	var s providerStats
	resp, err := http.Get(d.provider + "/admin/stats")
	if err != nil {
		return s
	}
	defer resp.Body.Close()
	_ = json.NewDecoder(resp.Body).Decode(&s)
	return s
}

func (d *demo) providerPost(path, body string) error {
	resp, err := http.Post(d.provider+path, "application/json", strings.NewReader(body))
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("provider %s: %s", path, resp.Status)
	}
	return nil
}
