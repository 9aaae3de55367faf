package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/contextos/ledger/internal/evalcase"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/packet"
	"github.com/contextos/ledger/wire"
)

func root(t *testing.T) string {
	t.Helper()
	r, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestGenerated: every file gen writes is what it would write now, so a
// code or a message changed in wire without go generate ./wire fails here.
func TestGenerated(t *testing.T) {
	r := root(t)
	files, err := generate(r)
	if err != nil {
		t.Fatal(err)
	}
	for f, want := range files {
		got, err := os.ReadFile(filepath.Join(r, f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what the wire package generates: run go generate ./wire", f)
		}
	}
}

// schemaMessages names, for each JSON Schema of docs/schema that describes
// a message (by file and JSON pointer), the wire struct it describes.
// subset marks a schema that describes some verbs' use of a larger struct.
var schemaMessages = []struct {
	file, pointer string
	v             any
	subset        bool
}{
	{"proposal.json", "", wire.Proposal{}, false},
	{"decision.json", "", wire.Reply{}, false},
	{"decision.json", "/properties/guarantees/items", wire.GuaranteeRow{}, false},
	{"op-reply.json", "", wire.OpReply{}, false},
	{"op-reply.json", "/$defs/exposure_row", wire.ExposureRow{}, false},
	{"op-reply.json", "/$defs/exposure_row/properties/archived_receipts", wire.ArchivedReceipts{}, false},
	{"op-reply.json", "/$defs/attempt_row", wire.AttemptRow{}, false},
	{"op-reply.json", "/$defs/settle_row", wire.SettleRow{}, false},
	{"op-reply.json", "/$defs/run_data/properties/run", wire.Run{}, false},
	{"op-reply.json", "/$defs/authority_data", wire.AuthorityChange{}, false},
	{"op-reply.json", "/$defs/approval_data", wire.Approval{}, false},
	{"op-reply.json", "/$defs/deny_data", wire.Denial{}, false},
	{"op-reply.json", "/$defs/version_row", wire.VersionRow{}, false},
	{"op-reply.json", "/$defs/approval_row", wire.PendingApproval{}, false},
	{"op-reply.json", "/$defs/incident_row", wire.Incident{}, false},
	{"op-reply.json", "/$defs/breaker_row", wire.BreakerRow{}, false},
	{"op-reply.json", "/$defs/breaker_row/properties/trip", wire.BreakerTrip{}, false},
	{"op-reply.json", "/$defs/import_result", wire.ImportResult{}, false},
	{"op-reply.json", "/$defs/outcome_row", wire.OutcomeRow{}, false},
	{"guarantee-import-request.json", "", wire.ImportRequest{}, false},
	{"guarantee-import-request.json", "/properties/rows/items", wire.ImportRow{}, false},
	{"report-request.json", "", wire.ReportRequest{}, false},
	{"audit-reply.json", "", wire.OpReply{}, true},
	{"admit-run-request.json", "", wire.AdmitRunRequest{}, false},
	{"approve-request.json", "", wire.ApproveRequest{}, false},
	{"deny-request.json", "", wire.DenyRequest{}, false},
	{"grant-request.json", "", wire.GrantRequest{}, false},
	{"run-request.json", "", wire.RunRequest{}, false},
	{"confirm-request.json", "", wire.ConfirmRequest{}, false},
	{"evidence-request.json", "", wire.EvidenceRequest{}, false},
	{"guarantee-set-limit-request.json", "", wire.SetLimitRequest{}, false},
	{"guarantee-history-request.json", "", wire.GuaranteeHistoryRequest{}, false},
	{"list-request.json", "", wire.ListRequest{}, false},
	{"audit-page-request.json", "", wire.ExportRequest{}, false},
	{"audit-prove-request.json", "", wire.ProveRequest{}, false},
	{"audit-prove-consistency-request.json", "", wire.ConsistencyRequest{}, false},
	{"exposure-request.json", "", wire.OpRequest{}, false},
	{"attempts-request.json", "", wire.OpRequest{}, false},
	{"reconcile-request.json", "", wire.OpRequest{}, false},
	{"close-attempt-request.json", "", wire.OpRequest{}, false},
	{"assert-absence-request.json", "", wire.OpRequest{}, false},
	{"kill-switch-request.json", "", wire.OpRequest{}, false},
	{"evidence-gate.json", "", wire.EvidenceGate{}, false},
	{"conflict-marker.json", "", wire.EvidenceConflictMarker{}, false},
	{"conflict-marker.json", "/$defs/resolution", wire.ConflictResolution{}, false},
	{"context-pack.json", "", kernel.ContextPack{}, false},
	{"context-run.json", "", kernel.RunContext{}, false},
	{"evidence-candidate.json", "", kernel.EvidenceCandidate{}, false},
	{"compiled-context.json", "", kernel.CompiledContext{}, false},
	{"context-eval-case.json", "", evalcase.Case{}, false},
	{"context-inputs.json", "", kernel.ContextInputs{}, false},
	{"decisions-request.json", "", wire.DecisionsRequest{}, false},
	{"decision-packet.json", "", packet.Packet{}, false},
	{"decision-packet.json", "/properties/input", packet.Input{}, false},
	{"decision-packet.json", "/properties/manifest", packet.Manifest{}, false},
}

// TestSchemasAreTheWire: each schema's members are its wire struct's, and
// every message schema of docs/schema is in the table above.
func TestSchemasAreTheWire(t *testing.T) {
	dir := filepath.Join(root(t), "docs", "schema")
	covered := map[string]bool{"common.json": true}
	for _, m := range schemaMessages {
		covered[m.file] = true
		b, err := os.ReadFile(filepath.Join(dir, m.file))
		if err != nil {
			t.Fatal(err)
		}
		var doc any
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		for _, tok := range strings.Split(m.pointer, "/")[1:] {
			doc, _ = doc.(map[string]any)[tok]
		}
		props, _ := doc.(map[string]any)["properties"].(map[string]any)
		if props == nil {
			t.Errorf("%s#%s: no properties", m.file, m.pointer)
			continue
		}
		var have []string
		for k := range props {
			have = append(have, k)
		}
		want := JSONNames(reflect.TypeOf(m.v))
		for _, k := range have {
			if !slices.Contains(want, k) {
				t.Errorf("%s#%s: member %q is not in %T", m.file, m.pointer, k, m.v)
			}
		}
		if !m.subset {
			for _, k := range want {
				if _, ok := props[k]; !ok {
					t.Errorf("%s#%s: no member %q of %T", m.file, m.pointer, k, m.v)
				}
			}
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	for _, f := range files {
		if !covered[filepath.Base(f)] {
			t.Errorf("%s describes no wire struct of the table", filepath.Base(f))
		}
	}
}

// TestSchemaLimits: the schemas' bounds are the wire package's.
func TestSchemaLimits(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root(t), "docs", "schema", "common.json"))
	if err != nil {
		t.Fatal(err)
	}
	var common struct {
		Defs struct {
			ID     struct{ MaxLength int } `json:"id"`
			Status struct{ Enum []wire.Status }
		} `json:"$defs"`
	}
	if err := json.Unmarshal(b, &common); err != nil {
		t.Fatal(err)
	}
	if common.Defs.ID.MaxLength != wire.MaxIDBytes {
		t.Errorf("common.json id maxLength %d, wire.MaxIDBytes %d", common.Defs.ID.MaxLength, wire.MaxIDBytes)
	}
	b, err = os.ReadFile(filepath.Join(root(t), "docs", "schema", "proposal.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"maxItems": 256`, `"maxLength": 1024`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("proposal.json: no %s", want)
		}
	}
	if wire.MaxEvidenceRefs != 256 || wire.MaxEvidenceRefBytes != 1024 {
		t.Errorf("evidence bounds changed: change proposal.json and this test together")
	}
}

var dataclassRE = regexp.MustCompile(`(?s)^[^\n]*\nclass (\w+):\n(.*)`)
var fieldRE = regexp.MustCompile(`(?m)^    (\w+): `)

// TestPythonTypes: the Python client's message dataclasses have their wire
// struct's members, in order.
func TestPythonTypes(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root(t), "clients", "python", "contextos_ledger", "types.py"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"Proposal": wire.Proposal{}, "GuaranteeRow": wire.GuaranteeRow{}, "Decision": wire.Reply{},
		"EvidenceGate": wire.EvidenceGate{}, "EvidenceConflictMarker": wire.EvidenceConflictMarker{}, "ConflictResolution": wire.ConflictResolution{},
		"ContextRequest": wire.ContextRequest{}, "ToolExposure": kernel.ToolExposure{},
		// A client view over ContextReply and the kernel's CompiledContext,
		// not a message of its own: its parts are checked above.
		"CompiledContext": nil}
	seen := 0
	for _, part := range strings.Split(string(b), "\n@dataclass")[1:] {
		m := dataclassRE.FindStringSubmatch(part)
		if m == nil {
			continue
		}
		// The class ends at the first line that is not indented.
		if i := regexp.MustCompile(`(?m)^\S`).FindStringIndex(m[2]); i != nil {
			m[2] = m[2][:i[0]]
		}
		v, ok := want[m[1]]
		if !ok {
			t.Errorf("types.py: dataclass %s is not checked against the wire package", m[1])
			continue
		}
		seen++
		if v == nil {
			continue
		}
		var got []string
		for _, f := range fieldRE.FindAllStringSubmatch(m[2], -1) {
			got = append(got, f[1])
		}
		if w := JSONNames(reflect.TypeOf(v)); !slices.Equal(got, w) {
			t.Errorf("types.py %s members %v, %T %v", m[1], got, v, w)
		}
	}
	if seen != len(want) {
		t.Errorf("types.py: %d of the %d dataclasses found", seen, len(want))
	}
}
