package daemon

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"

	"github.com/contextos/ledger/aggregates"
	"github.com/contextos/ledger/aggregates/jetsnap"
	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/gateway"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/projections"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
)

// Runtime is a running contextosd: the embedded server (unless an external
// URL is configured), the runtime's connection, the store and the gateway.
type Runtime struct {
	Config   *config.Config
	Embedded *events.Embedded
	NC       *nats.Conn
	// Replies is the connection replies are published through (gateway.ReplyUser
	// or nats.reply_user); nil when an external deployment names none.
	Replies *nats.Conn
	Store   *events.JetStore
	Gateway *gateway.Gateway
	Service *projections.Service
	// MetricsURL is where the Prometheus endpoint listens, if configured.
	MetricsURL string
	metrics    *http.Server
	Signer     codec.Signer
	URL        string
	cancel     context.CancelFunc
	// lock is the embedded server's data_dir lock, held until Close.
	lock *os.File

	// MCPURL is the MCP gateway's endpoint, if [mcp] listen is configured.
	MCPURL  string
	stopMCP func() error
	// ConsoleURL is the operator console's, if [console] listen is configured.
	ConsoleURL  string
	stopConsole func() error

	// Telemetry and health endpoints (telemetry.go).
	registry      *prometheus.Registry
	log           *slog.Logger
	js            jetstream.JetStream
	tracing       bool
	traceShutdown func(context.Context) error
}

// BootOptions are the parts of a runtime a test or the chaos harness may
// replace.
type BootOptions struct {
	Logger   *slog.Logger
	Hooks    gateway.Hooks
	Adapters map[string]gateway.Adapter
	Clock    aggregates.Clock
	// TracerProvider, when set, receives the runtime's spans instead of
	// the OTLP exporter the OTEL_* variables describe (tests).
	TracerProvider trace.TracerProvider
}

// Boot starts a runtime from a validated configuration.
func Boot(cfg *config.Config, o BootOptions) (*Runtime, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if o.Clock == nil {
		o.Clock = aggregates.SystemClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	rt := &Runtime{Config: cfg}
	ctx, cancel := context.WithCancel(context.Background())
	rt.cancel = cancel
	ok := false
	defer func() {
		if !ok {
			rt.Close()
		}
	}()
	var opts []nats.Option
	// The server refuses a publish or subscription the user may not make
	// asynchronously; without a handler nats.go drops the error.
	logAsync := nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
		if sub != nil {
			o.Logger.Error("nats error", "subject", sub.Subject, "err", err)
			return
		}
		o.Logger.Error("nats error", "err", err)
	})
	opts = append(opts, nats.Name("contextosd"), nats.MaxReconnects(-1), logAsync)
	replyOpts := []nats.Option{nats.Name("contextosd-replies"), nats.MaxReconnects(-1), logAsync}
	if cfg.NATS.URL == "" {
		pw := make([]byte, 24)
		if _, err := rand.Read(pw); err != nil {
			return nil, err
		}
		password := hex.EncodeToString(pw)
		host, port, err := cfg.NATS.EmbeddedListen()
		if err != nil {
			return nil, err
		}
		if rt.lock, err = lockDataDir(cfg.NATS.DataDir); err != nil {
			return nil, err
		}
		if err := addrFree(host, port); err != nil {
			return nil, fmt.Errorf("nats.listen: %w", err)
		}
		sync := cfg.NATS.Sync != "relaxed"
		emb, err := events.StartEmbedded(events.EmbeddedConfig{DataDir: cfg.NATS.DataDir, Host: host, Port: port, SyncAlways: &sync,
			Configure: func(so *server.Options) { so.Users = gateway.ServerUsers(cfg, password) }})
		if err != nil {
			return nil, err
		}
		rt.Embedded, rt.URL = emb, emb.ClientURL()
		opts = append(opts, nats.UserInfo(gateway.RuntimeUser, password))
		replyOpts = append(replyOpts, nats.UserInfo(gateway.ReplyUser, password))
	} else {
		rt.URL = cfg.NATS.URL
		user, err := runtimeUser(cfg)
		if err != nil {
			return nil, err
		}
		opts = append(append(opts, user...), tlsOptions(cfg)...)
		replyOpts = append(replyOpts, tlsOptions(cfg)...)
		switch {
		case cfg.NATS.ReplyCreds != "":
			replyOpts = append(replyOpts, nats.UserCredentials(cfg.NATS.ReplyCreds))
		case cfg.NATS.ReplyUser != "":
			replyOpts = append(replyOpts, nats.UserInfo(cfg.NATS.ReplyUser, cfg.NATS.ReplyPassword))
		default:
			replyOpts = nil
			o.Logger.Warn("no nats.reply_user: replies go through the runtime's own connection, guarded by the reply-subject check alone")
		}
	}
	nc, err := events.Connect(rt.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", rt.URL, err)
	}
	rt.NC = nc
	if replyOpts != nil {
		if rt.Replies, err = events.Connect(rt.URL, replyOpts...); err != nil {
			return nil, fmt.Errorf("connect %s for replies: %w", rt.URL, err)
		}
	}
	if cfg.NATS.URL != "" {
		// The reply user may subscribe to nothing, so it cannot ask; a
		// reply it may not publish is logged by logAsync.
		pub, sub := gateway.RuntimePublish, gateway.RuntimeSubscribe
		if cfg.NATS.Ownership.Enabled {
			pub, sub = append(slices.Clone(pub), gateway.OwnershipPublish...), append(slices.Clone(sub), gateway.OwnershipSubscribe...)
		}
		if err := gateway.CheckPermissions(nc, "nats.user", pub, sub); err != nil {
			return nil, err
		}
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	if _, err := events.EnsureStream(ctx, js, events.StreamOptions{Replicas: cfg.NATS.Replicas}); err != nil {
		return nil, err
	}
	rt.Store = events.NewJetStore(js, events.StreamName)
	var retired []ed25519.PublicKey
	if rt.Signer, retired, err = bootKey(ctx, cfg, js); err != nil {
		return nil, err
	}
	witnesses, witnessKeys, err := auditWitnesses(cfg)
	if err != nil {
		return nil, err
	}
	executor := cfg.Runtime.Executor
	if executor == "" {
		h, _ := os.Hostname()
		executor = h + "-" + strconv.Itoa(os.Getpid())
	}
	sealer := &aggregates.Sealer{Signer: rt.Signer, Clock: o.Clock, IDs: aggregates.NewIDs(o.Clock, nil)}
	snaps, err := jetsnap.Ensure(ctx, js, cfg.NATS.Replicas) // cold loads of resource ledgers start from a snapshot
	if err != nil {
		return nil, err
	}
	// One read model, from its snapshot, for the operator verbs, the
	// reconciler, the exposure export and the metrics.
	model := projections.NewModel(projections.ModelConfig{Store: rt.Store, Snapshots: snaps, Signer: rt.Signer,
		Limits: modelLimits(cfg.Runtime.Limits), Logf: func(format string, args ...any) { o.Logger.Info(fmt.Sprintf(format, args...)) }})
	rt.Gateway = gateway.New(gateway.Options{Config: cfg, Store: rt.Store, Sealer: sealer, Executor: executor, Logger: o.Logger, Hooks: o.Hooks, Adapters: o.Adapters,
		Replies: rt.Replies, Model: model})
	rt.Gateway.Engine().Snapshots = snaps
	if err := rt.startTelemetry(ctx, o); err != nil {
		return nil, err
	}
	if rt.Embedded != nil {
		watchAuthFailures(rt.Embedded, rt.Gateway)
	}
	if err := rt.Gateway.StartBreakers(ctx, nc); err != nil {
		return nil, err
	}
	// The projections: one signed audit chain per tenant, the exposure view
	// and the operator verbs that export them (the only way a client reaches
	// them: nobody but the runtime touches JetStream).
	tenants := cfg.TenantIDs()
	// Proposals read the witnesses' answers (kernel.CheckLogIntegrity); the
	// gateway counts, logs and records them. Nothing reads the view before
	// the service is assigned: the gateway and /metrics start after it.
	rt.Gateway.WatchWitnesses(func(t string) (kernel.Witnessing, string) { return rt.Service.Witnessing(t) })
	rt.Service, err = projections.StartService(ctx, projections.ServiceConfig{NC: nc, JS: js, Store: rt.Store, Signer: rt.Signer,
		RetiredKeys: retired, Witnesses: witnesses, WitnessKeys: witnessKeys, OnWitness: rt.Gateway.WitnessAnswered,
		Tenants: tenants, AuditStream: projections.AuditStreamOptions{Replicas: cfg.NATS.Replicas}, Model: model,
		CheckpointEvery: cfg.Runtime.AuditCheckpointEvery,
		Active:          rt.Gateway.Serves,
		Logf:            func(format string, args ...any) { o.Logger.Info(fmt.Sprintf(format, args...)) }})
	if err != nil {
		return nil, err
	}
	for _, v := range projections.Verbs {
		rt.Gateway.Mount(v, gateway.OpHandler(rt.Service.Ops.Handler(v)))
	}
	rt.js = js
	rt.Gateway.WatchState(rt.Service, rt.Store.LastStreamSeq)
	if cfg.Runtime.MetricsListen != "" {
		if err := rt.serveMetrics(cfg.Runtime.MetricsListen); err != nil {
			return nil, err
		}
	}
	// The store's space is known before the first proposal is taken.
	rt.measureSpace(ctx)
	go rt.watchSpace(ctx)
	if err := rt.Gateway.Start(ctx, nc); err != nil {
		return nil, err
	}
	if err := rt.startMCP(o.Logger); err != nil {
		return nil, err
	}
	if err := rt.startConsole(); err != nil {
		return nil, err
	}
	ok = true
	rt.logStartup()
	return rt, nil
}

// Close stops serving and shuts the embedded server down.
func (rt *Runtime) Close() {
	if rt.stopConsole != nil {
		_ = rt.stopConsole()
	}
	if rt.stopMCP != nil {
		_ = rt.stopMCP()
	}
	// The requests already taken finish before the context their lanes
	// run under is cancelled.
	if rt.Gateway != nil {
		rt.Gateway.Quiesce()
	}
	if rt.cancel != nil {
		rt.cancel()
	}
	if rt.Gateway != nil {
		rt.Gateway.Stop()
	}
	if rt.metrics != nil {
		_ = rt.metrics.Close()
	}
	if rt.Service != nil {
		rt.Service.Close()
	}
	if rt.NC != nil {
		rt.NC.Close()
	}
	if rt.Replies != nil {
		rt.Replies.Close()
	}
	if rt.Embedded != nil {
		rt.Embedded.Shutdown()
	}
	rt.closeTelemetry()
	if rt.lock != nil {
		_ = rt.lock.Close()
	}
}

// runtimeUser is how the runtime's own user authenticates to an external
// NATS deployment (nats.creds, nats.nkey_file or nats.user).
func runtimeUser(cfg *config.Config) ([]nats.Option, error) {
	switch {
	case cfg.NATS.Creds != "":
		return []nats.Option{nats.UserCredentials(cfg.NATS.Creds)}, nil
	case cfg.NATS.NkeyFile != "":
		nk, err := nats.NkeyOptionFromSeed(cfg.NATS.NkeyFile)
		if err != nil {
			return nil, fmt.Errorf("nats.nkey_file: %w", err)
		}
		return []nats.Option{nk}, nil
	case cfg.NATS.User != "":
		return []nats.Option{nats.UserInfo(cfg.NATS.User, cfg.NATS.Password)}, nil
	}
	return nil, nil
}

// tlsOptions are the TLS settings of the connections to an external NATS.
func tlsOptions(cfg *config.Config) []nats.Option {
	var opts []nats.Option
	if cfg.NATS.TLSCAFile != "" {
		opts = append(opts, nats.RootCAs(cfg.NATS.TLSCAFile))
	}
	if cfg.NATS.TLSCertFile != "" {
		opts = append(opts, nats.ClientCert(cfg.NATS.TLSCertFile, cfg.NATS.TLSKeyFile))
	}
	return opts
}

// addrFree reports an address another process listens on at once and
// clearly: the embedded server only logs its listen error, and Boot would
// then wait for a server that never becomes ready. A random port (-1) is
// always free.
func addrFree(host string, port int) error {
	if port < 0 {
		return nil
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return err
	}
	return ln.Close()
}

// modelLimits is the bounds of the read model runtime.limits set.
func modelLimits(l config.LimitsConfig) projections.ModelLimits {
	return projections.ModelLimits{Incidents: l.Incidents, Approvals: l.PendingApprovals, ResolvedOperations: l.ResolvedOperations}
}
