package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextos/ledger/internal/provider"
	"github.com/contextos/ledger/kernel"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
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
func bootObserved(t *testing.T, providerURL string, o BootOptions, edit func(*Config)) (*env, *logBuf) {
	t.Helper()
	dir := t.TempDir()
	cfg := testConfig(t, dir, providerURL)
	cfg.Runtime.LogFormat, cfg.Runtime.LogLevel = "json", "debug"
	cfg.Runtime.MetricsListen = "127.0.0.1:0"
	if edit != nil {
		edit(cfg)
	}
	logs := &logBuf{}
	o.Logger = NewLogger(cfg, logs)
	rt, err := Boot(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	return &env{t: t, rt: rt, dir: dir}, logs
}

// scrape reads /metrics and parses it with expfmt.
func scrape(t *testing.T, rt *Runtime) map[string]*dto.MetricFamily {
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
	e, logs := bootObserved(t, hs.URL, BootOptions{}, nil)
	logs.waitLine(t, "contextosd ready", map[string]any{"nats": e.rt.URL, "metrics": e.rt.MetricsURL,
		"readyz": strings.TrimSuffix(e.rt.MetricsURL, "metrics") + "readyz"})

	nc := e.client("acme", "agent_email")
	r := e.propose(nc, "acme", "agent_email", refund("run_log", "k1", "ord_secret_881", 700))
	if r.Status != kernel.StatusApplied {
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
	if r.Code != kernel.CodeAuthorityDenied {
		t.Fatalf("want authority_denied, got %s", r.Code)
	}
	logs.waitLine(t, "decision", map[string]any{"principal": "agent_readonly", "status": "refused", "code": "authority_denied"})

	on := true
	if rep := e.op("kill-switch", OpRequest{Engaged: &on, Reason: "drill"}); !rep.OK {
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
	e, logs := bootObserved(t, hs.URL, BootOptions{}, func(c *Config) { c.Runtime.LogArguments = true })
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
	e, logs := bootObserved(t, deadURL(t), BootOptions{}, nil)
	nc := e.client("acme", "agent_email")
	r := e.propose(nc, "acme", "agent_email", refund("run_out", "k1", "ord_out", 900))
	if r.Status != kernel.StatusUnknown || !strings.HasPrefix(r.Reason, "provider unreachable: ") || !strings.Contains(r.Reason, "connection refused") {
		t.Fatalf("reply %s %q, want unknown with the provider's failure", r.Status, r.Reason)
	}
	if strings.Contains(r.Reason, "/refunds") {
		t.Fatalf("the reason names the provider URL: %q", r.Reason)
	}
	logs.waitLine(t, "provider error", map[string]any{"level": "WARN", "capability": "adp_payments.issue_refund", "call": "dispatch",
		"kind": "transport", "attempt": r.AttemptID, "reason": r.Reason})
	logs.waitLine(t, "decision", map[string]any{"level": "INFO", "status": "unknown", "attempt": r.AttemptID, "reason": r.Reason})

	att := e.op("attempts", OpRequest{})
	if len(att.Attempts) != 1 || att.Attempts[0].AttemptID != r.AttemptID || !strings.HasPrefix(att.Attempts[0].LastReason, "provider unreachable: ") {
		t.Fatalf("attempts %+v", att.Attempts)
	}
	rec := e.op("reconcile", OpRequest{All: true})
	if len(rec.Settled) != 1 || !strings.HasPrefix(rec.Settled[0].Reason, "provider unreachable: ") {
		t.Fatalf("reconcile %+v", rec.Settled)
	}
	logs.waitLine(t, "provider error", map[string]any{"call": "query", "kind": "transport", "attempt": r.AttemptID})
	logs.waitLine(t, "reconciled", map[string]any{"level": "WARN", "attempt": r.AttemptID, "result": "provider_failed"})

	fams := scrape(t, e.rt)
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
	e, _ := bootObserved(t, hs.URL, BootOptions{}, nil)
	nc := e.client("acme", "agent_email")
	r := e.propose(nc, "acme", "agent_email", refund("run_5", "k1", "ord_5", 10))
	if r.Status != kernel.StatusUnknown || r.Reason != "provider answered 503 Service Unavailable" {
		t.Fatalf("5xx: %s %q", r.Status, r.Reason)
	}
	mode.Store("m", "slow")
	r = e.propose(nc, "acme", "agent_email", refund("run_5", "k2", "ord_6", 10))
	if r.Status != kernel.StatusUnknown || r.Reason != "provider timed out after 500ms" {
		t.Fatalf("timeout: %s %q", r.Status, r.Reason)
	}
	fams := scrape(t, e.rt)
	for _, kind := range []string{FailureStatus5xx, FailureTimeout} {
		if v, _ := sample(fams, "contextos_provider_errors_total", map[string]string{"kind": kind}); v != 1 {
			t.Errorf("provider errors of kind %s: %v", kind, v)
		}
	}
}
