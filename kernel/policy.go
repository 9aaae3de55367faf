package kernel

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"

	"github.com/contextos/ledger/wire"
)

// Policy is a capability's declarative argument constraints: a small,
// closed form (docs/authorization.md says why it is not a general policy
// language). Every constraint must hold; a value that is missing, of the
// wrong JSON kind or unreadable fails its constraint (closed by default).
type Policy struct {
	// MaxAmount, when positive, bounds the exact positive integer at
	// AmountPointer (see ParseAmount).
	MaxAmount     int64  `json:"max_amount,omitempty"`
	AmountPointer string `json:"amount_pointer,omitempty"`
	// Allowed lists, per pointer, the only string values accepted there.
	Allowed []AllowedValues `json:"allowed,omitempty"`
	// Patterns require the string at a pointer to match a regular
	// expression as a whole (RE2 syntax, implicitly anchored).
	Patterns []PatternRule `json:"patterns,omitempty"`
}

// AllowedValues is one Policy.Allowed constraint.
type AllowedValues struct {
	Pointer string   `json:"pointer"`
	Values  []string `json:"values"`
}

// PatternRule is one Policy.Patterns constraint.
type PatternRule struct {
	Pointer string `json:"pointer"`
	Regexp  string `json:"regexp"`
}

// maxPatternBytes bounds a policy regular expression.
const maxPatternBytes = 1024

// CompiledPolicy is a validated Policy with its pointers parsed, its
// expressions compiled and its digest computed. Build it with
// CompilePolicy; it is immutable and safe for concurrent use.
type CompiledPolicy struct {
	policy   Policy
	digest   string
	amount   Pointer
	allowed  []Pointer
	patterns []Pointer
	res      []*regexp.Regexp
}

// CompilePolicy validates p and prepares it for evaluation. Lists are sets:
// their order does not change the digest. Errors name the bad constraint.
func CompilePolicy(p Policy) (*CompiledPolicy, error) {
	p = normalizePolicy(p)
	c := &CompiledPolicy{policy: p}
	if p.MaxAmount < 0 || p.MaxAmount > MaxAmount {
		return nil, fmt.Errorf("policy max_amount %d must be in 0..2^53-1", p.MaxAmount)
	}
	if p.MaxAmount > 0 || p.AmountPointer != "" {
		ptr, err := memberPointer("amount_pointer", p.AmountPointer)
		if err != nil {
			return nil, err
		}
		c.amount = ptr
	}
	for i, a := range p.Allowed {
		if i > 0 && p.Allowed[i-1].Pointer == a.Pointer {
			return nil, fmt.Errorf("policy allowed names pointer %s twice", a.Pointer)
		}
		ptr, err := memberPointer("allowed pointer", a.Pointer)
		if err != nil {
			return nil, err
		}
		if len(a.Values) == 0 {
			return nil, fmt.Errorf("policy allowed %s lists no value (it would refuse everything)", a.Pointer)
		}
		c.allowed = append(c.allowed, ptr)
	}
	for _, pr := range p.Patterns {
		ptr, err := memberPointer("pattern pointer", pr.Pointer)
		if err != nil {
			return nil, err
		}
		if pr.Regexp == "" || len(pr.Regexp) > maxPatternBytes {
			return nil, fmt.Errorf("policy pattern for %s must be 1..%d bytes", pr.Pointer, maxPatternBytes)
		}
		re, err := regexp.Compile(`^(?:` + pr.Regexp + `)$`)
		if err != nil {
			return nil, fmt.Errorf("policy pattern for %s: %v", pr.Pointer, err)
		}
		c.patterns = append(c.patterns, ptr)
		c.res = append(c.res, re)
	}
	d, err := Digest(p)
	if err != nil {
		return nil, fmt.Errorf("policy digest: %v", err)
	}
	c.digest = d
	return c, nil
}

func memberPointer(name, s string) (Pointer, error) {
	ptr, err := ParsePointer(s)
	if err != nil {
		return nil, fmt.Errorf("policy %s: %v", name, err)
	}
	if len(ptr) == 0 {
		return nil, fmt.Errorf("policy %s must select a member, not the whole document", name)
	}
	return ptr, nil
}

// normalizePolicy sorts and de-duplicates every list, so that equal
// policies have equal digests.
func normalizePolicy(p Policy) Policy {
	allowed := make([]AllowedValues, len(p.Allowed))
	for i, a := range p.Allowed {
		vs := slices.Clone(a.Values)
		slices.Sort(vs)
		allowed[i] = AllowedValues{Pointer: a.Pointer, Values: slices.Compact(vs)}
	}
	slices.SortFunc(allowed, func(a, b AllowedValues) int { return cmp.Compare(a.Pointer, b.Pointer) })
	patterns := slices.Clone(p.Patterns)
	slices.SortFunc(patterns, func(a, b PatternRule) int {
		return cmp.Or(cmp.Compare(a.Pointer, b.Pointer), cmp.Compare(a.Regexp, b.Regexp))
	})
	p.Allowed = nilIfEmpty(allowed)
	p.Patterns = nilIfEmpty(slices.Compact(patterns))
	return p
}

// Policy returns the normalized policy.
func (c *CompiledPolicy) Policy() Policy { return c.policy }

// Digest is the hex SHA-256 of the normalized policy's canonical form: what
// a DecisionRecord's controls and an action binding name as policy_digest.
func (c *CompiledPolicy) Digest() string { return c.digest }

// AmountPointer is the pointer of the policy's amount, or nil.
func (c *CompiledPolicy) AmountPointer() Pointer { return c.amount }

// Evaluate checks decoded arguments (DecodeArguments) against the policy.
// It returns nil when every constraint holds, and otherwise a refusal with
// CodePolicyDenied naming the first failed constraint in a fixed order
// (amount, allowed values by pointer, patterns by pointer).
func (c *CompiledPolicy) Evaluate(args map[string]any) *Refusal {
	p := c.policy
	if p.MaxAmount > 0 {
		v, _ := c.amount.Eval(args)
		amt, r := ParseAmount(v)
		if r != nil {
			return refuse(wire.CodePolicyDenied, "policy %s: value at %s: %s", short(c.digest), p.AmountPointer, r.Reason)
		}
		if amt > p.MaxAmount {
			return refuse(wire.CodePolicyDenied, "policy %s: amount %d at %s exceeds the policy maximum %d", short(c.digest), amt, p.AmountPointer, p.MaxAmount)
		}
	}
	for i, a := range p.Allowed {
		v, _ := c.allowed[i].Eval(args)
		s, ok := v.(string)
		if !ok || !slices.Contains(a.Values, s) {
			return refuse(wire.CodePolicyDenied, "policy %s: value at %s is %s, not one of %v", short(c.digest), a.Pointer, quoteValue(v), a.Values)
		}
	}
	for i, pr := range p.Patterns {
		v, _ := c.patterns[i].Eval(args)
		s, ok := v.(string)
		if !ok || !c.res[i].MatchString(s) {
			return refuse(wire.CodePolicyDenied, "policy %s: value at %s is %s, which does not match %q", short(c.digest), pr.Pointer, quoteValue(v), pr.Regexp)
		}
	}
	return nil
}

func quoteValue(v any) string {
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", clip(s))
	}
	return jsonKind(v)
}
