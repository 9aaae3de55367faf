package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

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
	// Ownership divides the tenants among the replicas of one deployment
	// (docs/replicas.md); off unless enabled, and only with nats.url.
	Ownership OwnershipConfig `toml:"ownership"`
}

// OwnershipConfig is [nats.ownership]: tenants hashed into Partitions, each
// owned by one live replica through keys of a JetStream KV bucket that
// expire after TTL unless renewed every Heartbeat. A replica's loss hands
// its partitions over within TTL plus one Heartbeat.
type OwnershipConfig struct {
	Enabled    bool     `toml:"enabled"`
	Partitions int      `toml:"partitions"`
	TTL        Duration `toml:"ttl"`
	Heartbeat  Duration `toml:"heartbeat"`
}

// The ownership defaults: a hand-over within four seconds.
const (
	DefaultOwnershipPartitions = 32
	DefaultOwnershipTTL        = 3 * time.Second
	DefaultOwnershipHeartbeat  = time.Second
	MaxOwnershipPartitions     = 1024
)

// WithDefaults is o with its unset values at their defaults.
func (o OwnershipConfig) WithDefaults() OwnershipConfig {
	if o.Partitions == 0 {
		o.Partitions = DefaultOwnershipPartitions
	}
	if o.TTL.Duration == 0 {
		o.TTL.Duration = DefaultOwnershipTTL
	}
	if o.Heartbeat.Duration == 0 {
		o.Heartbeat.Duration = DefaultOwnershipHeartbeat
	}
	return o
}

func (o OwnershipConfig) validate(external bool) error {
	if !o.Enabled {
		return nil
	}
	switch {
	case !external:
		return errors.New("nats.ownership is for replicas on an external deployment (nats.url); the embedded server has one replica")
	case o.Partitions < 1 || o.Partitions > MaxOwnershipPartitions:
		return fmt.Errorf("nats.ownership.partitions must be 1..%d, not %d", MaxOwnershipPartitions, o.Partitions)
	case o.Heartbeat.Duration < 100*time.Millisecond:
		return fmt.Errorf("nats.ownership.heartbeat must be at least 100ms, not %s", o.Heartbeat.Duration)
	case o.TTL.Duration < 2*o.Heartbeat.Duration:
		return fmt.Errorf("nats.ownership.ttl (%s) must be at least twice the heartbeat (%s): one late heartbeat must not hand a live replica's partitions over", o.TTL.Duration, o.Heartbeat.Duration)
	}
	return nil
}

func (n *NATSConfig) validate(keyFile string) error {
	if err := n.Ownership.WithDefaults().validate(n.URL != ""); err != nil {
		return err
	}
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
	for _, p := range []struct{ key, pw string }{{"nats.password", n.Password}, {"nats.reply_password", n.ReplyPassword}} {
		if p.pw != "" {
			if err := checkPassword(p.key, p.pw, false); err != nil {
				return err
			}
		}
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
