package projections

import (
	"context"
	"crypto/ed25519"
	"errors"
	"sync"
	"time"

	"github.com/contextos/ledger/audit/witness"
	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ServiceConfig configures StartService.
type ServiceConfig struct {
	NC     *nats.Conn          // the runtime's connection: wake-ups on new events
	JS     jetstream.JetStream // the runtime's JetStream context (audit stream)
	Store  events.Store        // the event stream
	Signer codec.Signer        // the runtime key: signs checkpoints (events are signed by the gateway)
	// RetiredKeys are earlier runtime public keys whose records are still in
	// the log; audit-keys publishes them with the current one.
	RetiredKeys        []ed25519.PublicKey
	Tenants            []string
	AuditStream        AuditStreamOptions
	CheckpointEvery    int           // see AuditConfig
	CheckpointInterval time.Duration // see AuditConfig
	PollInterval       time.Duration // see AuditConfig
	Clock              Clock
	Logf               func(format string, args ...any)
	// Witnesses cosign every tenant's checkpoints (see AuditConfig); their
	// keys (WitnessKeys, cosignature verifier keys) are published in
	// keys.json.
	Witnesses   func(tenant string) []*witness.Client
	WitnessKeys []string
	// OnWitness receives every witness's answer (see AuditConfig).
	OnWitness func(WitnessReport)
	// Model is the read model the service follows and serves (the one the
	// gateway reads); nil makes one over Store.
	Model *Model
	// Active, when set, says whether this replica records the tenant's
	// audit now (see AuditConfig.Active).
	Active func(tenant string) bool
}

// Service runs the projections of a daemon: one audit projector per tenant,
// the read model, and the ops verbs over them.
type Service struct {
	Log   *AuditLog
	Model *Model
	// View is Model, under its former name.
	View       *Model
	Ops        *Ops
	Projectors map[string]*AuditProjector

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// StartService ensures the audit stream and starts the projectors and the
// view in the background; mount Service.Ops on the gateway
// (gw.Mount(verb, gateway.OpHandler(svc.Ops.Handler(verb))) for each of
// Verbs). Close stops them.
func StartService(ctx context.Context, cfg ServiceConfig) (*Service, error) {
	if cfg.JS == nil || cfg.Store == nil {
		return nil, errors.New("projections: StartService needs JS and Store")
	}
	name := cfg.AuditStream.Name
	if name == "" {
		name = AuditStreamName
	}
	if _, err := EnsureAuditStream(ctx, cfg.JS, cfg.AuditStream); err != nil {
		return nil, err
	}
	model := cfg.Model
	if model == nil {
		model = NewModel(ModelConfig{Store: cfg.Store, Logf: cfg.Logf})
	}
	s := &Service{Log: NewAuditLog(cfg.JS, name), Model: model, View: model, Projectors: map[string]*AuditProjector{}}
	for _, t := range cfg.Tenants {
		var ws []*witness.Client
		if cfg.Witnesses != nil {
			ws = cfg.Witnesses(t) // one client per tenant: each remembers its log's size at the witness
		}
		// The projector takes the tenant's events from the model, which
		// reads every event anyway, and wakes when the model hands it some
		// (see feed); a model over another store cannot feed it.
		fed := model.cfg.Store == cfg.Store
		notify := cfg.NC
		if fed {
			notify = nil
		}
		p, err := NewAuditProjector(AuditConfig{Witnesses: ws, Tenant: t, Events: cfg.Store, Log: s.Log, Signer: cfg.Signer,
			CheckpointEvery: cfg.CheckpointEvery, CheckpointInterval: cfg.CheckpointInterval, Clock: cfg.Clock,
			PollInterval: cfg.PollInterval, Notify: notify, Logf: cfg.Logf, OnWitness: cfg.OnWitness})
		if cfg.Active != nil {
			p.cfg.Active = func() bool { return cfg.Active(t) }
		}
		if err != nil {
			return nil, err
		}
		if fed {
			p.feed = model.follow(t)
		}
		s.Projectors[t] = p
	}
	pubs := []ed25519.PublicKey{cfg.Signer.Key.Public().(ed25519.PublicKey)}
	s.Ops = NewOps(OpsConfig{Log: s.Log, Events: cfg.Store, PublicKeys: append(pubs, cfg.RetiredKeys...), WitnessKeys: cfg.WitnessKeys, Model: s.Model})
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	for _, p := range s.Projectors {
		s.wg.Add(1)
		go func() { defer s.wg.Done(); _ = p.Run(rctx) }()
	}
	s.wg.Add(1)
	go func() { defer s.wg.Done(); _ = s.Model.Run(rctx, cfg.NC, cfg.PollInterval, cfg.Logf) }()
	return s, nil
}

// Witnessing returns the state of the latest submission of tenant's log
// to its witnesses (AuditProjector.Witnessing); an unknown tenant is
// pending.
func (s *Service) Witnessing(tenant string) (kernel.Witnessing, string) {
	p := s.Projectors[tenant]
	if p == nil {
		return kernel.WitnessPending, "no audit projector for the tenant"
	}
	return p.Witnessing()
}

// Close stops the projectors and the read model and waits for them, then
// writes a last snapshot of the model (when it has a snapshot store) so the
// next start folds only what is stored after it.
func (s *Service) Close() {
	s.cancel()
	s.wg.Wait()
	if s.Model.snapshotting() && s.Model.Seq() > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Model.FlushSnapshot(ctx)
	}
}
