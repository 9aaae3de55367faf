package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	_ "time/tzdata" // guarantees' time zones, whatever the host has

	"github.com/BurntSushi/toml"
	"github.com/contextos/ledger/events/codec"
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
	// Digest is the hex SHA-256 of the configuration's bytes as loaded:
	// every decision record names the configuration it was decided under.
	Digest string `toml:"-"`
	zones  map[string]*time.Location
}

// Zone is a calendar window's time zone ("" is UTC), loaded when the
// configuration was validated.
func (c *Config) Zone(name string) *time.Location {
	if z, ok := c.zones[name]; ok {
		return z
	}
	return time.UTC
}

// TenantIDs returns the configured tenants' ids, in configuration order.
func (c *Config) TenantIDs() []string {
	ids := make([]string, len(c.Tenants))
	for i, t := range c.Tenants {
		ids[i] = t.ID
	}
	return ids
}

// Load reads and validates a configuration file.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parse(b, filepath.Dir(path))
}

// Parse decodes a configuration strictly: unknown keys are errors,
// and every section is validated. Relative file paths in it (context
// packs) are taken from the working directory.
func Parse(b []byte) (*Config, error) { return parse(b, "") }

func parse(b []byte, dir string) (*Config, error) {
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
	sum := sha256.Sum256(b)
	c.Digest = hex.EncodeToString(sum[:])
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
	c.NATS.Ownership = c.NATS.Ownership.WithDefaults()
	if c.Runtime.MaxProposalBytes == 0 {
		c.Runtime.MaxProposalBytes = 64 << 10
	}
	if c.Runtime.Workers == 0 {
		c.Runtime.Workers = 256
	}
	if err := c.Runtime.Limits.Validate(); err != nil {
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
	// MinReconcileInterval and MaxReconcileInterval bound a nonzero
	// runtime.reconcile_interval: a reconciler that never sleeps would
	// spin, one that sleeps a day is off.
	MinReconcileInterval = 10 * time.Millisecond
	MaxReconcileInterval = 24 * time.Hour
)

// Validate checks every value of a configuration: Load calls it (so
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
	if path := c.KeyPath(); path != "" {
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
		if err := t.validateOperators(); err != nil {
			return err
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
			if p.Password != "" {
				if err := checkPassword(fmt.Sprintf("tenant %s principal %s password", t.ID, p.ID), p.Password, true); err != nil {
					return err
				}
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

// keyPath is where the runtime key is read (or created): runtime.key_file,
// else <data_dir>/runtime.key; empty when neither is set.
func (c *Config) KeyPath() string {
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

// amountPointers are the amount pointers of the guarantees that cover a
// capability (kernel.DecodeArguments refuses an inexact number there as an
// invalid amount).
func (c *Config) AmountPointers(capabilityID string) []kernel.Pointer {
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
