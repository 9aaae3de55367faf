package daemon

// The tests of this file stay in package daemon because what they test has
// no public surface: the key file's create-or-load race (createOrLoadKey,
// reached publicly only through a full Boot per replica), the OTLP exporter
// read from the environment (tracingFromEnv) and the startup log's URL
// redaction (redactURL). None of them boots a runtime; every test that does
// is in package daemon_test and boots through daemontest.

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"

	"github.com/contextos/ledger/config"
)

// TestSharedKeyFileConverges: replicas that start at once on one key file
// (a shared volume, no key yet) all end up with the same key.
func TestSharedKeyFileConverges(t *testing.T) {
	cfg := &config.Config{Runtime: config.RuntimeConfig{KeyFile: filepath.Join(t.TempDir(), "keys", "runtime.key")}}
	keys := make([][]byte, 8)
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	for i := range keys {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			keys[i], errs[i] = createOrLoadKey(cfg.Runtime.KeyFile)
		}(i)
	}
	wg.Wait()
	for i := range keys {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if !bytes.Equal(keys[i], keys[0]) {
			t.Fatalf("replica %d made its own key", i)
		}
	}
	matches, _ := filepath.Glob(cfg.Runtime.KeyFile + ".*")
	if len(matches) != 0 {
		t.Fatalf("left behind: %v", matches)
	}
}

// TestTracingFromEnv: tracing is off without an OTLP endpoint, and with
// OTEL_EXPORTER_OTLP_ENDPOINT set the spans reach that collector over
// OTLP/HTTP.
func TestTracingFromEnv(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	if tp, err := tracingFromEnv(context.Background()); tp != nil || err != nil {
		t.Fatalf("tracing on without an endpoint: %v %v", tp, err)
	}
	posts := make(chan *http.Request, 4)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		posts <- r
	}))
	defer hs.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", hs.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	tp, err := tracingFromEnv(context.Background())
	if err != nil || tp == nil {
		t.Fatalf("tracing from env: %v %v", tp, err)
	}
	_, span := tp.Tracer("github.com/contextos/ledger/gateway").Start(context.Background(), "propose")
	span.End()
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-posts:
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Fatalf("collector got %s %s %s", r.Method, r.URL.Path, r.Header.Get("Content-Type"))
		}
	default:
		t.Fatal("no OTLP export reached the collector")
	}
	t.Setenv("OTEL_SDK_DISABLED", "true")
	if tp, _ := tracingFromEnv(context.Background()); tp != nil {
		t.Fatal("tracing on with OTEL_SDK_DISABLED=true")
	}
}

// TestRedactURL: the startup log shows a NATS URL without its secrets.
func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"nats://127.0.0.1:4222":                          "nats://127.0.0.1:4222",
		"nats://u:secret@a:4222,nats://u:secret@b:4222":  "nats://u:xxxxx@a:4222,nats://u:xxxxx@b:4222",
		"tls://s3cr3t-token@nats.example:4222":           "tls://xxxxx@nats.example:4222",
		"nats://%zz@host":                                "(unparsable url)",
		"nats://user:p%40ss@127.0.0.1:4222/?name=x#frag": "nats://user:xxxxx@127.0.0.1:4222/?name=x#frag",
	} {
		if got := redactURL(in); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
