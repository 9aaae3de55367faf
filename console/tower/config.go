package tower

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/contextos/ledger/audit"
	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/kernel"
)

// Config is towerd's configuration file (docs/console.md).
type Config struct {
	// Listen is the web view's address; loopback only.
	Listen string `toml:"listen"`
	// MaxRowsPerTenant bounds the exposure and incident rows shown for one
	// tenant (default 50); the rest are counted.
	MaxRowsPerTenant int `toml:"max_rows_per_tenant"`
	// SessionIdle ends a web session nobody used for this long (default
	// 30m); no session outlives 12 hours.
	SessionIdle config.Duration `toml:"session_idle"`
	// MaxSessions bounds the web sessions logged into one tenant (default
	// 64); a login beyond it ends that tenant's least recently used login,
	// never another tenant's.
	MaxSessions int `toml:"max_sessions"`
	// StateDir keeps, per runtime and tenant, the newest checkpoint tower
	// verified (<state_dir>/<runtime>/<tenant>.checkpoint); a later read
	// must extend it or the log shows as forked or rewritten. Empty keeps
	// them in memory only, for the life of the process.
	StateDir string          `toml:"state_dir"`
	Runtimes []RuntimeConfig `toml:"runtimes"`
}

// RuntimeConfig is one runtime and the tenants' logs read from it.
type RuntimeConfig struct {
	Name string `toml:"name"`
	// NATSURL is the runtime's NATS: operators log in through it, and live
	// logs, approvals and the kill switch go through their connections.
	NATSURL string `toml:"nats_url"`
	// TLSCAFile (PEM) is the CA the NATS server's certificate is checked
	// against instead of the system roots; TLSCertFile and TLSKeyFile are
	// the client certificate, for a server that verifies clients.
	TLSCAFile   string `toml:"tls_ca_file"`
	TLSCertFile string `toml:"tls_cert_file"`
	TLSKeyFile  string `toml:"tls_key_file"`
	// WitnessKeys are the cosignature verifier keys (<name>+<hash>+<key>)
	// of the witnesses tower trusts for this runtime's logs, and Witnesses
	// how many of them must have cosigned a log's newest checkpoint for it
	// to show as verified: the witness policy of ctx audit-verify
	// --witness-key K --witnesses N. The keys the runtime serves never
	// stand in for them.
	WitnessKeys []string       `toml:"witness_keys"`
	Witnesses   int            `toml:"witnesses"`
	Tenants     []TenantSource `toml:"tenants"`

	tls       *tls.Config       // loaded from the files above by validate
	witnesses []*audit.Cosigner // parsed from WitnessKeys by validate
}

// TenantSource is one tenant's audit log on a runtime.
type TenantSource struct {
	ID string `toml:"id"`
	// Keys is the keys.json trusted for this log (obtained out of band).
	Keys string `toml:"keys"`
	// Entries is an exported entries.json; empty reads the log live from
	// the runtime, as an operator of the tenant.
	Entries string `toml:"entries"`
	// Operator and its password (from the environment variable
	// PasswordEnv) are what the command-line modes (towerd --once,
	// --engage, --release) read the live log and send the kill switch as.
	// The web page never uses them: it acts as the operator logged in.
	Operator    string `toml:"operator"`
	PasswordEnv string `toml:"password_env"`
}

// Live reports whether the log is read live from the runtime.
func (s TenantSource) Live() bool { return s.Entries == "" }

// LoadConfig reads and validates a configuration file; relative paths in
// it are taken from the file's directory.
func LoadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseConfig(b, filepath.Dir(path))
}

// ParseConfig decodes a configuration strictly (unknown keys are errors)
// and validates it; relative paths are joined to dir.
func ParseConfig(b []byte, dir string) (*Config, error) {
	var c Config
	md, err := toml.NewDecoder(bytes.NewReader(b)).Decode(&c)
	if err != nil {
		return nil, fmt.Errorf("tower config: %w", err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		return nil, fmt.Errorf("tower config: unknown keys: %s", strings.Join(keys, ", "))
	}
	if err := c.validate(dir); err != nil {
		return nil, fmt.Errorf("tower config: %w", err)
	}
	return &c, nil
}

// maxSources bounds the logs one tower reads.
const maxSources = 1024

func (c *Config) validate(dir string) error {
	if c.Listen != "" {
		host, _, err := net.SplitHostPort(c.Listen)
		if err != nil {
			return fmt.Errorf("listen: %w", err)
		}
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return fmt.Errorf("listen: loopback only, not %q", host)
		}
	}
	switch {
	case c.MaxRowsPerTenant == 0:
		c.MaxRowsPerTenant = 50
	case c.MaxRowsPerTenant < 0 || c.MaxRowsPerTenant > 10000:
		return errors.New("max_rows_per_tenant must be 1..10000")
	}
	switch {
	case c.MaxSessions == 0:
		c.MaxSessions = 64
	case c.MaxSessions < 0 || c.MaxSessions > 4096:
		return errors.New("max_sessions must be 1..4096")
	}
	if c.SessionIdle.Duration == 0 {
		c.SessionIdle.Duration = 30 * time.Minute
	}
	if c.StateDir != "" {
		c.StateDir = join(dir, c.StateDir)
	}
	if len(c.Runtimes) == 0 {
		return errors.New("at least one [[runtimes]] is required")
	}
	names, n := map[string]bool{}, 0
	for i := range c.Runtimes {
		r := &c.Runtimes[i]
		if err := kernel.ValidToken(r.Name); err != nil {
			return fmt.Errorf("runtimes[%d].name %q: %w", i, r.Name, err)
		}
		if names[r.Name] {
			return fmt.Errorf("runtime %s declared twice", r.Name)
		}
		names[r.Name] = true
		if r.TLSCAFile != "" || r.TLSCertFile != "" || r.TLSKeyFile != "" {
			if r.NATSURL == "" {
				return fmt.Errorf("runtime %s: tls_ca_file, tls_cert_file and tls_key_file need a nats_url", r.Name)
			}
			r.TLSCAFile, r.TLSCertFile, r.TLSKeyFile = joinSet(dir, r.TLSCAFile), joinSet(dir, r.TLSCertFile), joinSet(dir, r.TLSKeyFile)
			var err error
			if r.tls, err = config.LoadTLS(r.TLSCAFile, r.TLSCertFile, r.TLSKeyFile); err != nil {
				return fmt.Errorf("runtime %s: %w", r.Name, err)
			}
		}
		if r.Witnesses < 0 || r.Witnesses > len(r.WitnessKeys) {
			return fmt.Errorf("runtime %s: witnesses = %d needs at least that many witness_keys", r.Name, r.Witnesses)
		}
		if len(r.WitnessKeys) > 64 {
			return fmt.Errorf("runtime %s: more than 64 witness_keys", r.Name)
		}
		r.witnesses = nil
		for _, k := range r.WitnessKeys {
			w, err := audit.ParseCosignerKey(k)
			if err != nil {
				return fmt.Errorf("runtime %s: witness_keys: %w", r.Name, err)
			}
			r.witnesses = append(r.witnesses, w)
		}
		if len(r.Tenants) == 0 {
			return fmt.Errorf("runtime %s: at least one [[runtimes.tenants]] is required", r.Name)
		}
		seen := map[string]bool{}
		for j := range r.Tenants {
			t := &r.Tenants[j]
			n++
			if err := kernel.ValidToken(t.ID); err != nil {
				return fmt.Errorf("runtime %s tenant %q: %w", r.Name, t.ID, err)
			}
			if seen[t.ID] {
				return fmt.Errorf("runtime %s tenant %s declared twice", r.Name, t.ID)
			}
			seen[t.ID] = true
			if t.Keys == "" {
				return fmt.Errorf("runtime %s tenant %s: keys (the trusted keys.json) is required", r.Name, t.ID)
			}
			t.Keys = join(dir, t.Keys)
			if t.Entries != "" {
				t.Entries = join(dir, t.Entries)
			}
			if t.Operator != "" {
				if err := kernel.ValidToken(t.Operator); err != nil {
					return fmt.Errorf("runtime %s tenant %s operator %q: %w", r.Name, t.ID, t.Operator, err)
				}
				if r.NATSURL == "" {
					return fmt.Errorf("runtime %s: nats_url is required for tenant %s's operator", r.Name, t.ID)
				}
			}
			if t.Entries == "" && r.NATSURL == "" {
				return fmt.Errorf("runtime %s tenant %s: name entries (an exported log), or give the runtime a nats_url (the live log)", r.Name, t.ID)
			}
		}
	}
	if n > maxSources {
		return fmt.Errorf("more than %d tenant logs", maxSources)
	}
	return nil
}

func joinSet(dir, p string) string {
	if p == "" {
		return ""
	}
	return join(dir, p)
}

func join(dir, p string) string {
	if filepath.IsAbs(p) || dir == "" {
		return p
	}
	return filepath.Join(dir, p)
}
