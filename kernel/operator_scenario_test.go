package kernel

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// operatorWorld is one tenant's operator configuration and its pending
// requests.
type operatorWorld struct {
	policy   OperatorPolicy
	scopes   map[string][]Scope // nil: every scope
	requests map[string]*OperatorRequest
	n        int
	now      time.Time // the scenario's clock, moved by advance
}

func (w *operatorWorld) run(t *testing.T, d *datadriven.TestData) string {
	arg := func(key, def string) string { return scenarioArg(d, key, def) }
	var out strings.Builder
	switch d.Cmd {
	case "advance":
		dur, err := time.ParseDuration(arg("by", ""))
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		w.now = w.now.Add(dur)
		return w.now.Format(time.RFC3339)
	case "policy":
		// The tenant's two_person and limit_raise_above.
		w.policy = OperatorPolicy{TwoPerson: list(arg("two_person", ""))}
		if v := arg("request_ttl", ""); v != "" {
			ttl, err := time.ParseDuration(v)
			if err != nil {
				d.Fatalf(t, "request_ttl: %v", err)
			}
			w.policy.RequestTTL = ttl
		}
		if v := arg("limit_raise_above", ""); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				d.Fatalf(t, "limit_raise_above: %v", err)
			}
			w.policy.LimitRaiseAbove = n
		}
		return "ok"
	case "operator":
		// An operator; scopes=* (or no scopes) holds every scope.
		id := arg("id", "")
		if s := arg("scopes", "*"); s != "*" {
			w.scopes[id] = []Scope{}
			for _, x := range list(s) {
				w.scopes[id] = append(w.scopes[id], Scope(x))
			}
		} else {
			w.scopes[id] = nil
		}
		return "ok"
	case "verb":
		// An operator sends a verb with the body in the input; an action
		// the two-person rule holds becomes a request.
		op, verb, body := arg("operator", ""), arg("verb", ""), []byte(d.Input)
		v := DecideOperatorVerb(w.policy, OperatorAction{Operator: op, Scopes: w.scopes[op], Verb: verb, Body: body})
		switch {
		case v.Refusal != nil:
			ev := NewOperatorRefused(op, verb, body, v.Refusal)
			fmt.Fprintf(&out, "refused %s: %s\nrecorded %s operator=%s verb=%s code=%s", v.Refusal.Code, v.Refusal.Reason, ev.EventType(), ev.Operator, ev.Verb, ev.Code)
		case v.SecondOperator:
			w.n++
			id := fmt.Sprintf("r%d", w.n)
			q := &OperatorRequest{}
			dec := DecideOperatorRequest(q, RequestOperatorAction{RequestID: id, Operator: op, Verb: verb, Scope: v.Scope, Body: body,
				Now: w.now, TTL: w.policy.RequestTTL})
			if dec.Refusal != nil {
				return fmt.Sprintf("refused %s: %s", dec.Refusal.Code, dec.Refusal.Reason)
			}
			for _, ev := range dec.Events {
				if err := q.Apply(ev); err != nil {
					d.Fatalf(t, "%v", err)
				}
			}
			w.requests[id] = q
			fmt.Fprintf(&out, "held for a second operator with %s: request %s (%s)", v.Scope, id, dec.Events[0].EventType())
		default:
			fmt.Fprintf(&out, "admitted: needs %s", orAll(v.Scope))
		}
	case "confirm":
		op, id := arg("operator", ""), arg("request", "")
		q := w.requests[id]
		if q == nil {
			q = &OperatorRequest{}
		}
		dec := DecideConfirm(q, Confirm{RequestID: id, Operator: op, Scopes: w.scopes[op], Now: w.now})
		if dec.Refusal != nil {
			return fmt.Sprintf("refused %s: %s", dec.Refusal.Code, dec.Refusal.Reason)
		}
		for _, ev := range dec.Events {
			if err := q.Apply(ev); err != nil {
				d.Fatalf(t, "%v", err)
			}
		}
		fmt.Fprintf(&out, "confirmed by %s (%s): run %s as %s with %s", q.ConfirmedBy, dec.Events[0].EventType(), q.Request.Verb, q.Request.Operator, q.Request.Body)
	default:
		d.Fatalf(t, "unknown command %s", d.Cmd)
	}
	return out.String()
}

func orAll(s Scope) string {
	if s == "" {
		return "every scope"
	}
	return string(s)
}
