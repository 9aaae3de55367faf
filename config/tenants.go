package config

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
