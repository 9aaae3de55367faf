package config

import (
	"fmt"
	"time"

	"github.com/contextos/ledger/kernel"
)

// TenantConfig declares a tenant's principals.
type TenantConfig struct {
	ID        string            `toml:"id"`
	Agents    []PrincipalConfig `toml:"agents"`
	Operators []PrincipalConfig `toml:"operators"`
	// UnadmittedRuns says what a proposal may do in a run no operator
	// admitted: "refuse" (the default: run_budget_exhausted until an
	// operator admits the run with a budget) or "unlimited" (said
	// explicitly; usage is still recorded). docs/authorization.md.
	UnadmittedRuns string `toml:"unadmitted_runs"`
	// TwoPerson names the operator actions that need a second operator:
	// "assert_absence" (every assert-absence) and "limit_raise" (a
	// guarantee-set-limit whose new limit is above LimitRaiseAbove). One
	// operator's request is recorded and pending; another operator with
	// the same scope confirms it (docs/operations.md).
	TwoPerson       []string `toml:"two_person"`
	LimitRaiseAbove int64    `toml:"limit_raise_above"`
	// ReleaseAbstentionBoundBP is the release gate's bound on false
	// abstentions, in basis points: a pack version is promoted only when
	// its false-abstention rate on the held-out cases exceeds the promoted
	// version's by at most this much. Unset: 200 (2 percentage points).
	ReleaseAbstentionBoundBP *int64 `toml:"release_abstention_bound_bp"`
	// RequestTTL is how long another operator may confirm a two-person
	// request (default 1h, at most 7 days); a later confirmation is
	// refused request_expired.
	RequestTTL Duration `toml:"request_ttl"`
}

// AbstentionBoundBP returns the tenant's release gate bound on false
// abstentions in basis points (kernel.DefaultAbstentionBoundBP unless set).
func (t *TenantConfig) AbstentionBoundBP() int64 {
	if t.ReleaseAbstentionBoundBP == nil {
		return kernel.DefaultAbstentionBoundBP
	}
	return *t.ReleaseAbstentionBoundBP
}

// OperatorPolicy returns the tenant's rule for its operators' actions.
func (t *TenantConfig) OperatorPolicy() kernel.OperatorPolicy {
	return kernel.OperatorPolicy{TwoPerson: t.TwoPerson, LimitRaiseAbove: t.LimitRaiseAbove, RequestTTL: t.RequestTTL.Duration}
}

// OperatorScopes returns the scopes of an operator of the tenant: nil (every
// scope) when its configuration has no scopes list.
func (t *TenantConfig) OperatorScopes(id string) []kernel.Scope {
	for _, o := range t.Operators {
		if o.ID == id && o.Scopes != nil {
			s := make([]kernel.Scope, len(o.Scopes))
			for i, x := range o.Scopes {
				s[i] = kernel.Scope(x)
			}
			return s
		}
	}
	return nil
}

// validateOperators checks the operators' scopes and the two-person rule.
func (t *TenantConfig) validateOperators() error {
	for _, a := range t.Agents {
		if a.Scopes != nil {
			return fmt.Errorf("tenant %s agent %s: scopes are an operator's", t.ID, a.ID)
		}
	}
	for _, o := range t.Operators {
		if o.Scopes != nil && len(o.Scopes) == 0 {
			return fmt.Errorf("tenant %s operator %s: scopes is empty; name at least \"read\", or leave scopes out for every scope", t.ID, o.ID)
		}
		for _, s := range o.Scopes {
			if !kernel.ValidScope(s) {
				return fmt.Errorf("tenant %s operator %s: unknown scope %q (read, approve, recover, resolve, limits, kill_switch, guardrails)", t.ID, o.ID, s)
			}
		}
	}
	for _, a := range t.TwoPerson {
		if !kernel.ValidTwoPerson(a) {
			return fmt.Errorf("tenant %s two_person: unknown action %q (assert_absence, limit_raise)", t.ID, a)
		}
	}
	if t.LimitRaiseAbove < 0 {
		return fmt.Errorf("tenant %s limit_raise_above must not be negative", t.ID)
	}
	if b := t.AbstentionBoundBP(); b < 0 || b > 10_000 {
		return fmt.Errorf("tenant %s release_abstention_bound_bp must be 0..10000 basis points, not %d", t.ID, b)
	}
	if d := t.RequestTTL.Duration; d < 0 || d > 7*24*time.Hour || (d > 0 && d < time.Minute) {
		return fmt.Errorf("tenant %s request_ttl must be 1m..168h, not %s", t.ID, d)
	}
	return nil
}

// allowsUnadmitted reports whether runs without an admission may propose.
func (t *TenantConfig) AllowsUnadmitted() bool { return t.UnadmittedRuns == "unlimited" }

// PrincipalConfig is an agent or operator and the credentials the NATS
// server checks.
type PrincipalConfig struct {
	ID       string `toml:"id"`
	Password string `toml:"password"`
	// Capabilities granted to an agent (authority). Operators need none.
	// Operators' grant and revoke verbs override them per capability.
	Capabilities []string `toml:"capabilities"`
	// EvidenceSources are the evidence sources an agent may rely on: the
	// RunContext.allowed_sources of its evidence gates. Empty grants none.
	EvidenceSources []string `toml:"evidence_sources"`
	// MCPToken is an agent's bearer credential on the MCP gateway: the
	// same identity as its NATS user (docs/mcp.md).
	MCPToken string `toml:"mcp_token"`
	// Scopes are an operator's rights: read, approve, recover, resolve,
	// limits, kill_switch (kernel.Scope). Left out, the operator holds
	// every scope, as before scopes existed; an empty list is refused.
	Scopes []string `toml:"scopes"`
}

// Agent returns an agent of a tenant.
func (t *TenantConfig) Agent(id string) (*PrincipalConfig, bool) {
	for i := range t.Agents {
		if t.Agents[i].ID == id {
			return &t.Agents[i], true
		}
	}
	return nil, false
}

// IsOperator reports whether id is one of the tenant's operators.
func (t *TenantConfig) IsOperator(id string) bool {
	for _, o := range t.Operators {
		if o.ID == id {
			return true
		}
	}
	return false
}
