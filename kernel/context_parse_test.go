package kernel

import (
	"errors"
	"strings"
	"testing"
)

const goodRun = `{"tenant":"acme","principal":"agent_email","run_id":"run_01","decision_key":"support.refund.execute","decision_time":"2026-10-26T12:00:00Z"}`

// TestContextParsersStrict refuses everything that is not exactly one
// well-formed value of the schema.
func TestContextParsersStrict(t *testing.T) {
	for _, tc := range []struct {
		name, input, want string
	}{
		{"unknown field", `{"tenant":"acme","principal":"a","run_id":"r","decision_key":"d","decision_time":"2026-10-26T12:00:00Z","role":"admin"}`, "unknown field"},
		{"trailing data", goodRun + ` {}`, "trailing data"},
		{"trailing garbage", goodRun + `x`, "trailing data"},
		{"two values", goodRun + goodRun, "trailing data"},
		{"duplicate key", `{"tenant":"acme","tenant":"globex","principal":"a","run_id":"r","decision_key":"d","decision_time":"2026-10-26T12:00:00Z"}`, `duplicate object key "tenant"`},
		{"case-folded key", `{"Tenant":"acme","principal":"a","run_id":"r","decision_key":"d","decision_time":"2026-10-26T12:00:00Z"}`, "not lowercase"},
		{"unicode-folded key", `{"tenant":"acme","principal":"a","run_id":"r","decision_\u212aey":"d","decision_time":"2026-10-26T12:00:00Z"}`, "not lowercase"},
		{"array", `[` + goodRun + `]`, "must be a JSON object"},
		{"null", `null`, "must be a JSON object"},
		{"empty", ``, "empty input"},
		{"invalid utf-8", "{\"tenant\":\"ac\xffme\"}", "UTF-8"},
		{"bad time", strings.Replace(goodRun, "2026-10-26T12:00:00Z", "yesterday", 1), "parsing time"},
		{"missing time", `{"tenant":"acme","principal":"a","run_id":"r","decision_key":"d"}`, "decision_time is required"},
		{"time out of range", strings.Replace(goodRun, "2026-10-26T12:00:00Z", "0001-01-01T00:30:00+01:00", 1), "out of range"},
		{"repeated source", strings.Replace(goodRun, `}`, `,"allowed_sources":["kg","kg"]}`, 1), "allowed_sources repeats"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseRunContext([]byte(tc.input))
			var ie *ContextInputError
			if !errors.As(err, &ie) || ie.Input != "run" || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want a run error containing %q", err, tc.want)
			}
		})
	}
	if r, err := ParseRunContext([]byte(" \n" + goodRun + "\n\t")); err != nil || r.DecisionTime.Location().String() != "UTC" {
		t.Fatalf("good run refused: %v", err)
	}
	if r, err := ParseRunContext([]byte(strings.Replace(goodRun, "12:00:00Z", "17:30:00+05:30", 1))); err != nil ||
		r.DecisionTime.Format("15:04Z07:00") != "12:00Z" {
		t.Fatalf("offset time: %v %v", r.DecisionTime, err)
	}
}

const goodCandidate = `{"ref":"kg:1","source":"kg","tenant":"acme","content_hash":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855","content":"","bucket":"evidence","observed_at":"2026-10-26T11:00:00Z","valid_until":"2026-10-26T13:00:00Z","verified":true,"admitted":true,"instruction_treatment":"data_only"}`

func TestParseEvidenceRefusals(t *testing.T) {
	if cs, err := ParseEvidence([]byte(`[` + goodCandidate + `]`)); err != nil || len(cs) != 1 {
		t.Fatalf("good candidate refused: %v", err)
	}
	for _, tc := range []struct{ name, input, want string }{
		{"object", goodCandidate, "must be a JSON array"},
		{"duplicate ref", `[` + goodCandidate + `,` + goodCandidate + `]`, "duplicate ref (first at evidence[0])"},
		{"uppercase hash", `[` + strings.Replace(goodCandidate, "e3b0c442", "E3B0C442", 1) + `]`, "content_hash"},
		{"short hash", `[` + strings.Replace(goodCandidate, "e3b0c442", "e3b0", 1) + `]`, "content_hash"},
		{"expiry before observation", `[` + strings.Replace(goodCandidate, "13:00:00Z", "10:00:00Z", 1) + `]`, "valid_until must be after"},
		{"unknown treatment", `[` + strings.Replace(goodCandidate, "data_only", "trusted", 1) + `]`, "instruction_treatment"},
		{"negative tokens", `[` + strings.Replace(goodCandidate, `"bucket"`, `"tokens":-1,"bucket"`, 1) + `]`, "tokens"},
		{"huge tokens", `[` + strings.Replace(goodCandidate, `"bucket"`, `"tokens":9007199254740992,"bucket"`, 1) + `]`, "tokens"},
		{"fractional tokens", `[` + strings.Replace(goodCandidate, `"bucket"`, `"tokens":1.5,"bucket"`, 1) + `]`, "tokens"},
		{"missing tenant", `[` + strings.Replace(goodCandidate, `"tenant":"acme",`, ``, 1) + `]`, "required"},
		{"empty requirement", `[` + strings.Replace(goodCandidate, `"bucket"`, `"requirements":[""],"bucket"`, 1) + `]`, "empty element"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseEvidence([]byte(tc.input))
			var ie *ContextInputError
			if !errors.As(err, &ie) || ie.Input != "evidence" || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an evidence error containing %q", err, tc.want)
			}
		})
	}
}

const goodPack = `{"schema":"context_pack.v1","pack_id":"p","version":"1","buckets":[{"name":"evidence","max_tokens":10}],"decisions":[{"decision_key":"d","required_evidence":["a"]}]}`

func TestParseContextPackRefusals(t *testing.T) {
	if _, err := ParseContextPack([]byte(goodPack)); err != nil {
		t.Fatalf("good pack refused: %v", err)
	}
	for _, tc := range []struct{ name, input, want string }{
		{"wrong schema", strings.Replace(goodPack, "context_pack.v1", "context_pack.v2", 1), "schema must be"},
		{"no version", strings.Replace(goodPack, `"version":"1",`, ``, 1), "pack_id and version are required"},
		{"unbounded bucket", strings.Replace(goodPack, `,"max_tokens":10`, ``, 1), "positive max_tokens or max_bytes"},
		{"no buckets", strings.Replace(goodPack, `[{"name":"evidence","max_tokens":10}]`, `[]`, 1), "at least one bucket"},
		{"duplicate bucket", strings.Replace(goodPack, `{"name":"evidence","max_tokens":10}`, `{"name":"evidence","max_tokens":10},{"name":"evidence","max_bytes":1}`, 1), "duplicate bucket"},
		{"no decisions", strings.Replace(goodPack, `[{"decision_key":"d","required_evidence":["a"]}]`, `[]`, 1), "at least one decision"},
		{"duplicate decision", strings.Replace(goodPack, `{"decision_key":"d","required_evidence":["a"]}`, `{"decision_key":"d"},{"decision_key":"d"}`, 1), "duplicate decision_key"},
		{"repeated requirement", strings.Replace(goodPack, `["a"]`, `["a","a"]`, 1), "required_evidence repeats"},
		{"tool gated by unknown decision", strings.Replace(goodPack, `}]}`, `}],"tools":[{"capability_id":"c","gated_by":"x"}]}`, 1), "unknown decision"},
		{"trust names unknown requirement", strings.Replace(goodPack, `}]}`, `}],"trust":[{"source":"kg","requirements":["b"]}]}`, 1), `requirement "b"`},
		{"duplicate trust source", strings.Replace(goodPack, `}]}`, `}],"trust":[{"source":"kg"},{"source":"kg"}]}`, 1), "duplicate trust source"},
		{"rule kind model", strings.Replace(goodPack, `}]}`, `}],"resolution_rules":[{"rule_id":"r","kind":"model"}]}`, 1), "rule kind must be"},
		{"rule kind review", strings.Replace(goodPack, `}]}`, `}],"resolution_rules":[{"rule_id":"r","kind":"accountable_review"}]}`, 1), "rule kind must be"},
		{"priority rule with one source", strings.Replace(goodPack, `}]}`, `}],"resolution_rules":[{"rule_id":"r","kind":"source_priority","source_order":["kg"]}]}`, 1), "source_order needs at least 2"},
		{"refresh rule without system of record", strings.Replace(goodPack, `}]}`, `}],"resolution_rules":[{"rule_id":"r","kind":"authoritative_refresh"}]}`, 1), "needs system_of_record"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseContextPack([]byte(tc.input))
			var ie *ContextInputError
			if !errors.As(err, &ie) || ie.Input != "pack" || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want a pack error containing %q", err, tc.want)
			}
		})
	}
}

// TestCompileRefusesUnknownDecision: the run's decision must be one of the
// pack's.
func TestCompileRefusesUnknownDecision(t *testing.T) {
	p, err := ParseContextPack([]byte(goodPack))
	if err != nil {
		t.Fatal(err)
	}
	r, err := ParseRunContext([]byte(goodRun))
	if err != nil {
		t.Fatal(err)
	}
	_, err = CompileContext(p, r, nil, nil)
	var ie *ContextInputError
	if !errors.As(err, &ie) || ie.Input != "run" || !strings.Contains(ie.Reason, "is not a decision of pack p@1") {
		t.Fatalf("got %v", err)
	}
	r.DecisionKey = "d"
	got, err := CompileContext(p, r, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Gate.CommitAllowed || got.Requirements[0].Reasons[0] != ReasonRequirementNotCovered {
		t.Fatalf("empty evidence: %+v", got.Gate)
	}
}
