package events

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// EmbeddedConfig configures StartEmbedded.
type EmbeddedConfig struct {
	// DataDir holds the server's state: JetStream stores under
	// DataDir/nats/jetstream. Required.
	DataDir string
	// Host to listen on; default "127.0.0.1" (loopback only).
	Host string
	// Port to listen on: 0 means 4222, -1 a random free port.
	Port int
	// DontListen starts no listener at all: only InProcessConn reaches the server.
	DontListen bool
	// SyncAlways makes the server fsync every write before acknowledging it
	// (nats-server's jetstream sync_interval: always, Options.SyncAlways). nil
	// means true: the default never loses an acknowledged event, even on a
	// power loss. false leaves flushing to the OS and the server's periodic
	// sync (2 minutes): an acknowledged event then survives a process crash
	// but not a machine crash. See docs/storage.md for the measured cost.
	SyncAlways *bool
	// ServerName names the server (default "contextosd").
	ServerName string
	// ReadyTimeout bounds the wait for the server to accept connections
	// (default 10s).
	ReadyTimeout time.Duration
	// Configure, if set, edits the server options last (users, permissions,
	// TLS, logging, limits...).
	Configure func(*server.Options)
	// Logging enables the server's log on stderr.
	Logging bool
}

// Embedded is a nats-server with JetStream running in this process.
type Embedded struct {
	srv        *server.Server
	dontListen bool
}

// StartEmbedded starts an embedded nats-server with JetStream and file storage
// under cfg.DataDir and waits until it accepts connections. Signal handling is
// off (NoSigs): the daemon owns signals and calls Shutdown.
func StartEmbedded(cfg EmbeddedConfig) (*Embedded, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("events: StartEmbedded: DataDir is required")
	}
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if cfg.ServerName == "" {
		cfg.ServerName = "contextosd"
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = 10 * time.Second
	}
	syncAlways := cfg.SyncAlways == nil || *cfg.SyncAlways
	opts := &server.Options{
		ServerName: cfg.ServerName,
		Host:       cfg.Host,
		Port:       cfg.Port,
		DontListen: cfg.DontListen,
		NoSigs:     true,
		NoLog:      !cfg.Logging,
		JetStream:  true,
		StoreDir:   filepath.Join(cfg.DataDir, "nats"),
		SyncAlways: syncAlways,
	}
	if cfg.Configure != nil {
		cfg.Configure(opts)
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("events: StartEmbedded: %w", err)
	}
	if cfg.Logging {
		srv.ConfigureLogger()
	}
	srv.Start()
	if !srv.ReadyForConnections(cfg.ReadyTimeout) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, errors.New("events: StartEmbedded: server not ready in time")
	}
	if !srv.JetStreamEnabled() {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, errors.New("events: StartEmbedded: JetStream did not start")
	}
	return &Embedded{srv: srv, dontListen: opts.DontListen}, nil
}

// Server returns the underlying server.
func (e *Embedded) Server() *server.Server { return e.srv }

// ClientURL returns the URL clients connect to ("" with DontListen).
func (e *Embedded) ClientURL() string {
	if e.dontListen {
		return ""
	}
	return e.srv.ClientURL()
}

// InProcessConn connects to the server without a socket.
func (e *Embedded) InProcessConn(opts ...nats.Option) (*nats.Conn, error) {
	return nats.Connect("", append([]nats.Option{nats.InProcessServer(e.srv)}, opts...)...)
}

// Shutdown stops the server, flushing and closing its stores, and waits for
// it to finish.
func (e *Embedded) Shutdown() {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
}

// Connect connects to an external NATS deployment (or an Embedded's
// ClientURL); the store works the same over it.
func Connect(url string, opts ...nats.Option) (*nats.Conn, error) {
	return nats.Connect(url, opts...)
}
