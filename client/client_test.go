package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/contextos/ledger/client"
	"github.com/contextos/ledger/daemon"
	"github.com/contextos/ledger/gateway"
	"github.com/contextos/ledger/internal/testing/daemontest"
	"github.com/contextos/ledger/internal/testing/provider"
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

type testDaemon struct {
	rt   *daemon.Runtime
	prov *provider.Server
}

// boot starts a real runtime (embedded NATS with JetStream) and the
// synthetic provider on loopback.
func boot(t *testing.T, hooks gateway.Hooks) *testDaemon {
	t.Helper()
	return bootEdited(t, hooks, nil)
}

// bootEdited boots as boot does with the configuration edit gives.
func bootEdited(t *testing.T, hooks gateway.Hooks, edit func(string) string) *testDaemon {
	t.Helper()
	d := daemontest.Boot(t, daemontest.Options{Edit: edit, Boot: daemon.BootOptions{Hooks: hooks}})
	return &testDaemon{rt: d.RT, prov: d.Provider}
}

var passwords = daemontest.Passwords

func (d *testDaemon) connect(t *testing.T, principal string, o ...func(*client.Options)) *client.Client {
	t.Helper()
	opts := client.Options{URL: d.rt.URL, Tenant: "acme", Principal: principal, Password: passwords[principal], Timeout: 5 * time.Second}
	for _, f := range o {
		f(&opts)
	}
	c, err := client.Connect(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func refund(run, key, order string, amount int64) client.Proposal {
	args, _ := json.Marshal(map[string]any{"order_id": order, "amount_minor": amount, "currency": "INR"})
	return client.Proposal{RunID: run, OperationKey: key, CapabilityID: "adp_payments.issue_refund", Arguments: args}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestSeedRace: two agents race INR 800 refunds on one order under a
// ceiling of INR 1,000: one is applied, the other is a Refused carrying
// shared_guarantee_exceeded and the balances, and the provider saw one call.
func TestSeedRace(t *testing.T) {
	d := boot(t, gateway.Hooks{})
	agents := []*client.Client{d.connect(t, "agent_email"), d.connect(t, "agent_chat")}
	var wg sync.WaitGroup
	decisions := make([]client.Decision, 2)
	errs := make([]error, 2)
	for i, c := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			decisions[i], errs[i] = c.Propose(ctxT(t), refund("run_"+c.Principal(), "refund-ord_881", "ord_881", 80000))
		}()
	}
	wg.Wait()
	applied, exceeded := 0, 0
	for i := range agents {
		var r client.Refused
		switch {
		case errs[i] == nil && decisions[i].Status == client.StatusApplied:
			applied++
		case errors.As(errs[i], &r) && errors.Is(errs[i], client.Refused{Code: client.CodeExceeded}):
			exceeded++
			if r.Decision == nil || r.Decision.Available == nil || *r.Decision.Available != 20000 {
				t.Errorf("refusal without its balances: %+v", r.Decision)
			}
		default:
			t.Errorf("agent %d: %+v %v", i, decisions[i], errs[i])
		}
	}
	if applied != 1 || exceeded != 1 {
		t.Fatalf("applied %d exceeded %d, want 1 and 1", applied, exceeded)
	}
	if st := d.prov.Stats(); st.Calls != 1 {
		t.Fatalf("provider calls %d, want 1", st.Calls)
	}
}

// TestResendAfterLostReply: the daemon's reply is held until the client
// has given up waiting for it; the client resends the same operation key
// and learns the outcome of the one operation, with one provider call.
func TestResendAfterLostReply(t *testing.T) {
	resent := make(chan struct{})
	var once sync.Once
	d := boot(t, gateway.Hooks{AfterProviderCall: func(string) { <-resent }})
	ops := d.connect(t, "ops_alice")
	c := d.connect(t, "agent_email", func(o *client.Options) {
		o.Timeout = 200 * time.Millisecond
		// The first reply is lost (the hook held it past the timeout);
		// before resending, let the first request finish, so that the
		// resend finds the operation settled rather than in flight.
		o.OnResend = func(int, error) {
			once.Do(func() {
				close(resent)
				deadline := time.Now().Add(10 * time.Second)
				for time.Now().Before(deadline) {
					if rows, err := ops.Exposure(context.Background(), "", "ord_9"); err == nil && len(rows) == 1 && rows[0].Committed == 30000 {
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
				t.Error("the first request never settled")
			})
		}
	})
	dec, err := c.Propose(ctxT(t), refund("run_lost", "op-lost", "ord_9", 30000))
	if err != nil || dec.Status != client.StatusApplied {
		t.Fatalf("%+v %v", dec, err)
	}
	select {
	case <-resent:
	default:
		t.Fatal("the client never resent")
	}
	if st := d.prov.Stats(); st.Calls != 1 {
		t.Fatalf("provider calls %d, want 1", st.Calls)
	}
	again, err := c.Propose(ctxT(t), refund("run_lost", "op-lost", "ord_9", 30000))
	if err != nil || again.OperationID != dec.OperationID || again.AttemptID != dec.AttemptID {
		t.Fatalf("resend: %+v %v, first %+v", again, err, dec)
	}
}

// TestTypedErrors: each failure comes back as its type and code.
func TestTypedErrors(t *testing.T) {
	d := boot(t, gateway.Hooks{})
	agent := d.connect(t, "agent_email")
	_, err := agent.Propose(ctxT(t), client.Proposal{RunID: "r", OperationKey: "k", CapabilityID: "no.such", Arguments: json.RawMessage(`{}`)})
	if !errors.Is(err, client.Refused{Code: client.CodeCapabilityNotSurfaced}) {
		t.Fatalf("unknown capability: %v", err)
	}
	_, err = agent.Propose(ctxT(t), refund("r", "k2", "ord_1", 0))
	if !errors.Is(err, client.Refused{Code: client.CodeAmountInvalid}) {
		t.Fatalf("zero amount: %v", err)
	}
	// The server refuses an agent's publish on an operator subject: a
	// Refused at once, not a timeout.
	start := time.Now()
	_, err = agent.Exposure(ctxT(t), "", "")
	if !errors.Is(err, client.Refused{Code: client.CodeAuthorityDenied}) || time.Since(start) > 3*time.Second {
		t.Fatalf("agent on an operator verb: %v after %s", err, time.Since(start))
	}
	_, err = client.Connect(client.Options{URL: d.rt.URL, Tenant: "acme", Principal: "agent_email", Password: "wrong"})
	if !errors.Is(err, client.Refused{Code: client.CodeAuthorityDenied}) {
		t.Fatalf("wrong password: %v", err)
	}
	_, err = client.Connect(client.Options{URL: deadURL(t), Tenant: "acme", Principal: "agent_email", Password: "x"})
	var u client.Unreachable
	if !errors.As(err, &u) {
		t.Fatalf("dead URL: %v", err)
	}
}

func deadURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return "nats://" + ln.Addr().String()
}

// TestOperatorCalls drives every operator call the client has against the
// daemon, including an approval that lets a high-risk proposal through.
func TestOperatorCalls(t *testing.T) {
	d := boot(t, gateway.Hooks{})
	ops, agent := d.connect(t, "ops_alice"), d.connect(t, "agent_email")
	ctx := ctxT(t)
	run, err := ops.AdmitRun(ctx, client.AdmitRunRequest{RunID: "run_ops", Principal: "agent_email", Calls: 5, Amount: 50000})
	if err != nil || !run.Admitted || run.Calls != 5 {
		t.Fatalf("admit-run: %+v %v", run, err)
	}
	if _, err := ops.AdmitRun(ctx, client.AdmitRunRequest{RunID: "run_ops", Principal: "agent_email", Calls: 9, Amount: 90000}); !errors.Is(err, client.Refused{Code: client.CodeRunAlreadyAdmitted}) {
		t.Fatalf("second admission: %v", err)
	}
	if _, err := agent.Propose(ctx, refund("run_ops", "k1", "ord_2", 10000)); err != nil {
		t.Fatal(err)
	}
	if run, err = ops.Run(ctx, "run_ops"); err != nil || run.UsedCalls != 1 {
		t.Fatalf("run: %+v %v", run, err)
	}
	rows, err := ops.Exposure(ctx, "", "ord_2")
	if err != nil || len(rows) != 1 || rows[0].Committed != 10000 {
		t.Fatalf("exposure: %+v %v", rows, err)
	}
	if _, err := ops.Attempts(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := ops.Reconcile(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := ops.CloseAttempt(ctx, "nope", "", "", ""); !errors.Is(err, client.Refused{Code: client.CodeAttemptUnknown}) {
		t.Fatalf("close-attempt: %v", err)
	}
	if _, err := ops.AssertAbsence(ctx, "nope", "ticket-1"); !errors.Is(err, client.Refused{Code: client.CodeAttemptUnknown}) {
		t.Fatalf("assert-absence: %v", err)
	}
	ch, err := ops.Revoke(ctx, "agent_email", "crm.lookup", "test")
	if err != nil || ch.Granted || !ch.Recorded {
		t.Fatalf("revoke: %+v %v", ch, err)
	}
	lookup := client.Proposal{RunID: "run_ops", OperationKey: "look-1", CapabilityID: "crm.lookup", Arguments: json.RawMessage(`{"q":"x"}`)}
	if _, err := agent.Propose(ctx, lookup); !errors.Is(err, client.Refused{Code: client.CodeAuthorityDenied}) {
		t.Fatalf("revoked capability: %v", err)
	}
	if ch, err = ops.Grant(ctx, "agent_email", "crm.lookup", "test"); err != nil || !ch.Granted {
		t.Fatalf("grant: %+v %v", ch, err)
	}
	lookup.OperationKey = "look-2"
	if _, err := agent.Propose(ctx, lookup); err != nil {
		t.Fatalf("granted capability: %v", err)
	}
	// approval_required, approve the digest, propose with the approval.
	wire := client.Proposal{RunID: "run_ops", OperationKey: "wire-1", CapabilityID: "bank.wire", Arguments: json.RawMessage(`{"to":"x","amount_minor":5}`)}
	_, err = agent.Propose(ctx, wire)
	var r client.Refused
	if !errors.As(err, &r) || r.Code != client.CodeApprovalRequired || r.Decision.ActionDigest == "" {
		t.Fatalf("high risk without approval: %v", err)
	}
	ap, err := ops.Approve(ctx, client.ApproveRequest{ActionDigest: r.Decision.ActionDigest, Risk: "high", ExpiresIn: "10m"})
	if err != nil || ap.ApprovalID == "" {
		t.Fatalf("approve: %+v %v", ap, err)
	}
	wire.OperationKey, wire.ApprovalID = "wire-2", ap.ApprovalID
	if dec, err := agent.Propose(ctx, wire); err != nil || dec.Status != client.StatusApplied {
		t.Fatalf("approved proposal: %+v %v", dec, err)
	}
	on := true
	if v, err := ops.KillSwitch(ctx, &on, "test"); err != nil || !v {
		t.Fatalf("kill-switch: %v %v", v, err)
	}
	if _, err := agent.Propose(ctx, refund("run_ops", "k9", "ord_3", 100)); !errors.Is(err, client.Refused{Code: client.CodeKillSwitchEngaged}) {
		t.Fatalf("proposal under the kill switch: %v", err)
	}
	if _, err := ops.Evidence(ctx, client.EvidenceRequest{}); !errors.Is(err, client.Refused{Code: client.CodeRequestMalformed}) {
		t.Fatalf("empty evidence: %v", err)
	}
	// The audit verbs: the signed log of everything above (the projector
	// records it behind the ledger), and its keys.
	deadline := time.Now().Add(10 * time.Second)
	for {
		entries, err := ops.Audit().ExportAudit(ctx)
		if err == nil && len(entries.Records) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("audit export: %d records, %v", len(entries.Records), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if keys, err := ops.Audit().File(ctx, "audit-keys", struct{}{}); err != nil || len(keys) == 0 {
		t.Fatalf("audit keys: %v", err)
	}
}

// TestNATSContext: a NATS context file names the URL and the user
// "<tenant>.<principal>" with its password.
func TestNATSContext(t *testing.T) {
	d := boot(t, gateway.Hooks{})
	path := filepath.Join(t.TempDir(), "acme-ops.json")
	b, _ := json.Marshal(map[string]string{"url": d.rt.URL, "user": "acme.ops_alice", "password": "alice-secret-passphrase", "description": "acme"})
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := client.Connect(client.Options{Context: path})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Tenant() != "acme" || c.Principal() != "ops_alice" {
		t.Fatalf("identity %s.%s", c.Tenant(), c.Principal())
	}
	if _, err := c.Exposure(ctxT(t), "", ""); err != nil {
		t.Fatal(err)
	}
	// By name under $XDG_CONFIG_HOME/nats/context.
	cfg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", cfg)
	if err := os.MkdirAll(filepath.Join(cfg, "nats", "context"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg, "nats", "context", "acme.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	c2, err := client.Connect(client.Options{Context: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	c2.Close()
}

// TestNKeyAndUnresolved: a server that knows the principal by nkey accepts
// the seed file; with no contextosd behind it, a proposal resends until its
// deadline and reports the outcome unknown.
func TestNKeyAndUnresolved(t *testing.T) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	seedFile := filepath.Join(t.TempDir(), "agent.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoSigs: true, Nkeys: []*server.NkeyUser{{Nkey: pub}}})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	defer s.Shutdown()
	if !s.ReadyForConnections(5 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	resends := 0
	c, err := client.Connect(client.Options{URL: s.ClientURL(), Tenant: "acme", Principal: "agent_email", NKeyFile: seedFile,
		Timeout: 50 * time.Millisecond, OnResend: func(n int, _ error) { resends = n }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 800*time.Millisecond)
	defer cancel()
	_, err = c.Propose(ctx, refund("r", "k", "o", 1))
	var u client.Unresolved
	if !errors.As(err, &u) || resends == 0 {
		t.Fatalf("no daemon: %v after %d resends", err, resends)
	}
	if _, err := client.Connect(client.Options{URL: s.ClientURL(), Tenant: "acme", Principal: "agent_email", Password: "p", NKeyFile: seedFile}); err == nil {
		t.Fatal("two credentials accepted")
	}
}

// TestCredsFile: a server in operator mode (JWT) knows the principal by a
// credentials file; one signed by an account it does not trust is refused.
func TestCredsFile(t *testing.T) {
	okp, _ := nkeys.CreateOperator()
	opub, _ := okp.PublicKey()
	oc := jwt.NewOperatorClaims(opub)
	ojwt, err := oc.Encode(okp)
	if err != nil {
		t.Fatal(err)
	}
	claims, err := jwt.DecodeOperatorClaims(ojwt)
	if err != nil {
		t.Fatal(err)
	}
	account := func() (nkeys.KeyPair, string, string) {
		akp, _ := nkeys.CreateAccount()
		apub, _ := akp.PublicKey()
		ajwt, err := jwt.NewAccountClaims(apub).Encode(okp)
		if err != nil {
			t.Fatal(err)
		}
		return akp, apub, ajwt
	}
	creds := func(akp nkeys.KeyPair) string {
		ukp, _ := nkeys.CreateUser()
		upub, _ := ukp.PublicKey()
		useed, _ := ukp.Seed()
		ujwt, err := jwt.NewUserClaims(upub).Encode(akp)
		if err != nil {
			t.Fatal(err)
		}
		b, err := jwt.FormatUserConfig(ujwt, useed)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "user.creds")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	akp, apub, ajwt := account()
	resolver := &server.MemAccResolver{}
	if err := resolver.Store(apub, ajwt); err != nil {
		t.Fatal(err)
	}
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoSigs: true, TrustedOperators: []*jwt.OperatorClaims{claims}, AccountResolver: resolver})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	defer s.Shutdown()
	if !s.ReadyForConnections(5 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	c, err := client.Connect(client.Options{URL: s.ClientURL(), Tenant: "acme", Principal: "agent_email", CredsFile: creds(akp)})
	if err != nil {
		t.Fatalf("creds file: %v", err)
	}
	c.Close()
	stranger, _, _ := account()
	_, err = client.Connect(client.Options{URL: s.ClientURL(), Tenant: "acme", Principal: "agent_email", CredsFile: creds(stranger)})
	if !errors.Is(err, client.Refused{Code: client.CodeAuthorityDenied}) {
		t.Fatalf("creds of an untrusted account: %v", err)
	}
}
