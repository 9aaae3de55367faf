package kernel

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"
	"unicode/utf8"
)

// ParseContextPack decodes and validates a ContextPack strictly: one JSON
// object, valid UTF-8, no unknown, duplicate or non-lowercase keys, no
// trailing data. Errors are *ContextInputError.
func ParseContextPack(b []byte) (ContextPack, error) {
	var p ContextPack
	if err := decodeStrict(b, '{', &p); err != nil {
		return ContextPack{}, inputErr("pack", -1, "", "%v", err)
	}
	p = normalizePack(p)
	if err := validatePack(p); err != nil {
		return ContextPack{}, err
	}
	return p, nil
}

// ParseRunContext decodes and validates a RunContext strictly (see
// ParseContextPack). The decision time is returned in UTC.
func ParseRunContext(b []byte) (RunContext, error) {
	var r RunContext
	if err := decodeStrict(b, '{', &r); err != nil {
		return RunContext{}, inputErr("run", -1, "", "%v", err)
	}
	r = normalizeRun(r)
	if err := validateRun(r); err != nil {
		return RunContext{}, err
	}
	return r, nil
}

// ParseEvidence decodes and validates a JSON array of EvidenceCandidates
// strictly (see ParseContextPack). Malformed candidates and duplicate refs
// are refused; well-formed but ineligible candidates are accepted and
// rejected later, visibly, by the compiler.
func ParseEvidence(b []byte) ([]EvidenceCandidate, error) {
	var cs []EvidenceCandidate
	if err := decodeStrict(b, '[', &cs); err != nil {
		return nil, inputErr("evidence", -1, "", "%v", err)
	}
	for i := range cs {
		cs[i] = normalizeCandidate(cs[i])
	}
	if err := validateEvidence(cs); err != nil {
		return nil, err
	}
	return cs, nil
}

// ParseMarkers decodes a JSON array of EvidenceConflictMarkers strictly
// (see ParseContextPack) and applies the structural marker checks of
// ValidateMarkers. Checks that need the pack or the run (unknown
// requirements, rule selections, self-review) run in CompileContext.
func ParseMarkers(b []byte) ([]EvidenceConflictMarker, error) {
	var ms []EvidenceConflictMarker
	if err := decodeStrict(b, '[', &ms); err != nil {
		return nil, inputErr("markers", -1, "", "%v", err)
	}
	for i := range ms {
		ms[i] = normalizeMarker(ms[i])
	}
	if err := ValidateMarkers(ms); err != nil {
		return nil, err
	}
	return ms, nil
}

// decodeStrict decodes exactly one JSON value of the given kind ('{' or '[')
// into v. It refuses invalid UTF-8, object keys that repeat or that are not
// made of [a-z0-9_] (encoding/json matches keys case-insensitively, so
// "Ref" or "ſource" would otherwise alias a field), unknown fields and
// trailing data.
func decodeStrict(b []byte, kind byte, v any) error {
	if !utf8.Valid(b) {
		return errors.New("input is not valid UTF-8")
	}
	if err := checkKeys(b, kind); err != nil {
		return err
	}
	return KnownJSON(b, v)
}

// checkKeys walks the token stream of the first JSON value of b, checking
// that it starts with kind and that no object repeats a key or uses a key
// outside [a-z0-9_]+.
func checkKeys(b []byte, kind byte) error {
	type frame struct {
		obj       bool
		expectKey bool
		keys      map[string]struct{}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var stack []*frame
	first := true
	for {
		tok, err := dec.Token()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return errors.New("empty input")
			}
			return err
		}
		if first {
			first = false
			if d, ok := tok.(json.Delim); !ok || byte(d) != kind {
				if kind == '{' {
					return errors.New("input must be a JSON object")
				}
				return errors.New("input must be a JSON array")
			}
		}
		if n := len(stack); n > 0 && stack[n-1].obj && stack[n-1].expectKey {
			top := stack[n-1]
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:n-1]
			} else {
				key, _ := tok.(string)
				if !validKey(key) {
					return fmt.Errorf("object key %q is not lowercase [a-z0-9_]", key)
				}
				if _, dup := top.keys[key]; dup {
					return fmt.Errorf("duplicate object key %q", key)
				}
				top.keys[key] = struct{}{}
				top.expectKey = false
				continue
			}
		} else if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{':
				stack = append(stack, &frame{obj: true, expectKey: true, keys: map[string]struct{}{}})
				continue
			case '[':
				stack = append(stack, &frame{})
				continue
			default: // ']' ('}' is handled above)
				stack = stack[:len(stack)-1]
			}
		}
		// A value has just completed.
		if len(stack) == 0 {
			return nil
		}
		if top := stack[len(stack)-1]; top.obj {
			top.expectKey = true
		}
	}
}

func validKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

// Normalization makes a parsed value a fixed point of encode/parse: empty
// lists become nil (they are omitted when encoded) and times are UTC.

func nilIfEmpty[T any](xs []T) []T {
	if len(xs) == 0 {
		return nil
	}
	return xs
}

func normalizePack(p ContextPack) ContextPack {
	// Clone before writing into elements: the caller's arrays stay untouched.
	p.Buckets = nilIfEmpty(slices.Clone(p.Buckets))
	p.Decisions = nilIfEmpty(slices.Clone(p.Decisions))
	for i := range p.Decisions {
		p.Decisions[i].RequiredEvidence = nilIfEmpty(p.Decisions[i].RequiredEvidence)
		p.Decisions[i].Independence = nilIfEmpty(slices.Clone(p.Decisions[i].Independence))
	}
	p.Tools = nilIfEmpty(slices.Clone(p.Tools))
	p.Trust = nilIfEmpty(slices.Clone(p.Trust))
	for i := range p.Trust {
		p.Trust[i].Requirements = nilIfEmpty(p.Trust[i].Requirements)
	}
	p.ResolutionRules = nilIfEmpty(slices.Clone(p.ResolutionRules))
	for i := range p.ResolutionRules {
		p.ResolutionRules[i].Requirements = nilIfEmpty(p.ResolutionRules[i].Requirements)
		p.ResolutionRules[i].SourceOrder = nilIfEmpty(p.ResolutionRules[i].SourceOrder)
	}
	return p
}

func normalizeRun(r RunContext) RunContext {
	r.DecisionTime = r.DecisionTime.UTC()
	r.AllowedSources = nilIfEmpty(r.AllowedSources)
	r.Capabilities = nilIfEmpty(r.Capabilities)
	return r
}

func normalizeCandidate(c EvidenceCandidate) EvidenceCandidate {
	c.ObservedAt = c.ObservedAt.UTC()
	c.ValidUntil = c.ValidUntil.UTC()
	c.Requirements = nilIfEmpty(c.Requirements)
	return c
}

func normalizeMarker(m EvidenceConflictMarker) EvidenceConflictMarker {
	m.EvidenceRefs = nilIfEmpty(m.EvidenceRefs)
	m.Requirements = nilIfEmpty(m.Requirements)
	m.Values = nilIfEmpty(m.Values)
	if m.Resolution != nil {
		r := *m.Resolution
		r.SelectedEvidenceRefs = nilIfEmpty(r.SelectedEvidenceRefs)
		m.Resolution = &r
	}
	return m
}

// checkSet checks that xs has at least min elements, none empty, none
// repeated.
func checkSet(field string, xs []string, min int) error {
	if len(xs) < min {
		return fmt.Errorf("%s needs at least %d element(s)", field, min)
	}
	seen := make(map[string]struct{}, len(xs))
	for _, x := range xs {
		if x == "" {
			return fmt.Errorf("%s has an empty element", field)
		}
		if _, dup := seen[x]; dup {
			return fmt.Errorf("%s repeats %q", field, x)
		}
		seen[x] = struct{}{}
	}
	return nil
}

// checkTime refuses a missing time and one that RFC 3339 cannot carry in UTC.
func checkTime(field string, t time.Time) error {
	if t.IsZero() {
		return fmt.Errorf("%s is required", field)
	}
	if y := t.UTC().Year(); y < 1 || y > 9999 {
		return fmt.Errorf("%s is out of range", field)
	}
	return nil
}

func checkRange(field string, v int64) error {
	if v < 0 || v > maxJSONSafeInt {
		return fmt.Errorf("%s must be in [0, 2^53-1]", field)
	}
	return nil
}

func validatePack(p ContextPack) error {
	perr := func(i int, id, format string, args ...any) error {
		return inputErr("pack", i, id, format, args...)
	}
	if p.Schema != ContextPackSchema {
		return perr(-1, "", "schema must be %q, got %q", ContextPackSchema, p.Schema)
	}
	if p.PackID == "" || p.Version == "" {
		return perr(-1, "", "pack_id and version are required")
	}
	if len(p.Buckets) == 0 {
		return perr(-1, p.PackID, "at least one bucket is required")
	}
	buckets := map[string]bool{}
	for i, b := range p.Buckets {
		if b.Name == "" {
			return perr(i, "", "bucket name is required")
		}
		if buckets[b.Name] {
			return perr(i, b.Name, "duplicate bucket name")
		}
		buckets[b.Name] = true
		if err := checkRange("max_tokens", b.MaxTokens); err != nil {
			return perr(i, b.Name, "bucket %v", err)
		}
		if err := checkRange("max_bytes", b.MaxBytes); err != nil {
			return perr(i, b.Name, "bucket %v", err)
		}
		if b.MaxTokens == 0 && b.MaxBytes == 0 {
			return perr(i, b.Name, "bucket needs a positive max_tokens or max_bytes")
		}
	}
	if len(p.Decisions) == 0 {
		return perr(-1, p.PackID, "at least one decision is required")
	}
	vocab := map[string]bool{}
	decisions := map[string]bool{}
	for i, d := range p.Decisions {
		if d.DecisionKey == "" {
			return perr(i, "", "decision_key is required")
		}
		if decisions[d.DecisionKey] {
			return perr(i, d.DecisionKey, "duplicate decision_key")
		}
		decisions[d.DecisionKey] = true
		if err := checkSet("required_evidence", d.RequiredEvidence, 0); err != nil {
			return perr(i, d.DecisionKey, "%v", err)
		}
		for _, r := range d.RequiredEvidence {
			vocab[r] = true
		}
		demanded := map[string]bool{}
		for _, ind := range d.Independence {
			if !slices.Contains(d.RequiredEvidence, ind.Requirement) {
				return perr(i, d.DecisionKey, "independence names %q, which the decision does not require", ind.Requirement)
			}
			if demanded[ind.Requirement] {
				return perr(i, d.DecisionKey, "independence names %q twice", ind.Requirement)
			}
			demanded[ind.Requirement] = true
			if ind.MinFamilies < 1 || ind.MinFamilies > maxFamilies {
				return perr(i, d.DecisionKey, "independence of %q: min_families must be in [1, %d]", ind.Requirement, maxFamilies)
			}
		}
	}
	tools := map[string]bool{}
	for i, t := range p.Tools {
		if t.CapabilityID == "" {
			return perr(i, "", "tool capability_id is required")
		}
		if tools[t.CapabilityID] {
			return perr(i, t.CapabilityID, "duplicate tool capability_id")
		}
		tools[t.CapabilityID] = true
		if t.GatedBy != "" && !decisions[t.GatedBy] {
			return perr(i, t.CapabilityID, "tool gated_by names unknown decision %q", t.GatedBy)
		}
	}
	sources := map[string]bool{}
	for i, t := range p.Trust {
		if t.Source == "" {
			return perr(i, "", "trust source is required")
		}
		if sources[t.Source] {
			return perr(i, t.Source, "duplicate trust source")
		}
		sources[t.Source] = true
		if err := checkSet("trust requirements", t.Requirements, 0); err != nil {
			return perr(i, t.Source, "%v", err)
		}
		for _, r := range t.Requirements {
			if !vocab[r] {
				return perr(i, t.Source, "trust names requirement %q that no decision requires", r)
			}
		}
	}
	rules := map[string]bool{}
	for i, r := range p.ResolutionRules {
		if r.RuleID == "" {
			return perr(i, "", "resolution rule_id is required")
		}
		if rules[r.RuleID] {
			return perr(i, r.RuleID, "duplicate resolution rule_id")
		}
		rules[r.RuleID] = true
		if err := checkSet("rule requirements", r.Requirements, 0); err != nil {
			return perr(i, r.RuleID, "%v", err)
		}
		for _, q := range r.Requirements {
			if !vocab[q] {
				return perr(i, r.RuleID, "rule names requirement %q that no decision requires", q)
			}
		}
		switch r.Kind {
		case ResolutionSourcePriority:
			if err := checkSet("source_order", r.SourceOrder, 2); err != nil {
				return perr(i, r.RuleID, "%v", err)
			}
			if r.SystemOfRecord != "" {
				return perr(i, r.RuleID, "a source_priority rule has no system_of_record")
			}
		case ResolutionAuthoritativeRefresh:
			if r.SystemOfRecord == "" {
				return perr(i, r.RuleID, "an authoritative_refresh rule needs system_of_record")
			}
			if len(r.SourceOrder) != 0 {
				return perr(i, r.RuleID, "an authoritative_refresh rule has no source_order")
			}
		default:
			return perr(i, r.RuleID, "rule kind must be %q or %q, got %q",
				ResolutionSourcePriority, ResolutionAuthoritativeRefresh, r.Kind)
		}
	}
	return nil
}

func validateRun(r RunContext) error {
	rerr := func(format string, args ...any) error { return inputErr("run", -1, r.RunID, format, args...) }
	if r.Tenant == "" || r.Principal == "" || r.RunID == "" || r.DecisionKey == "" {
		return rerr("tenant, principal, run_id and decision_key are required")
	}
	if err := checkTime("decision_time", r.DecisionTime); err != nil {
		return rerr("%v", err)
	}
	if err := checkSet("allowed_sources", r.AllowedSources, 0); err != nil {
		return rerr("%v", err)
	}
	if err := checkSet("capabilities", r.Capabilities, 0); err != nil {
		return rerr("%v", err)
	}
	return nil
}

func validateCandidate(c EvidenceCandidate) error {
	if c.Ref == "" || c.Source == "" || c.Tenant == "" || c.Bucket == "" {
		return errors.New("ref, source, tenant and bucket are required")
	}
	if len(c.ContentHash) != 64 || !isLowerHex(c.ContentHash) {
		return errors.New("content_hash must be 64 lowercase hex digits (SHA-256)")
	}
	if err := checkRange("tokens", c.Tokens); err != nil {
		return err
	}
	if err := checkRange("rank", c.Rank); err != nil {
		return err
	}
	if err := checkSet("requirements", c.Requirements, 0); err != nil {
		return err
	}
	if err := checkTime("observed_at", c.ObservedAt); err != nil {
		return err
	}
	if err := checkTime("valid_until", c.ValidUntil); err != nil {
		return err
	}
	if !c.ValidUntil.After(c.ObservedAt) {
		return errors.New("valid_until must be after observed_at")
	}
	switch c.InstructionTreatment {
	case TreatmentDataOnly, TreatmentInstruction:
	default:
		return fmt.Errorf("instruction_treatment must be %q or %q, got %q",
			TreatmentDataOnly, TreatmentInstruction, c.InstructionTreatment)
	}
	return nil
}

func validateEvidence(cs []EvidenceCandidate) error {
	first := make(map[string]int, len(cs))
	for i, c := range cs {
		if err := validateCandidate(c); err != nil {
			return inputErr("evidence", i, c.Ref, "%v", err)
		}
		if j, dup := first[c.Ref]; dup {
			return inputErr("evidence", i, c.Ref, "duplicate ref (first at evidence[%d])", j)
		}
		first[c.Ref] = i
	}
	return nil
}

func isLowerHex(s string) bool {
	if _, err := hex.DecodeString(s); err != nil {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] >= 'A' && s[i] <= 'F' {
			return false
		}
	}
	return true
}
