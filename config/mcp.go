package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
)

// MCPConfig is the [mcp] section: the MCP gateway that serves each surfaced
// capability as an MCP tool (package mcpgw, docs/mcp.md). Off unless Listen
// is set.
type MCPConfig struct {
	// Listen is the loopback address (host:port, port 0 = random) of the
	// streamable HTTP endpoint, served at /mcp.
	Listen string `toml:"listen"`
	// AllowedOrigins are the browser origins (scheme://host[:port]) whose
	// requests are served; a request with any other Origin header is
	// refused 403. Requests without an Origin (every non-browser client)
	// are unaffected.
	AllowedOrigins []string `toml:"allowed_origins"`
}

// MCPToolConfig is a capability's [capabilities.mcp] table: the tool of an
// existing MCP server (streamable HTTP) that is the capability's provider.
type MCPToolConfig struct {
	URL  string `toml:"url"`
	Tool string `toml:"tool"`
	// QueryTool, when set, looks an attempt up by its idempotency key for
	// reconciliation; without it an unsettled attempt waits for an operator.
	QueryTool string `toml:"query_tool"`
	// IdempotencyArgument is the top-level tool argument that carries the
	// attempt id (default "idempotency_key"), on the call and the query.
	IdempotencyArgument string   `toml:"idempotency_argument"`
	Timeout             Duration `toml:"timeout"`
}

// minMCPTokenBytes keeps bearer tokens out of guessing range.
const minMCPTokenBytes = 24

// maxToolNameBytes is the MCP limit on tool names.
const maxToolNameBytes = 128

// validateMCP checks the [mcp] section and the agents' MCP tokens: a token
// is at least minMCPTokenBytes long and names exactly one agent of one
// tenant, so the token alone determines tenant and principal.
func (c *Config) validateMCP() error {
	seen := map[string]string{}
	for _, t := range c.Tenants {
		for _, o := range t.Operators {
			if o.MCPToken != "" {
				return fmt.Errorf("tenant %s operator %s: mcp_token is for agents", t.ID, o.ID)
			}
		}
		for _, a := range t.Agents {
			if a.MCPToken == "" {
				continue
			}
			who := wire.UserName(t.ID, a.ID)
			if len(a.MCPToken) < minMCPTokenBytes {
				return fmt.Errorf("tenant %s agent %s: mcp_token must be at least %d bytes", t.ID, a.ID, minMCPTokenBytes)
			}
			if other, dup := seen[a.MCPToken]; dup {
				return fmt.Errorf("agents %s and %s share an mcp_token; each token must name one agent", other, who)
			}
			seen[a.MCPToken] = who
		}
	}
	m := &c.MCP
	if m.Listen == "" {
		if len(m.AllowedOrigins) > 0 {
			return errors.New("mcp.allowed_origins needs mcp.listen")
		}
		return nil
	}
	host, port, err := net.SplitHostPort(m.Listen)
	if err != nil {
		return fmt.Errorf("mcp.listen: %w", err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("mcp.listen: port %q", port)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("mcp.listen: loopback only, not %q", host)
	}
	for i, o := range m.AllowedOrigins {
		n, err := NormalizeOrigin(o)
		if err != nil {
			return fmt.Errorf("mcp.allowed_origins[%d]: %w", i, err)
		}
		m.AllowedOrigins[i] = n
	}
	for _, cp := range c.Capabilities {
		if err := validToolName(cp.ID); err != nil {
			return fmt.Errorf("capability %s cannot be served as an MCP tool: %w", cp.ID, err)
		}
	}
	return nil
}

// NormalizeOrigin returns an origin as browsers send it in the Origin
// header: lower-case scheme://host[:port], no path.
func NormalizeOrigin(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("%q is not an origin (scheme://host[:port])", s)
	}
	return u.Scheme + "://" + u.Host, nil
}

func validToolName(name string) error {
	if name == "" || len(name) > maxToolNameBytes {
		return fmt.Errorf("a tool name has 1..%d bytes", maxToolNameBytes)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return fmt.Errorf("%q is not allowed in a tool name ([A-Za-z0-9_.-])", r)
		}
	}
	return nil
}

// ValidateMCP checks what a capability declares for MCP: its
// arguments schema (a JSON Schema object) and, for the mcp adapter, the
// tool it calls and its recovery contract over the tool result's
// structured content.
func (cp *CapabilityConfig) ValidateMCP() error {
	if cp.ArgumentsSchema != "" {
		var s map[string]any
		if err := kernel.DecodeRequest([]byte(cp.ArgumentsSchema), &s); err != nil {
			return fmt.Errorf("arguments_schema: %w", err)
		}
		if s["type"] != "object" {
			return errors.New(`arguments_schema: a tool's arguments are an object: "type" must be "object"`)
		}
	}
	if cp.Adapter != "mcp" {
		if cp.MCP != (MCPToolConfig{}) {
			return errors.New("[capabilities.mcp] is for adapter = \"mcp\"")
		}
		return nil
	}
	m := &cp.MCP
	if err := checkEndpoint(m.URL, false); err != nil {
		return fmt.Errorf("mcp.url (a streamable HTTP MCP endpoint): %w", err)
	}
	if m.Tool == "" {
		return errors.New("mcp.tool is required for the mcp adapter")
	}
	if m.IdempotencyArgument == "" {
		m.IdempotencyArgument = "idempotency_key"
	}
	if m.Timeout.Duration == 0 {
		m.Timeout.Duration = 5 * time.Second
	}
	if err := checkProviderTimeout("mcp.timeout", m.Timeout.Duration); err != nil {
		return err
	}
	if !cp.HTTP.isZero() {
		return errors.New("[capabilities.http] is for adapter = \"http\"")
	}
	r := cp.Recovery
	if len(r.NotAppliedStatuses) > 0 || r.QueryURL != "" {
		return errors.New("recovery.not_applied_statuses and recovery.query_url are for http; an mcp capability reconciles through mcp.query_tool")
	}
	if !cp.Effectful {
		return nil
	}
	if r.Completion == "" {
		return errors.New("an effectful mcp capability must declare recovery.completion (a JSON pointer into the tool result's structured content)")
	}
	if _, err := kernel.ParsePointer(r.Completion); err != nil {
		return fmt.Errorf("recovery.completion: %w", err)
	}
	if len(r.Applied) == 0 || len(r.NotApplied) == 0 {
		return errors.New("recovery must list applied and not_applied states")
	}
	return nil
}

// ArgumentsSchemaJSON is the JSON Schema of the capability's arguments:
// the manifest's arguments_schema, or the permissive {"type":"object"}
// when it declares none.
func (cp *CapabilityConfig) ArgumentsSchemaJSON() json.RawMessage {
	if cp.ArgumentsSchema == "" {
		return json.RawMessage(`{"type":"object"}`)
	}
	return json.RawMessage(cp.ArgumentsSchema)
}
