package daemon_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/daemon"
	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/gateway"
	"github.com/contextos/ledger/internal/testing/daemontest"
	"github.com/contextos/ledger/internal/testing/provider"
	"github.com/contextos/ledger/internal/testing/testenv"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
	"github.com/nats-io/nats.go"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// logBuf collects a runtime's JSON log lines.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// lines parses every line as one JSON object.
func (l *logBuf) lines(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(l.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line is not JSON: %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// waitLine polls for a log line with msg whose fields include want.
func (l *logBuf) waitLine(t *testing.T, msg string, want map[string]any) map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, m := range l.lines(t) {
			if m["msg"] != msg {
				continue
			}
			ok := true
			for k, v := range want {
				ok = ok && fmt.Sprint(m[k]) == fmt.Sprint(v)
			}
			if ok {
				return m
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q line with %v in:\n%s", msg, want, l.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// bootObserved boots a runtime logging JSON into a buffer, serving metrics.
func bootObserved(t *testing.T, providerURL string, o daemon.BootOptions, edit func(*config.Config)) (*env, *logBuf) {
	t.Helper()
	logs := &logBuf{}
	e := startEnvWith(t, daemontest.Options{
		Of: &daemontest.Daemon{Dir: t.TempDir(), ProviderURL: providerURL},
		Config: func(cfg *config.Config) {
			cfg.Runtime.LogFormat, cfg.Runtime.LogLevel = "json", "debug"
			cfg.Runtime.MetricsListen = "127.0.0.1:0"
			if edit != nil {
				edit(cfg)
			}
		},
		Log:  logs,
		Boot: o,
	})
	return e, logs
}

// scrape reads /metrics and parses it with expfmt.
func scrape(t *testing.T, rt *daemon.Runtime) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(rt.MetricsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// sample returns the value of the series of name whose labels include
// want, and whether there is one.
func sample(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
	for _, m := range f.Metric {
		ok := true
		for k, v := range want {
			found := false
			for _, l := range m.Label {
				found = found || l.GetName() == k && l.GetValue() == v
			}
			ok = ok && found
		}
		if !ok {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

// TestTelemetryDecisionLogs: a proposal leaves one JSON decision line at
// info with tenant, principal, capability, status, code, attempt and
// duration, and no argument value; a refusal names its code; the kill
// switch is logged at warn; startup names every address.
func TestTelemetryDecisionLogs(t *testing.T) {
	prov := provider.New()
	hs := httptest.NewServer(prov.Handler())
	defer hs.Close()
	e, logs := bootObserved(t, hs.URL, daemon.BootOptions{}, nil)
	logs.waitLine(t, "contextosd started", map[string]any{"nats": e.rt.URL, "metrics": e.rt.MetricsURL,
		"readyz": strings.TrimSuffix(e.rt.MetricsURL, "metrics") + "readyz"})

	nc := e.client("acme", "agent_email")
	r := e.propose(nc, "acme", "agent_email", refund("run_log", "k1", "ord_secret_881", 700))
	if r.Status != wire.StatusApplied {
		t.Fatalf("status %s %s", r.Status, r.Reason)
	}
	line := logs.waitLine(t, "decision", map[string]any{"level": "INFO", "tenant": "acme", "principal": "agent_email",
		"capability": "adp_payments.issue_refund", "status": "applied", "code": "", "attempt": r.AttemptID, "operation": r.OperationID})
	if d, ok := line["duration_ms"].(float64); !ok || d <= 0 {
		t.Fatalf("duration_ms %v", line["duration_ms"])
	}
	if _, ok := line["arguments"]; ok {
		t.Fatal("arguments logged without runtime.log_arguments")
	}
	if strings.Contains(logs.String(), "ord_secret_881") {
		t.Fatalf("an argument value reached the log:\n%s", logs.String())
	}

	ro := e.client("acme", "agent_readonly")
	r = e.propose(ro, "acme", "agent_readonly", refund("run_log", "k2", "ord_2", 700))
	if r.Code != wire.CodeAuthorityDenied {
		t.Fatalf("want authority_denied, got %s", r.Code)
	}
	logs.waitLine(t, "decision", map[string]any{"principal": "agent_readonly", "status": "refused", "code": "authority_denied"})

	on := true
	if rep := e.op("kill-switch", wire.OpRequest{Engaged: &on, Reason: "drill"}); !rep.OK {
		t.Fatalf("kill switch: %+v", rep)
	}
	logs.waitLine(t, "operator action", map[string]any{"level": "WARN", "verb": "kill-switch", "operator": "ops_alice", "engaged": true, "why": "drill"})
	r = e.propose(nc, "acme", "agent_email", refund("run_log", "k3", "ord_3", 700))
	logs.waitLine(t, "decision", map[string]any{"status": "refused", "code": "kill_switch_engaged", "operation": r.OperationID})
}

// TestTelemetryArgumentsLoggedWhenConfigured: runtime.log_arguments adds
// the canonical arguments to the decision line.
func TestTelemetryArgumentsLoggedWhenConfigured(t *testing.T) {
	prov := provider.New()
	hs := httptest.NewServer(prov.Handler())
	defer hs.Close()
	e, logs := bootObserved(t, hs.URL, daemon.BootOptions{}, func(c *config.Config) { c.Runtime.LogArguments = true })
	r := e.propose(e.client("acme", "agent_email"), "acme", "agent_email", refund("run_arg", "k1", "ord_arg", 10))
	line := logs.waitLine(t, "decision", map[string]any{"attempt": r.AttemptID})
	args, _ := line["arguments"].(map[string]any)
	if args["order_id"] != "ord_arg" {
		t.Fatalf("arguments %v", line["arguments"])
	}
}

// deadURL is the address of a loopback port nothing listens on.
func deadURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// TestTelemetryProviderOutage: with the provider down, the reply, the
// attempt row, the reconcile output, the logs and the metrics all say the
// provider was unreachable, never that it answered.
func TestTelemetryProviderOutage(t *testing.T) {
	e, logs := bootObserved(t, deadURL(t), daemon.BootOptions{}, nil)
	nc := e.client("acme", "agent_email")
	r := e.propose(nc, "acme", "agent_email", refund("run_out", "k1", "ord_out", 900))
	if r.Status != wire.StatusUnknown || !strings.HasPrefix(r.Reason, "provider unreachable: ") || !strings.Contains(r.Reason, "connection refused") {
		t.Fatalf("reply %s %q, want unknown with the provider's failure", r.Status, r.Reason)
	}
	if strings.Contains(r.Reason, "/refunds") {
		t.Fatalf("the reason names the provider URL: %q", r.Reason)
	}
	logs.waitLine(t, "provider error", map[string]any{"level": "WARN", "capability": "adp_payments.issue_refund", "call": "dispatch",
		"kind": "transport", "attempt": r.AttemptID, "reason": r.Reason})
	logs.waitLine(t, "decision", map[string]any{"level": "INFO", "status": "unknown", "attempt": r.AttemptID, "reason": r.Reason})

	att := e.op("attempts", wire.OpRequest{})
	if len(att.Attempts) != 1 || att.Attempts[0].AttemptID != r.AttemptID || !strings.HasPrefix(att.Attempts[0].LastReason, "provider unreachable: ") {
		t.Fatalf("attempts %+v", att.Attempts)
	}
	rec := e.op("reconcile", wire.OpRequest{All: true})
	if len(rec.Settled) != 1 || !strings.HasPrefix(rec.Settled[0].Reason, "provider unreachable: ") {
		t.Fatalf("reconcile %+v", rec.Settled)
	}
	logs.waitLine(t, "provider error", map[string]any{"call": "query", "kind": "transport", "attempt": r.AttemptID})
	logs.waitLine(t, "reconciled", map[string]any{"level": "WARN", "attempt": r.AttemptID, "result": "provider_failed"})

	before := e.rt.Gateway.Engine().Stats().AppendBusy.Seconds()
	fams := scrape(t, e.rt)
	after := e.rt.Gateway.Engine().Stats().AppendBusy.Seconds()
	if v, ok := sample(fams, "contextos_store_append_busy_seconds_total", nil); !ok || v <= 0 || v < before || v > after {
		t.Errorf("contextos_store_append_busy_seconds_total = %v (present %v), want > 0 and the engine's %v..%v", v, ok, before, after)
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"contextos_provider_errors_total", map[string]string{"capability": "adp_payments.issue_refund", "kind": "transport"}, 2},
		{"contextos_provider_calls_total", map[string]string{"call": "dispatch", "outcome": "unknown"}, 1},
		{"contextos_decisions_total", map[string]string{"tenant": "acme", "status": "unknown", "code": ""}, 1},
		{"contextos_reconciled_attempts_total", map[string]string{"result": "provider_failed"}, 1},
		{"contextos_open_holds", map[string]string{"tenant": "acme", "state": "held", "age": "lt_1m"}, 1},
	} {
		if v, ok := sample(fams, c.name, c.labels); !ok || v != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.name, c.labels, v, ok, c.want)
		}
	}
}

// TestTelemetryTimeoutAnd5xx: a timeout and a 5xx are named as such.
func TestTelemetryTimeoutAnd5xx(t *testing.T) {
	var mode sync.Map
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v, _ := mode.Load("m"); v == "slow" {
			time.Sleep(800 * time.Millisecond)
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"error":"down"}`)
	}))
	defer hs.Close()
	e, _ := bootObserved(t, hs.URL, daemon.BootOptions{}, nil)
	nc := e.client("acme", "agent_email")
	r := e.propose(nc, "acme", "agent_email", refund("run_5", "k1", "ord_5", 10))
	if r.Status != wire.StatusUnknown || r.Reason != "provider answered 503 Service Unavailable" {
		t.Fatalf("5xx: %s %q", r.Status, r.Reason)
	}
	mode.Store("m", "slow")
	r = e.propose(nc, "acme", "agent_email", refund("run_5", "k2", "ord_6", 10))
	if r.Status != wire.StatusUnknown || r.Reason != "provider timed out after 500ms" {
		t.Fatalf("timeout: %s %q", r.Status, r.Reason)
	}
	fams := scrape(t, e.rt)
	for _, kind := range []string{gateway.FailureStatus5xx, gateway.FailureTimeout} {
		if v, _ := sample(fams, "contextos_provider_errors_total", map[string]string{"kind": kind}); v != 1 {
			t.Errorf("provider errors of kind %s: %v", kind, v)
		}
	}
}

// readyz returns /readyz's status and answer.
func readyz(t *testing.T, rt *daemon.Runtime) (int, daemon.Readiness) {
	t.Helper()
	resp, err := http.Get(strings.TrimSuffix(rt.MetricsURL, "metrics") + "readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rep daemon.Readiness
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, rep
}

// waitReady polls /readyz until its readiness is want.
func waitReady(t *testing.T, rt *daemon.Runtime, want bool) daemon.Readiness {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, rep := readyz(t, rt)
		if rep.Ready == want && (code == http.StatusOK) == want {
			return rep
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz never became ready=%v: %d %+v", want, code, rep)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestReadyzFollowsTheStore: on an external NATS server, /readyz is ready,
// turns unready with the store checks failing while the server is down,
// and ready again once it is back; /healthz answers throughout.
func TestReadyzFollowsTheStore(t *testing.T) {
	natsDir := t.TempDir()
	start := func(port int) *events.Embedded {
		emb, err := events.StartEmbedded(events.EmbeddedConfig{DataDir: natsDir, Port: port})
		if err != nil {
			t.Fatal(err)
		}
		return emb
	}
	emb := start(-1)
	defer func() { emb.Shutdown() }()
	port := emb.Server().Addr().(*net.TCPAddr).Port
	prov := provider.New()
	hs := httptest.NewServer(prov.Handler())
	defer hs.Close()
	e, _ := bootObserved(t, hs.URL, daemon.BootOptions{}, func(c *config.Config) {
		c.NATS.URL = emb.ClientURL()
		c.Runtime.KeyFile = filepath.Join(t.TempDir(), "runtime.key")
	})
	rep := waitReady(t, e.rt, true)
	var names []string
	for _, c := range rep.Checks {
		names = append(names, c.Name)
	}
	if strings.Join(names, ",") != "store,audit_stream,read_model,audit_lag,log_integrity,serving,store_space" {
		t.Fatalf("checks %v", names)
	}

	emb.Shutdown()
	rep = waitReady(t, e.rt, false)
	if len(rep.Checks) == 0 || rep.Checks[0].Name != "store" || rep.Checks[0].OK {
		t.Fatalf("unready without a failing store check: %+v", rep)
	}
	if resp, err := http.Get(strings.TrimSuffix(e.rt.MetricsURL, "metrics") + "healthz"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz while the store is down: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if v, _ := sample(scrape(t, e.rt), "contextos_store_up", nil); v != 0 {
		t.Fatalf("contextos_store_up %v while the store is down", v)
	}

	emb = start(port)
	waitReady(t, e.rt, true)
	// The runtime's subscriptions come back with its reconnection, which the
	// server may show the agent's connection a moment after readiness: the
	// agent resends the same key (idempotent) while nobody answers.
	nc := e.client("acme", "agent_email")
	body, _ := json.Marshal(refund("run_rdy", "k1", "ord_rdy", 10))
	var r wire.Reply
	testenv.Eventually(t, func() bool {
		msg, err := nc.Request(wire.ProposeSubject("acme", "agent_email"), body, 10*time.Second)
		if errors.Is(err, nats.ErrNoResponders) {
			return false
		}
		if err != nil {
			t.Fatalf("propose after the restart: %v", err)
		}
		if err := json.Unmarshal(msg.Data, &r); err != nil {
			t.Fatal(err)
		}
		return true
	}, 10*time.Second, "a responder to proposals after the store's restart")
	if r.Status != wire.StatusApplied {
		t.Fatalf("after the restart: %s %s", r.Status, r.Reason)
	}
}

// TestMetricsBoundedSeries: 10,000 distinct resources held leave the
// number of series independent of them: per-guarantee totals, and the
// configured top-N per-resource series only.
func TestMetricsBoundedSeries(t *testing.T) {
	prov := provider.New()
	hs := httptest.NewServer(prov.Handler())
	defer hs.Close()
	const resources, topN = 10_000, 5
	e, _ := bootObserved(t, hs.URL, daemon.BootOptions{}, func(c *config.Config) {
		c.NATS.Sync = "relaxed"
		c.Runtime.MetricsResourceSeries = topN
	})
	ctx := context.Background()
	eng := e.rt.Gateway.Engine()
	def := e.rt.Config.Guarantees[0]
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := 0; w < 64; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < resources; i += 64 {
				res, _, err := eng.Exposure(ctx, "acme", def.ID, fmt.Sprintf("ord_%05d", i), kernel.Reserve{GuaranteeID: def.ID,
					Resource: fmt.Sprintf("ord_%05d", i), AttemptID: fmt.Sprintf("att_%05d", i), OperationID: fmt.Sprintf("op_%05d", i),
					Amount: int64(1 + i%100), Limit: def.Limit, DefinitionDigest: def.Digest()})
				if err == nil && res.Refusal != nil {
					err = res.Refusal
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var want int64
	for i := 0; i < resources; i++ {
		want += int64(1 + i%100)
	}
	var fams map[string]*dto.MetricFamily
	deadline := time.Now().Add(60 * time.Second)
	for {
		fams = scrape(t, e.rt)
		v, _ := sample(fams, "contextos_guarantee_held", map[string]string{"tenant": "acme", "guarantee": def.ID})
		if int64(v) == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("contextos_guarantee_held %v, want %d", v, want)
		}
		time.Sleep(100 * time.Millisecond) // the view follows the stream
	}
	if v, _ := sample(fams, "contextos_guarantee_resources", map[string]string{"tenant": "acme"}); v != resources {
		t.Fatalf("contextos_guarantee_resources %v", v)
	}
	total := 0
	for name, f := range fams {
		total += len(f.Metric)
		if strings.HasPrefix(name, "contextos_exposure_") && name != "contextos_exposure_incidents" && !strings.HasSuffix(name, "_seq") &&
			!strings.HasSuffix(name, "_skipped") && len(f.Metric) != topN {
			t.Errorf("%s has %d series, want %d", name, len(f.Metric), topN)
		}
	}
	if total > 400 {
		t.Fatalf("%d series for %d resources", total, resources)
	}
	t.Logf("%d series in all for %d resources", total, resources)
	// The top resources are those holding most (amount 100: i%100 == 99).
	if v, ok := sample(fams, "contextos_exposure_held", map[string]string{"resource": "ord_00099"}); !ok || v != 100 {
		t.Fatalf("top resource ord_00099: %v %v", v, ok)
	}
}

// TestTraceOfAProposal: the agent's traceparent (a NATS header) is the
// parent of one trace across propose, decode, reserve, dispatch, the
// provider call and settle; the provider receives the provider call's
// traceparent; no span attribute carries an argument value.
func TestTraceOfAProposal(t *testing.T) {
	prov := provider.New()
	var mu sync.Mutex
	var got []string
	inner := prov.Handler()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/refunds" {
			mu.Lock()
			got = append(got, r.Header.Get("traceparent"))
			mu.Unlock()
		}
		inner.ServeHTTP(w, r)
	}))
	defer hs.Close()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	e, _ := bootObserved(t, hs.URL, daemon.BootOptions{TracerProvider: tp}, nil)
	nc := e.client("acme", "agent_email")

	const agentTrace, agentSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	body, _ := json.Marshal(refund("run_tr", "k1", "ord_traced_77", 98765))
	msg := nats.NewMsg(wire.ProposeSubject("acme", "agent_email"))
	msg.Header.Set("traceparent", "00-"+agentTrace+"-"+agentSpan+"-01")
	msg.Data = body
	resp, err := nc.RequestMsg(msg, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var r wire.Reply
	if err := json.Unmarshal(resp.Data, &r); err != nil || r.Status != wire.StatusApplied {
		t.Fatalf("reply %s %v", resp.Data, err)
	}

	spans := map[string]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		if s.SpanContext.TraceID().String() != agentTrace {
			t.Errorf("span %s in trace %s, not the agent's", s.Name, s.SpanContext.TraceID())
		}
		spans[s.Name] = s
		for _, kv := range s.Attributes {
			if v := kv.Value.String(); strings.Contains(v, "ord_traced_77") || v == "98765" {
				t.Errorf("span %s attribute %s carries an argument value: %s", s.Name, kv.Key, v)
			}
		}
	}
	for _, name := range []string{"propose", "decode", "reserve", "dispatch", "provider.dispatch", "settle"} {
		if _, ok := spans[name]; !ok {
			t.Fatalf("no %s span; spans: %v", name, exp.GetSpans().Snapshots())
		}
	}
	parent := func(child, want string) {
		t.Helper()
		if p := spans[child].Parent.SpanID(); p != spans[want].SpanContext.SpanID() {
			t.Errorf("%s's parent is %s, want %s", child, p, want)
		}
	}
	if p := spans["propose"].Parent.SpanID().String(); p != agentSpan || !spans["propose"].Parent.IsRemote() {
		t.Errorf("propose's parent %s, want the agent's span %s", p, agentSpan)
	}
	for _, c := range []string{"decode", "reserve", "dispatch", "settle"} {
		parent(c, "propose")
	}
	parent("provider.dispatch", "dispatch")
	attrs := map[string]string{}
	for _, kv := range spans["propose"].Attributes {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	if attrs["status"] != "applied" || attrs["attempt_id"] != r.AttemptID || attrs["capability"] != "adp_payments.issue_refund" || attrs["tenant"] != "acme" {
		t.Errorf("propose attributes %v", attrs)
	}
	mu.Lock()
	defer mu.Unlock()
	want := "00-" + agentTrace + "-" + spans["provider.dispatch"].SpanContext.SpanID().String() + "-01"
	if len(got) != 1 || got[0] != want {
		t.Fatalf("provider received traceparent %q, want %q", got, want)
	}

	// Without a traceparent, each proposal is a trace of its own.
	exp.Reset()
	r = e.propose(nc, "acme", "agent_email", refund("run_tr", "k2", "ord_tr2", 10))
	traces := map[string]bool{}
	for _, s := range exp.GetSpans() {
		traces[s.SpanContext.TraceID().String()] = true
	}
	if len(traces) != 1 || traces[agentTrace] {
		t.Fatalf("traces %v for one proposal without traceparent", traces)
	}
	// The signed decision records name their proposal's trace.
	if rec := e.decision("acme", "run_tr", "k1"); rec.TraceID != agentTrace {
		t.Fatalf("record of k1 names trace %q, want the agent's %s", rec.TraceID, agentTrace)
	}
	if rec := e.decision("acme", "run_tr", "k2"); !traces[rec.TraceID] {
		t.Fatalf("record of k2 names trace %q, want its own of %v", rec.TraceID, traces)
	}
}

// TestObservabilityConfig: the logging, readiness, metrics and breaker
// keys decode from TOML and are validated.
func TestObservabilityConfig(t *testing.T) {
	base := gatewayText(t.TempDir(), "http://127.0.0.1:1")
	with := func(runtime, breaker string) string {
		s := strings.Replace(base, "[runtime]\n", "[runtime]\n"+runtime+"\n", 1)
		return strings.Replace(s, "  [capabilities.recovery]\n", breaker+"\n  [capabilities.recovery]\n", 1)
	}
	cfg, err := config.Parse([]byte(with(`log_format = "json"
log_level = "warn"
log_arguments = true
ready_max_lag = 50
metrics_resource_series = 20`, `  [capabilities.breaker]
  threshold = 5
  window = "30s"`)))
	if err != nil {
		t.Fatal(err)
	}
	o := cfg.Runtime.ObservabilityConfig
	cp, _ := cfg.Capability("adp_payments.issue_refund")
	if o.LogFormat != "json" || o.LogLevel != "warn" || !o.LogArguments || o.ReadyMaxLag != 50 || o.MetricsResourceSeries != 20 ||
		cp.Breaker.Threshold != 5 || cp.Breaker.Window.Duration != 30*time.Second {
		t.Fatalf("decoded %+v, breaker %+v", o, cp.Breaker)
	}
	if cfg, err := config.Parse([]byte(base)); err != nil || cfg.Runtime.LogFormat != "text" || cfg.Runtime.ReadyMaxLag != config.DefaultReadyMaxLag {
		t.Fatalf("defaults: %+v %v", cfg.Runtime.ObservabilityConfig, err)
	}
	for _, bad := range []struct{ runtime, breaker string }{
		{`log_format = "xml"`, ""},
		{`log_level = "trace"`, ""},
		{`metrics_resource_series = 1001`, ""},
		{`metrics_resource_series = -1`, ""},
		{"", "  [capabilities.breaker]\n  threshold = 3"},
		{"", "  [capabilities.breaker]\n  window = \"1m\""},
		{"", "  [capabilities.breaker]\n  threshold = 10001\n  window = \"1m\""},
		{"", "  [capabilities.breaker]\n  threshold = 3\n  window = \"48h\""},
		{"", "  [capabilities.breaker]\n  threshold = 3\n  window = \"1m\"\n  windw = \"1m\""},
	} {
		if _, err := config.Parse([]byte(with(bad.runtime, bad.breaker))); err == nil {
			t.Errorf("accepted %q %q", bad.runtime, bad.breaker)
		}
	}
}

// TestProposalsInProgressGauge: a proposal waiting on its provider is
// counted until it is answered, and only then.
func TestProposalsInProgressGauge(t *testing.T) {
	prov := provider.New()
	release := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		prov.Handler().ServeHTTP(w, r)
	}))
	defer hs.Close()
	defer open()
	e, _ := bootObserved(t, hs.URL, daemon.BootOptions{}, func(c *config.Config) {
		cp, _ := c.Capability("adp_payments.issue_refund")
		cp.HTTP.Timeout.Duration = time.Minute
	})
	inProgress := func() float64 {
		v, ok := sample(scrape(t, e.rt), "contextos_proposals_in_progress", nil)
		if !ok {
			t.Fatal("no contextos_proposals_in_progress series")
		}
		return v
	}
	if v := inProgress(); v != 0 {
		t.Fatalf("%v proposals in progress before any was sent", v)
	}
	nc := e.client("acme", "agent_email")
	body, _ := json.Marshal(refund("run_gauge", "k1", "ord_gauge", 900))
	replied := make(chan error, 1)
	go func() {
		_, err := nc.Request(wire.ProposeSubject("acme", "agent_email"), body, time.Minute)
		replied <- err
	}()
	testenv.Eventually(t, func() bool { return inProgress() == 1 }, 30*time.Second, "the proposal waiting on its provider to be counted")
	open()
	if err := <-replied; err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, func() bool { return inProgress() == 0 }, 30*time.Second, "the answered proposal to be counted no more")
}
