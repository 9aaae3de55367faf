package config

import (
	"errors"
	"fmt"
	"time"
)

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
	// (telemetry.go).
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
	// MinFreeBytes is the free space the store must keep (default
	// DefaultMinFreeBytes): below it new proposals are refused overloaded
	// and /readyz fails, while settlements and operator verbs go on. The
	// space is the least of the data_dir volume's free bytes (embedded
	// server) and what the streams' and the account's limits leave.
	MinFreeBytes int64 `toml:"min_free_bytes"`
	// StoreSpaceInterval is how often that space is measured (default
	// DefaultStoreSpaceInterval).
	StoreSpaceInterval Duration `toml:"store_space_interval"`
}

// DefaultMinFreeBytes is runtime.min_free_bytes's default: room for about
// 40,000 whole proposals' events and audit records after new ones stop.
const DefaultMinFreeBytes = 256 << 20

// DefaultStoreSpaceInterval is runtime.store_space_interval's default.
const DefaultStoreSpaceInterval = 5 * time.Second

// DefaultReconcileInterval is runtime.reconcile_interval's default: the
// crash-recovery path runs by itself.
const DefaultReconcileInterval = 30 * time.Second

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
	switch {
	case r.MinFreeBytes < 0 || r.MinFreeBytes > 1<<50:
		return fmt.Errorf("runtime.min_free_bytes must be 0..%d (0: the default %d), not %d", int64(1)<<50, DefaultMinFreeBytes, r.MinFreeBytes)
	case r.MinFreeBytes == 0:
		r.MinFreeBytes = DefaultMinFreeBytes
	}
	switch d := r.StoreSpaceInterval.Duration; {
	case d < 0 || (d > 0 && d < 100*time.Millisecond) || d > time.Minute:
		return fmt.Errorf("runtime.store_space_interval must be 100ms..1m, not %s", d)
	case d == 0:
		r.StoreSpaceInterval.Duration = DefaultStoreSpaceInterval
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
