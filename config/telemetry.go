package config

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"
)

// ObservabilityConfig is the part of [runtime] that says how the runtime
// reports on itself: its log lines, its readiness bounds and which metric
// series it exports (docs/operations.md, "Logs, health, metrics, traces").
type ObservabilityConfig struct {
	// LogFormat is "text" (the default) or "json".
	LogFormat string `toml:"log_format"`
	// LogLevel is "debug", "info" (the default), "warn" or "error".
	LogLevel string `toml:"log_level"`
	// LogArguments adds a proposal's canonical arguments to its decision
	// log line. Off by default: arguments may hold personal data.
	LogArguments bool `toml:"log_arguments"`
	// ReadyMaxLag is how many stream sequences the read model and each
	// tenant's audit chain may be behind the event stream while /readyz
	// still reports ready (default DefaultReadyMaxLag).
	ReadyMaxLag uint64 `toml:"ready_max_lag"`
	// MetricsResourceSeries, when positive, exports per-resource held and
	// committed gauges for at most this many resources (those holding the
	// most); 0 exports per-guarantee totals only. At most
	// MaxMetricsResourceSeries.
	MetricsResourceSeries int `toml:"metrics_resource_series"`
}

// DefaultReadyMaxLag is ObservabilityConfig.ReadyMaxLag's default.
const DefaultReadyMaxLag = 1000

// MaxMetricsResourceSeries bounds ObservabilityConfig.MetricsResourceSeries:
// resource ids are chosen by agents, so their series must stay few.
const MaxMetricsResourceSeries = 1000

func (o *ObservabilityConfig) validate() error {
	switch o.LogFormat {
	case "":
		o.LogFormat = "text"
	case "text", "json":
	default:
		return fmt.Errorf("runtime.log_format must be \"text\" or \"json\", not %q", o.LogFormat)
	}
	if _, err := parseLevel(o.LogLevel); err != nil {
		return err
	}
	if o.ReadyMaxLag == 0 {
		o.ReadyMaxLag = DefaultReadyMaxLag
	}
	if o.MetricsResourceSeries < 0 || o.MetricsResourceSeries > MaxMetricsResourceSeries {
		return fmt.Errorf("runtime.metrics_resource_series must be between 0 and %d, not %d", MaxMetricsResourceSeries, o.MetricsResourceSeries)
	}
	return nil
}

func parseLevel(s string) (slog.Level, error) {
	switch s {
	case "debug":
		return slog.LevelDebug, nil
	case "", "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("runtime.log_level must be debug, info, warn or error, not %q", s)
}

// NewLogger returns the logger the configuration asks for, writing to w.
func NewLogger(cfg *Config, w io.Writer) *slog.Logger {
	level, _ := parseLevel(cfg.Runtime.LogLevel) // validated by Parse
	opts := &slog.HandlerOptions{Level: level}
	if cfg.Runtime.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// BreakerConfig is a capability's [capabilities.breaker] table: Threshold
// provider failures (unknown outcomes, transport errors, timeouts, 5xx)
// within Window trip the capability's switch, which an operator resets.
// A zero Threshold disables the breaker.
type BreakerConfig struct {
	Threshold int      `toml:"threshold"`
	Window    Duration `toml:"window"`
}

// MaxBreakerThreshold bounds BreakerConfig.Threshold: the breaker keeps the
// times of the last Threshold failures.
const MaxBreakerThreshold = 10_000

func (b *BreakerConfig) validate() error {
	switch {
	case b.Threshold < 0 || b.Threshold > MaxBreakerThreshold:
		return fmt.Errorf("breaker.threshold must be between 0 and %d", MaxBreakerThreshold)
	case b.Threshold > 0 && b.Window.Duration <= 0:
		return errors.New("breaker.window is required with breaker.threshold")
	case b.Threshold == 0 && b.Window.Duration != 0:
		return errors.New("breaker.window needs breaker.threshold")
	case b.Window.Duration > 24*time.Hour:
		return errors.New("breaker.window must be at most 24h")
	}
	return nil
}
