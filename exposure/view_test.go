package exposure

import (
	"testing"

	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
)

// TestIncidentOf: which events are incidents, and the kind each reports,
// whatever the body holds for the types that cannot be one.
func TestIncidentOf(t *testing.T) {
	for _, tc := range []struct {
		typ, body string
		kind      string
		incident  bool
	}{
		{kernel.TypeExposureIncident, `{"kind":"observation_contradicts_seal","attempt_id":"a1"}`, "observation_contradicts_seal", true},
		{"incident.provider_contradiction", `{"code":"x"}`, "x", true},
		{"refusal.kill_switch", `{}`, "", true},
		{kernel.TypeOperationRefused, `{"code":"shared_guarantee_contention"}`, "shared_guarantee_contention", true},
		{kernel.TypeOperationRefused, `{"code":"shared_guarantee_exceeded"}`, "", false},
		{kernel.TypeProposalRefused, `{"code":"executor_fenced"}`, "executor_fenced", true},
		{kernel.TypeExposureReserved, `{"code":"executor_fenced","kind":"executor_fenced"}`, "", false},
		{kernel.TypeOperationIncident + "x", `{"kind":"executor_fenced"}`, "", false},
		{kernel.TypeOperationRefused, `not json`, "", false},
	} {
		in, ok := IncidentOf(7, "s", codec.Envelope{Type: tc.typ, Body: []byte(tc.body)})
		if ok != tc.incident || in.Kind != tc.kind {
			t.Errorf("%s %s: incident %v kind %q, want %v %q", tc.typ, tc.body, ok, in.Kind, tc.incident, tc.kind)
		}
	}
}
