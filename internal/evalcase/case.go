package evalcase

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Schema is the schema tag every case carries.
const Schema = "context_eval_case.v1"

// Bounds on what Load reads: a case set is an operator's file tree, and a
// runaway one is refused rather than read into memory.
const (
	MaxCaseBytes = 1 << 20
	MaxCases     = 10000
)

// Outcome is what a decision does with its evidence. Its zero value is
// invalid.
type Outcome string

// The outcomes.
const (
	// Commit: the decision may close (the gate's commit_allowed).
	Commit Outcome = "commit"
	// Abstain: the decision stays open.
	Abstain Outcome = "abstain"
)

// Risk is the risk class of the case's action, the axis the report's
// accuracy-coverage frontier is segmented by.
type Risk string

// The risk classes, lowest first.
const (
	RiskLow    Risk = "low"
	RiskMedium Risk = "medium"
	RiskHigh   Risk = "high"
)

// Risks lists the risk classes in order.
var Risks = []Risk{RiskLow, RiskMedium, RiskHigh}

// Variants are the evidence conditions a case can exercise: the seed's
// protocol (sufficient, insufficient, stale, untrusted, omitted,
// conflicting, resolved, and the no-conflict control) and the correlated
// variant of the independence demand.
var Variants = []string{
	"sufficient", "insufficient", "stale", "untrusted", "omitted",
	"conflicting", "resolved", "control", "correlated",
}

// Truth is a snapshot's ground-truth label: whether its answer is the
// right one. Only the report's accuracy reads it; neither the grader nor
// the compiler does.
type Truth string

// The truth labels (RAMDocs' own: correct, misinfo, noise).
const (
	TruthCorrect Truth = "correct"
	TruthMisinfo Truth = "misinfo"
	TruthNoise   Truth = "noise"
)

// Resolution kinds a policy may accept. KindNone accepts none: a conflict
// stays open.
const (
	KindNone                 = "none"
	KindAccountableReview    = "accountable_review"
	KindSourcePriority       = "source_priority"
	KindAuthoritativeRefresh = "authoritative_refresh"
)

// Case is one decision case.
type Case struct {
	Schema     string     `json:"schema"`
	CaseID     string     `json:"case_id"`
	Slice      string     `json:"slice"`
	Variant    string     `json:"variant"`
	Risk       Risk       `json:"risk"`
	Provenance Provenance `json:"provenance"`
	// Agent is the principal the decision runs as: its own review of a
	// conflict is no resolution.
	Agent            string           `json:"agent"`
	Decision         Decision         `json:"decision"`
	Snapshots        []Snapshot       `json:"snapshots"`
	ResolutionPolicy ResolutionPolicy `json:"resolution_policy"`
	Resolution       *Resolution      `json:"resolution,omitempty"`
	// Expected is the grader's verdict, kept with the case so that a change
	// of grader or labels shows in review as a changed case.
	Expected Expected `json:"expected"`
	Inputs   Inputs   `json:"inputs"`

	// Path is the file the case was loaded from (not encoded).
	Path string `json:"-"`
}

// Provenance says where a case comes from.
type Provenance struct {
	Dataset string `json:"dataset"`
	Licence string `json:"licence,omitempty"`
	Record  int    `json:"record,omitempty"` // the dataset's line or item number, 0-based
	Note    string `json:"note,omitempty"`
}

// Decision is the decision spec in the grader's terms.
type Decision struct {
	DecisionKey string       `json:"decision_key"`
	Obligations []Obligation `json:"obligations"`
}

// Obligation is one evidence requirement; MinFamilies (0 means 1) is the
// number of independent source families it needs.
type Obligation struct {
	Requirement string `json:"requirement"`
	MinFamilies int    `json:"min_families,omitempty"`
}

// Snapshot is one source snapshot, labelled. Claims are the obligations
// it answers (empty for noise) and Answer its value for them. Current,
// Trusted and InBudget state whether it is within its validity at decision
// time, from a source trusted for its claims, and fits the context budget.
type Snapshot struct {
	Ref        string    `json:"ref"`
	Source     string    `json:"source"`
	Family     string    `json:"family,omitempty"` // empty: the source itself
	ObservedAt time.Time `json:"observed_at"`
	Claims     []string  `json:"claims,omitempty"`
	Answer     string    `json:"answer,omitempty"`
	Truth      Truth     `json:"truth"`
	Current    bool      `json:"current"`
	Trusted    bool      `json:"trusted"`
	InBudget   bool      `json:"in_budget"`
}

// FamilyName returns the snapshot's source family.
func (s Snapshot) FamilyName() string {
	if s.Family != "" {
		return s.Family
	}
	return s.Source
}

// ResolutionPolicy is the resolution the case's policy accepts for a
// conflict: none, an accountable review, a source priority (SourceOrder,
// best first) or an authoritative refresh from SystemOfRecord.
type ResolutionPolicy struct {
	Kind           string   `json:"kind"`
	SourceOrder    []string `json:"source_order,omitempty"`
	SystemOfRecord string   `json:"system_of_record,omitempty"`
}

// Resolution is a review supplied with the case: who resolved and which
// refs they selected.
type Resolution struct {
	By      string   `json:"by"`
	Selects []string `json:"selects"`
}

// Expected is the grader's verdict.
type Expected struct {
	Outcome Outcome `json:"outcome"`
	Reason  string  `json:"reason"`
}

// Inputs are the compiler's inputs, kept as raw JSON: the kernel's strict
// parsers read them, this package does not.
type Inputs struct {
	Pack     json.RawMessage `json:"pack"`
	Run      json.RawMessage `json:"run"`
	Evidence json.RawMessage `json:"evidence"`
	Markers  json.RawMessage `json:"markers"`
}

// Parse decodes one case strictly (valid UTF-8, one JSON object, no
// unknown fields, no trailing data) and checks its labels.
func Parse(b []byte) (Case, error) {
	var c Case
	if len(b) > MaxCaseBytes {
		return c, fmt.Errorf("case is larger than %d bytes", MaxCaseBytes)
	}
	if !utf8.Valid(b) {
		return c, errors.New("case is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Case{}, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Case{}, errors.New("trailing data after the case")
	}
	if err := c.Validate(); err != nil {
		return Case{}, err
	}
	return c, nil
}

// Validate checks the labels: required fields, known enums, unique refs,
// claims and resolution selections that name the case's own obligations
// and refs.
func (c Case) Validate() error {
	if c.Schema != Schema {
		return fmt.Errorf("schema must be %q, got %q", Schema, c.Schema)
	}
	if c.CaseID == "" || c.Slice == "" || c.Agent == "" {
		return errors.New("case_id, slice and agent are required")
	}
	if !slices.Contains(Variants, c.Variant) {
		return fmt.Errorf("variant %q is not one of %v", c.Variant, Variants)
	}
	if !slices.Contains(Risks, c.Risk) {
		return fmt.Errorf("risk %q is not one of %v", c.Risk, Risks)
	}
	if c.Provenance.Dataset == "" {
		return errors.New("provenance.dataset is required")
	}
	if c.Decision.DecisionKey == "" || len(c.Decision.Obligations) == 0 {
		return errors.New("decision needs a decision_key and at least one obligation")
	}
	obligations := map[string]bool{}
	for _, o := range c.Decision.Obligations {
		if o.Requirement == "" || obligations[o.Requirement] {
			return fmt.Errorf("obligation %q is empty or repeated", o.Requirement)
		}
		if o.MinFamilies < 0 || o.MinFamilies > 64 {
			return fmt.Errorf("obligation %q: min_families must be in [0, 64]", o.Requirement)
		}
		obligations[o.Requirement] = true
	}
	refs := map[string]bool{}
	for _, s := range c.Snapshots {
		if s.Ref == "" || s.Source == "" || refs[s.Ref] {
			return fmt.Errorf("snapshot %q: ref and source are required, refs are unique", s.Ref)
		}
		refs[s.Ref] = true
		if s.ObservedAt.IsZero() {
			return fmt.Errorf("snapshot %q: observed_at is required", s.Ref)
		}
		switch s.Truth {
		case TruthCorrect, TruthMisinfo, TruthNoise:
		default:
			return fmt.Errorf("snapshot %q: truth %q is not correct, misinfo or noise", s.Ref, s.Truth)
		}
		for _, q := range s.Claims {
			if !obligations[q] {
				return fmt.Errorf("snapshot %q claims %q, which is not an obligation", s.Ref, q)
			}
		}
		if len(s.Claims) > 0 && s.Answer == "" {
			return fmt.Errorf("snapshot %q claims an obligation without an answer", s.Ref)
		}
	}
	p := c.ResolutionPolicy
	switch p.Kind {
	case KindNone, KindAccountableReview:
		if len(p.SourceOrder) > 0 || p.SystemOfRecord != "" {
			return fmt.Errorf("a %s policy has no source_order or system_of_record", p.Kind)
		}
	case KindSourcePriority:
		if len(p.SourceOrder) < 2 || p.SystemOfRecord != "" {
			return errors.New("a source_priority policy needs a source_order of two or more, and no system_of_record")
		}
	case KindAuthoritativeRefresh:
		if p.SystemOfRecord == "" || len(p.SourceOrder) > 0 {
			return errors.New("an authoritative_refresh policy needs a system_of_record, and no source_order")
		}
	default:
		return fmt.Errorf("resolution_policy.kind %q is not none, %s, %s or %s", p.Kind,
			KindAccountableReview, KindSourcePriority, KindAuthoritativeRefresh)
	}
	if r := c.Resolution; r != nil {
		if r.By == "" || len(r.Selects) == 0 {
			return errors.New("a resolution needs by and selects")
		}
		for _, ref := range r.Selects {
			if !refs[ref] {
				return fmt.Errorf("resolution selects %q, which is not a snapshot", ref)
			}
		}
	}
	switch c.Expected.Outcome {
	case Commit, Abstain:
	default:
		return fmt.Errorf("expected.outcome %q is not commit or abstain", c.Expected.Outcome)
	}
	for name, raw := range map[string]json.RawMessage{"pack": c.Inputs.Pack, "run": c.Inputs.Run, "evidence": c.Inputs.Evidence, "markers": c.Inputs.Markers} {
		if len(raw) == 0 {
			return fmt.Errorf("inputs.%s is required", name)
		}
	}
	return nil
}

// Load reads every *.json file under dir (recursively, in path order) as
// a case. Case ids must be unique. Errors name the file.
func Load(dir string) ([]Case, error) {
	var paths []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".json") {
			if len(paths) == MaxCases {
				return fmt.Errorf("more than %d cases", MaxCases)
			}
			paths = append(paths, path)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cases %s: %w", dir, err)
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("cases %s: no *.json case files", dir)
	}
	slices.Sort(paths)
	cases := make([]Case, 0, len(paths))
	seen := map[string]string{}
	for _, path := range paths {
		c, err := loadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if prev, dup := seen[c.CaseID]; dup {
			return nil, fmt.Errorf("%s: case_id %q repeats %s", path, c.CaseID, prev)
		}
		seen[c.CaseID] = path
		c.Path = path
		cases = append(cases, c)
	}
	return cases, nil
}

func loadFile(path string) (Case, error) {
	f, err := os.Open(path)
	if err != nil {
		return Case{}, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxCaseBytes+1))
	if err != nil {
		return Case{}, err
	}
	return Parse(b)
}

// Encode returns the case as indented JSON with a final newline: the form
// the case files are written in.
func Encode(c Case) ([]byte, error) {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
