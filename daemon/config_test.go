package daemon_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/daemon"
	"github.com/contextos/ledger/internal/testing/daemontest"
)

// validationBase is a valid configuration with one effectful HTTP
// capability; each case of TestValidateHostile replaces one line of it.
const validationBase = `[nats]
data_dir = "d"
listen = "127.0.0.1:0"

[runtime]
workers = 8

[[tenants]]
id = "t"
  [[tenants.agents]]
  id = "a"
  password = "p-secret-passphrase"
  capabilities = ["pay.refund"]

[[capabilities]]
id = "pay.refund"
effectful = true
adapter = "http"
  [capabilities.http]
  url = "http://127.0.0.1:9/refunds"
  method = "POST"
  timeout = "2s"
  idempotency_header = "Idempotency-Key"
  [capabilities.recovery]
  completion = "/status"
  applied = ["succeeded"]
  not_applied = ["failed"]
  query_url = "http://127.0.0.1:9/refunds/{idempotency_key}"
`

// TestValidateHostile: every hostile value is refused by ParseConfig (what
// --check-config runs) and, set in code on a configuration that loaded, by
// Boot with the same message and before anything starts (no panic, no
// server).
func TestValidateHostile(t *testing.T) {
	cases := []struct {
		name      string
		old, repl string // a line of validationBase and its replacement
		mutate    func(*config.Config)
		want      string
	}{
		{"workers -1", "workers = 8", "workers = -1", func(c *config.Config) { c.Runtime.Workers = -1 }, "runtime.workers must be 1..65536, not -1"},
		{"workers huge", "workers = 8", "workers = 100000000", func(c *config.Config) { c.Runtime.Workers = 100000000 }, "runtime.workers must be"},
		{"audit_checkpoint_every -1", "workers = 8", "audit_checkpoint_every = -1", func(c *config.Config) { c.Runtime.AuditCheckpointEvery = -1 }, "runtime.audit_checkpoint_every must be 1..1048576 (0: the default), not -1"},
		{"min_free_bytes -1", "workers = 8", "min_free_bytes = -1", func(c *config.Config) { c.Runtime.MinFreeBytes = -1 }, "runtime.min_free_bytes must be 0.."},
		{"store_space_interval 1ms", "workers = 8", `store_space_interval = "1ms"`, func(c *config.Config) { c.Runtime.StoreSpaceInterval.Duration = time.Millisecond }, "runtime.store_space_interval must be 100ms..1m, not 1ms"},
		{"max_proposal_bytes -1", "workers = 8", "max_proposal_bytes = -1", func(c *config.Config) { c.Runtime.MaxProposalBytes = -1 }, "runtime.max_proposal_bytes must be 1..8388608, not -1"},
		{"replicas -3", `listen = "127.0.0.1:0"`, "replicas = -3", func(c *config.Config) { c.NATS.Replicas = -3 }, "nats.replicas must be 1..5, not -3"},
		{"replicas 3 embedded", `listen = "127.0.0.1:0"`, "replicas = 3", func(c *config.Config) { c.NATS.Replicas = 3 }, "the embedded server is one node"},
		{"ftp url", `url = "http://127.0.0.1:9/refunds"`, `url = "ftp://x"`, func(c *config.Config) { c.Capabilities[0].HTTP.URL = "ftp://x" }, `http.url: "ftp://x": the scheme must be http or https`},
		{"plain http remote", `url = "http://127.0.0.1:9/refunds"`, `url = "http://pay.example.com/refunds"`, func(c *config.Config) { c.Capabilities[0].HTTP.URL = "http://pay.example.com/refunds" }, "plain http only to a loopback host"},
		{"credentials in url", `url = "http://127.0.0.1:9/refunds"`, `url = "https://u:pw@pay.example.com/refunds"`, func(c *config.Config) { c.Capabilities[0].HTTP.URL = "https://u:pw@pay.example.com/refunds" }, "credentials in the URL are refused"},
		{"invalid method", `method = "POST"`, `method = "PO ST"`, func(c *config.Config) { c.Capabilities[0].HTTP.Method = "PO ST" }, `http.method must be one of POST, PUT, PATCH, DELETE, GET, not "PO ST"`},
		{"unknown method", `method = "POST"`, `method = "BREW"`, func(c *config.Config) { c.Capabilities[0].HTTP.Method = "BREW" }, `http.method must be one of`},
		{"invalid header name", `idempotency_header = "Idempotency-Key"`, `idempotency_header = "Idem Key:"`, func(c *config.Config) { c.Capabilities[0].HTTP.IdempotencyHeader = "Idem Key:" }, `http.idempotency_header: "Idem Key:" is not a valid header name`},
		{"reserved header name", `idempotency_header = "Idempotency-Key"`, `idempotency_header = "content-length"`, func(c *config.Config) { c.Capabilities[0].HTTP.IdempotencyHeader = "content-length" }, "Content-Length is set by the transport"},
		{"timeout 100000h", `timeout = "2s"`, `timeout = "100000h"`, func(c *config.Config) { c.Capabilities[0].HTTP.Timeout.Duration = 100000 * time.Hour }, "http.timeout must be 100ms..5m0s, not 100000h0m0s"},
		{"timeout 1ns", `timeout = "2s"`, `timeout = "1ns"`, func(c *config.Config) { c.Capabilities[0].HTTP.Timeout.Duration = 1 }, "http.timeout must be 100ms..5m0s, not 1ns"},
		{"query_url without key", `query_url = "http://127.0.0.1:9/refunds/{idempotency_key}"`, `query_url = "http://127.0.0.1:9/refunds"`, func(c *config.Config) { c.Capabilities[0].Recovery.QueryURL = "http://127.0.0.1:9/refunds" }, "recovery.query_url must contain {idempotency_key}"},
		{"query_url ftp", `query_url = "http://127.0.0.1:9/refunds/{idempotency_key}"`, `query_url = "ftp://x/{idempotency_key}"`, func(c *config.Config) { c.Capabilities[0].Recovery.QueryURL = "ftp://x/{idempotency_key}" }, "recovery.query_url: \"ftp://x/k\": the scheme must be http or https"},
		{"nats listen 0.0.0.0", `listen = "127.0.0.1:0"`, `listen = "0.0.0.0:4222"`, func(c *config.Config) { c.NATS.Listen = "0.0.0.0:4222" }, `nats.listen: the embedded server listens on loopback only: loopback only, not "0.0.0.0"`},
		{"nats listen bad port", `listen = "127.0.0.1:0"`, `listen = "127.0.0.1:99999"`, func(c *config.Config) { c.NATS.Listen = "127.0.0.1:99999" }, "the port must be 0..65535"},
		{"metrics 0.0.0.0", "workers = 8", `metrics_listen = "0.0.0.0:9464"`, func(c *config.Config) { c.Runtime.MetricsListen = "0.0.0.0:9464" }, `runtime.metrics_listen: loopback only, not "0.0.0.0"`},
		{"metrics [::]", "workers = 8", `metrics_listen = "[::]:9464"`, func(c *config.Config) { c.Runtime.MetricsListen = "[::]:9464" }, `runtime.metrics_listen: loopback only, not "::"`},
		{"metrics_allow_non_loopback alone", "workers = 8", "metrics_allow_non_loopback = true", func(c *config.Config) { c.Runtime.MetricsAllowNonLoopback = true }, "runtime.metrics_allow_non_loopback needs runtime.metrics_listen"},
		{"reconcile 1ns", "workers = 8", `reconcile_interval = "1ns"`, func(c *config.Config) { c.Runtime.ReconcileInterval.Duration = 1 }, "runtime.reconcile_interval must be 0 (off) or 10ms..24h0m0s, not 1ns"},
		{"external nats without a key", `data_dir = "d"`, `url = "nats://127.0.0.1:4222"`, func(c *config.Config) { c.NATS.URL, c.NATS.DataDir, c.NATS.Listen = "nats://127.0.0.1:4222", "", "" }, "runtime.key_file (or nats.data_dir) is required with an external NATS"},
		{"creds file missing", `data_dir = "d"`, "url = \"nats://127.0.0.1:4222\"\ndata_dir = \"d\"\ncreds = \"/nonexistent/rt.creds\"", func(c *config.Config) {
			c.NATS.URL, c.NATS.Listen, c.NATS.Creds = "nats://127.0.0.1:4222", "", "/nonexistent/rt.creds"
		}, "nats.creds: stat /nonexistent/rt.creds"},
		{"nkey file missing", `data_dir = "d"`, "url = \"nats://127.0.0.1:4222\"\ndata_dir = \"d\"\nnkey_file = \"/nonexistent/rt.nk\"", func(c *config.Config) {
			c.NATS.URL, c.NATS.Listen, c.NATS.NkeyFile = "nats://127.0.0.1:4222", "", "/nonexistent/rt.nk"
		}, "nats.nkey_file"},
		{"nats tls with the embedded server", `data_dir = "d"`, "data_dir = \"d\"\ntls_ca_file = \"ca.pem\"", func(c *config.Config) { c.NATS.TLSCAFile = "ca.pem" }, "are for an external deployment"},
		{"nats url http", `listen = "127.0.0.1:0"`, `url = "http://127.0.0.1:4222"`, func(c *config.Config) { c.NATS.URL = "http://127.0.0.1:4222" }, "the scheme must be nats, tls, ws or wss"},
		{"nats url list with a bad one", `listen = "127.0.0.1:0"`, `url = "nats://a:4222,ftp://b:4222"`, func(c *config.Config) { c.NATS.URL = "nats://a:4222,ftp://b:4222" }, `nats.url "ftp://b:4222"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(validationBase, c.old) {
				t.Fatalf("the base has no line %q", c.old)
			}
			_, err := config.Parse([]byte(strings.Replace(validationBase, c.old, c.repl, 1)))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("ParseConfig: %v, want %q", err, c.want)
			}
			cfg, err := config.Parse([]byte(validationBase))
			if err != nil {
				t.Fatal(err)
			}
			c.mutate(cfg)
			rt, err := bootConfig(t, cfg, daemontest.Options{})
			if err == nil {
				rt.Close()
				t.Fatal("Boot accepted it")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Boot: %v, want %q", err, c.want)
			}
		})
	}
}

// TestValidateKeyFile: a key file that is there must load, so a key
// readable by others is refused by the check as it is at start.
func TestValidateKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "runtime.key")
	if _, err := daemon.CreateKey(path); err != nil {
		t.Fatal(err)
	}
	conf := strings.Replace(validationBase, "workers = 8", "key_file = "+strconv.Quote(path), 1)
	if _, err := config.Parse([]byte(conf)); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Parse([]byte(conf)); err == nil || !strings.Contains(err.Error(), "runtime.key_file: ") || !strings.Contains(err.Error(), "want 0600") {
		t.Fatalf("a 0644 key: %v", err)
	}
}

// TestValidateAccepts: the values at the edge of each bound, and the shapes
// deployments use (a list of cluster URLs, https anywhere, http to
// localhost), are accepted.
func TestValidateAccepts(t *testing.T) {
	cases := []struct{ old, repl string }{
		{"workers = 8", "workers = 65536"},
		{"workers = 8", "max_proposal_bytes = 8388608"},
		{"workers = 8", `reconcile_interval = "24h"`},
		{"workers = 8", `metrics_listen = "localhost:0"`},
		{"workers = 8", "metrics_listen = \"0.0.0.0:9464\"\nmetrics_allow_non_loopback = true"},
		{`timeout = "2s"`, `timeout = "5m"`},
		{`method = "POST"`, `method = "PUT"`},
		{`url = "http://127.0.0.1:9/refunds"`, `url = "https://pay.example.com/refunds"`},
		{`url = "http://127.0.0.1:9/refunds"`, `url = "http://localhost:9/refunds"`},
		{`url = "http://127.0.0.1:9/refunds"`, `url = "http://[::1]:9/refunds"`},
		{`idempotency_header = "Idempotency-Key"`, `idempotency_header = "X-Request-Id"`},
		{`data_dir = "d"`, "url = \"nats://n1:4222, nats://n2:4222,tls://n3:4222\"\nreplicas = 5\ndata_dir = \"d\""},
	}
	for _, c := range cases {
		if _, err := config.Parse([]byte(strings.Replace(validationBase, c.old, c.repl, 1))); err != nil {
			t.Errorf("%s: %v", c.repl, err)
		}
	}
}
