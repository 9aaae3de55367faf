package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/contextos/ledger/kernel"
)

// validateControls checks and prepares a capability's approval, policy,
// amount pointer and decision gate.
func (cp *CapabilityConfig) validateControls(dir string) error {
	switch cp.Approval {
	case "", "required", "none":
	default:
		return fmt.Errorf("approval must be \"required\" or \"none\", not %q", cp.Approval)
	}
	if cp.AmountPointer != "" {
		p, err := kernel.ParsePointer(cp.AmountPointer)
		if err != nil || len(p) == 0 {
			return fmt.Errorf("amount_pointer %q must select a member of the arguments", cp.AmountPointer)
		}
	}
	pol := kernel.Policy{MaxAmount: cp.Policy.MaxAmount, AmountPointer: cp.Policy.AmountPointer}
	if pol.AmountPointer == "" && pol.MaxAmount > 0 {
		pol.AmountPointer = cp.AmountPointer
	}
	for _, a := range cp.Policy.Allowed {
		pol.Allowed = append(pol.Allowed, kernel.AllowedValues{Pointer: a.Pointer, Values: a.Values})
	}
	for _, p := range cp.Policy.Pattern {
		pol.Patterns = append(pol.Patterns, kernel.PatternRule{Pointer: p.Pointer, Regexp: p.Regexp})
	}
	compiled, err := kernel.CompilePolicy(pol)
	if err != nil {
		return err
	}
	cp.policy = compiled
	if (cp.DecisionKey == "") != (cp.ContextPack == "") {
		return errors.New("decision_key and context_pack go together")
	}
	if cp.DecisionKey == "" {
		return nil
	}
	path := cp.ContextPack
	if !filepath.IsAbs(path) && dir != "" {
		path = filepath.Join(dir, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("context_pack: %w", err)
	}
	pack, err := kernel.ParseContextPack(b)
	if err != nil {
		return fmt.Errorf("context_pack %s: %w", path, err)
	}
	if !slices.ContainsFunc(pack.Decisions, func(d kernel.DecisionSpec) bool { return d.DecisionKey == cp.DecisionKey }) {
		return fmt.Errorf("decision_key %s is not a decision of context pack %s", cp.DecisionKey, pack.PackID)
	}
	for _, tr := range pack.Tools {
		if tr.CapabilityID == cp.ID && tr.GatedBy != "" && tr.GatedBy != cp.DecisionKey {
			return fmt.Errorf("context pack %s gates %s by %s, the manifest by %s", pack.PackID, cp.ID, tr.GatedBy, cp.DecisionKey)
		}
	}
	cp.pack = &pack
	return nil
}

// CompiledPolicy returns the capability's policy (an empty one for a
// manifest that was never validated).
func (cp *CapabilityConfig) CompiledPolicy() *kernel.CompiledPolicy {
	if cp.policy == nil {
		p, _ := kernel.CompilePolicy(kernel.Policy{})
		return p
	}
	return cp.policy
}

// Pack returns the capability's context pack, read when the configuration
// was validated (nil when it names no decision_key).
func (cp *CapabilityConfig) Pack() *kernel.ContextPack { return cp.pack }
