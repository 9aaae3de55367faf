package kernel

import (
	"bytes"
	"encoding/json"
	"slices"
)

// RecoveryContract says how a provider's reply maps to an outcome: where the
// completion state is read, which states mean applied, not applied and
// pending, and which HTTP statuses prove the effect did not happen.
type RecoveryContract struct {
	Completion         string   `json:"completion"`
	Applied            []string `json:"applied"`
	NotApplied         []string `json:"not_applied"`
	Pending            []string `json:"pending"`
	NotAppliedStatuses []int    `json:"not_applied_statuses"`
}

// ProviderReply is what an adapter saw: a transport failure (timeout, broken
// connection) or an HTTP status with a body.
type ProviderReply struct {
	TransportError bool
	Status         int
	Body           []byte
}

// ClassifyQuery maps the reply to a reconciliation query (a look-up by the
// attempt's idempotency key) to an outcome. Only the reported state
// settles: NotAppliedStatuses are statuses of the dispatch call, and a
// query's non-2xx is unknown whatever it is. A 404 for a key the provider
// never saw proves nothing: the call may still be on its way, or the
// provider may have lost the key, so it must never release a hold.
func (c RecoveryContract) ClassifyQuery(r ProviderReply) (Outcome, string) {
	if r.Status < 200 || r.Status > 299 {
		return OutcomeUnknown, ""
	}
	return c.Classify(r)
}

// Classify maps a provider reply to an outcome under the contract. A 2xx
// settles only when the reported state says so; a listed status is
// not_applied; any other status, a transport failure, an unreadable body or
// an unlisted state is unknown. The second result is the state the provider
// reported, for the record.
func (c RecoveryContract) Classify(r ProviderReply) (Outcome, string) {
	if r.TransportError {
		return OutcomeUnknown, ""
	}
	if slices.Contains(c.NotAppliedStatuses, r.Status) {
		return OutcomeNotApplied, ""
	}
	if r.Status < 200 || r.Status > 299 {
		return OutcomeUnknown, ""
	}
	ptr, err := ParsePointer(c.Completion)
	if err != nil {
		return OutcomeUnknown, ""
	}
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return OutcomeUnknown, ""
	}
	v, _ := ptr.Eval(doc)
	state, ok := v.(string)
	if !ok {
		return OutcomeUnknown, ""
	}
	switch {
	case slices.Contains(c.Applied, state):
		return OutcomeApplied, state
	case slices.Contains(c.NotApplied, state):
		return OutcomeNotApplied, state
	case slices.Contains(c.Pending, state):
		return OutcomePending, state
	}
	return OutcomeUnknown, state
}
