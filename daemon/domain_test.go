package daemon_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/contextos/ledger/aggregates"
	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/gateway"
	"github.com/contextos/ledger/internal/testing/daemontest"
	"github.com/contextos/ledger/internal/testing/provider"
	"github.com/contextos/ledger/internal/testing/refundcfg"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
)

// refundsPerOrder is the refund configuration's order ceiling, its last
// table.
var refundsPerOrder = "\n" + refundcfg.Block(refundcfg.Text("", ""), "guarantees", refundcfg.Guarantee)

// withGuarantees edits the configuration's text to hold guarantees (TOML
// [[guarantees]] tables) in place of its own.
func withGuarantees(guarantees string) func(string) string {
	return func(text string) string {
		return strings.TrimRight(refundcfg.Without(text, "guarantees", refundcfg.Guarantee), "\n") + "\n" + guarantees
	}
}

// replicaOptions boot a replica of one external deployment: its own data
// dir (of's, when of is set) and executor, the deployment's shared key file.
func replicaOptions(natsURL, executor, keyFile, guarantees string, of *daemontest.Daemon) daemontest.Options {
	return gatewayOptions(daemontest.Options{Of: of, Edit: withGuarantees(guarantees), Config: func(cfg *config.Config) {
		cfg.NATS.URL, cfg.NATS.Listen = natsURL, ""
		cfg.NATS.User, cfg.NATS.Password = "contextosd", "rt-secret-passphrase"
		cfg.NATS.ReplyUser, cfg.NATS.ReplyPassword = "contextosd-replies", "replies-secret-passphrase"
		cfg.Runtime.KeyFile, cfg.Runtime.Executor = keyFile, executor
	}})
}

// appliedOn sums what the provider applied on an order, from its own record.
func appliedOn(t *testing.T, prov *provider.Server, order string) (n int, amount int64) {
	t.Helper()
	for _, r := range prov.Refunds() {
		var args struct {
			OrderID string `json:"order_id"`
			Amount  int64  `json:"amount_minor"`
		}
		if err := json.Unmarshal(r.Args, &args); err != nil {
			t.Fatal(err)
		}
		if r.Applied && args.OrderID == order {
			n++
			amount += args.Amount
		}
	}
	return n, amount
}

// TestEnforcementDomainAcrossReplicas is the finding on one external NATS:
// replica B is configured without the order's refund ceiling, replica A
// with it. B booted before anything was pinned; once A pins the guarantee,
// B refuses every refund (the proposal step reads the domain on the
// tenant's control subject, whatever B's configuration says) and none
// reaches the provider; through either replica the provider applies at
// most the ceiling. B restarted with the same configuration refuses to
// boot, naming the tenant, the guarantee and the capability.
func TestEnforcementDomainAcrossReplicas(t *testing.T) {
	url := startDocsServer(t, docsAuthorization(t))
	keyFile := t.TempDir() + "/runtime.key"
	dB, err := daemontest.Start(t, replicaOptions(url, "replica-b", keyFile, "", nil))
	if err != nil {
		t.Fatalf("replica B on a stream where nothing is pinned: %v", err)
	}
	dA := daemontest.Boot(t, replicaOptions(url, "replica-a", keyFile, refundsPerOrder, replicaOf(t, dB)))
	rtA, rtB, prov := dA.RT, dB.RT, dB.Provider
	cfgA, cfgB := rtA.Config, rtB.Config

	// Twenty refunds of 30,000 on one order, all decided by B.
	viaB := make([]wire.Reply, 20)
	var wg sync.WaitGroup
	for i := range viaB {
		wg.Go(func() {
			b, _ := json.Marshal(refund("run_dom", "b-"+string(rune('a'+i)), "ord_dom", 30000))
			viaB[i] = rtB.Gateway.Propose(context.Background(), "acme", "agent_email", b)
		})
	}
	wg.Wait()
	for i, r := range viaB {
		if r.Status != wire.StatusRefused || r.Code != wire.CodeDomainMismatch || !strings.Contains(r.Reason, "refunds-per-order") {
			t.Fatalf("refund %d through B: %s %s %s", i, r.Status, r.Code, r.Reason)
		}
	}
	if calls := prov.Stats().Calls; calls != 0 {
		t.Fatalf("the provider received %d calls from a replica outside the domain", calls)
	}

	// The same through NATS, where the two replicas share the requests.
	e := &env{t: t, rt: rtA, prov: prov}
	nc := e.client("acme", "agent_email")
	viaNATS := make([]wire.Reply, 20)
	for i := range viaNATS {
		wg.Go(func() {
			viaNATS[i] = e.propose(nc, "acme", "agent_email", refund("run_dom", "n-"+string(rune('a'+i)), "ord_dom", 30000))
		})
	}
	wg.Wait()
	applied, codes := 0, map[wire.Code]int{}
	for _, r := range viaNATS {
		if r.Status == wire.StatusApplied {
			applied++
			continue
		}
		codes[r.Code]++
	}
	if applied > 3 || codes[wire.CodeDomainMismatch]+codes[wire.CodeExceeded]+codes[wire.CodeUnresolvedAttempt] != 20-applied {
		t.Fatalf("through NATS: %d applied, refusals %v", applied, codes)
	}
	// A takes the order to its ceiling: three refunds of 30,000, no more.
	for i := 0; applied < 4; i++ {
		b, _ := json.Marshal(refund("run_dom", "a-"+string(rune('a'+i)), "ord_dom", 30000))
		r := rtA.Gateway.Propose(context.Background(), "acme", "agent_email", b)
		if r.Status != wire.StatusApplied {
			if r.Code != wire.CodeExceeded {
				t.Fatalf("through A: %s %s %s", r.Status, r.Code, r.Reason)
			}
			break
		}
		applied++
	}
	n, amount := appliedOn(t, prov, "ord_dom")
	if st := prov.Stats(); applied != 3 || n != 3 || amount != 90000 || st.Calls != 3 {
		t.Fatalf("%d applied; the provider applied %d refunds of %d in all over %d calls, want 3 of 90000 under the ceiling of 100000", applied, n, amount, st.Calls)
	}

	// B restarted with its configuration refuses to boot.
	rtB.Close()
	_, err = daemontest.Start(t, replicaOptions(url, "replica-b", keyFile, "", dB))
	var de *gateway.DomainError
	if !errors.As(err, &de) || de.Refusal.Code != wire.CodeDomainMismatch ||
		!strings.Contains(err.Error(), "tenant acme") || !strings.Contains(err.Error(), "refunds-per-order") || !strings.Contains(err.Error(), "adp_payments.issue_refund") {
		t.Fatalf("replica B rebooted: %v", err)
	}
	// So does a replica configured with a new guarantee id over the same
	// capability that does not replace the old one: it would start every
	// order at the full limit.
	fresh := strings.ReplaceAll(refundsPerOrder, `"refunds-per-order"`, `"refunds-per-order-v2"`)
	if _, err := daemontest.Start(t, replicaOptions(url, "replica-c", keyFile, fresh, replicaOf(t, dB))); !errors.As(err, &de) || !strings.Contains(err.Error(), "replaces") {
		t.Fatalf("a new id without replaces: %v", err)
	}
	// And --check-config's check agrees, without writing anything.
	if _, err := gateway.CheckDomain(context.Background(), cfgB, rtA.Store); !errors.As(err, &de) {
		t.Fatalf("CheckDomain: %v", err)
	}
	if w, err := gateway.CheckDomain(context.Background(), cfgA, rtA.Store); err != nil || len(w) != 0 {
		t.Fatalf("CheckDomain of A's configuration: %v %v", w, err)
	}
}

// TestEnforcementDomainBackfill: a pin stored before enrollment existed (as
// a replica of the previous version made it, on the pin subject alone) is
// enrolled by the next boot, which then behaves as before for a
// configuration that matches the stream, and refuses one that omits it.
func TestEnforcementDomainBackfill(t *testing.T) {
	e := startEnv(t)
	credits := kernel.Definition{ID: "credits-per-order", CapabilityIDs: []string{"adp_payments.issue_refund"}, ResourcePointer: "/order_id",
		AmountPointer: "/amount_minor", Limit: 50000, Unit: "INR_minor"}
	ref, err := aggregates.PinRef("acme", credits.ID)
	if err != nil {
		t.Fatal(err)
	}
	sealer := &aggregates.Sealer{Signer: e.rt.Signer, Clock: aggregates.SystemClock{}, IDs: aggregates.NewIDs(aggregates.SystemClock{}, nil)}
	envs, err := sealer.Seal("acme", kernel.DecidePin(nil, "acme", credits).Events)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.rt.Store.Append(context.Background(), ref.Subject, 0, envs...); err != nil {
		t.Fatal(err)
	}
	// The running replica has not enrolled it: it dispatches as before.
	nc := e.client("acme", "agent_email")
	if r := e.propose(nc, "acme", "agent_email", refund("run_bf", "k1", "ord_bf", 60000)); r.Status != wire.StatusApplied {
		t.Fatalf("before the backfill: %+v", r)
	}

	e.rt.Close()
	if _, err := daemontest.Start(t, gatewayOptions(daemontest.Options{Of: e.d})); err == nil || !strings.Contains(err.Error(), "credits-per-order") {
		t.Fatalf("a configuration without the older pin: %v", err)
	}
	e.restart(daemontest.Options{Edit: withGuarantees(refundsPerOrder + `
[[guarantees]]
id = "credits-per-order"
capability_ids = ["adp_payments.issue_refund"]
resource_pointer = "/order_id"
amount_pointer = "/amount_minor"
limit = 50000
unit = "INR_minor"
`)})
	nc = e.client("acme", "agent_email")
	if r := e.propose(nc, "acme", "agent_email", refund("run_bf", "k2", "ord_bf2", 50000)); r.Status != wire.StatusApplied || len(r.Guarantees) != 2 {
		t.Fatalf("under both guarantees: %+v", r)
	}
	if r := e.propose(nc, "acme", "agent_email", refund("run_bf", "k3", "ord_bf2", 1)); r.Code != wire.CodeExceeded {
		t.Fatalf("over the second ceiling: %+v", r)
	}
}

// TestReplacementCarriesExposure: the order's ceiling is replaced by a new
// guarantee id with the same limit. What the old one committed on the order
// (90,000) counts against the new one's limit (100,000): at most 10,000 more
// reach the provider. A replica configured with the new id but without
// replaces refuses to boot.
func TestReplacementCarriesExposure(t *testing.T) {
	e := startEnv(t)
	nc := e.client("acme", "agent_email")
	wantBalance(t, e.propose(nc, "acme", "agent_email", refund("run_rp", "old", "ord_rp", 90000)), 90000, 0, 10000)
	e.rt.Close()

	v2 := strings.ReplaceAll(refundsPerOrder, `"refunds-per-order"`, `"refunds-v2"`)
	if _, err := daemontest.Start(t, gatewayOptions(daemontest.Options{Of: e.d, Edit: withGuarantees(v2)})); err == nil || !strings.Contains(err.Error(), `replaces = "refunds-per-order"`) {
		t.Fatalf("a new id without replaces: %v", err)
	}
	e.restart(daemontest.Options{Edit: withGuarantees(v2 + `replaces = "refunds-per-order"` + "\n")})
	nc = e.client("acme", "agent_email")
	calls := e.prov.Stats().Calls
	r := e.propose(nc, "acme", "agent_email", refund("run_rp", "new-1", "ord_rp", 20000))
	if r.Code != wire.CodeExceeded || *r.Available != 10000 || r.Guarantees[0].Carried != 90000 {
		t.Fatalf("20,000 over the carried 90,000: %+v", r)
	}
	if r := e.propose(nc, "acme", "agent_email", refund("run_rp", "new-2", "ord_rp", 10000)); r.Status != wire.StatusApplied || *r.Available != 0 {
		t.Fatalf("the last 10,000: %+v", r)
	}
	if r := e.propose(nc, "acme", "agent_email", refund("run_rp", "new-3", "ord_rp", 1)); r.Code != wire.CodeExceeded {
		t.Fatalf("one more: %+v", r)
	}
	// Another order starts at the new guarantee's full limit.
	if r := e.propose(nc, "acme", "agent_email", refund("run_rp", "new-4", "ord_other", 100000)); r.Status != wire.StatusApplied {
		t.Fatalf("another order: %+v", r)
	}
	if got := e.prov.Stats().Calls - calls; got != 2 {
		t.Fatalf("the provider received %d calls after the replacement, want 2", got)
	}
	if n, amount := appliedOn(t, e.prov, "ord_rp"); n != 2 || amount != 100000 {
		t.Fatalf("the provider applied %d refunds of %d on the order, want 2 of 100000", n, amount)
	}
	// The domain costs one control event per pin, none per proposal.
	control, err := aggregates.ControlRef("acme")
	if err != nil {
		t.Fatal(err)
	}
	stored, err := e.rt.Store.Read(context.Background(), control.Subject, 1)
	if err != nil || len(stored) != 2 || stored[0].Envelope.Type != kernel.TypeGuaranteeEnrolled || stored[1].Envelope.Type != kernel.TypeGuaranteeEnrolled {
		t.Fatalf("the control subject holds %d events (%v), want the two enrollments", len(stored), err)
	}
}
