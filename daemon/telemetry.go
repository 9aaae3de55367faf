package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/projections"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// tracingFromEnv builds the OTLP trace pipeline the standard OTEL_*
// variables describe. It is off (nil provider) unless
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is
// set, and also when OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none.
// The protocol is OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or
// OTEL_EXPORTER_OTLP_PROTOCOL: http/protobuf (the default) or grpc; the
// exporters read the endpoint, headers, TLS files and timeout themselves,
// and the SDK reads OTEL_TRACES_SAMPLER, OTEL_BSP_* and
// OTEL_RESOURCE_ATTRIBUTES / OTEL_SERVICE_NAME.
func tracingFromEnv(ctx context.Context) (*sdktrace.TracerProvider, error) {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") || os.Getenv("OTEL_TRACES_EXPORTER") == "none" {
		return nil, nil
	}
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return nil, nil
	}
	proto := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	var exp *otlptrace.Exporter
	var err error
	switch proto {
	case "", "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q: only http/protobuf and grpc are supported", proto)
	}
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", "contextosd")),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}

// startTelemetry gives the gateway its telemetry; call it after the
// gateway is made and before it starts.
func (rt *Runtime) startTelemetry(ctx context.Context, o BootOptions) error {
	tp := o.TracerProvider
	if tp == nil {
		sdk, err := tracingFromEnv(ctx)
		if err != nil {
			return err
		}
		if sdk != nil {
			tp, rt.traceShutdown = sdk, sdk.Shutdown
		}
	}
	rt.registry = rt.Gateway.Instrument(o.Logger, tp)
	rt.log = o.Logger
	rt.tracing = tp != nil
	return nil
}

func (rt *Runtime) tenantIDs() []string {
	out := make([]string, len(rt.Config.Tenants))
	for i, t := range rt.Config.Tenants {
		out[i] = t.ID
	}
	return out
}

// serveMetrics serves /metrics, /healthz and /readyz on a loopback address.
func (rt *Runtime) serveMetrics(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("runtime.metrics_listen: %w", err)
	}
	if ip := ln.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() && !rt.Config.Runtime.MetricsAllowNonLoopback {
		ln.Close()
		return fmt.Errorf("runtime.metrics_listen: loopback only, not %s", ip)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(rt.registry, promhttp.HandlerOpts{ErrorLog: nil, Timeout: 10 * time.Second}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"ok": true})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		rep := rt.Ready(ctx)
		status := http.StatusOK
		if !rep.Ready {
			status = http.StatusServiceUnavailable
		}
		writeJSON(w, status, rep)
	})
	rt.metrics = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	rt.MetricsURL = "http://" + ln.Addr().String() + "/metrics"
	go func() { _ = rt.metrics.Serve(ln) }()
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Readiness is /readyz's answer: ready when every check passed.
type Readiness struct {
	Ready  bool         `json:"ready"`
	Checks []ReadyCheck `json:"checks"`
}

// ReadyCheck is one readiness condition.
type ReadyCheck struct {
	Name  string `json:"name"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
	// Warning is a condition that does not make the runtime unready: a
	// missing witness cosignature under witness_policy warn.
	Warning string `json:"warning,omitempty"`
}

// Ready checks that the store answers, both streams exist, the read model
// and every tenant's audit chain are within runtime.ready_max_lag stream
// sequences of the event stream, and the store has runtime.min_free_bytes
// free.
func (rt *Runtime) Ready(ctx context.Context) Readiness {
	var rep Readiness
	add := func(name string, err error) {
		c := ReadyCheck{Name: name, OK: err == nil}
		if err != nil {
			c.Error = err.Error()
		}
		rep.Checks = append(rep.Checks, c)
	}
	bound := rt.Config.Runtime.ReadyMaxLag
	if !rt.NC.IsConnected() {
		add("store", fmt.Errorf("not connected to NATS (%s)", rt.NC.Status()))
		return rep
	}
	last, err := rt.Store.LastStreamSeq(ctx)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		err = errors.New("event stream missing")
	}
	add("store", err)
	if err != nil {
		return rep
	}
	_, err = rt.js.Stream(ctx, projections.AuditStreamName)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		err = errors.New("audit stream missing")
	}
	add("audit_stream", err)
	viewErr := rt.Service.View.Err()
	if l := lag(last, rt.Service.View.Seq()); viewErr == nil && l > bound {
		viewErr = fmt.Errorf("read model %d sequences behind (bound %d)", l, bound)
	}
	add("read_model", viewErr)
	var auditErr error
	for _, t := range rt.tenantIDs() {
		p := rt.Service.Projectors[t]
		if p == nil {
			continue
		}
		if l := lag(rt.Service.View.View(t).Seq, p.Status().LastEventSeq); l > bound {
			auditErr = errors.Join(auditErr, fmt.Errorf("tenant %s audit chain %d sequences behind (bound %d)", t, l, bound))
		}
	}
	add("audit_lag", auditErr)
	if policy := rt.Config.WitnessPolicy(); policy != "" {
		var werr, warn error
		for _, t := range rt.tenantIDs() {
			st, reason := rt.Service.Witnessing(t)
			switch {
			case st == kernel.WitnessPending:
				werr = errors.Join(werr, fmt.Errorf("tenant %s: the witnesses have not answered the boot check", t))
			case st == kernel.WitnessMissing && policy == kernel.WitnessRequire:
				werr = errors.Join(werr, fmt.Errorf("tenant %s: %s", t, reason))
			case st == kernel.WitnessMissing:
				warn = errors.Join(warn, fmt.Errorf("tenant %s: %s", t, reason))
			}
		}
		add("audit_witnesses", werr)
		if warn != nil {
			rep.Checks[len(rep.Checks)-1].Warning = warn.Error()
		}
	}
	var ierr error
	for _, t := range rt.tenantIDs() {
		st, err := rt.Gateway.Integrity(ctx, t)
		switch {
		case err != nil:
			ierr = errors.Join(ierr, fmt.Errorf("tenant %s: %w", t, err))
		case st.Open != nil:
			ierr = errors.Join(ierr, fmt.Errorf("tenant %s: witness %s answered that the audit log %s: dispatch is stopped until an operator resolves it", t, st.Open.Witness, st.Open.Kind))
		}
	}
	add("log_integrity", ierr)
	add("serving", rt.Gateway.ServingErr())
	add("store_space", rt.Gateway.StoreSpaceErr())
	rep.Ready = true
	for _, c := range rep.Checks {
		rep.Ready = rep.Ready && c.OK
	}
	return rep
}

// logStartup logs every address the runtime listens on or connects to.
func (rt *Runtime) logStartup() {
	attrs := []any{"nats", redactURL(rt.URL), "embedded", rt.Embedded != nil, "executor", rt.Gateway.Executor(),
		"key_id", rt.Signer.KeyID, "tenants", len(rt.Config.Tenants), "tracing", rt.tracing}
	if rt.MCPURL != "" {
		attrs = append(attrs, "mcp", rt.MCPURL)
	}
	if rt.ConsoleURL != "" {
		attrs = append(attrs, "console", rt.ConsoleURL)
	}
	if rt.MetricsURL != "" {
		base := strings.TrimSuffix(rt.MetricsURL, "/metrics")
		attrs = append(attrs, "metrics", rt.MetricsURL, "healthz", base+"/healthz", "readyz", base+"/readyz")
	}
	rt.log.Info("contextosd started", attrs...)
}

// redactURL hides the secrets of a (comma-separated) NATS URL's user info:
// a password, or a user name alone (a NATS token).
func redactURL(s string) string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		u, err := url.Parse(part)
		switch {
		case err != nil:
			out = append(out, "(unparsable url)")
			continue
		case u.User == nil:
		case hasPassword(u.User):
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		default:
			u.User = url.User("xxxxx")
		}
		out = append(out, u.String())
	}
	return strings.Join(out, ",")
}

func hasPassword(u *url.Userinfo) bool { _, ok := u.Password(); return ok }

// lag is how many sequences at is behind head.
func lag(head, at uint64) uint64 {
	if at >= head {
		return 0
	}
	return head - at
}

// closeTelemetry flushes the trace exporter.
func (rt *Runtime) closeTelemetry() {
	if rt.traceShutdown != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = rt.traceShutdown(ctx)
	}
}
