package gateway

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // guarantees' time zones, whatever the host has

	"github.com/BurntSushi/toml"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
	"github.com/nats-io/nats.go"
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
	// NkeyFile is an nkey seed file: the runtime's own user as an nkey
	// (instead of user/password or creds).
	NkeyFile string `toml:"nkey_file"`
	// TLSCAFile (PEM) is the CA the servers' certificates are checked
	// against instead of the system roots; TLSCertFile and TLSKeyFile are
	// the runtime's client certificate, for servers that verify clients.
	// Both connections (runtime and replies) use them.
	TLSCAFile   string `toml:"tls_ca_file"`
	TLSCertFile string `toml:"tls_cert_file"`
	TLSKeyFile  string `toml:"tls_key_file"`
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
	// /readyz at http://<addr> (loopback only, unless MetricsAllowNonLoopback).
	MetricsListen string `toml:"metrics_listen"`
	// MetricsAllowNonLoopback lets MetricsListen be a non-loopback address (a
	// container's, for probes and scrapes from outside the pod): said
	// explicitly, since the metrics name tenants and guarantees.
	MetricsAllowNonLoopback bool `toml:"metrics_allow_non_loopback"`
	// Limits bound the daemon's memory and each tenant's share of it
	// (limits.go).
	Limits LimitsConfig `toml:"limits"`
	// ObservabilityConfig holds the logging, health and metrics keys
	// (telemetry_config.go).
	ObservabilityConfig
	// Witnesses cosign the audit checkpoints ([[runtime.witnesses]],
	// docs/audit.md).
	Witnesses []WitnessConfig `toml:"witnesses"`
	// WitnessPolicy says whether a runtime whose latest checkpoint lacks a
	// witness's cosignature keeps serving ("warn") or refuses proposals
	// ("require", the default once a witness is configured).
	WitnessPolicy string `toml:"witness_policy"`
	// AuditCheckpointEvery is how many uncovered audit records make a
	// checkpoint due (default projections.DefaultCheckpointEvery); it also
	// bounds the projector's atomic batches, which never cross a checkpoint.
	AuditCheckpointEvery int `toml:"audit_checkpoint_every"`
}

// TenantIDs returns the configured tenants' ids, in configuration order.
func (c *Config) TenantIDs() []string {
	ids := make([]string, len(c.Tenants))
	for i, t := range c.Tenants {
		ids[i] = t.ID
	}
	return ids
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
	Timeout Duration `toml:"timeout"`
	// IdempotencyHeader carries the attempt id (default "Idempotency-Key").
	IdempotencyHeader string `toml:"idempotency_header"`
	// FallbackURLs are other endpoints of the same provider, tried in
	// order only when a call provably never left (no connection could be
	// made to the previous one). A call that may have reached an endpoint
	// is never sent to another: its outcome is unknown until reconciled.
	FallbackURLs []string `toml:"fallback_urls"`
	// AllowHTTP permits plain http:// to a host that is not loopback.
	AllowHTTP bool `toml:"allow_http"`
	// CAFile (PEM) replaces the system roots for this provider's https
	// certificates; CertFile and KeyFile are a client certificate.
	CAFile   string `toml:"ca_file"`
	CertFile string `toml:"cert_file"`
	KeyFile  string `toml:"key_file"`
	// Headers are sent with every call; their values come from a file or
	// an environment variable, never from this file.
	Headers []HeaderConfig `toml:"headers"`

	// tls and headers are what Validate loaded from the files and the
	// environment (unexported: never part of a digest or a log).
	tls     *tls.Config
	headers http.Header
}

// HeaderConfig is a [[capabilities.http.headers]] entry: a header whose
// value is read at start from ValueFile (trailing newlines dropped) or the
// environment variable ValueEnv, after Prefix ("Bearer " for a token).
type HeaderConfig struct {
	Name      string `toml:"name"`
	Prefix    string `toml:"prefix"`
	ValueFile string `toml:"value_file"`
	ValueEnv  string `toml:"value_env"`
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
	// FallbackQueryURLs are other endpoints for queries, under the same
	// rule as http.fallback_urls.
	FallbackQueryURLs []string `toml:"fallback_query_urls"`
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
	// ResourceForm is "ascii-token", "nfc" or empty (any string).
	ResourceForm string `toml:"resource_form"`
	// Replaces names the guarantee this one replaces, whose exposure it
	// carries forward; that one may not be configured too.
	Replaces string `toml:"replaces"`
}

// Duration is a configuration duration, written as Go writes one ("90s",
// "5m"); it is never negative.
type Duration struct{ time.Duration }

// UnmarshalText parses a Go duration.
func (d *Duration) UnmarshalText(b []byte) error {
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
	var v Duration
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
	if err := c.prepare(dir); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// prepare fills in the defaults and compiles what the file names (policies,
// context packs, guarantee definitions); Validate then checks every value.
func (c *Config) prepare(dir string) error {
	if c.NATS.Sync == "" {
		c.NATS.Sync = "always"
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
	if err := c.Runtime.Limits.validate(); err != nil {
		return err
	}
	if !c.Runtime.ReconcileInterval.set && c.Runtime.ReconcileInterval.Duration == 0 {
		c.Runtime.ReconcileInterval.Duration = DefaultReconcileInterval
	}
	for i := range c.Capabilities {
		cp := &c.Capabilities[i]
		if cp.Version == "" {
			cp.Version = "1"
		}
		if cp.Risk == "" {
			cp.Risk = "low"
		}
		if cp.Adapter == "http" {
			if cp.HTTP.Method == "" {
				cp.HTTP.Method = http.MethodPost
			}
			if cp.HTTP.Timeout.Duration == 0 {
				cp.HTTP.Timeout.Duration = 5 * time.Second
			}
			if cp.HTTP.IdempotencyHeader == "" {
				cp.HTTP.IdempotencyHeader = "Idempotency-Key"
			}
		}
		if err := cp.validateControls(dir); err != nil {
			return fmt.Errorf("capability %s: %w", cp.ID, err)
		}
	}
	c.Guarantees = nil
	for _, g := range c.RawGuarantee {
		c.Guarantees = append(c.Guarantees, kernel.Definition{ID: g.ID, CapabilityIDs: g.CapabilityIDs, ResourcePointer: g.ResourcePointer,
			AmountPointer: g.AmountPointer, Limit: g.Limit, Unit: g.Unit, Mode: g.Mode, Window: g.Window, TimeZone: g.TimeZone, Duration: g.Duration,
			ResourceForm: kernel.ResourceForm(g.ResourceForm), Replaces: g.Replaces})
	}
	return nil
}

// Bounds of the values Validate accepts.
const (
	// MaxProposalBytesLimit is the largest runtime.max_proposal_bytes: the
	// largest payload a NATS server can be configured to carry.
	MaxProposalBytesLimit = 8 << 20
	// MaxWorkers is the largest runtime.workers.
	MaxWorkers = 1 << 16
	// MaxAuditCheckpointEvery is the largest runtime.audit_checkpoint_every:
	// records wait at most this long for a checkpoint by count (the
	// checkpoint interval still covers them within seconds).
	MaxAuditCheckpointEvery = 1 << 20
	// MaxReplicas is the largest nats.replicas JetStream accepts.
	MaxReplicas = 5
	// MaxProviderTimeout is the longest capabilities.http.timeout: an
	// attempt's reconcile grace is twice its timeout, and a hold must not
	// wait hours for a provider that is gone.
	MaxProviderTimeout = 5 * time.Minute
	// MinReconcileInterval and MaxReconcileInterval bound a nonzero
	// runtime.reconcile_interval: a reconciler that never sleeps would
	// spin, one that sleeps a day is off.
	MinReconcileInterval = 10 * time.Millisecond
	MaxReconcileInterval = 24 * time.Hour
)

// Validate checks every value of a configuration: LoadConfig calls it (so
// `contextosd --check-config` reports it) and daemon.Boot calls it again, so a
// configuration changed in code after loading is held to the same rules and
// what the check accepts is what boot accepts.
func (c *Config) Validate() error {
	if err := c.validate(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return nil
}

func (c *Config) validate() error {
	if err := c.NATS.validate(c.Runtime.KeyFile); err != nil {
		return err
	}
	if err := c.Runtime.validate(); err != nil {
		return err
	}
	if err := c.Runtime.ObservabilityConfig.validate(); err != nil {
		return err
	}
	if path := c.keyPath(); path != "" {
		// A key that is there must load (mode 0600, well formed); one that
		// is not is created at start.
		if _, err := os.Stat(path); err == nil {
			if _, err := codec.LoadPrivateKey(path); err != nil {
				return fmt.Errorf("runtime.key_file: %w", err)
			}
		}
	}
	if err := c.Console.validate(&c.NATS); err != nil {
		return err
	}
	if len(c.Tenants) == 0 {
		return errors.New("at least one [[tenants]] is required")
	}
	if err := c.Runtime.validateAudit(); err != nil {
		return err
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
		if err := cp.validate(); err != nil {
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
	for _, def := range c.Guarantees {
		if r := def.Validate(); r != nil {
			return r
		}
		if seenG[def.ID] {
			return fmt.Errorf("guarantee %s declared twice", def.ID)
		}
		seenG[def.ID] = true
		for _, capID := range def.CapabilityIDs {
			if caps[capID] == nil {
				return fmt.Errorf("guarantee %s covers unknown capability %s", def.ID, capID)
			}
		}
		if def.Calendar() && def.TimeZone != "" {
			z, err := time.LoadLocation(def.TimeZone)
			if err != nil {
				return fmt.Errorf("guarantee %s time_zone: %w", def.ID, err)
			}
			if c.zones == nil {
				c.zones = map[string]*time.Location{}
			}
			c.zones[def.TimeZone] = z
		}
	}
	// What can be checked without the stream: a guarantee is not configured
	// with the one it replaces. Boot checks the rest against the stream's
	// enforcement domain.
	var empty *kernel.Control
	if r := empty.CheckConfigured(c.Guarantees, func(string) bool { return true }); r != nil {
		return r
	}
	return c.validateMCP()
}

func (n *NATSConfig) validate(keyFile string) error {
	switch n.Sync {
	case "always", "relaxed":
	default:
		return fmt.Errorf("nats.sync must be \"always\" or \"relaxed\", not %q", n.Sync)
	}
	if n.Replicas < 1 || n.Replicas > MaxReplicas {
		return fmt.Errorf("nats.replicas must be 1..%d, not %d", MaxReplicas, n.Replicas)
	}
	if n.URL == "" {
		if n.DataDir == "" {
			return errors.New("nats.data_dir is required for the embedded server")
		}
		if _, _, err := n.EmbeddedListen(); err != nil {
			return err
		}
		if n.Replicas != 1 {
			return fmt.Errorf("nats.replicas = %d needs a JetStream cluster (nats.url); the embedded server is one node", n.Replicas)
		}
		if n.User != "" || n.Password != "" || n.Creds != "" || n.NkeyFile != "" || n.ReplyUser != "" || n.ReplyPassword != "" || n.ReplyCreds != "" {
			return errors.New("nats.user, password, creds, nkey_file, reply_user, reply_password and reply_creds are for an external deployment (nats.url); the embedded server makes its own")
		}
		if n.TLSCAFile != "" || n.TLSCertFile != "" || n.TLSKeyFile != "" {
			return errors.New("nats.tls_ca_file, tls_cert_file and tls_key_file are for an external deployment (nats.url); the embedded server listens on loopback")
		}
		return nil
	}
	if err := validNATSURLs(n.URL); err != nil {
		return err
	}
	if keyFile == "" && n.DataDir == "" {
		return errors.New("runtime.key_file (or nats.data_dir) is required with an external NATS (nats.url): the runtime's signing key must persist")
	}
	switch {
	case countSet(n.Creds, n.User, n.NkeyFile) > 1:
		return errors.New("nats.creds, nats.user and nats.nkey_file exclude each other")
	case (n.User == "") != (n.Password == ""):
		return errors.New("nats.user and nats.password go together")
	case n.ReplyCreds != "" && n.ReplyUser != "":
		return errors.New("nats.reply_creds and nats.reply_user exclude each other")
	case (n.ReplyUser == "") != (n.ReplyPassword == ""):
		return errors.New("nats.reply_user and nats.reply_password go together")
	}
	for _, f := range []struct{ key, path string }{{"creds", n.Creds}, {"reply_creds", n.ReplyCreds}} {
		if f.path != "" {
			if _, err := os.Stat(f.path); err != nil {
				return fmt.Errorf("nats.%s: %w", f.key, err)
			}
		}
	}
	if n.NkeyFile != "" {
		if _, err := nats.NkeyOptionFromSeed(n.NkeyFile); err != nil {
			return fmt.Errorf("nats.nkey_file: %w", err)
		}
	}
	if _, err := LoadTLS(n.TLSCAFile, n.TLSCertFile, n.TLSKeyFile); err != nil {
		return fmt.Errorf("nats.%w", err)
	}
	return nil
}

func countSet(v ...string) int {
	n := 0
	for _, s := range v {
		if s != "" {
			n++
		}
	}
	return n
}

// LoadTLS reads a CA bundle and a client certificate into the TLS
// configuration of a client (NATS or HTTP); nil when none is configured.
// Errors name the key ("tls_ca_file: ...") for the caller's prefix.
func LoadTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	if caFile == "" && certFile == "" && keyFile == "" {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		b, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("tls_ca_file: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("tls_ca_file %s: no PEM certificate in it", caFile)
		}
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("tls_cert_file and tls_key_file go together")
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("tls_cert_file: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// validNATSURLs checks nats.url: one URL or a comma-separated list (the seed
// servers of a cluster), each nats://, tls://, ws:// or wss:// with a host.
func validNATSURLs(s string) error {
	for _, one := range strings.Split(s, ",") {
		u, err := url.Parse(strings.TrimSpace(one))
		if err != nil {
			return fmt.Errorf("nats.url: %w", err)
		}
		switch u.Scheme {
		case "nats", "tls", "ws", "wss":
		default:
			return fmt.Errorf("nats.url %q: the scheme must be nats, tls, ws or wss", one)
		}
		if u.Hostname() == "" {
			return fmt.Errorf("nats.url %q: a host is required", one)
		}
	}
	return nil
}

func (r *RuntimeConfig) validate() error {
	if r.MaxProposalBytes < 1 || r.MaxProposalBytes > MaxProposalBytesLimit {
		return fmt.Errorf("runtime.max_proposal_bytes must be 1..%d, not %d", MaxProposalBytesLimit, r.MaxProposalBytes)
	}
	if r.Workers < 1 || r.Workers > MaxWorkers {
		return fmt.Errorf("runtime.workers must be 1..%d, not %d", MaxWorkers, r.Workers)
	}
	if r.AuditCheckpointEvery < 0 || r.AuditCheckpointEvery > MaxAuditCheckpointEvery {
		return fmt.Errorf("runtime.audit_checkpoint_every must be 1..%d (0: the default), not %d", MaxAuditCheckpointEvery, r.AuditCheckpointEvery)
	}
	if d := r.ReconcileInterval.Duration; d != 0 && (d < MinReconcileInterval || d > MaxReconcileInterval) {
		return fmt.Errorf("runtime.reconcile_interval must be 0 (off) or %s..%s, not %s", MinReconcileInterval, MaxReconcileInterval, d)
	}
	if r.MetricsListen != "" {
		if err := listenAddress(r.MetricsListen, !r.MetricsAllowNonLoopback); err != nil {
			return fmt.Errorf("runtime.metrics_listen: %w (runtime.metrics_allow_non_loopback = true allows any address)", err)
		}
	} else if r.MetricsAllowNonLoopback {
		return errors.New("runtime.metrics_allow_non_loopback needs runtime.metrics_listen")
	}
	return nil
}

func (cp *CapabilityConfig) validate() error {
	switch cp.Risk {
	case "low", "medium", "high":
	default:
		return fmt.Errorf("risk must be low, medium or high, not %q", cp.Risk)
	}
	if err := cp.validateMCPManifest(); err != nil {
		return err
	}
	if err := cp.Breaker.validate(); err != nil {
		return err
	}
	switch cp.Adapter {
	case "http":
		if err := cp.HTTP.validate(); err != nil {
			return err
		}
	case "mcp": // validateMCPManifest
	case "noop":
		if cp.Effectful {
			return errors.New("an effectful capability cannot use the noop adapter")
		}
	default:
		return fmt.Errorf("adapter must be \"http\", \"mcp\" or \"noop\", not %q", cp.Adapter)
	}
	r := cp.Recovery
	if cp.Effectful && cp.Adapter == "http" {
		if r.Completion == "" {
			return errors.New("an effectful http capability must declare recovery.completion")
		}
		if len(r.Applied) == 0 || len(r.NotApplied) == 0 {
			return errors.New("recovery must list applied and not_applied states")
		}
		if r.QueryURL == "" {
			return errors.New("recovery.query_url is required to reconcile attempts")
		}
	}
	if r.Completion != "" {
		if _, err := kernel.ParsePointer(r.Completion); err != nil {
			return fmt.Errorf("recovery.completion: %w", err)
		}
	}
	if r.QueryURL != "" {
		if !strings.Contains(r.QueryURL, "{idempotency_key}") {
			return errors.New("recovery.query_url must contain {idempotency_key}: a query must name the attempt it asks about")
		}
		if err := cp.HTTP.validURL(strings.ReplaceAll(r.QueryURL, "{idempotency_key}", "k")); err != nil {
			return fmt.Errorf("recovery.query_url: %w", err)
		}
	}
	for _, u := range r.FallbackQueryURLs {
		if r.QueryURL == "" || !strings.Contains(u, "{idempotency_key}") {
			return errors.New("recovery.fallback_query_urls: each must contain {idempotency_key}, beside a query_url")
		}
		if err := cp.HTTP.validURL(strings.ReplaceAll(u, "{idempotency_key}", "k")); err != nil {
			return fmt.Errorf("recovery.fallback_query_urls: %w", err)
		}
	}
	for _, s := range r.NotAppliedStatuses {
		if s < 400 || s > 599 {
			return fmt.Errorf("recovery.not_applied_statuses: %d is not a 4xx/5xx status", s)
		}
	}
	return nil
}

// providerMethods are the methods a provider may be called with.
var providerMethods = []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodGet}

// reservedHeaders are set by the transport or the adapter itself.
var reservedHeaders = []string{"Content-Type", "Content-Length", "Host", "Transfer-Encoding", "Connection", "Traceparent", "Tracestate"}

func (h *HTTPConfig) validate() error {
	if h.URL == "" {
		return errors.New("http.url is required for the http adapter")
	}
	if err := h.validURL(h.URL); err != nil {
		return fmt.Errorf("http.url: %w", err)
	}
	if !slices.Contains(providerMethods, h.Method) {
		return fmt.Errorf("http.method must be one of %s, not %q", strings.Join(providerMethods, ", "), h.Method)
	}
	if d := h.Timeout.Duration; d < time.Millisecond || d > MaxProviderTimeout {
		return fmt.Errorf("http.timeout must be 1ms..%s, not %s", MaxProviderTimeout, d)
	}
	if err := validHeaderName(h.IdempotencyHeader); err != nil {
		return fmt.Errorf("http.idempotency_header: %w", err)
	}
	for _, u := range h.FallbackURLs {
		if err := h.validURL(u); err != nil {
			return fmt.Errorf("http.fallback_urls: %w", err)
		}
	}
	c, err := LoadTLS(h.CAFile, h.CertFile, h.KeyFile)
	if err != nil {
		return fmt.Errorf("http.%s", strings.NewReplacer("tls_ca_file", "ca_file", "tls_cert_file", "cert_file", "tls_key_file", "key_file").Replace(err.Error()))
	}
	h.tls = c
	h.headers = http.Header{}
	for _, hc := range h.Headers {
		if err := validHeaderName(hc.Name); err != nil {
			return fmt.Errorf("http.headers: %w", err)
		}
		if strings.EqualFold(hc.Name, h.IdempotencyHeader) || h.headers.Get(hc.Name) != "" {
			return fmt.Errorf("http.headers: %s is set twice", hc.Name)
		}
		v, err := hc.value()
		if err != nil {
			return fmt.Errorf("http.headers %s: %w", hc.Name, err)
		}
		h.headers.Set(hc.Name, v)
	}
	return nil
}

// value reads a header's value from its file or environment variable.
func (hc HeaderConfig) value() (string, error) {
	var v string
	switch {
	case (hc.ValueFile == "") == (hc.ValueEnv == ""):
		return "", errors.New("exactly one of value_file and value_env is required (a value is never written in the configuration)")
	case hc.ValueFile != "":
		b, err := os.ReadFile(hc.ValueFile)
		if err != nil {
			return "", err
		}
		v = strings.TrimRight(string(b), "\r\n")
	default:
		var ok bool
		if v, ok = os.LookupEnv(hc.ValueEnv); !ok {
			return "", fmt.Errorf("environment variable %s is not set", hc.ValueEnv)
		}
	}
	v = hc.Prefix + v
	if v == "" || strings.ContainsAny(v, "\r\n\x00") {
		return "", errors.New("the value is empty or holds a line break")
	}
	return v, nil
}

// validURL checks a provider URL: http or https with a host, and plain
// http only to a loopback host.
func (h *HTTPConfig) validURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return err
	}
	if u.Hostname() == "" {
		return fmt.Errorf("%q: a host is required", s)
	}
	if u.User != nil {
		return fmt.Errorf("%q: credentials in the URL are refused (they would be logged and recorded)", s)
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !isLoopbackHost(u.Hostname()) && !h.AllowHTTP {
			return fmt.Errorf("%q: plain http only to a loopback host; use https (or say http.allow_http = true)", s)
		}
	default:
		return fmt.Errorf("%q: the scheme must be http or https", s)
	}
	return nil
}

// isZero reports whether no [capabilities.http] key was given.
func (h *HTTPConfig) isZero() bool { return reflect.ValueOf(*h).IsZero() }

// validHeaderName checks an HTTP field name (an RFC 9110 token) that the
// adapter may set.
func validHeaderName(s string) error {
	if s == "" {
		return errors.New("a header name is required")
	}
	for i := 0; i < len(s); i++ {
		if !isTokenChar(s[i]) {
			return fmt.Errorf("%q is not a valid header name", s)
		}
	}
	for _, r := range reservedHeaders {
		if strings.EqualFold(s, r) {
			return fmt.Errorf("%s is set by the transport, not by configuration", r)
		}
	}
	return nil
}

func isTokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// EmbeddedListen is the embedded server's host and port (-1: a random port).
func (n NATSConfig) EmbeddedListen() (string, int, error) {
	s := n.Listen
	if s == "" {
		return "127.0.0.1", 4222, nil
	}
	if err := loopbackAddr(s); err != nil {
		return "", 0, fmt.Errorf("nats.listen: the embedded server listens on loopback only: %w", err)
	}
	host, p, _ := net.SplitHostPort(s)
	port, _ := strconv.Atoi(p)
	if port == 0 {
		port = -1
	}
	return host, port, nil
}

// loopbackAddr checks a host:port listen address on a loopback host.
func loopbackAddr(s string) error { return listenAddress(s, true) }

// listenAddress checks a host:port listen address, on a loopback host if
// loopbackOnly.
func listenAddress(s string, loopbackOnly bool) error {
	host, p, err := net.SplitHostPort(s)
	if err != nil {
		return err
	}
	if port, err := strconv.Atoi(p); err != nil || port < 0 || port > 65535 {
		return fmt.Errorf("%q: the port must be 0..65535", s)
	}
	if loopbackOnly && !isLoopbackHost(host) {
		return fmt.Errorf("loopback only, not %q", host)
	}
	return nil
}

// keyPath is where the runtime key is read (or created): runtime.key_file,
// else <data_dir>/runtime.key; empty when neither is set.
func (c *Config) keyPath() string {
	if c.Runtime.KeyFile != "" {
		return c.Runtime.KeyFile
	}
	if c.NATS.DataDir != "" {
		return filepath.Join(c.NATS.DataDir, "runtime.key")
	}
	return ""
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

// amountPointers are the amount pointers of the guarantees that cover a
// capability (kernel.DecodeArguments refuses an inexact number there as an
// invalid amount).
func (c *Config) amountPointers(capabilityID string) []kernel.Pointer {
	var out []kernel.Pointer
	for _, g := range c.GuaranteesFor(capabilityID) {
		if p, err := kernel.ParsePointer(g.AmountPointer); err == nil {
			out = append(out, p)
		}
	}
	return out
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
