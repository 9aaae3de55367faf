package gateway

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/contextos/ledger/aggregates"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/internal/testenv"
	"github.com/contextos/ledger/kernel"
	"github.com/nats-io/nats.go"
)

// FuzzParseProposal: never panics; a refusal is request_malformed with a
// reason; an accepted proposal has its ids present and bounded and object
// arguments, and its JSON form is accepted again as the same proposal.
func FuzzParseProposal(f *testing.F) {
	good, _ := json.Marshal(refund("run_1", "op-1", "ord_881", 80000))
	for _, s := range []string{string(good), `{}`, `null`, `[]`, `{"run_id":"r","operation_key":"k","capability_id":"c","arguments":{}}`,
		`{"run_id":"r","operation_key":"k","capability_id":"c","arguments":{},"tenant":"globex"}`,
		`{"run_id":"r","operation_key":"k","capability_id":"c","arguments":[]}`,
		`{"run_id":"r","operation_key":"k","capability_id":"c","arguments":{"a":1e400}} trailing`,
		`{"run_id":"r","run_id":"s","operation_key":"k","capability_id":"c","arguments":{}}`,
		`{"RUN_ID":"r","operation_key":"k","capability_id":"c","arguments":{}}`,
		"{\"run_id\":\"\xff\",\"operation_key\":\"k\",\"capability_id\":\"c\",\"arguments\":{}}",
		`{"run_id":"r","operation_key":"k","capability_id":"c","arguments":{},"evidence_refs":[""],"approval_id":"a"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, r := ParseProposal(b)
		if r != nil {
			if r.Code != kernel.CodeRequestMalformed || r.Reason == "" {
				t.Fatalf("refusal %+v", r)
			}
			return
		}
		for _, id := range []string{p.RunID, p.OperationKey, p.CapabilityID} {
			if id == "" || len(id) > maxIDBytes {
				t.Fatalf("accepted id %q", id)
			}
		}
		if len(p.Arguments) == 0 || p.Arguments[0] != '{' {
			t.Fatalf("accepted arguments %q", p.Arguments)
		}
		again, err := json.Marshal(p)
		if err != nil {
			t.Fatalf("accepted proposal does not encode: %v", err)
		}
		q, r := ParseProposal(again)
		if r != nil {
			t.Fatalf("re-encoded proposal refused: %v\n%s", r, again)
		}
		if q.RunID != p.RunID || q.OperationKey != p.OperationKey || q.CapabilityID != p.CapabilityID || q.ApprovalID != p.ApprovalID ||
			len(q.EvidenceRefs) != len(p.EvidenceRefs) {
			t.Fatalf("round trip changed the proposal: %+v vs %+v", p, q)
		}
		if !json.Valid(p.Arguments) || !json.Valid(q.Arguments) {
			t.Fatalf("accepted arguments are not JSON: %q", p.Arguments)
		}
	})
}

// TestHostileProposals: what DESIGN calls malformed is refused
// request_malformed (or the amount's own code) before anything is
// reserved, leaves a signed refusal record, and changes no balance; a body
// above the NATS payload limit never leaves the client. Duplicate keys in
// the arguments must be refused: the ledger reads the last occurrence, and a
// provider whose JSON parser keeps the first would refund another order or
// amount than the one reserved.
func TestHostileProposals(t *testing.T) {
	e := startEnv(t)
	nc := e.client("acme", "agent_email")
	wantBalance(t, e.propose(nc, "acme", "agent_email", refund("run_b", "base", "ord_1", 10000)), 10000, 0, 90000)
	deepArgs := strings.Repeat(`{"x":`, 5000) + `1` + strings.Repeat(`}`, 5000)
	raw := func(key, args string) []byte {
		return []byte(`{"run_id":"run_h","operation_key":"` + key + `","capability_id":"adp_payments.issue_refund","arguments":` + args + `}`)
	}
	cases := []struct {
		name  string
		body  []byte
		codes []kernel.Code
	}{
		{"invalid UTF-8 body", []byte("{\"run_id\":\"\xff\xfe\"}"), []kernel.Code{kernel.CodeRequestMalformed}},
		{"invalid UTF-8 in an argument", raw("u", "{\"order_id\":\"ord_1\xff\",\"amount_minor\":5}"), []kernel.Code{kernel.CodeRequestMalformed}},
		{"NUL and controls", raw("n", "{\"order_id\":\"ord_1\",\"amount_minor\":5}\x00"), []kernel.Code{kernel.CodeRequestMalformed}},
		{"amount 1e400", raw("h1", `{"order_id":"ord_1","amount_minor":1e400}`), []kernel.Code{kernel.CodeRequestMalformed, kernel.CodeAmountInvalid}},
		{"amount 2^53+1", raw("h2", `{"order_id":"ord_1","amount_minor":9007199254740993}`), []kernel.Code{kernel.CodeRequestMalformed, kernel.CodeAmountInvalid}},
		{"amount -0", raw("h3", `{"order_id":"ord_1","amount_minor":-0}`), []kernel.Code{kernel.CodeAmountInvalid}},
		{"amount 1e-400", raw("h4", `{"order_id":"ord_1","amount_minor":1e-400}`), []kernel.Code{kernel.CodeRequestMalformed, kernel.CodeAmountInvalid}},
		{"huge other number", raw("h5", `{"order_id":"ord_1","amount_minor":5,"n":123456789012345678901234567890}`), []kernel.Code{kernel.CodeRequestMalformed}},
		{"5000 levels deep", raw("d", deepArgs), []kernel.Code{kernel.CodeRequestMalformed}},
		{"100 KB body", raw("o", `{"order_id":"ord_1","amount_minor":5,"pad":"`+strings.Repeat("x", 100<<10)+`"}`), []kernel.Code{kernel.CodeRequestMalformed}},
		{"empty", []byte{}, []kernel.Code{kernel.CodeRequestMalformed}},
		{"null", []byte(`null`), []kernel.Code{kernel.CodeRequestMalformed}},
		{"array", []byte(`[]`), []kernel.Code{kernel.CodeRequestMalformed}},
		{"trailing data", append(raw("t", `{"order_id":"ord_1","amount_minor":5}`), []byte(`{}`)...), []kernel.Code{kernel.CodeRequestMalformed}},
		{"arguments not an object", raw("a", `"ord_1"`), []kernel.Code{kernel.CodeRequestMalformed}},
		{"resource not a string", raw("r", `{"order_id":881,"amount_minor":5}`), []kernel.Code{kernel.CodeResourceInvalid}},
		{"case-variant member name", []byte(`{"Run_ID":"r","operation_key":"k","capability_id":"adp_payments.issue_refund","arguments":{}}`), []kernel.Code{kernel.CodeRequestMalformed}},
		{"duplicate keys in arguments", raw("dup", `{"order_id":"ord_2","amount_minor":100000,"order_id":"ord_1","amount_minor":1}`), []kernel.Code{kernel.CodeRequestMalformed}},
	}
	calls := e.prov.Stats().Calls
	var failed []string
	for _, c := range cases {
		msg, err := nc.Request(ProposeSubject("acme", "agent_email"), c.body, 10*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var r Reply
		if err := json.Unmarshal(msg.Data, &r); err != nil {
			t.Fatal(err)
		}
		ok := r.Status == kernel.StatusRefused && r.Reason != ""
		found := false
		for _, code := range c.codes {
			found = found || r.Code == code
		}
		if !ok || !found {
			failed = append(failed, c.name+": "+string(r.Status)+" "+string(r.Code)+" "+r.Reason)
		}
	}
	// Above the server's max payload (1 MB): the client refuses to send it.
	huge := raw("x", `{"order_id":"ord_1","amount_minor":5,"pad":"`+strings.Repeat("x", 2<<20)+`"}`)
	if _, err := nc.Request(ProposeSubject("acme", "agent_email"), huge, 5*time.Second); !errors.Is(err, nats.ErrMaxPayload) {
		t.Errorf("2 MB proposal: %v, want %v", err, nats.ErrMaxPayload)
	}
	rows := e.op("exposure", OpRequest{}).Exposure
	if len(rows) != 1 || rows[0].Balance != (kernel.Balance{Limit: 100000, Committed: 10000, Available: 90000}) {
		t.Errorf("hostile proposals changed balances: %+v", rows)
	}
	if st := e.prov.Stats(); st.Calls != calls {
		t.Errorf("hostile proposals reached the provider: %d calls, refunds %+v", st.Calls-calls, e.prov.Refunds())
	}
	// Each refusal is recorded and signed: on the principal's refusal
	// subject when it names no operation (sampled: the first of a window
	// as itself, the others in the window's aggregate), on the operation
	// otherwise.
	subject, _ := codec.Subject("acme", "refusal", "agent_email")
	ops := map[string]bool{}
	for _, k := range []string{"u", "n", "h1", "h2", "h3", "h4", "h5", "d", "o", "t", "a", "r", "dup"} {
		ref, _ := aggregates.OperationRef("acme", "run_h", k)
		ops[ref.Subject] = true
	}
	signedRefusals := func() int {
		refusals := 0
		for _, se := range signedStream(t, e.rt) {
			switch ev := se.ev.(type) {
			case kernel.ProposalRefused:
				if se.subject == subject {
					refusals += max(1, ev.Count)
				}
			case kernel.OperationRefused:
				if ops[se.subject] && ev.Code != "" {
					refusals++
				}
			}
		}
		return refusals
	}
	// The window's aggregate is appended at its end.
	testenv.Eventually(t, func() bool { return signedRefusals() >= len(cases)-len(failed) }, 10*time.Second,
		len(cases)-len(failed), " signed refusal records")
	for _, f := range failed {
		t.Errorf("not refused as it should be: %s", f)
	}
}

// FuzzBindAction: for every proposal whose arguments are accepted, the
// provider's body (the canonical bytes), the digest and the ledger's
// resource and amount agree: the body is canonical and stable, the digest
// is the one of the body, and the resource and amount read from the body
// are the ones the ledger reserves on.
func FuzzBindAction(f *testing.F) {
	for _, s := range []string{`{"order_id":"ord_881","amount_minor":80000}`, `{"order_id":"s_\ud800","amount_minor":1}`,
		`{"order_id":"s_\udc00","amount_minor":1}`, `{"order_id":"s_\uFFFD","amount_minor":1}`, `{ "amount_minor" : 1e2, "order_id":"\u0041" }`,
		`{"order_id":"s_\ud83d\ude00","amount_minor":1.0}`, `{"order_id":"\u00e9","amount_minor":7,"x":[1,{"y":null}]}`} {
		f.Add([]byte(s))
	}
	def := kernel.Definition{ID: "refunds-per-order", CapabilityIDs: []string{"adp_payments.issue_refund"},
		ResourcePointer: "/order_id", AmountPointer: "/amount_minor", Limit: 100000, Unit: "INR_minor"}
	cp := &CapabilityConfig{ID: "adp_payments.issue_refund", Version: "1"}
	f.Fuzz(func(t *testing.T, raw []byte) {
		p := Proposal{RunID: "run_1", OperationKey: "k", CapabilityID: cp.ID, Arguments: raw}
		act, r := bindAction("acme", "agent_email", p, cp)
		if r != nil {
			if r.Code != kernel.CodeRequestMalformed {
				t.Fatalf("refusal %+v", r)
			}
			return
		}
		if act.digest == "" || len(act.canon) == 0 {
			t.Fatalf("accepted with digest %q and body %q", act.digest, act.canon)
		}
		twice, err := kernel.Canonical(act.canon)
		if err != nil || string(twice) != string(act.canon) {
			t.Fatalf("provider body %s is not canonical: %s %v", act.canon, twice, err)
		}
		q := p
		q.Arguments = act.canon
		again, r := bindAction("acme", "agent_email", q, cp)
		if r != nil || again.digest != act.digest || string(again.canon) != string(act.canon) {
			t.Fatalf("the provider body %s binds another action: %v %s vs %s", act.canon, r, again.digest, act.digest)
		}
		res, amt, er := def.Extract(act.args)
		res2, amt2, er2 := def.Extract(again.args)
		if (er == nil) != (er2 == nil) || res != res2 || amt != amt2 {
			t.Fatalf("ledger reads %q %d (%v) from the proposal, %q %d (%v) from the provider body %s", res, amt, er, res2, amt2, er2, act.canon)
		}
	})
}
