package kernel

import (
	"strings"
	"testing"
	"time"

	"github.com/contextos/ledger/wire"
)

// TestOpChecks walks every branch of the operator verbs' request checks:
// each case is the refusal a check returns ("none" when it lets the
// request on).
func TestOpChecks(t *testing.T) {
	digest := strings.Repeat("ab", 32)
	malformed := func(reason string) string { return string(wire.CodeRequestMalformed) + ": " + reason }
	unknown := func(reason string) string { return string(wire.CodeAttemptUnknown) + ": " + reason }
	var fakeErr = errString("no such operation")
	rows := func(n int) wire.ImportRequest { return wire.ImportRequest{Rows: make([]wire.ImportRow, n)} }
	for _, tc := range []struct {
		name string
		r    *Refusal
		want string
	}{
		{"unknown verb", RefuseUnknownVerb("frob"), malformed(`unknown verb "frob"`)},
		{"limit 0", CheckPageLimit(0), "none"},
		{"limit max", CheckPageLimit(wire.MaxPageLimit), "none"},
		{"limit over", CheckPageLimit(wire.MaxPageLimit + 1), malformed("limit must be 0 (the default, " + itoa(wire.DefaultPageLimit) + ") to " + itoa(wire.MaxPageLimit) + ", not " + itoa(wire.MaxPageLimit+1))},
		{"limit negative", CheckPageLimit(-1), malformed("limit must be 0 (the default, " + itoa(wire.DefaultPageLimit) + ") to " + itoa(wire.MaxPageLimit) + ", not -1")},
		{"no digest", CheckResourceDigest("ord_1", ""), "none"},
		{"digest", CheckResourceDigest("", digest), "none"},
		{"digest and resource", CheckResourceDigest("ord_1", digest), malformed("name resource or resource_digest, not both")},
		{"not a digest", CheckResourceDigest("", strings.ToUpper(digest)), malformed("resource_digest must be 64 lowercase hex digits (the SHA-256 of the resource)")},
		{"unknown digest", RefuseUnknownResourceDigest("g", digest), malformed("resource_digest " + digest + ` names no resource of guarantee "g" the runtime knows; name the resource itself`)},
		{"exposure", CheckExposureRequest(wire.OpRequest{ResourceDigest: digest}), "none"},
		{"exposure digest and resource", CheckExposureRequest(wire.OpRequest{Resource: "r", ResourceDigest: digest}),
			malformed("resource_digest must be 64 lowercase hex digits (the SHA-256 of the resource), without resource")},
		{"exposure bad digest", CheckExposureRequest(wire.OpRequest{ResourceDigest: "ab"}),
			malformed("resource_digest must be 64 lowercase hex digits (the SHA-256 of the resource), without resource")},
		{"reconcile one", CheckReconcileRequest(wire.OpRequest{AttemptID: "a1"}), "none"},
		{"reconcile all", CheckReconcileRequest(wire.OpRequest{All: true}), "none"},
		{"breaker list", CheckBreakerRequest(wire.BreakerRequest{}, false), "none"},
		{"breaker reset", CheckBreakerRequest(wire.BreakerRequest{Reset: true, CapabilityID: "c"}, true), "none"},
		{"breaker reset unknown", CheckBreakerRequest(wire.BreakerRequest{Reset: true, CapabilityID: "c"}, false),
			string(wire.CodeCapabilityNotSurfaced) + `: capability "c" is not in the manifest`},
		{"breaker reason without reset", CheckBreakerRequest(wire.BreakerRequest{Reason: "r"}, true), malformed("capability_id and reason go with reset")},
		{"reconcile nothing", CheckReconcileRequest(wire.OpRequest{}), malformed("name attempt_id or set all")},
		{"close known", CheckCloseRequest(wire.OpRequest{AttemptID: "a1"}, true), "none"},
		{"close no attempt", CheckCloseRequest(wire.OpRequest{}, false), malformed("attempt_id is required")},
		{"close unknown, ledger named", CheckCloseRequest(wire.OpRequest{AttemptID: "a1", GuaranteeID: "g", Resource: "r"}, false), "none"},
		{"close unknown, digest named", CheckCloseRequest(wire.OpRequest{AttemptID: "a1", GuaranteeID: "g", ResourceDigest: digest}, false), "none"},
		{"close unknown, no resource", CheckCloseRequest(wire.OpRequest{AttemptID: "a1", GuaranteeID: "g"}, false),
			unknown("attempt a1 is unknown; name guarantee_id and resource (or resource_digest) to tombstone it")},
		{"close unknown, no guarantee", CheckCloseRequest(wire.OpRequest{AttemptID: "a1", Resource: "r"}, false),
			unknown("attempt a1 is unknown; name guarantee_id and resource (or resource_digest) to tombstone it")},
		{"absence", CheckAssertAbsenceRequest(wire.OpRequest{AttemptID: "a1", ArtifactRef: "x"}, true), "none"},
		{"absence no artifact", CheckAssertAbsenceRequest(wire.OpRequest{AttemptID: "a1"}, false), malformed("attempt_id and artifact_ref are required")},
		{"absence unknown", CheckAssertAbsenceRequest(wire.OpRequest{AttemptID: "a1", ArtifactRef: "x"}, false), unknown("attempt a1: unknown attempt")},
		{"reconcile target", CheckReconcileTarget(true, true, true), "none"},
		{"reconcile no query", CheckReconcileTarget(true, false, false), "none"},
		{"reconcile unknown", CheckReconcileTarget(false, true, true), unknown("no operation holds this attempt")},
		{"reconcile unsurfaced", CheckReconcileTarget(true, true, false),
			string(wire.CodeCapabilityNotSurfaced) + ": capability no longer in the manifest"},
		{"attempt target", RefuseAttemptTarget(fakeErr), unknown("no such operation")},
		{"grant", CheckGrantRequest("acme", wire.GrantRequest{Principal: "a", CapabilityID: "c"}, true, true), "none"},
		{"grant not an agent", CheckGrantRequest("acme", wire.GrantRequest{Principal: "a", CapabilityID: "c"}, false, false), malformed(`"a" is not an agent of tenant acme`)},
		{"grant unsurfaced", CheckGrantRequest("acme", wire.GrantRequest{Principal: "a", CapabilityID: "c"}, true, false),
			string(wire.CodeCapabilityNotSurfaced) + `: capability "c" is not in the manifest`},
		{"admit run", CheckAdmitRunRequest("acme", wire.AdmitRunRequest{Principal: "a", RunID: "r"}, true), "none"},
		{"admit run not an agent", CheckAdmitRunRequest("acme", wire.AdmitRunRequest{Principal: "a"}, false), malformed(`"a" is not an agent of tenant acme`)},
		{"admit run no id", CheckAdmitRunRequest("acme", wire.AdmitRunRequest{Principal: "a"}, true),
			malformed("run_id is required and ids are at most " + itoa(wire.MaxIDBytes) + " bytes")},
		{"admit run long parent", CheckAdmitRunRequest("acme", wire.AdmitRunRequest{Principal: "a", RunID: "r", ParentRunID: strings.Repeat("p", wire.MaxIDBytes+1)}, true),
			malformed("run_id is required and ids are at most " + itoa(wire.MaxIDBytes) + " bytes")},
		{"run", CheckRunRequest(wire.RunRequest{RunID: "r"}, true), "none"},
		{"run no id", CheckRunRequest(wire.RunRequest{}, true), malformed("run_id is required")},
		{"run no subject", CheckRunRequest(wire.RunRequest{RunID: "r.x"}, false), malformed("run_id is required")},
		{"import", CheckImportRequest(rows(1)), "none"},
		{"import max", CheckImportRequest(rows(wire.MaxImportRows)), "none"},
		{"import none", CheckImportRequest(rows(0)), malformed("an import needs at least one row")},
		{"import over", CheckImportRequest(rows(wire.MaxImportRows + 1)),
			malformed("an import carries at most " + itoa(wire.MaxImportRows) + " rows, not " + itoa(wire.MaxImportRows+1) + "; split the file")},
		{"confirm", CheckConfirmRequest(wire.ConfirmRequest{RequestID: "q"}), "none"},
		{"confirm none", CheckConfirmRequest(wire.ConfirmRequest{}), malformed("request_id is required")},
		{"second operator", SecondOperatorRequired("kill-switch", Scope("control"), "q1"),
			string(wire.CodeSecondOperatorRequired) + ": kill-switch needs a second operator: another operator with the scope control confirms it with ctx confirm q1"},
		{"pack unknown", RefusePackUnknown("v9"), string(wire.CodePackUnknown) + `: pack version "v9" is not published`},
	} {
		if got := refusalString(tc.r); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

type errString string

func (e errString) Error() string { return string(e) }

func TestCheckEvidenceRequest(t *testing.T) {
	for _, tc := range []struct {
		req       wire.EvidenceRequest
		candidate bool
		refused   bool
	}{
		{wire.EvidenceRequest{Candidate: []byte(`{}`)}, true, false},
		{wire.EvidenceRequest{Marker: []byte(`{}`)}, false, false},
		{wire.EvidenceRequest{Candidate: []byte(`{}`), Marker: []byte(`{}`)}, false, true},
		{wire.EvidenceRequest{}, false, true},
	} {
		c, r := CheckEvidenceRequest(tc.req)
		if c != tc.candidate || (r != nil) != tc.refused || r != nil && r.Error() != string(wire.CodeRequestMalformed)+": name exactly one of candidate and marker" {
			t.Errorf("%+v: candidate %v, %v", tc.req, c, r)
		}
	}
}

func TestDecodeOpRequest(t *testing.T) {
	var req wire.ConfirmRequest
	if r := DecodeOpRequest([]byte(`{"request_id":"q"}`), &req); r != nil || req.RequestID != "q" {
		t.Errorf("valid: %v %+v", r, req)
	}
	for body, want := range map[string]string{
		"":                   "request: empty request",
		`{"request_id":"q",`: "request: ",
		`{"other":1}`:        "request: ",
		`[1]`:                "request: ",
	} {
		r := DecodeOpRequest([]byte(body), &wire.ConfirmRequest{})
		if r == nil || r.Code != wire.CodeRequestMalformed || !strings.HasPrefix(r.Reason, want) {
			t.Errorf("%q: %v, want a refusal starting %q", body, r, want)
		}
	}
}

func TestParseTimes(t *testing.T) {
	if ttl, r := ParseApprovalTTL("15m"); r != nil || ttl != 15*time.Minute {
		t.Errorf("15m: %v %v", ttl, r)
	}
	if _, r := ParseApprovalTTL("soon"); r == nil || !strings.HasPrefix(r.Reason, "expires_in: ") || r.Code != wire.CodeRequestMalformed {
		t.Errorf("soon: %v", r)
	}
	if at, r := ParseTimeFilter("since", "2026-12-05T10:00:00.5Z"); r != nil || at.Nanosecond() != 5e8 {
		t.Errorf("since: %v %v", at, r)
	}
	if got := refusalString(refusalOf2(ParseTimeFilter("until", "yesterday"))); got != string(wire.CodeRequestMalformed)+`: until must be an RFC 3339 time, not "yesterday`+wire.Ellipsis+`"` {
		t.Errorf("until: %s", got)
	}
	if at, r := ParseWaiverUntil("2026-12-05T10:00:00Z"); r != nil || at.Hour() != 10 {
		t.Errorf("waiver until: %v %v", at, r)
	}
	if _, r := ParseWaiverUntil("tomorrow"); r == nil || !strings.HasPrefix(r.Reason, "until: an RFC 3339 time: ") {
		t.Errorf("waiver tomorrow: %v", r)
	}
}

func refusalOf2[T any](_ T, r *Refusal) *Refusal { return r }

func TestIsDigest(t *testing.T) {
	for s, want := range map[string]bool{
		strings.Repeat("0f", 32): true, strings.Repeat("0F", 32): false, strings.Repeat("0f", 31): false,
		strings.Repeat("0g", 32): false, "": false,
	} {
		if IsDigest(s) != want {
			t.Errorf("%q: %v", s, !want)
		}
	}
}
