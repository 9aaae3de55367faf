package daemon_test

// Security tests, end to end over NATS with the embedded server's real
// users and permissions: nobody acts outside their authority, and every
// refusal the gateway decides leaves a signed record, read back through a
// runtime-user connection and verified with the runtime key.

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/contextos/ledger/aggregates"
	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/daemon"
	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/gateway"
	"github.com/contextos/ledger/internal/testing/daemontest"
	"github.com/contextos/ledger/internal/testing/gatewaytest"
	"github.com/contextos/ledger/internal/testing/provider"
	"github.com/contextos/ledger/internal/testing/testenv"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// signedEvent is a stored event whose signature verified.
type signedEvent struct {
	subject string
	ev      kernel.Event
}

// signedStream reads the whole stream through the runtime's own connection
// and verifies every signature with the runtime key; a bad one fails t.
func signedStream(t *testing.T, rt *daemon.Runtime) []signedEvent {
	t.Helper()
	js, err := jetstream.New(rt.NC)
	if err != nil {
		t.Fatal(err)
	}
	keys := codec.Keyring{}
	keys.Add(rt.Signer.Key.Public().(ed25519.PublicKey))
	var out []signedEvent
	err = events.NewJetStore(js, events.StreamName).Replay(context.Background(), 1, func(st events.Stored) error {
		if err := keys.Verify(st.Envelope); err != nil {
			t.Errorf("seq %d %s: %v", st.Seq, st.Envelope.Type, err)
		}
		ev, err := kernel.DecodeEvent(st.Envelope.Type, st.Envelope.V, st.Envelope.Body)
		if err != nil {
			return nil // not a kernel event
		}
		out = append(out, signedEvent{st.Subject, ev})
		return nil
	})
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	return out
}

// wantSignedRefusal finds a signed refusal with code on the operation of
// (run, key) or, when run is empty, on the principal's refusal subject.
func wantSignedRefusal(t *testing.T, rt *daemon.Runtime, tenant, principal, run, key string, code wire.Code) {
	t.Helper()
	for _, se := range signedStream(t, rt) {
		switch ev := se.ev.(type) {
		case kernel.OperationRefused:
			ref, _ := aggregates.OperationRef(tenant, run, key)
			if run != "" && se.subject == ref.Subject && ev.Code == code {
				return
			}
		case kernel.ProposalRefused:
			subject, _ := codec.Subject(tenant, "refusal", principal)
			if run == "" && se.subject == subject && ev.Code == code && ev.Principal == principal {
				return
			}
		}
	}
	t.Fatalf("no signed %s refusal for %s/%s %s/%s", code, tenant, principal, run, key)
}

// wantCountedRefusals waits for signed aggregates on the principal's
// refusal subject that count n refusals of code.
func wantCountedRefusals(t *testing.T, rt *daemon.Runtime, tenant, principal string, code wire.Code, n int) {
	t.Helper()
	subject, _ := codec.Subject(tenant, "refusal", principal)
	testenv.Eventually(t, func() bool {
		got := 0
		for _, se := range signedStream(t, rt) {
			if ev, ok := se.ev.(kernel.ProposalRefused); ok && se.subject == subject && ev.Code == code {
				got += ev.Count
			}
		}
		return got == n
	}, 10*time.Second, n, " counted ", code, " refusals of ", principal)
}

func streamLen(t *testing.T, rt *daemon.Runtime) int {
	t.Helper()
	return len(signedStream(t, rt))
}

// deniedConn connects a principal and reports asynchronous permission
// errors on the returned channel.
func (e *env) deniedConn(tenant, principal string) (*nats.Conn, chan error) {
	e.t.Helper()
	errs := make(chan error, 32)
	nc := gatewaytest.Connect(e.t, e.rt.URL, passwords[wire.UserName(tenant, principal)], tenant, principal,
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
	return nc, errs
}

func wantViolation(t *testing.T, what string, errs chan error) {
	t.Helper()
	select {
	case err := <-errs:
		if !strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
			t.Fatalf("%s: %v, want a permissions violation", what, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: the server did not deny it", what)
	}
}

// TestSecurityPublishAndSubscribe: agents and operators can publish only
// their own subjects and subscribe only to their own inbox: not another
// principal's or tenant's propose subject, not the ops verbs (agents), not
// another operator's or tenant's ops subjects, not $JS.API.>, $JS.ACK.>,
// $KV.>, ctx.ev.>, not into another's inbox; nor subscribe to another
// inbox, all inboxes, the proposals of others or the event stream. The
// server refuses each one (the message never reaches the gateway), and
// nothing is appended or sent to the provider.
func TestSecurityPublishAndSubscribe(t *testing.T) {
	e := startEnv(t)
	before := streamLen(t, e.rt)
	body, _ := json.Marshal(refund("r", "k", "ord_sec", 1000))
	cases := []struct {
		tenant, principal string
		publish           []string
		subscribe         []string
	}{
		{"acme", "agent_chat",
			[]string{wire.ProposeSubject("acme", "agent_email"), wire.ProposeSubject("globex", "agent_email"), wire.ProposeSubject("acme", "ops"),
				wire.OpSubject("acme", "exposure", "ops_alice"), wire.OpSubject("acme", "exposure", "agent_chat"), wire.OpSubject("acme", "kill-switch", "agent_chat"),
				"ctx.ev.acme.exposure.refunds-per-order.ord_sec", "ctx.ev.globex.control", "$JS.API.STREAM.INFO.CTX_EVENTS",
				"$JS.API.STREAM.DELETE.CTX_EVENTS", "$JS.API.DIRECT.GET.CTX_EVENTS", "$JS.ACK.CTX_EVENTS.c.1.1.1.1.1", "$KV.any.key",
				"_INBOX.acme.agent_email.x", "ctx.v1.acme.agent_chat.ops"},
			[]string{"_INBOX.acme.agent_email.>", "_INBOX.>", ">", "ctx.ev.>", "ctx.v1.>", wire.ProposeSubject("acme", "agent_email"), "$JS.API.>"}},
		{"globex", "agent_email",
			[]string{wire.ProposeSubject("acme", "agent_email"), wire.OpSubject("globex", "exposure", "agent_email"), "ctx.ev.globex.exposure.x.y"},
			[]string{"_INBOX.acme.agent_email.>", "ctx.ev.acme.>"}},
		{"acme", "ops_alice",
			[]string{wire.OpSubject("globex", "exposure", "ops_alice"), wire.ProposeSubject("acme", "agent_email"), "ctx.v1.acme.ops.exposure.other_op",
				"ctx.ev.acme.control", "$JS.API.STREAM.LIST"},
			[]string{"_INBOX.acme.agent_email.>", "ctx.v1.acme.>", "ctx.ev.>"}},
	}
	for _, c := range cases {
		nc, errs := e.deniedConn(c.tenant, c.principal)
		for _, subj := range c.publish {
			if err := nc.Publish(subj, body); err != nil {
				t.Fatal(err)
			}
			_ = nc.Flush()
			wantViolation(t, c.principal+" publish "+subj, errs)
		}
		for _, subj := range c.subscribe {
			sub, err := nc.SubscribeSync(subj)
			if err != nil {
				t.Fatal(err)
			}
			_ = nc.Flush()
			wantViolation(t, c.principal+" subscribe "+subj, errs)
			_ = sub.Unsubscribe()
		}
	}
	if after := streamLen(t, e.rt); after != before {
		t.Fatalf("denied messages appended %d events", after-before)
	}
	if st := e.prov.Stats(); st.Calls != 0 {
		t.Fatalf("denied messages reached the provider: %+v", st)
	}
}

// TestSecurityReplySubject: the reply subject of a request is chosen by
// the requester, and the runtime publishes its reply there with its own
// permissions. An agent that names a stream subject or a JetStream API
// subject as its reply must not make the runtime write into the stream or
// call the JetStream API: the stream keeps only valid signed events and
// still exists afterwards. A JetStream API reply is refused by the server
// itself (nats-server 2.15.3 and later: a reply may not issue an API
// request on the requester's behalf); the others reach the gateway, which
// drops each reply and counts it.
func TestSecurityReplySubject(t *testing.T) {
	e := startEnv(t)
	nc, errs := e.deniedConn("acme", "agent_chat")
	targets := []string{
		"ctx.ev.acme.exposure.refunds-per-order.ord_inject", // a ledger subject
		"ctx.ev.acme.control",                               // the kill switch subject
		"$JS.API.STREAM.DELETE." + events.StreamName,        // the stream itself
	}
	for i, reply := range targets {
		body, _ := json.Marshal(refund("r_inject", "k"+string(rune('0'+i)), "ord_inject", 1000))
		if err := nc.PublishMsg(&nats.Msg{Subject: wire.ProposeSubject("acme", "agent_chat"), Reply: reply, Data: body}); err != nil {
			t.Fatal(err)
		}
	}
	_ = nc.Flush()
	wantViolation(t, "a proposal replying to "+targets[2], errs)
	opnc := e.client("acme", "ops_alice")
	if err := opnc.PublishMsg(&nats.Msg{Subject: wire.OpSubject("acme", "exposure", "ops_alice"), Reply: "ctx.ev.acme.control", Data: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	// Wait until the three requests the server let through (the two
	// proposals replying to stream subjects and the operator's) were
	// handled before looking for what they may have written.
	const through = 3
	testenv.Eventually(t, func() bool { return e.rt.Gateway.BadReplies() == through }, 10*time.Second,
		"the gateway to handle the requests with foreign reply subjects")
	js, err := jetstream.New(e.rt.NC)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(context.Background(), events.StreamName)
	if err != nil {
		t.Fatalf("the event stream is gone after a reply to %s: %v", targets[2], err)
	}
	for _, subj := range targets[:2] {
		info, err := s.Info(context.Background(), jetstream.WithSubjectFilter(subj))
		if err != nil {
			t.Fatal(err)
		}
		for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
			m, err := s.GetMsg(context.Background(), seq)
			if err != nil || m.Subject != subj {
				continue
			}
			if _, derr := codec.Decode(m.Data); derr != nil {
				t.Errorf("a requester made the runtime store a non-event on %s (seq %d): %.100q", subj, seq, m.Data)
			}
		}
	}
	// The injected ledger still loads, and the operator views (which fold
	// the whole stream) still work.
	r := e.propose(e.client("acme", "agent_email"), "acme", "agent_email", refund("r_after", "k", "ord_inject", 1000))
	if r.Status != wire.StatusApplied {
		t.Errorf("a proposal on the injected ledger after the injection: %s %s %s", r.Status, r.Code, r.Reason)
	}
	if rows := e.op("exposure", wire.OpRequest{}); !rows.OK {
		t.Errorf("operator exposure after the injection: %s %s", rows.Code, rows.Reason)
	}
}

// TestSecurityReplyConnection: the runtime publishes its replies through a
// connection of its own (ReplyUser), which the server lets publish only to
// inboxes: even a reply the gateway's check let through could not reach the
// event stream, the control subject or the JetStream API. Replies still
// arrive (every test that proposes shows it).
func TestSecurityReplyConnection(t *testing.T) {
	e := startEnv(t)
	if e.rt.Replies == nil || e.rt.Replies == e.rt.NC {
		t.Fatal("the embedded runtime has no separate reply connection")
	}
	before := streamLen(t, e.rt)
	errs := make(chan error, 16)
	e.rt.Replies.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err })
	for _, subj := range []string{"ctx.ev.acme.exposure.refunds-per-order.ord_reply", "ctx.ev.acme.control",
		"$JS.API.STREAM.DELETE." + events.StreamName, "$JS.API.STREAM.INFO." + events.StreamName, "$KV.CTX_SNAPSHOTS.x",
		wire.ProposeSubject("acme", "agent_email"), wire.OpSubject("acme", "kill-switch", "ops_alice")} {
		if err := e.rt.Replies.Publish(subj, []byte(`{"status":"applied"}`)); err != nil {
			t.Fatal(err)
		}
		_ = e.rt.Replies.Flush()
		wantViolation(t, "reply connection publish "+subj, errs)
	}
	sub, err := e.rt.Replies.SubscribeSync("ctx.v1.>")
	if err != nil {
		t.Fatal(err)
	}
	_ = e.rt.Replies.Flush()
	wantViolation(t, "reply connection subscribe ctx.v1.>", errs)
	_ = sub.Unsubscribe()
	if after := streamLen(t, e.rt); after != before {
		t.Fatalf("the reply connection appended %d events", after-before)
	}
	if st := e.prov.Stats(); st.Calls != 0 {
		t.Fatalf("the reply connection reached the provider: %+v", st)
	}
}

// TestSecurityCrossTenantOperator: an operator sees and acts only on its
// own tenant: another tenant's ledger is not in its exposure or attempts
// view, and reconcile, close-attempt and assert-absence of another
// tenant's attempt are refused and change nothing but the record of the
// refusals in the operator's own tenant.
func TestSecurityCrossTenantOperator(t *testing.T) {
	e := startEnv(t)
	e.prov.Script(provider.Pending)
	g := e.propose(e.client("globex", "agent_email"), "globex", "agent_email", refund("run_g", "g1", "ord_globex", 7000))
	if g.Status != wire.StatusPending {
		t.Fatalf("globex proposal: %+v", g)
	}
	before := streamLen(t, e.rt)
	if rows := e.op("exposure", wire.OpRequest{}).Exposure; len(rows) != 0 {
		t.Fatalf("acme's operator sees another tenant's ledgers: %+v", rows)
	}
	if rows := e.op("attempts", wire.OpRequest{}).Attempts; len(rows) != 0 {
		t.Fatalf("acme's operator sees another tenant's attempts: %+v", rows)
	}
	if r := e.op("reconcile", wire.OpRequest{AttemptID: g.AttemptID}); len(r.Settled) != 1 || r.Settled[0].Code != wire.CodeAttemptUnknown {
		t.Fatalf("reconcile of globex's attempt: %+v", r)
	}
	if r := e.op("close-attempt", wire.OpRequest{AttemptID: g.AttemptID}); r.OK || r.Code != wire.CodeAttemptUnknown {
		t.Fatalf("close-attempt of globex's attempt: %+v", r)
	}
	if r := e.op("assert-absence", wire.OpRequest{AttemptID: g.AttemptID, ArtifactRef: "x"}); r.OK || r.Code != wire.CodeAttemptUnknown {
		t.Fatalf("assert-absence of globex's attempt: %+v", r)
	}
	// The two refused actions are recorded, signed, on acme's operator's
	// refusal subject, and nothing else was appended: globex's ledger and
	// operation are untouched.
	if after := streamLen(t, e.rt); after != before+2 {
		t.Fatalf("cross-tenant operator actions appended %d events, want the 2 refusals", after-before)
	}
	if got := e.operatorRefusals("ops_alice"); len(got) != 2 || got[0].Code != wire.CodeAttemptUnknown || got[1].Code != wire.CodeAttemptUnknown {
		t.Fatalf("acme's operator's refusals: %+v", got)
	}
}

// TestSecurityCeilingFromConfigOnly: a limit claimed in the body is
// refused (unknown field) and one inside the arguments is just an argument;
// a runtime booted on the same data with a raised limit fails closed: every
// proposal the guarantee covers is refused
// shared_guarantee_definition_mismatch, also on a resource never seen, and
// each refusal is signed.
func TestSecurityCeilingFromConfigOnly(t *testing.T) {
	e := startEnv(t)
	prov := e.prov
	nc := e.client("acme", "agent_email")
	wantBalance(t, e.propose(nc, "acme", "agent_email", refund("run_c", "c1", "ord_c", 90000)), 90000, 0, 10000)
	claim := refund("run_c", "c2", "ord_c", 20000)
	claim["limit"] = 1000000
	if r := e.propose(nc, "acme", "agent_email", claim); r.Code != wire.CodeRequestMalformed {
		t.Fatalf("limit in the body: %+v", r)
	}
	inArgs := refund("run_c", "c3", "ord_c", 20000)
	inArgs["arguments"].(map[string]any)["limit"] = 1000000
	if r := e.propose(nc, "acme", "agent_email", inArgs); r.Code != wire.CodeExceeded || *r.Limit != 100000 {
		t.Fatalf("limit in the arguments: %+v", r)
	}
	nc.Close()
	e.rt.Close()

	e.restart(daemontest.Options{Config: func(raised *config.Config) { raised.Guarantees[0].Limit = 200000 }})
	rt := e.rt
	// A configuration file cannot raise a ceiling: the limit is versioned
	// in the stream (guarantee-set-limit), and the stream's version holds.
	nc = e.client("acme", "agent_email")
	for i, order := range []string{"ord_c", "ord_never_seen"} {
		key := "raised-" + string(rune('a'+i))
		if r := e.propose(nc, "acme", "agent_email", refund("run_c", key, order, 100)); r.Status != wire.StatusApplied || *r.Limit != 100000 {
			t.Fatalf("%s under a raised configured limit: %+v", order, r)
		}
	}
	calls := prov.Stats().Calls
	r := e.propose(nc, "acme", "agent_email", refund("run_c", "raised-c", "ord_c", 20000))
	if r.Code != wire.CodeExceeded || *r.Limit != 100000 || *r.Committed != 90100 {
		t.Fatalf("over the stream's limit under a raised configured one: %+v", r)
	}
	wantSignedRefusal(t, rt, "acme", "agent_email", "run_c", "raised-c", wire.CodeExceeded)
	if prov.Stats().Calls != calls {
		t.Fatal("a proposal over the stream's limit reached the provider")
	}
	if rows := e.op("exposure", wire.OpRequest{Resource: "ord_c"}).Exposure; len(rows) != 1 || rows[0].Limit != 100000 || rows[0].Committed != 90100 {
		t.Fatalf("ledger after the raised boot: %+v", rows)
	}
	// What the guarantee means still fails closed when it changes.
	nc.Close()
	rt.Close()
	e.restart(daemontest.Options{Config: func(other *config.Config) { other.Guarantees[0].Unit = "USD_minor" }})
	rt = e.rt
	nc = e.client("acme", "agent_email")
	if r := e.propose(nc, "acme", "agent_email", refund("run_c", "unit-a", "ord_never_seen", 100)); r.Code != wire.CodeDefinitionMismatch {
		t.Fatalf("under a changed unit: %+v", r)
	}
	wantSignedRefusal(t, rt, "acme", "agent_email", "run_c", "unit-a", wire.CodeDefinitionMismatch)
}

// TestSecurityHoldSurvivesNewRunAndKey: a pending hold is not erased by
// proposing again under a new run or a new operation key (each is refused
// exceeded, signed: the first whole, the others in their window's signed
// aggregate); the same key returns the same attempt without a new
// reservation; the same key with another amount is operation_key_conflict.
func TestSecurityHoldSurvivesNewRunAndKey(t *testing.T) {
	e := startEnv(t)
	nc := e.client("acme", "agent_email")
	e.prov.Script(provider.Pending)
	held := e.propose(nc, "acme", "agent_email", refund("run_1", "k1", "ord_h", 80000))
	wantBalance(t, held, 0, 80000, 20000)
	for i, c := range []struct{ run, key string }{{"run_2", "k1"}, {"run_1", "k2"}, {"run_3", "k9"}} {
		r := e.propose(nc, "acme", "agent_email", refund(c.run, c.key, "ord_h", 30000))
		if r.Code != wire.CodeExceeded {
			t.Fatalf("%s/%s: %+v", c.run, c.key, r)
		}
		wantBalance(t, r, 0, 80000, 20000)
		if i == 0 {
			wantSignedRefusal(t, e.rt, "acme", "agent_email", c.run, c.key, wire.CodeExceeded)
		}
	}
	wantCountedRefusals(t, e.rt, "acme", "agent_email", wire.CodeExceeded, 2)
	again := e.propose(nc, "acme", "agent_email", refund("run_1", "k1", "ord_h", 80000))
	if again.AttemptID != held.AttemptID || again.Status != wire.StatusPending {
		t.Fatalf("same key again: %+v", again)
	}
	wantBalance(t, again, 0, 80000, 20000)
	if r := e.propose(nc, "acme", "agent_email", refund("run_1", "k1", "ord_h", 1000)); r.Code != wire.CodeOperationConflict {
		t.Fatalf("same key, other amount: %+v", r)
	}
	wantSignedRefusal(t, e.rt, "acme", "agent_email", "", "", wire.CodeOperationConflict)
	if st := e.prov.Stats(); st.Calls != 1 {
		t.Fatalf("provider calls %d, want 1", st.Calls)
	}
}

// TestSecurityApprovalReplay: an approval is redeemed once. Replaying it
// under a new operation key is approval_redeemed, with other arguments
// approval_mismatch, and the same operation key returns the first result
// without a second provider call; every refusal is signed.
func TestSecurityApprovalReplay(t *testing.T) {
	e, _ := authzEnv(t, authzEdit)
	nc := e.client("acme", "agent_email")
	e.admit("run_ap", "agent_email", 50, 10000000)
	high := func(key, order string, amount int64, approval string) map[string]any {
		p := refundTo("adp_payments.issue_refund_high", "run_ap", key, order, amount)
		if approval != "" {
			p["approval_id"] = approval
		}
		return p
	}
	first := e.propose(nc, "acme", "agent_email", high("a0", "ord_ap", 40000, ""))
	if first.Code != wire.CodeApprovalRequired {
		t.Fatalf("without approval: %+v", first)
	}
	ap := e.mustOp("approve", wire.ApproveRequest{ActionDigest: first.ActionDigest, Risk: "high", ExpiresIn: "10m"}).Data["approval_id"].(string)
	ok := e.propose(nc, "acme", "agent_email", high("a1", "ord_ap", 40000, ap))
	if ok.Status != wire.StatusApplied {
		t.Fatalf("approved: %+v", ok)
	}
	calls := e.prov.Stats().Calls
	if r := e.propose(nc, "acme", "agent_email", high("a2", "ord_ap", 40000, ap)); r.Code != wire.CodeApprovalRedeemed {
		t.Fatalf("replay under a new key: %+v", r)
	}
	wantSignedRefusal(t, e.rt, "acme", "agent_email", "run_ap", "a2", wire.CodeApprovalRedeemed)
	if r := e.propose(nc, "acme", "agent_email", high("a3", "ord_ap", 40001, ap)); r.Code != wire.CodeApprovalMismatch && r.Code != wire.CodeApprovalRedeemed {
		t.Fatalf("replay with other arguments: %+v", r)
	}
	if r := e.propose(nc, "acme", "agent_email", high("a1", "ord_ap", 40000, ap)); r.Status != wire.StatusApplied || r.AttemptID != ok.AttemptID {
		t.Fatalf("same key again: %+v", r)
	}
	if e.prov.Stats().Calls != calls {
		t.Fatal("a replayed approval reached the provider")
	}
}

// pausedAfterDispatchStart boots a runtime whose executor pauses right after
// its dispatch-start, sends p from agent_email, and returns once the executor
// is paused: the attempt, the channel that wakes it, and the reply to come.
func pausedAfterDispatchStart(t *testing.T, p map[string]any) (*env, string, chan struct{}, chan wire.Reply) {
	t.Helper()
	paused, wake := make(chan string, 1), make(chan struct{})
	e := startEnvWith(t, daemontest.Options{Boot: daemon.BootOptions{Hooks: gateway.Hooks{AfterDispatchStart: func(id string) { paused <- id; <-wake }}}})
	done := make(chan wire.Reply, 1)
	nc := e.client("acme", "agent_email")
	go func() { done <- e.propose(nc, "acme", "agent_email", p) }()
	return e, <-paused, wake, done
}

// TestSecurityStaleExecutor: an executor whose operation was taken over
// cannot act. (1) The provider is called only once the reservation and the
// dispatch-start are stored together: paused right after its dispatch-start,
// the executor's attempt is already started on the operation and the
// ledger, and nothing reached the provider; there is no moment at which an
// operator could close the attempt as unstarted while the executor goes on
// to dispatch it (close-attempt is refused dispatch_active). (2) Paused
// after its dispatch-start (the provider call is already allowed) while
// reconciliation takes the operation over, its own observation is refused
// executor_fenced: only the current generation records outcomes, and the
// hold stays until reconciliation reads the provider.
func TestSecurityStaleExecutor(t *testing.T) {
	t.Run("started-before-dispatch", func(t *testing.T) {
		e, attempt, wake, done := pausedAfterDispatchStart(t, refund("run_s", "s1", "ord_s", 5000))
		prov := e.prov
		opSubject, _ := codec.Subject("acme", "operation", "run_s", "s1")
		var reserved, started bool
		for _, ev := range e.signed(opSubject) {
			switch ev := ev.(type) {
			case kernel.OperationReserved:
				reserved = reserved || ev.AttemptID == attempt
			case kernel.OperationDispatchStarted:
				started = started || (ev.AttemptID == attempt && reserved)
			}
		}
		ledger, _ := codec.ExposureSubject("acme", "refunds-per-order", "ord_s")
		var ledgerStarted bool
		for _, ev := range e.signed(ledger) {
			if ds, ok := ev.(kernel.ExposureDispatchStarted); ok && ds.AttemptID == attempt {
				ledgerStarted = true
			}
		}
		if !started || !ledgerStarted || prov.Stats().Calls != 0 {
			t.Fatalf("before the provider call: operation started %v, ledger started %v, provider %+v", started, ledgerStarted, prov.Stats())
		}
		if r := e.op("close-attempt", wire.OpRequest{AttemptID: attempt, Reason: "executor presumed dead"}); r.Code != wire.CodeDispatchActive {
			t.Fatalf("close-attempt of a started attempt: %+v", r)
		}
		close(wake)
		if r := <-done; r.Status != wire.StatusApplied {
			t.Fatalf("the executor's own dispatch: %+v", r)
		}
		if bal := e.op("exposure", wire.OpRequest{Resource: "ord_s"}).Exposure[0].Balance; bal.Committed != 5000 || bal.Held != 0 {
			t.Fatalf("after the dispatch: %+v", bal)
		}
	})
	t.Run("after-dispatch-start", func(t *testing.T) {
		e, attempt, wake, done := pausedAfterDispatchStart(t, refund("run_t", "t1", "ord_t", 6000))
		var rec wire.OpReply
		deadline := time.Now().Add(15 * time.Second)
		for { // the grace period (2 x 500ms + 1s) is wall-clock time
			rec = e.op("reconcile", wire.OpRequest{AttemptID: attempt})
			if rec.Settled[0].Code != wire.CodeDispatchActive || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if s := rec.Settled[0]; s.Code != "" || s.Outcome != wire.OutcomeUnknown {
			t.Fatalf("reconcile of the paused attempt: %+v", s)
		}
		close(wake)
		r := <-done
		if r.Code != wire.CodeExecutorFenced {
			t.Fatalf("stale executor's observation: %+v", r)
		}
		bal := e.op("exposure", wire.OpRequest{Resource: "ord_t"}).Exposure[0].Balance
		if bal.Held != 6000 {
			t.Fatalf("hold after the fenced observation: %+v", bal)
		}
		if rec := e.op("reconcile", wire.OpRequest{AttemptID: attempt}); rec.Settled[0].Outcome != wire.OutcomeApplied {
			t.Fatalf("reconcile after the late call: %+v", rec)
		}
		if bal := e.op("exposure", wire.OpRequest{Resource: "ord_t"}).Exposure[0].Balance; bal.Committed != 6000 || bal.Held != 0 {
			t.Fatalf("after reconciliation: %+v", bal)
		}
		signedStream(t, e.rt)
	})
}
