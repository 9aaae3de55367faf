package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/contextos/ledger/aggregates"
	"github.com/contextos/ledger/client"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/exposure"
	"github.com/contextos/ledger/internal/testing/daemontest"
	"github.com/contextos/ledger/internal/testing/provider"
	"github.com/contextos/ledger/internal/testing/testenv"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/projections"
	"github.com/contextos/ledger/verifier"
	"github.com/contextos/ledger/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// exposureView fetches view.json (what ctx exposure export writes) as acme's
// ops_alice.
func (e *env) exposureView() exposure.View {
	e.t.Helper()
	c := &client.AuditClient{NC: e.client("acme", "ops_alice"), Tenant: "acme", Operator: "ops_alice"}
	b, err := c.File(context.Background(), wire.VerbExposureView, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	v, err := exposure.ParseView(b)
	if err != nil {
		e.t.Fatal(err)
	}
	return v
}

// storeRaw appends a message to the event stream as only the runtime's own
// user can: a stored event the kernel will refuse.
func (e *env) storeRaw(subject string, data []byte) {
	e.t.Helper()
	js, err := jetstream.New(e.rt.NC)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := js.Publish(context.Background(), subject, data); err != nil {
		e.t.Fatalf("store on %s: %v", subject, err)
	}
}

// wantAgree checks that ctx exposure (the exposure verb) and ctx exposure
// export (view.json) show the same resources with the same balances and
// open attempts.
func wantAgree(t *testing.T, rows []wire.ExposureRow, v exposure.View) {
	t.Helper()
	byRes := map[string]exposure.ResourceView{}
	for _, r := range v.Resources {
		if r.GuaranteeID != "" {
			byRes[r.GuaranteeID+"/"+r.Resource] = r
		}
	}
	if len(rows) != len(byRes) {
		t.Fatalf("exposure lists %d resources, the export %d: %+v vs %+v", len(rows), len(byRes), rows, v.Resources)
	}
	for _, r := range rows {
		x, ok := byRes[r.GuaranteeID+"/"+r.Resource]
		if !ok {
			t.Fatalf("%s/%s is in exposure, not in the export", r.GuaranteeID, r.Resource)
		}
		if r.Limit != x.Limit || r.Committed != x.Committed || r.Held != x.Held || r.Available != x.Available || r.OpenAttempts != len(x.OpenAttempts) {
			t.Fatalf("%s/%s: exposure %+v, export %+v", r.GuaranteeID, r.Resource, r, x)
		}
	}
}

// TestExposureAgreesWithExport: ctx exposure and ctx exposure export read
// the same read model, so they agree on a stream, also after the stream
// holds an event the kernel refuses (an observation of an attempt the
// ledger never saw, signed by the runtime key) and a message that is not an
// event at all. Both are counted and listed as incidents; neither changes a
// balance; the events after them are folded.
func TestExposureAgreesWithExport(t *testing.T) {
	e := startEnv(t)
	nc := e.client("acme", "agent_email")
	wantBalance(t, e.propose(nc, "acme", "agent_email", refund("run_a", "a1", "ord_a", 700)), 700, 0, 99300)
	e.prov.Script(provider.Pending)
	if r := e.propose(nc, "acme", "agent_email", refund("run_a", "a2", "ord_a", 300)); r.Status != wire.StatusPending {
		t.Fatalf("pending: %+v", r)
	}
	e.prov.Script(provider.Applied)
	wantBalance(t, e.propose(nc, "acme", "agent_email", refund("run_a", "b1", "ord_b", 50)), 50, 0, 99950)
	before := e.op("exposure", wire.OpRequest{})
	wantAgree(t, before.Exposure, e.exposureView())

	subject, err := codec.ExposureSubject("acme", "refunds-per-order", "ord_a")
	if err != nil {
		t.Fatal(err)
	}
	env, err := e.rt.Signer.Seal(kernel.TypeExposureObserved, kernel.EventVersion, aggregates.NewIDs(aggregates.SystemClock{}, nil).New(), "acme",
		codec.FormatTime(time.Now()), kernel.ExposureObserved{AttemptID: "01JNOBODY0000000000000000", Outcome: kernel.OutcomeApplied, Source: "forged"})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := codec.Encode(env)
	if err != nil {
		t.Fatal(err)
	}
	e.storeRaw(subject, raw)
	// The offline replay of the exported events reports the refused event
	// instead of computing balances past it.
	var jsonl strings.Builder
	c := &client.AuditClient{NC: e.client("acme", "ops_alice"), Tenant: "acme", Operator: "ops_alice"}
	if _, _, err := c.ExportEvents(context.Background(), &jsonl, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := verifier.Replay(strings.NewReader(jsonl.String()), nil); err == nil || !strings.Contains(err.Error(), "unknown attempt") {
		t.Fatalf("offline replay of a stream with a refused event: %v", err)
	}
	e.storeRaw("ctx.ev.acme.noise", []byte(`{"not":"an event"}`))
	wantBalance(t, e.propose(nc, "acme", "agent_email", refund("run_a", "b2", "ord_b", 25)), 75, 0, 99925)

	after := e.op("exposure", wire.OpRequest{})
	view := e.exposureView()
	wantAgree(t, after.Exposure, view)
	for _, r := range after.Exposure {
		if r.Resource == "ord_a" && (r.Committed != 700 || r.Held != 300) {
			t.Fatalf("the refused event changed ord_a: %+v", r)
		}
	}
	if n := e.rt.Gateway.Model().RefusedEvents("acme"); n != 2 {
		t.Fatalf("refused %d stored messages, want 2", n)
	}
	in := e.op(wire.VerbIncidents, wire.OpRequest{})
	refused := 0
	for _, i := range in.Incidents {
		if i.Kind == projections.KindStoredEventRefused && i.Code == wire.CodeStoredEventRefused {
			refused++
		}
	}
	if !in.OK || refused != 2 {
		t.Fatalf("incidents %+v: want the 2 refused stored messages", in)
	}
}

// TestApprovalsAndIncidentsVerbs: a proposal refused approval_required is
// pending, with its arguments, until an operator approves or denies its
// digest; the verbs take {} and refuse anything else.
func TestApprovalsAndIncidentsVerbs(t *testing.T) {
	e, _ := authzEnv(t, authzEdit)
	nc := e.client("acme", "agent_email")
	e.admit("run_h", "agent_email", 50, 10000000)
	first := e.propose(nc, "acme", "agent_email", refundTo(capRefundHigh, "run_h", "h0", "ord_h", 5000))
	wantRefused(t, "no approval", first, wire.CodeApprovalRequired)
	other := e.propose(nc, "acme", "agent_email", refundTo(capRefundHigh, "run_h", "h1", "ord_i", 6000))
	wantRefused(t, "no approval", other, wire.CodeApprovalRequired)
	r := e.mustOp(wire.VerbApprovals, struct{}{})
	if len(r.Approvals) != 2 {
		t.Fatalf("approvals %+v, want 2", r.Approvals)
	}
	p := r.Approvals[0]
	if p.OperationID != first.OperationID || p.ActionDigest != first.ActionDigest || p.OperationKey != "h0" || p.RunID != "run_h" ||
		p.Principal != "agent_email" || p.CapabilityID != capRefundHigh || p.RequestedAt == "" {
		t.Fatalf("pending approval %+v does not describe %+v", p, first)
	}
	var args map[string]any
	if err := json.Unmarshal(p.Arguments, &args); err != nil || args["order_id"] != "ord_h" || args["amount_minor"] != float64(5000) {
		t.Fatalf("arguments %s", p.Arguments)
	}
	// The same action again under a new key supersedes the older request.
	again := e.propose(nc, "acme", "agent_email", refundTo(capRefundHigh, "run_h", "h2", "ord_h", 5000))
	if r := e.mustOp(wire.VerbApprovals, struct{}{}); len(r.Approvals) != 2 || r.Approvals[1].OperationID != again.OperationID {
		t.Fatalf("after a repeat: %+v", r.Approvals)
	}
	e.mustOp("approve", wire.ApproveRequest{ActionDigest: first.ActionDigest, Risk: "high", ExpiresIn: "10m"})
	if r := e.mustOp(wire.VerbApprovals, struct{}{}); len(r.Approvals) != 1 || r.Approvals[0].OperationID != other.OperationID {
		t.Fatalf("after approving %s: %+v", first.ActionDigest, r.Approvals)
	}
	e.mustOp("deny", map[string]any{"action_digest": other.ActionDigest, "risk": "high", "reason": "not this order"})
	if r := e.mustOp(wire.VerbApprovals, struct{}{}); len(r.Approvals) != 0 {
		t.Fatalf("after denying %s: %+v", other.ActionDigest, r.Approvals)
	}
	if r := e.opAny(wire.VerbApprovals, map[string]any{"all": true}); r.OK || r.Code != wire.CodeRequestMalformed {
		t.Fatalf("approvals with a body: %+v", r)
	}
	if r := e.mustOp(wire.VerbIncidents, struct{}{}); r.Incidents == nil && !r.OK {
		t.Fatalf("incidents: %+v", r)
	}
}

// TestModelSnapshotAcrossRestart: a daemon that stops writes a snapshot of
// its read model; the next start loads it and folds only what was stored
// after it, and its views equal a full fold of the stream.
func TestModelSnapshotAcrossRestart(t *testing.T) {
	e := startEnv(t)
	nc := e.client("acme", "agent_email")
	for i := 0; i < 5; i++ {
		e.propose(nc, "acme", "agent_email", refund("run_s", fmt.Sprintf("s%d", i), "ord_s", 10))
	}
	rows := e.op("exposure", wire.OpRequest{}).Exposure
	e.rt.Close()
	e.restart(daemontest.Options{})
	if err := e.rt.Gateway.Model().Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := e.rt.Gateway.Model().Stats()
	if !st.Snapshot.Loaded || st.Snapshot.LoadedAt == 0 {
		t.Fatalf("the restarted model did not start from its snapshot: %+v", st)
	}
	full := projections.NewModel(projections.ModelConfig{Store: e.rt.Store})
	if err := full.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := verifier.Compare(e.rt.Gateway.Model().View("acme"), full.View("acme")); len(d) != 0 {
		t.Fatalf("the model from its snapshot differs from a full fold: %v", d)
	}
	if after := e.op("exposure", wire.OpRequest{}).Exposure; fmt.Sprint(after) != fmt.Sprint(rows) {
		t.Fatalf("exposure after a restart %+v, before %+v", after, rows)
	}
}

// TestContradictionIsOneIncident: a provider that reports applied after an
// operator asserted absence is a signed incident, listed once by the
// incidents verb with its attempt and operation.
func TestContradictionIsOneIncident(t *testing.T) {
	e := startEnv(t)
	nc := e.client("acme", "agent_email")
	e.prov.Script(provider.Pending)
	r := e.propose(nc, "acme", "agent_email", refund("run_c", "c1", "ord_c", 500))
	if r.Status != wire.StatusPending {
		t.Fatalf("pending: %+v", r)
	}
	if a := e.op("assert-absence", wire.OpRequest{AttemptID: r.AttemptID, ArtifactRef: "ticket-7"}); !a.OK {
		t.Fatalf("assert-absence: %+v", a)
	}
	e.prov.Settle(r.AttemptID, "succeeded")
	e.op("reconcile", wire.OpRequest{AttemptID: r.AttemptID})
	var found []wire.Incident
	testenv.Eventually(t, func() bool {
		found = found[:0]
		for _, in := range e.op(wire.VerbIncidents, wire.OpRequest{}).Incidents {
			if in.Code == wire.CodeObservationContradictsSeal {
				found = append(found, in)
			}
		}
		return len(found) > 0
	}, 10*time.Second, "the contradiction to be listed")
	if len(found) != 1 || found[0].AttemptID != r.AttemptID || found[0].OperationID != r.OperationID || found[0].At == "" {
		t.Fatalf("contradiction incidents %+v, want one for attempt %s of %s", found, r.AttemptID, r.OperationID)
	}
}
