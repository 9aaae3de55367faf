package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/contextos/ledger/examples/internal/story"
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
	*story.Story
	natsURL  string
	provider string
}

func main() {
	flag.Parse()
	d := &demo{Story: &story.Story{Name: "demo", Keep: *keep, Verbose: *verbose, Elapsed: true}}
	d.Main(d.run)
}

func (d *demo) run() error {
	story.Step(0, "Start the synthetic payment provider and contextosd (embedded NATS, fsync on)")
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
	fmt.Printf("   provider %s, contextosd NATS %s, data %s\n", d.provider, d.natsURL, d.Dir)
	fmt.Println("   the operator admits each agent's run with a budget (a run nobody admitted is refused):")
	for _, a := range [][2]string{{"run_agent_email", "agent_email"}, {"run_agent_chat", "agent_chat"}, {"run_phone", "agent_phone"}} {
		args := []string{"admit-run", "--run", a[0], "--principal", a[1], "--calls", "5", "--amount", "200000"}
		fmt.Printf("   $ ctx %s\n", strings.Join(args, " "))
		d.ctx(args...)
	}

	story.Step(1, "Two agents race INR 800 refunds on ord_881 (ceiling INR 1,000)")
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
	d.Check(applied == 1 && exceeded == 1, "one refund applied, one refused shared_guarantee_exceeded")
	st := d.providerStats()
	d.Check(st.Calls == 1 && st.Applied == 1, "the provider received exactly one refund call (calls=%d applied=%d)", st.Calls, st.Applied)

	story.Step(2, "A third agent asks INR 150; the provider answers pending")
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
	d.Check(r3.Status == wire.StatusPending, "the reply is pending, attempt %s", r3.AttemptID)
	fmt.Println("   $ ctx exposure")
	d.ctx("exposure")
	d.checkExposure(80000, 15000, 5000)

	story.Step(3, "The operator looks at the hold, queries the provider with ctx reconcile, and the hold settles")
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
	d.Check(st.Calls == 2 && st.Applied == 2, "the provider applied exactly two refunds in two calls (calls=%d applied=%d)", st.Calls, st.Applied)

	r4, err := propose(email, "agent_email", "run_agent_email", "refund-ord_881", "ord_881", 80000)
	if err != nil {
		return err
	}
	first := replies["agent_email"]
	d.Check(r4.Status == first.Status && r4.Code == first.Code && r4.OperationID == first.OperationID,
		"agent_email resends its operation key: the same operation %s, still %s %s", r4.OperationID, r4.Status, r4.Code)
	d.Check(d.providerStats().Calls == 2, "still two provider calls")

	story.Step(4, "Finance raises the order's ceiling at runtime: a signed, versioned definition change")
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
	d.Check(r5.Status == wire.StatusApplied && r5.Limit != nil && *r5.Limit == 200000,
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
	story.Step(6, "Outcomes: applied, denials by code, pending, unknown and stranded exposure, side by side")
	fmt.Println("   $ ctx report")
	d.ctx("report")
	out, err := d.ctxOut("report", "--guarantee", "refunds-per-order", "-o", "json")
	if err != nil {
		d.Check(false, "ctx report -o json: %v: %s", err, out)
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
	d.Check(applied == 175000 && exceeded >= 1, "the report counts INR 1,750 applied and the refusal over the ceiling (applied %d, exceeded %d)", applied, exceeded)
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
	d.Check(ok, "exposure of ord_881: committed %d, held %d (available %d under the new limit)", committed, held, available)
}

func (d *demo) checkExposure(committed, held, available int64) {
	out, err := d.ctxOut("exposure", "--resource", "ord_881", "--json")
	var rows []wire.ExposureRow
	if err == nil {
		err = json.Unmarshal(out, &rows)
	}
	ok := err == nil && len(rows) == 1 && rows[0].Committed == committed && rows[0].Held == held && rows[0].Available == available
	d.Check(ok, "exposure of ord_881: committed %d, held %d, available %d", committed, held, available)
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
	d.Show(*bin, d.natsURL, "acme", "ops_alice", passwords["ops_alice"], args...)
}

func (d *demo) ctxOut(args ...string) ([]byte, error) {
	return story.Ctx(*bin, d.natsURL, "acme", "ops_alice", passwords["ops_alice"], args...)
}

func (d *demo) startProvider() (err error) {
	d.provider, err = d.StartProvider(*bin)
	return err
}

func (d *demo) startDaemon() error {
	listen, err := story.FreeAddr()
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(os.Args[0]), "contextos.toml"))
	if err != nil {
		raw, err = os.ReadFile("examples/shared-guarantees/contextos.toml")
	}
	if err != nil {
		return err
	}
	cfg := strings.NewReplacer("{{DATA}}", filepath.Join(d.Dir, "data"), "{{LISTEN}}", listen, "{{PROVIDER}}", d.provider).Replace(string(raw)) + witnessConfig()
	path := filepath.Join(d.Dir, "contextos.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(*bin, "contextosd"), "--config", path)
	if err := d.Spawn(cmd); err != nil {
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
