package kernel

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// ContextDiffSchema is the schema tag of every ContextDiff.
const ContextDiffSchema = "context_diff.v1"

// ContextDiff is what changed from one pack version, or one compiled
// context, to another (DiffPacks, DiffCompiled). Every list is sorted.
//
// For packs, an item is "bucket:<name>", "decision:<key>", "tool:<id>",
// "trust:<source>" or "rule:<id>"; an obligation is a decision's required
// evidence, whose status is "required" or "absent". For compiled contexts,
// a block is "<bucket>/<ref>" of the payload; Superseded lists the refs a
// resolution superseded in B but not in A; an obligation is a requirement
// of the run's decision, whose status is "satisfied", "unsatisfied" or
// "absent".
type ContextDiff struct {
	Schema      string             `json:"schema"`
	Kind        string             `json:"kind"` // "pack" or "compiled_context"
	From        string             `json:"from"` // A: id@version (digest) or the compiled context's digest
	To          string             `json:"to"`
	Added       []string           `json:"added"`
	Dropped     []string           `json:"dropped"`
	Changed     []string           `json:"changed"`
	Superseded  []string           `json:"superseded"`
	Obligations []ObligationChange `json:"obligations"`
}

// ObligationChange is one obligation whose status differs from A to B.
type ObligationChange struct {
	DecisionKey string `json:"decision_key"`
	Requirement string `json:"requirement"`
	From        string `json:"from"`
	To          string `json:"to"`
}

// Obligation statuses of a ContextDiff.
const (
	ObligationRequired    = "required"
	ObligationAbsent      = "absent"
	ObligationSatisfied   = "satisfied"
	ObligationUnsatisfied = "unsatisfied"
)

// Empty reports whether the diff found no change.
func (d ContextDiff) Empty() bool {
	return len(d.Added)+len(d.Dropped)+len(d.Changed)+len(d.Superseded)+len(d.Obligations) == 0
}

// DiffPacks compares two packs item by item, each item by the digest of
// its canonical form, and their decisions' obligations.
func DiffPacks(a, b ContextPack) (ContextDiff, error) {
	ia, err := packItems(a)
	if err != nil {
		return ContextDiff{}, err
	}
	ib, err := packItems(b)
	if err != nil {
		return ContextDiff{}, err
	}
	da, _ := PackDigest(a)
	db, _ := PackDigest(b)
	d := newDiff("pack", fmt.Sprintf("%s@%s (%s)", a.PackID, a.Version, da), fmt.Sprintf("%s@%s (%s)", b.PackID, b.Version, db))
	d.Added, d.Dropped, d.Changed = diffMaps(ia, ib)
	oa, ob := packObligations(a), packObligations(b)
	d.Obligations = obligationChanges(oa, ob, ObligationAbsent)
	return d, nil
}

// DiffCompiled compares two compiled contexts: their payload blocks, the
// evidence their resolutions superseded, and the status of each
// obligation of the run's decision.
func DiffCompiled(a, b CompiledContext) ContextDiff {
	d := newDiff("compiled_context", a.Digest, b.Digest)
	ba, bb := blocks(a), blocks(b)
	d.Added, d.Dropped, d.Changed = diffMaps(ba, bb)
	sa := map[string]bool{}
	for _, s := range a.Negative.Superseded {
		sa[s.Ref] = true
	}
	for _, s := range b.Negative.Superseded {
		if !sa[s.Ref] {
			d.Superseded = append(d.Superseded, s.Ref)
		}
	}
	slices.Sort(d.Superseded)
	d.Superseded = slices.Compact(d.Superseded)
	d.Obligations = obligationChanges(requirementStatuses(a), requirementStatuses(b), ObligationAbsent)
	return d
}

func newDiff(kind, from, to string) ContextDiff {
	return ContextDiff{Schema: ContextDiffSchema, Kind: kind, From: from, To: to,
		Added: []string{}, Dropped: []string{}, Changed: []string{}, Superseded: []string{}, Obligations: []ObligationChange{}}
}

// packItems maps every item of the canonical pack to its digest.
func packItems(p ContextPack) (map[string]string, error) {
	c := canonicalPack(p)
	out := map[string]string{}
	add := func(name string, v any) error {
		d, err := Digest(v)
		if err != nil {
			return fmt.Errorf("context diff: %s: %w", name, err)
		}
		out[name] = d
		return nil
	}
	for _, x := range c.Buckets {
		if err := add("bucket:"+x.Name, x); err != nil {
			return nil, err
		}
	}
	for _, x := range c.Decisions {
		if err := add("decision:"+x.DecisionKey, x); err != nil {
			return nil, err
		}
	}
	for _, x := range c.Tools {
		if err := add("tool:"+x.CapabilityID, x); err != nil {
			return nil, err
		}
	}
	for _, x := range c.Trust {
		if err := add("trust:"+x.Source, x); err != nil {
			return nil, err
		}
	}
	for _, x := range c.ResolutionRules {
		if err := add("rule:"+x.RuleID, x); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// blocks maps every payload block of c to the hash of what it carries.
func blocks(c CompiledContext) map[string]string {
	out := map[string]string{}
	for _, b := range c.Payload {
		for _, x := range b.Blocks {
			out[b.Bucket+"/"+x.Ref] = x.ContentHash + "|" + string(x.InstructionTreatment) + "|" + strings.Join(x.Requirements, ",")
		}
	}
	return out
}

func diffMaps(a, b map[string]string) (added, dropped, changed []string) {
	added, dropped, changed = []string{}, []string{}, []string{}
	for k, v := range b {
		w, ok := a[k]
		switch {
		case !ok:
			added = append(added, k)
		case w != v:
			changed = append(changed, k)
		}
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			dropped = append(dropped, k)
		}
	}
	slices.Sort(added)
	slices.Sort(dropped)
	slices.Sort(changed)
	return added, dropped, changed
}

type obligationKey struct{ decision, requirement string }

func packObligations(p ContextPack) map[obligationKey]string {
	out := map[obligationKey]string{}
	for _, d := range p.Decisions {
		for _, r := range d.RequiredEvidence {
			out[obligationKey{d.DecisionKey, r}] = ObligationRequired
		}
	}
	return out
}

func requirementStatuses(c CompiledContext) map[obligationKey]string {
	out := map[obligationKey]string{}
	for _, r := range c.Requirements {
		s := ObligationUnsatisfied
		if r.Satisfied {
			s = ObligationSatisfied
		}
		out[obligationKey{c.Run.DecisionKey, r.Requirement}] = s
	}
	return out
}

func obligationChanges(a, b map[obligationKey]string, absent string) []ObligationChange {
	out := []ObligationChange{}
	keys := map[obligationKey]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	for k := range keys {
		from, to := a[k], b[k]
		if from == "" {
			from = absent
		}
		if to == "" {
			to = absent
		}
		if from != to {
			out = append(out, ObligationChange{DecisionKey: k.decision, Requirement: k.requirement, From: from, To: to})
		}
	}
	slices.SortFunc(out, func(x, y ObligationChange) int {
		if c := strings.Compare(x.DecisionKey, y.DecisionKey); c != 0 {
			return c
		}
		return strings.Compare(x.Requirement, y.Requirement)
	})
	return out
}

// ParseDiffInput reads one side of a diff: a ContextPack (schema
// context_pack.v1) or a CompiledContext (compiled_context.v1), strictly.
// Exactly one of the results is set.
func ParseDiffInput(b []byte) (*ContextPack, *CompiledContext, error) {
	var tag struct {
		Schema string `json:"schema"`
	}
	if err := json.Unmarshal(b, &tag); err != nil {
		return nil, nil, fmt.Errorf("context diff: not a JSON object: %w", err)
	}
	switch tag.Schema {
	case ContextPackSchema:
		p, err := ParseContextPack(b)
		if err != nil {
			return nil, nil, err
		}
		return &p, nil, nil
	case CompiledContextSchema:
		var c CompiledContext
		if err := DecodeRequest(b, &c); err != nil {
			return nil, nil, fmt.Errorf("context diff: compiled context: %w", err)
		}
		return nil, &c, nil
	}
	return nil, nil, fmt.Errorf("context diff: schema %q is neither %s nor %s", tag.Schema, ContextPackSchema, CompiledContextSchema)
}
