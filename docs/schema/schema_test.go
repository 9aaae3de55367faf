package schema

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/contextos/ledger/client"
	"github.com/contextos/ledger/daemon"
	"github.com/contextos/ledger/gateway"
	"github.com/contextos/ledger/internal/testing/daemontest"
	"github.com/contextos/ledger/internal/testing/provider"
	"github.com/contextos/ledger/wire"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

const base = "https://contextos.invalid/schema/ctx.v1/"

// schemas compiles every schema of this directory.
func schemas(t testing.TB) map[string]*jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	c.AssertContent()
	files, err := filepath.Glob("*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no schemas: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if id, _ := doc.(map[string]any)["$id"].(string); id != base+f {
			t.Fatalf("%s: $id %q, want %q", f, id, base+f)
		}
		if err := c.AddResource(base+f, doc); err != nil {
			t.Fatal(err)
		}
	}
	out := map[string]*jsonschema.Schema{}
	for _, f := range files {
		s, err := c.Compile(base + f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[strings.TrimSuffix(f, ".json")] = s
	}
	for _, def := range []string{"exposure_row", "attempt_row", "settle_row", "run_data", "authority_data", "approval_data", "evidence_data", "deny_data", "approval_row", "incident_row", "version_row"} {
		s, err := c.Compile(base + "op-reply.json#/$defs/" + def)
		if err != nil {
			t.Fatal(err)
		}
		out["op-reply#"+def] = s
	}
	return out
}

func validate(s *jsonschema.Schema, b []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return err
	}
	return s.Validate(v)
}

// TestCodeEnumIsTheCatalog: the schemas' code enum is wire.Codes, in
// order, so a new code cannot reach the wire undocumented.
func TestCodeEnumIsTheCatalog(t *testing.T) {
	var common struct {
		Defs struct {
			Code struct {
				Enum []wire.Code `json:"enum"`
			} `json:"code"`
			Status struct {
				Enum []wire.Status `json:"enum"`
			} `json:"status"`
		} `json:"$defs"`
	}
	b, err := os.ReadFile("common.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &common); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(common.Defs.Code.Enum, wire.Codes) {
		t.Fatalf("common.json codes\n%v\nwire.Codes\n%v\nrun go generate ./wire", common.Defs.Code.Enum, wire.Codes)
	}
	want := []wire.Status{wire.StatusApplied, wire.StatusNotApplied, wire.StatusPending, wire.StatusUnknown, wire.StatusRefused}
	if !slices.Equal(common.Defs.Status.Enum, want) {
		t.Fatalf("statuses %v, want %v", common.Defs.Status.Enum, want)
	}
	schemas(t)
}

type testDaemon struct {
	rt   *daemon.Runtime
	prov *provider.Server
}

func boot(t *testing.T) *testDaemon {
	t.Helper()
	d := daemontest.Boot(t, daemontest.Options{})
	return &testDaemon{rt: d.RT, prov: d.Provider}
}

func (d *testDaemon) connect(t *testing.T, principal, password string) *client.Client {
	t.Helper()
	c, err := client.Connect(client.Options{URL: d.rt.URL, Tenant: "acme", Principal: principal, Password: password, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// propose sends body as is and returns the reply's bytes.
func propose(t *testing.T, c *client.Client, body string) []byte {
	t.Helper()
	m, err := c.Conn().Request(wire.ProposeSubject(c.Tenant(), c.Principal()), []byte(body), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return m.Data
}

func op(t *testing.T, c *client.Client, verb, body string) []byte {
	t.Helper()
	m, err := c.Conn().Request(wire.OpSubject(c.Tenant(), verb, c.Principal()), []byte(body), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return m.Data
}

const refundArgs = `{"order_id":"ord_1","amount_minor":60000,"currency":"INR"}`

func refund(key string) string {
	return `{"run_id":"run_s","operation_key":"` + key + `","capability_id":"adp_payments.issue_refund","arguments":` + refundArgs + `}`
}

// TestLiveReplies sends every kind of request to a running daemon (real
// embedded NATS, real provider on loopback), checks each request against
// its schema and each reply against the reply's.
func TestLiveReplies(t *testing.T) {
	s := schemas(t)
	d := boot(t)
	agent, ops := d.connect(t, "agent_email", "email-secret-passphrase"), d.connect(t, "ops_alice", "alice-secret-passphrase")
	check := func(what, schema string, b []byte) map[string]any {
		t.Helper()
		if err := validate(s[schema], b); err != nil {
			t.Errorf("%s: %s does not fit %s: %v", what, b, schema, err)
		}
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		return m
	}
	send := func(body string) map[string]any {
		t.Helper()
		check("proposal", "proposal", []byte(body))
		return check("decision", "decision", propose(t, agent, body))
	}
	if r := send(refund("k1")); r["status"] != "applied" {
		t.Fatalf("applied: %v", r)
	}
	if r := send(refund("k2")); r["code"] != string(wire.CodeExceeded) {
		t.Fatalf("exceeded: %v", r)
	}
	d.prov.Script(provider.Pending)
	pending := send(`{"run_id":"run_s","operation_key":"k3","capability_id":"adp_payments.issue_refund","arguments":{"order_id":"ord_2","amount_minor":100,"currency":"INR"},"evidence_refs":null}`)
	if pending["status"] != "pending" {
		t.Fatalf("pending: %v", pending)
	}
	wireProposal := `{"run_id":"run_s","operation_key":"w1","capability_id":"bank.wire","arguments":{"to":"x"}}`
	ar := send(wireProposal)
	if ar["code"] != string(wire.CodeApprovalRequired) {
		t.Fatalf("approval_required: %v", ar)
	}
	check("malformed reply", "decision", propose(t, agent, `{"run_id":"r"}`))
	// Ids and arguments over 256 bytes: the views show them shortened, with
	// their digests.
	long := strings.Repeat("L", 300)
	d.prov.Script(provider.Pending)
	if r := send(`{"run_id":"` + long[:256] + `","operation_key":"k4","capability_id":"adp_payments.issue_refund","arguments":{"order_id":"` + long + `","amount_minor":100,"currency":"INR"}}`); r["status"] != "pending" {
		t.Fatalf("pending with a long id: %v", r)
	}
	if r := send(`{"run_id":"run_s","operation_key":"w2","capability_id":"bank.wire","arguments":{"to":"` + long + `"}}`); r["code"] != string(wire.CodeApprovalRequired) {
		t.Fatalf("approval_required with a long argument: %v", r)
	}

	verbs := []struct{ verb, req, reqSchema, data string }{
		{"exposure", `{}`, "exposure-request", ""},
		{"exposure", `{"resource":"ord_1"}`, "exposure-request", ""},
		{"exposure", `{"limit":1}`, "exposure-request", ""},
		{"exposure", `{"resource_digest":"` + wire.Digest(long) + `","limit":null,"cursor":null}`, "exposure-request", ""},
		{"attempts", `{}`, "attempts-request", ""},
		{"attempts", `{"limit":1}`, "attempts-request", ""},
		{"reconcile", `{"all":true}`, "reconcile-request", ""},
		{"reconcile", `{"attempt_id":"nope"}`, "reconcile-request", ""},
		{"close-attempt", `{"attempt_id":"nope"}`, "close-attempt-request", ""},
		{"close-attempt", `{"attempt_id":"ghost","guarantee_id":"refunds-per-order","resource":"ord_7","reason":"tombstone"}`, "close-attempt-request", ""},
		{"assert-absence", `{"attempt_id":"` + pending["attempt_id"].(string) + `","artifact_ref":"ticket-1"}`, "assert-absence-request", ""},
		{"kill-switch", `{}`, "kill-switch-request", ""},
		{"grant", `{"principal":"agent_chat","capability_id":"crm.lookup","reason":"r"}`, "grant-request", "authority_data"},
		{"revoke", `{"principal":"agent_chat","capability_id":"crm.lookup"}`, "grant-request", "authority_data"},
		{"approve", `{"action_digest":"` + ar["action_digest"].(string) + `","risk":"high","expires_in":"10m"}`, "approve-request", "approval_data"},
		{"admit-run", `{"run_id":"run_new","principal":"agent_email","calls":3,"amount":100}`, "admit-run-request", "run_data"},
		{"admit-run", `{"run_id":"run_new","principal":"agent_email","calls":4,"amount":100}`, "admit-run-request", ""},
		{"run", `{"run_id":"run_s"}`, "run-request", "run_data"},
		{"evidence", `{"candidate":{}}`, "evidence-request", ""},
		{"approvals", `{}`, "list-request", ""},
		{"approvals", `{"limit":1}`, "list-request", ""},
		{"incidents", `{}`, "list-request", ""},
		{"incidents", `{"limit":500,"cursor":""}`, "list-request", ""},
		{"guarantee-set-limit", `{"guarantee_id":"refunds-per-order","limit":150000,"reason":"festival season"}`, "guarantee-set-limit-request", ""},
		{"guarantee-set-limit", `{"guarantee_id":"refunds-per-order","resource":"ord_vip","limit":500000,"reason":"enterprise"}`, "guarantee-set-limit-request", ""},
		{"guarantee-history", `{"guarantee_id":"refunds-per-order"}`, "guarantee-history-request", ""},
		{"guarantee-history", `{"guarantee_id":"refunds-per-order","limit":1}`, "guarantee-history-request", ""},
	}
	var nextCursors int
	for _, v := range verbs {
		check(v.verb+" request", v.reqSchema, []byte(v.req))
		r := check(v.verb+" reply", "op-reply", op(t, ops, v.verb, v.req))
		if v.data != "" {
			if r["ok"] != true {
				t.Errorf("%s %s: %v", v.verb, v.req, r)
				continue
			}
			b, _ := json.Marshal(r["data"])
			check(v.verb+" data", "op-reply#"+v.data, b)
		}
		if r["next_cursor"] != nil {
			nextCursors++
		}
		for _, row := range []struct{ member, def string }{{"exposure", "exposure_row"}, {"attempts", "attempt_row"}, {"settled", "settle_row"},
			{"approvals", "approval_row"}, {"incidents", "incident_row"}, {"versions", "version_row"}} {
			rows, _ := r[row.member].([]any)
			for _, x := range rows {
				b, _ := json.Marshal(x)
				check(v.verb+" "+row.member, "op-reply#"+row.def, b)
			}
		}
	}
	if nextCursors < 3 {
		t.Errorf("%d replies had a next_cursor: the pages of one row did not page", nextCursors)
	}
	// The shortened forms reached the replies, digests beside them.
	for verb, want := range map[string]string{"attempts": `"resource_digest":"` + wire.Digest(long) + `"`,
		"exposure": `"resource_digest":"` + wire.Digest(long) + `"`, "approvals": `"arguments_digest":"`} {
		if b := op(t, ops, verb, `{}`); !strings.Contains(string(b), want) || strings.Contains(string(b), long) {
			t.Errorf("%s: no %s, or the long id whole: %.400s", verb, want, b)
		}
	}
	// deny: checked where this build's daemon serves it.
	deny := `{"action_digest":"` + ar["action_digest"].(string) + `","risk":"high","reason":"not this one"}`
	check("deny request", "deny-request", []byte(deny))
	if r := check("deny reply", "op-reply", op(t, ops, "deny", deny)); r["ok"] == true {
		b, _ := json.Marshal(r["data"])
		check("deny data", "op-reply#deny_data", b)
	} else {
		t.Logf("deny: %v (not served by this build)", r["reason"])
	}
	for _, v := range []struct{ verb, req, reqSchema string }{
		{"audit-keys", `{}`, ""},
		{"exposure-view", `{}`, ""},
		{"audit-export", `{"from":0,"limit":10}`, "audit-page-request"},
		{"events-export", `{"from":0,"limit":10}`, "audit-page-request"},
		{"audit-checkpoints", `{"from":0}`, "audit-page-request"},
		{"audit-prove", `{"event_id":"01J00000000000000000000000"}`, "audit-prove-request"},
		{"audit-prove-consistency", `{"old_size":1000000}`, "audit-prove-consistency-request"},
	} {
		if v.reqSchema != "" {
			check(v.verb+" request", v.reqSchema, []byte(v.req))
		}
		check(v.verb+" reply", "audit-reply", op(t, ops, v.verb, v.req))
	}
}

// proposalCases are bodies of the proposal schema's boundary; valid says
// whether the schema accepts each.
var proposalCases = []struct {
	name  string
	body  string
	valid bool
}{
	{"minimal", `{"run_id":"r","operation_key":"k","capability_id":"crm.lookup","arguments":{}}`, true},
	{"all members", `{"run_id":"r","operation_key":"k2","capability_id":"crm.lookup","arguments":{"q":"x"},"evidence_refs":["e1"],"approval_id":""}`, true},
	{"nulls for optional members", `{"run_id":"r","operation_key":"k3","capability_id":"crm.lookup","arguments":{},"evidence_refs":null,"approval_id":null}`, true},
	{"id of 256 bytes", `{"run_id":"` + strings.Repeat("r", 256) + `","operation_key":"k","capability_id":"crm.lookup","arguments":{}}`, true},
	{"missing run_id", `{"operation_key":"k","capability_id":"crm.lookup","arguments":{}}`, false},
	{"missing arguments", `{"run_id":"r","operation_key":"k","capability_id":"crm.lookup"}`, false},
	{"empty operation_key", `{"run_id":"r","operation_key":"","capability_id":"crm.lookup","arguments":{}}`, false},
	{"id of 257 bytes", `{"run_id":"` + strings.Repeat("r", 257) + `","operation_key":"k","capability_id":"crm.lookup","arguments":{}}`, false},
	{"arguments an array", `{"run_id":"r","operation_key":"k","capability_id":"crm.lookup","arguments":[1]}`, false},
	{"arguments a string", `{"run_id":"r","operation_key":"k","capability_id":"crm.lookup","arguments":"{}"}`, false},
	{"arguments null", `{"run_id":"r","operation_key":"k","capability_id":"crm.lookup","arguments":null}`, false},
	{"unknown member", `{"run_id":"r","operation_key":"k","capability_id":"crm.lookup","arguments":{},"tenant":"globex"}`, false},
	{"member of another case", `{"Run_ID":"r","operation_key":"k","capability_id":"crm.lookup","arguments":{}}`, false},
	{"run_id a number", `{"run_id":7,"operation_key":"k","capability_id":"crm.lookup","arguments":{}}`, false},
	{"empty evidence ref", `{"run_id":"r","operation_key":"k","capability_id":"crm.lookup","arguments":{},"evidence_refs":[""]}`, false},
	{"evidence ref of 1025 bytes", `{"run_id":"r","operation_key":"k","capability_id":"crm.lookup","arguments":{},"evidence_refs":["` + strings.Repeat("e", 1025) + `"]}`, false},
	{"257 evidence refs", `{"run_id":"r","operation_key":"k","capability_id":"crm.lookup","arguments":{},"evidence_refs":[` + strings.TrimSuffix(strings.Repeat(`"e",`, 257), ",") + `]}`, false},
	{"approval_id of 257 bytes", `{"run_id":"r","operation_key":"k","capability_id":"crm.lookup","arguments":{},"approval_id":"` + strings.Repeat("a", 257) + `"}`, false},
	{"not an object", `["run_id"]`, false},
}

// opCases are operator request bodies at their schemas' boundaries.
var opCases = []struct {
	verb, schema, body string
	valid              bool
}{
	{"exposure", "exposure-request", `{"guarantee_id":"refunds-per-order"}`, true},
	{"exposure", "exposure-request", `{"tenant":"globex"}`, false},
	{"exposure", "exposure-request", `{"resource":5}`, false},
	{"attempts", "attempts-request", `{"all":"yes"}`, false},
	{"attempts", "attempts-request", `{"limit":501}`, false},
	{"attempts", "attempts-request", `{"limit":-1}`, false},
	{"attempts", "attempts-request", `{"limit":"10"}`, false},
	{"exposure", "exposure-request", `{"resource_digest":"ABC"}`, false},
	{"approvals", "list-request", `{"limit":10}`, true},
	{"approvals", "list-request", `{"limit":1000}`, false},
	{"incidents", "list-request", `{"cursor":"` + strings.Repeat("x", 1025) + `"}`, false},
	{"incidents", "list-request", `{"all":true}`, false},
	{"guarantee-history", "guarantee-history-request", `{"guarantee_id":"refunds-per-order","limit":0}`, true},
	{"guarantee-history", "guarantee-history-request", `{"guarantee_id":"refunds-per-order","limit":600}`, false},
	{"reconcile", "reconcile-request", `{"all":true}`, true},
	{"reconcile", "reconcile-request", `{}`, false},
	{"reconcile", "reconcile-request", `{"all":false}`, false},
	{"close-attempt", "close-attempt-request", `{"reason":"x"}`, false},
	{"assert-absence", "assert-absence-request", `{"attempt_id":"a"}`, false},
	{"kill-switch", "kill-switch-request", `{"engaged":"yes"}`, false},
	{"grant", "grant-request", `{"principal":"agent_chat","capability_id":"crm.lookup"}`, true},
	{"grant", "grant-request", `{"principal":"agent_chat"}`, false},
	{"grant", "grant-request", `{"principal":"agent_chat","capability_id":"crm.lookup","operator":"x"}`, false},
	{"revoke", "grant-request", `{"capability_id":"crm.lookup"}`, false},
	{"approve", "approve-request", `{"action_digest":"` + strings.Repeat("a", 64) + `","risk":"high"}`, false},
	{"approve", "approve-request", `{"action_digest":"` + strings.Repeat("a", 64) + `","risk":"high","expires_in":"soon"}`, false},
	{"admit-run", "admit-run-request", `{"run_id":"rr","principal":"agent_chat","calls":1,"amount":1}`, true},
	{"admit-run", "admit-run-request", `{"principal":"agent_chat","calls":1}`, false},
	{"admit-run", "admit-run-request", `{"run_id":"rr2","principal":"agent_chat","calls":1.5}`, false},
	{"admit-run", "admit-run-request", `{"run_id":"rr3","principal":"agent_chat","calls":"1"}`, false},
	{"run", "run-request", `{"run_id":"rr"}`, true},
	{"run", "run-request", `{}`, false},
	{"run", "run-request", `{"run_id":"rr","x":1}`, false},
	{"evidence", "evidence-request", `{}`, false},
	{"evidence", "evidence-request", `{"candidate":{},"marker":{}}`, false},
	{"evidence", "evidence-request", `{"candidate":[]}`, false},
}

// TestDaemonRefusesWhatSchemasRefuse: each body the schemas refuse, the
// daemon refuses (request_malformed, or the code of what a missing member
// leaves unnamed); each they accept it takes past parsing, never refusing it
// request_malformed (it may still refuse what the body asks).
func TestDaemonRefusesWhatSchemasRefuse(t *testing.T) {
	s := schemas(t)
	d := boot(t)
	agent, ops := d.connect(t, "agent_email", "email-secret-passphrase"), d.connect(t, "ops_alice", "alice-secret-passphrase")
	for _, c := range proposalCases {
		if err := validate(s["proposal"], []byte(c.body)); (err == nil) != c.valid {
			t.Errorf("%s: schema says %v, want valid=%v", c.name, err, c.valid)
		}
		var r client.Decision
		if err := json.Unmarshal(propose(t, agent, c.body), &r); err != nil {
			t.Fatal(err)
		}
		if refused := r.Status == wire.StatusRefused; c.valid && refused && r.Code == wire.CodeRequestMalformed || !c.valid && !refused {
			t.Errorf("%s: the daemon replied %s %s (%s), schema valid=%v", c.name, r.Status, r.Code, r.Reason, c.valid)
		}
	}
	for _, c := range opCases {
		if err := validate(s[c.schema], []byte(c.body)); (err == nil) != c.valid {
			t.Errorf("%s %s: schema says %v, want valid=%v", c.verb, c.body, err, c.valid)
		}
		var r wire.OpReply
		if err := json.Unmarshal(op(t, ops, c.verb, c.body), &r); err != nil {
			t.Fatal(err)
		}
		if c.valid && !r.OK && r.Code == wire.CodeRequestMalformed || !c.valid && r.OK {
			t.Errorf("%s %s: the daemon replied ok=%v %s (%s), schema valid=%v", c.verb, c.body, r.OK, r.Code, r.Reason, c.valid)
		}
	}
}

// FuzzProposalSchema: whatever JSON the proposal schema refuses, the
// daemon's parser (gateway.ParseProposal, what the daemon runs first on
// every proposal) refuses too.
func FuzzProposalSchema(f *testing.F) {
	for _, c := range proposalCases {
		f.Add([]byte(c.body))
	}
	s := schemas(f)["proposal"]
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			return
		}
		if err := validate(s, b); err == nil {
			return
		} else if errors.Is(err, context.Canceled) {
			return
		}
		if p, r := gateway.ParseProposal(b); r == nil {
			t.Fatalf("the schema refuses %s, the daemon's parser accepts it as %+v", b, p)
		}
	})
}
