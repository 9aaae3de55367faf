package kernel

import "testing"

func TestClassify(t *testing.T) {
	c := RecoveryContract{Completion: "/refund/status", Applied: []string{"succeeded"}, NotApplied: []string{"failed"},
		Pending: []string{"pending"}, NotAppliedStatuses: []int{409, 422}}
	cases := []struct {
		name  string
		reply ProviderReply
		want  Outcome
	}{
		{"applied", ProviderReply{Status: 200, Body: []byte(`{"refund":{"status":"succeeded"}}`)}, OutcomeApplied},
		{"not applied state", ProviderReply{Status: 201, Body: []byte(`{"refund":{"status":"failed"}}`)}, OutcomeNotApplied},
		{"pending", ProviderReply{Status: 202, Body: []byte(`{"refund":{"status":"pending"}}`)}, OutcomePending},
		{"2xx unlisted state", ProviderReply{Status: 200, Body: []byte(`{"refund":{"status":"weird"}}`)}, OutcomeUnknown},
		{"2xx no state", ProviderReply{Status: 200, Body: []byte(`{}`)}, OutcomeUnknown},
		{"2xx state not a string", ProviderReply{Status: 200, Body: []byte(`{"refund":{"status":1}}`)}, OutcomeUnknown},
		{"2xx not json", ProviderReply{Status: 200, Body: []byte(`ok`)}, OutcomeUnknown},
		{"listed 409", ProviderReply{Status: 409, Body: []byte(`{"refund":{"status":"succeeded"}}`)}, OutcomeNotApplied},
		{"unlisted 400", ProviderReply{Status: 400}, OutcomeUnknown},
		{"500", ProviderReply{Status: 500}, OutcomeUnknown},
		{"timeout", ProviderReply{TransportError: true}, OutcomeUnknown},
	}
	for _, tc := range cases {
		if got, _ := c.Classify(tc.reply); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// TestClassifyQueryStatuses: the statuses that prove a dispatch call did
// not apply prove nothing about a query: a 404 for a key the provider never
// saw is unknown, and only a reported state settles a query.
func TestClassifyQueryStatuses(t *testing.T) {
	c := RecoveryContract{Completion: "/refund/status", Applied: []string{"succeeded"}, NotApplied: []string{"failed"},
		Pending: []string{"pending"}, NotAppliedStatuses: []int{404, 409}}
	for _, tc := range []struct {
		r     ProviderReply
		query Outcome
		call  Outcome
	}{
		{ProviderReply{Status: 404}, OutcomeUnknown, OutcomeNotApplied},
		{ProviderReply{Status: 409}, OutcomeUnknown, OutcomeNotApplied},
		{ProviderReply{Status: 500}, OutcomeUnknown, OutcomeUnknown},
		{ProviderReply{TransportError: true}, OutcomeUnknown, OutcomeUnknown},
		{ProviderReply{Status: 200, Body: []byte(`{"refund":{"status":"failed"}}`)}, OutcomeNotApplied, OutcomeNotApplied},
		{ProviderReply{Status: 200, Body: []byte(`{"refund":{"status":"succeeded"}}`)}, OutcomeApplied, OutcomeApplied},
		{ProviderReply{Status: 200, Body: []byte(`{"refund":{"status":"pending"}}`)}, OutcomePending, OutcomePending},
	} {
		if got, _ := c.ClassifyQuery(tc.r); got != tc.query {
			t.Errorf("query %+v: %s, want %s", tc.r, got, tc.query)
		}
		if got, _ := c.Classify(tc.r); got != tc.call {
			t.Errorf("call %+v: %s, want %s", tc.r, got, tc.call)
		}
	}
}
