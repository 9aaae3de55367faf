package config

import (
	"errors"
	"fmt"
	"net"
	"time"
)

const defaultSessionIdle = 30 * time.Minute

// ConsoleConfig is the [console] section: the operator web console (package
// console), off unless Listen is set. The console is an operator client of
// the ops verbs: it keeps no rule and no user store of its own.
type ConsoleConfig struct {
	// Listen is the console's HTTP address (host:port, port 0 = random);
	// empty leaves it off. Loopback only unless AllowNonLoopback.
	Listen string `toml:"listen"`
	// AllowNonLoopback lets Listen name a non-loopback address, for a
	// console behind a TLS-terminating proxy: its session cookies are then
	// marked Secure.
	AllowNonLoopback bool `toml:"allow_non_loopback"`
	// SessionIdle ends a session nobody used for this long (default 30m).
	SessionIdle Duration `toml:"session_idle"`
	// MaxSessions bounds the sessions (each one NATS connection) of one
	// tenant kept at once (default 64); a login beyond it ends that
	// tenant's least recently used session, never another tenant's.
	MaxSessions int `toml:"max_sessions"`
	// NATSTLSCertFile and NATSTLSKeyFile are the client certificate of the
	// operators' NATS connections, for an external server that verifies
	// clients; the server's certificate is checked against nats.tls_ca_file.
	NATSTLSCertFile string `toml:"nats_tls_cert_file"`
	NATSTLSKeyFile  string `toml:"nats_tls_key_file"`
}

// validate checks the address and the certificate, and fills the
// defaults.
func (c *ConsoleConfig) validate(n *NATSConfig) error {
	if c.Listen == "" {
		return nil
	}
	if c.NATSTLSCertFile != "" || c.NATSTLSKeyFile != "" {
		if n.URL == "" {
			return errors.New("console.nats_tls_cert_file and nats_tls_key_file are for an external deployment (nats.url); the embedded server listens on loopback")
		}
		if _, err := LoadTLS("", c.NATSTLSCertFile, c.NATSTLSKeyFile); err != nil {
			return fmt.Errorf("console.nats_%w", err)
		}
	}
	host, _, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return fmt.Errorf("console.listen: %w", err)
	}
	if ip := net.ParseIP(host); !c.AllowNonLoopback && host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("console.listen: loopback only, not %q (set console.allow_non_loopback behind a TLS proxy)", host)
	}
	if c.SessionIdle.Duration == 0 {
		c.SessionIdle.Duration = defaultSessionIdle
	}
	switch {
	case c.MaxSessions == 0:
		c.MaxSessions = 64
	case c.MaxSessions < 0 || c.MaxSessions > 4096:
		return errors.New("console.max_sessions must be 1..4096")
	}
	return nil
}
