package daemon_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/contextos/ledger/aggregates"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/internal/testing/testenv"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
	"github.com/nats-io/nats.go"
)

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
		codes []wire.Code
	}{
		{"invalid UTF-8 body", []byte("{\"run_id\":\"\xff\xfe\"}"), []wire.Code{wire.CodeRequestMalformed}},
		{"invalid UTF-8 in an argument", raw("u", "{\"order_id\":\"ord_1\xff\",\"amount_minor\":5}"), []wire.Code{wire.CodeRequestMalformed}},
		{"NUL and controls", raw("n", "{\"order_id\":\"ord_1\",\"amount_minor\":5}\x00"), []wire.Code{wire.CodeRequestMalformed}},
		{"amount 1e400", raw("h1", `{"order_id":"ord_1","amount_minor":1e400}`), []wire.Code{wire.CodeRequestMalformed, wire.CodeAmountInvalid}},
		{"amount 2^53+1", raw("h2", `{"order_id":"ord_1","amount_minor":9007199254740993}`), []wire.Code{wire.CodeRequestMalformed, wire.CodeAmountInvalid}},
		{"amount -0", raw("h3", `{"order_id":"ord_1","amount_minor":-0}`), []wire.Code{wire.CodeAmountInvalid}},
		{"amount 1e-400", raw("h4", `{"order_id":"ord_1","amount_minor":1e-400}`), []wire.Code{wire.CodeRequestMalformed, wire.CodeAmountInvalid}},
		{"huge other number", raw("h5", `{"order_id":"ord_1","amount_minor":5,"n":123456789012345678901234567890}`), []wire.Code{wire.CodeRequestMalformed}},
		{"5000 levels deep", raw("d", deepArgs), []wire.Code{wire.CodeRequestMalformed}},
		{"100 KB body", raw("o", `{"order_id":"ord_1","amount_minor":5,"pad":"`+strings.Repeat("x", 100<<10)+`"}`), []wire.Code{wire.CodeRequestMalformed}},
		{"empty", []byte{}, []wire.Code{wire.CodeRequestMalformed}},
		{"null", []byte(`null`), []wire.Code{wire.CodeRequestMalformed}},
		{"array", []byte(`[]`), []wire.Code{wire.CodeRequestMalformed}},
		{"trailing data", append(raw("t", `{"order_id":"ord_1","amount_minor":5}`), []byte(`{}`)...), []wire.Code{wire.CodeRequestMalformed}},
		{"arguments not an object", raw("a", `"ord_1"`), []wire.Code{wire.CodeRequestMalformed}},
		{"resource not a string", raw("r", `{"order_id":881,"amount_minor":5}`), []wire.Code{wire.CodeResourceInvalid}},
		{"case-variant member name", []byte(`{"Run_ID":"r","operation_key":"k","capability_id":"adp_payments.issue_refund","arguments":{}}`), []wire.Code{wire.CodeRequestMalformed}},
		{"duplicate keys in arguments", raw("dup", `{"order_id":"ord_2","amount_minor":100000,"order_id":"ord_1","amount_minor":1}`), []wire.Code{wire.CodeRequestMalformed}},
	}
	calls := e.prov.Stats().Calls
	var failed []string
	for _, c := range cases {
		msg, err := nc.Request(wire.ProposeSubject("acme", "agent_email"), c.body, 10*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var r wire.Reply
		if err := json.Unmarshal(msg.Data, &r); err != nil {
			t.Fatal(err)
		}
		ok := r.Status == wire.StatusRefused && r.Reason != ""
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
	if _, err := nc.Request(wire.ProposeSubject("acme", "agent_email"), huge, 5*time.Second); !errors.Is(err, nats.ErrMaxPayload) {
		t.Errorf("2 MB proposal: %v, want %v", err, nats.ErrMaxPayload)
	}
	rows := e.op("exposure", wire.OpRequest{}).Exposure
	if len(rows) != 1 || rows[0].Balance != (wire.Balance{Limit: 100000, Committed: 10000, Available: 90000}) {
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
