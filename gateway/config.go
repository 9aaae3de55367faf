package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	_ "time/tzdata" // guarantees' time zones, whatever the host has

	"github.com/BurntSushi/toml"
	"github.com/contextos/ledger/kernel"
)

// Config is the daemon's configuration: one TOML file (docs/config.md).
type Config struct {
	NATS         NATSConfig         `toml:"nats"`
	Runtime      RuntimeConfig      `toml:"runtime"`
	Tenants      []TenantConfig     `toml:"tenants"`
	Capabilities []CapabilityConfig `toml:"capabilities"`
	RawGuarantee []GuaranteeConfig  `toml:"guarantees"`
	Console      ConsoleConfig      `toml:"console"`
	MCP          MCPConfig          `toml:"mcp"`
	// Guarantees are the validated definitions of RawGuarantee.
	Guarantees []kernel.Definition `toml:"-"`
	zones      map[string]*time.Location
}

// Zone is a calendar window's time zone ("" is UTC), loaded when the
// configuration was validated.
func (c *Config) Zone(name string) *time.Location {
	if z, ok := c.zones[name]; ok {
		return z
	}
	return time.UTC
}

// NATSConfig says where the event store lives.
type NATSConfig struct {
	// URL of an existing NATS deployment; empty starts the embedded server.
	URL string `toml:"url"`
	// DataDir holds the embedded server's JetStream files and the runtime key.
	DataDir string `toml:"data_dir"`
	// Listen is the embedded server's loopback address (host:port, port 0 = random).
	Listen string `toml:"listen"`
	// Sync is "always" (fsync before every acknowledgement, the default) or
	// "relaxed" (development only).
	Sync string `toml:"sync"`
	// Replicas of the streams: 1 embedded, 3 on a JetStream cluster.
	Replicas int `toml:"replicas"`
	// User and Password are the runtime's own NATS credentials on an
	// external deployment (the embedded server generates its own).
	User     string `toml:"user"`
	Password string `toml:"password"`
	// Creds is a NATS credentials file for an external deployment.
	Creds string `toml:"creds"`
	// ReplyUser and ReplyPassword, or ReplyCreds, are the credentials of a
	// second connection through which the runtime publishes its replies on
	// an external deployment: a user that may publish only to _INBOX.>
	// (the embedded server makes one). Without them replies go through the
	// runtime's own connection, guarded by the reply-subject check alone.
	ReplyUser     string `toml:"reply_user"`
	ReplyPassword string `toml:"reply_password"`
	ReplyCreds    string `toml:"reply_creds"`
}

// RuntimeConfig tunes the runtime.
type RuntimeConfig struct {
	// KeyFile holds the runtime's Ed25519 signing key (created 0600 on
	// first start); default <data_dir>/runtime.key.
	KeyFile string `toml:"key_file"`
	// Executor names this replica in operation claims; default host-pid.
	Executor string `toml:"executor"`
	// ReconcileInterval is how often pending and unknown attempts are
	// queried (default DefaultReconcileInterval); "0s" disables the
	// background reconciler.
	ReconcileInterval optionalDuration `toml:"reconcile_interval"`
	// MaxProposalBytes bounds a proposal body (default 65536).
	MaxProposalBytes int `toml:"max_proposal_bytes"`
	// Workers bounds proposals handled at once (default 256).
	Workers int `toml:"workers"`
	// MetricsListen, when set, serves /metrics (Prometheus), /healthz and
	// /readyz at http://<addr> (loopback only).
	MetricsListen string `toml:"metrics_listen"`
	// ObservabilityConfig holds the logging, health and metrics keys
	// (telemetry_config.go).
	ObservabilityConfig
}

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
func (t *TenantConfig) allowsUnadmitted() bool { return t.UnadmittedRuns == "unlimited" }

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

// CapabilityConfig is one pinned capability manifest.
type CapabilityConfig struct {
	ID        string         `toml:"id"`
	Version   string         `toml:"version"`
	Risk      string         `toml:"risk"`
	Effectful bool           `toml:"effectful"`
	Adapter   string         `toml:"adapter"`
	HTTP      HTTPConfig     `toml:"http"`
	Recovery  RecoveryConfig `toml:"recovery"`
	// Approval is "required", "none", or empty: required exactly when the
	// risk is high.
	Approval string `toml:"approval"`
	// AmountPointer is where a proposal's amount is read: what it consumes
	// from its run budget (and what policy.max_amount bounds, unless the
	// policy names its own pointer). Empty: proposals consume calls only.
	AmountPointer string       `toml:"amount_pointer"`
	Policy        PolicyConfig `toml:"policy"`
	// DecisionKey names the decision of ContextPack whose evidence gate
	// must allow commit before the capability is dispatched.
	DecisionKey string `toml:"decision_key"`
	// ContextPack is the path of the context pack (JSON) of DecisionKey,
	// relative to the configuration file.
	ContextPack string `toml:"context_pack"`
	// ArgumentsSchema is the JSON Schema of the arguments (JSON text), the
	// input schema of the capability's MCP tool.
	ArgumentsSchema string        `toml:"arguments_schema"`
	MCP             MCPToolConfig `toml:"mcp"`
	// Breaker trips the capability's switch after repeated provider
	// failures (telemetry_config.go).
	Breaker BreakerConfig `toml:"breaker"`

	policy *kernel.CompiledPolicy
	pack   *kernel.ContextPack
}

// PolicyConfig is a capability's [capabilities.policy] table: the
// declarative argument constraints kernel.Policy evaluates.
type PolicyConfig struct {
	MaxAmount     int64           `toml:"max_amount"`
	AmountPointer string          `toml:"amount_pointer"`
	Allowed       []AllowedConfig `toml:"allowed"`
	Pattern       []PatternConfig `toml:"pattern"`
}

// AllowedConfig is a [[capabilities.policy.allowed]] constraint.
type AllowedConfig struct {
	Pointer string   `toml:"pointer"`
	Values  []string `toml:"values"`
}

// PatternConfig is a [[capabilities.policy.pattern]] constraint.
type PatternConfig struct {
	Pointer string `toml:"pointer"`
	Regexp  string `toml:"regexp"`
}

// HTTPConfig is how the HTTP adapter calls the provider.
type HTTPConfig struct {
	URL     string   `toml:"url"`
	Method  string   `toml:"method"`
	Timeout duration `toml:"timeout"`
	// IdempotencyHeader carries the attempt id (default "Idempotency-Key").
	IdempotencyHeader string `toml:"idempotency_header"`
}

// RecoveryConfig is an effectful capability's recovery contract.
type RecoveryConfig struct {
	// Completion is the JSON pointer in the provider's reply where the
	// completion state is read.
	Completion string   `toml:"completion"`
	Applied    []string `toml:"applied"`
	NotApplied []string `toml:"not_applied"`
	Pending    []string `toml:"pending"`
	// NotAppliedStatuses are HTTP statuses that prove the effect did not
	// happen; any other non-2xx status is unknown.
	NotAppliedStatuses []int `toml:"not_applied_statuses"`
	// QueryURL looks an attempt up later; "{idempotency_key}" is replaced
	// by the attempt id (path-escaped).
	QueryURL string `toml:"query_url"`
}

// GuaranteeConfig is a [[guarantees]] table.
type GuaranteeConfig struct {
	ID              string   `toml:"id"`
	CapabilityIDs   []string `toml:"capability_ids"`
	ResourcePointer string   `toml:"resource_pointer"`
	AmountPointer   string   `toml:"amount_pointer"`
	Limit           int64    `toml:"limit"`
	Unit            string   `toml:"unit"`
	// Mode is "enforce" (the default) or "observe" (record what would be
	// refused, refuse nothing).
	Mode string `toml:"mode"`
	// Window is "" (no period), "day", "week" or "month" in TimeZone (an
	// IANA name, "" for UTC), or "rolling" over Duration ("24h").
	Window   string `toml:"window"`
	TimeZone string `toml:"time_zone"`
	Duration string `toml:"duration"`
}

type duration struct{ time.Duration }

func (d *duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	if v < 0 {
		return errors.New("duration must not be negative")
	}
	d.Duration = v
	return nil
}

// optionalDuration is a duration whose absence is told apart from "0s".
type optionalDuration struct {
	time.Duration
	set bool // written by the configuration, even as 0
}

func (d *optionalDuration) UnmarshalText(b []byte) error {
	var v duration
	if err := v.UnmarshalText(b); err != nil {
		return err
	}
	d.Duration, d.set = v.Duration, true
	return nil
}

// DefaultReconcileInterval is runtime.reconcile_interval's default: the
// crash-recovery path runs by itself.
const DefaultReconcileInterval = 30 * time.Second

// LoadConfig reads and validates a configuration file.
func LoadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseConfig(b, filepath.Dir(path))
}

// ParseConfig decodes a configuration strictly: unknown keys are errors,
// and every section is validated. Relative file paths in it (context
// packs) are taken from the working directory.
func ParseConfig(b []byte) (*Config, error) { return parseConfig(b, "") }

func parseConfig(b []byte, dir string) (*Config, error) {
	var c Config
	md, err := toml.NewDecoder(bytes.NewReader(b)).Decode(&c)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		return nil, fmt.Errorf("config: unknown keys: %s", strings.Join(keys, ", "))
	}
	if err := c.validate(dir); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if err := c.Console.validate(); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return &c, nil
}

func (c *Config) validate(dir string) error {
	switch c.NATS.Sync {
	case "":
		c.NATS.Sync = "always"
	case "always", "relaxed":
	default:
		return fmt.Errorf("nats.sync must be \"always\" or \"relaxed\", not %q", c.NATS.Sync)
	}
	if c.NATS.URL == "" && c.NATS.DataDir == "" {
		return errors.New("nats.data_dir is required for the embedded server")
	}
	if c.NATS.URL != "" {
		if _, err := url.Parse(c.NATS.URL); err != nil {
			return fmt.Errorf("nats.url: %w", err)
		}
	}
	switch {
	case c.NATS.URL == "" && (c.NATS.ReplyUser != "" || c.NATS.ReplyPassword != "" || c.NATS.ReplyCreds != ""):
		return errors.New("nats.reply_user, reply_password and reply_creds are for an external deployment (nats.url); the embedded server makes its own")
	case c.NATS.ReplyCreds != "" && c.NATS.ReplyUser != "":
		return errors.New("nats.reply_creds and nats.reply_user exclude each other")
	case (c.NATS.ReplyUser == "") != (c.NATS.ReplyPassword == ""):
		return errors.New("nats.reply_user and nats.reply_password go together")
	}
	if c.NATS.Replicas == 0 {
		c.NATS.Replicas = 1
	}
	if c.Runtime.MaxProposalBytes == 0 {
		c.Runtime.MaxProposalBytes = 64 << 10
	}
	if c.Runtime.Workers == 0 {
		c.Runtime.Workers = 256
	}
	if err := c.Runtime.ObservabilityConfig.validate(); err != nil {
		return err
	}
	if !c.Runtime.ReconcileInterval.set && c.Runtime.ReconcileInterval.Duration == 0 {
		c.Runtime.ReconcileInterval.Duration = DefaultReconcileInterval
	}
	if len(c.Tenants) == 0 {
		return errors.New("at least one [[tenants]] is required")
	}
	caps := map[string]*CapabilityConfig{}
	for i := range c.Capabilities {
		cp := &c.Capabilities[i]
		if cp.ID == "" {
			return fmt.Errorf("capabilities[%d]: id is required", i)
		}
		if caps[cp.ID] != nil {
			return fmt.Errorf("capability %s declared twice", cp.ID)
		}
		caps[cp.ID] = cp
		if err := cp.validate(dir); err != nil {
			return fmt.Errorf("capability %s: %w", cp.ID, err)
		}
	}
	seenTenant := map[string]bool{}
	for _, t := range c.Tenants {
		if err := kernel.ValidToken(t.ID); err != nil {
			return fmt.Errorf("tenant id %q: %w", t.ID, err)
		}
		if seenTenant[t.ID] {
			return fmt.Errorf("tenant %s declared twice", t.ID)
		}
		seenTenant[t.ID] = true
		switch t.UnadmittedRuns {
		case "", "unlimited", "refuse":
		default:
			return fmt.Errorf("tenant %s unadmitted_runs must be \"unlimited\" or \"refuse\", not %q", t.ID, t.UnadmittedRuns)
		}
		seen := map[string]bool{"ops": true}
		for _, p := range append(slices.Clone(t.Agents), t.Operators...) {
			if err := kernel.ValidToken(p.ID); err != nil {
				return fmt.Errorf("tenant %s principal %q: %w", t.ID, p.ID, err)
			}
			if seen[p.ID] {
				return fmt.Errorf("tenant %s principal %s declared twice (or named \"ops\", which is reserved)", t.ID, p.ID)
			}
			seen[p.ID] = true
			if p.Password == "" && c.NATS.URL == "" {
				return fmt.Errorf("tenant %s principal %s needs a password for the embedded server", t.ID, p.ID)
			}
			for _, capID := range p.Capabilities {
				if caps[capID] == nil {
					return fmt.Errorf("tenant %s principal %s is granted unknown capability %s", t.ID, p.ID, capID)
				}
			}
		}
	}
	seenG := map[string]bool{}
	for _, g := range c.RawGuarantee {
		def := kernel.Definition{ID: g.ID, CapabilityIDs: g.CapabilityIDs, ResourcePointer: g.ResourcePointer,
			AmountPointer: g.AmountPointer, Limit: g.Limit, Unit: g.Unit, Mode: g.Mode, Window: g.Window, TimeZone: g.TimeZone, Duration: g.Duration}
		if r := def.Validate(); r != nil {
			return r
		}
		if seenG[g.ID] {
			return fmt.Errorf("guarantee %s declared twice", g.ID)
		}
		seenG[g.ID] = true
		for _, capID := range g.CapabilityIDs {
			if caps[capID] == nil {
				return fmt.Errorf("guarantee %s covers unknown capability %s", g.ID, capID)
			}
		}
		if def.Calendar() && def.TimeZone != "" {
			z, err := time.LoadLocation(def.TimeZone)
			if err != nil {
				return fmt.Errorf("guarantee %s time_zone: %w", g.ID, err)
			}
			if c.zones == nil {
				c.zones = map[string]*time.Location{}
			}
			c.zones[def.TimeZone] = z
		}
		c.Guarantees = append(c.Guarantees, def)
	}
	return c.validateMCP()
}

func (cp *CapabilityConfig) validate(dir string) error {
	if cp.Version == "" {
		cp.Version = "1"
	}
	switch cp.Risk {
	case "":
		cp.Risk = "low"
	case "low", "medium", "high":
	default:
		return fmt.Errorf("risk must be low, medium or high, not %q", cp.Risk)
	}
	if err := cp.validateControls(dir); err != nil {
		return err
	}
	if err := cp.validateMCPManifest(); err != nil {
		return err
	}
	if err := cp.Breaker.validate(); err != nil {
		return err
	}
	switch cp.Adapter {
	case "http":
		if cp.HTTP.URL == "" {
			return errors.New("http.url is required for the http adapter")
		}
		if cp.HTTP.Method == "" {
			cp.HTTP.Method = "POST"
		}
		if cp.HTTP.Timeout.Duration == 0 {
			cp.HTTP.Timeout.Duration = 5 * time.Second
		}
		if cp.HTTP.IdempotencyHeader == "" {
			cp.HTTP.IdempotencyHeader = "Idempotency-Key"
		}
	case "mcp": // validateMCPManifest
	case "noop":
		if cp.Effectful {
			return errors.New("an effectful capability cannot use the noop adapter")
		}
	default:
		return fmt.Errorf("adapter must be \"http\", \"mcp\" or \"noop\", not %q", cp.Adapter)
	}
	if cp.Effectful && cp.Adapter == "http" {
		r := cp.Recovery
		if r.Completion == "" {
			return errors.New("an effectful http capability must declare recovery.completion")
		}
		if _, err := kernel.ParsePointer(r.Completion); err != nil {
			return fmt.Errorf("recovery.completion: %w", err)
		}
		if len(r.Applied) == 0 || len(r.NotApplied) == 0 {
			return errors.New("recovery must list applied and not_applied states")
		}
		if r.QueryURL == "" {
			return errors.New("recovery.query_url is required to reconcile attempts")
		}
		for _, s := range r.NotAppliedStatuses {
			if s < 400 || s > 599 {
				return fmt.Errorf("recovery.not_applied_statuses: %d is not a 4xx/5xx status", s)
			}
		}
	}
	return nil
}

// Capability returns the manifest of a capability id.
func (c *Config) Capability(id string) (*CapabilityConfig, bool) {
	for i := range c.Capabilities {
		if c.Capabilities[i].ID == id {
			return &c.Capabilities[i], true
		}
	}
	return nil, false
}

// Tenant returns a tenant's configuration.
func (c *Config) Tenant(id string) (*TenantConfig, bool) {
	for i := range c.Tenants {
		if c.Tenants[i].ID == id {
			return &c.Tenants[i], true
		}
	}
	return nil, false
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

// GuaranteesFor returns the guarantees that cover a capability.
func (c *Config) GuaranteesFor(capabilityID string) []kernel.Definition {
	var out []kernel.Definition
	for _, g := range c.Guarantees {
		if g.Covers(capabilityID) {
			out = append(out, g)
		}
	}
	return out
}
