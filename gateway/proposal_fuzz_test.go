package gateway

import (
	"encoding/json"
	"testing"

	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
)

// FuzzParseProposal: never panics; a refusal is request_malformed with a
// reason; an accepted proposal has its ids present and bounded and object
// arguments, and its JSON form is accepted again as the same proposal.
func FuzzParseProposal(f *testing.F) {
	good, _ := json.Marshal(map[string]any{"run_id": "run_1", "operation_key": "op-1", "capability_id": "adp_payments.issue_refund",
		"arguments": map[string]any{"order_id": "ord_881", "amount_minor": 80000, "currency": "INR"}})
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
			if r.Code != wire.CodeRequestMalformed || r.Reason == "" {
				t.Fatalf("refusal %+v", r)
			}
			return
		}
		for _, id := range []string{p.RunID, p.OperationKey, p.CapabilityID} {
			if id == "" || len(id) > wire.MaxIDBytes {
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
	cp := &config.CapabilityConfig{ID: "adp_payments.issue_refund", Version: "1"}
	f.Fuzz(func(t *testing.T, raw []byte) {
		p := wire.Proposal{RunID: "run_1", OperationKey: "k", CapabilityID: cp.ID, Arguments: raw}
		act, r := kernel.BindAction("acme", "agent_email", kernel.Proposal(p), cp.Kernel())
		if r != nil {
			if r.Code != wire.CodeRequestMalformed {
				t.Fatalf("refusal %+v", r)
			}
			return
		}
		if act.Digest == "" || len(act.Canonical) == 0 {
			t.Fatalf("accepted with digest %q and body %q", act.Digest, act.Canonical)
		}
		twice, err := kernel.Canonical(act.Canonical)
		if err != nil || string(twice) != string(act.Canonical) {
			t.Fatalf("provider body %s is not canonical: %s %v", act.Canonical, twice, err)
		}
		q := p
		q.Arguments = act.Canonical
		again, r := kernel.BindAction("acme", "agent_email", kernel.Proposal(q), cp.Kernel())
		if r != nil || again.Digest != act.Digest || string(again.Canonical) != string(act.Canonical) {
			t.Fatalf("the provider body %s binds another action: %v %s vs %s", act.Canonical, r, again.Digest, act.Digest)
		}
		res, amt, er := def.Extract(act.Args)
		res2, amt2, er2 := def.Extract(again.Args)
		if (er == nil) != (er2 == nil) || res != res2 || amt != amt2 {
			t.Fatalf("ledger reads %q %d (%v) from the proposal, %q %d (%v) from the provider body %s", res, amt, er, res2, amt2, er2, act.Canonical)
		}
	})
}
