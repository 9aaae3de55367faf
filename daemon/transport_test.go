package daemon_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/gateway"
	"github.com/contextos/ledger/internal/testing/daemontest"
	"github.com/contextos/ledger/internal/testing/testenv"
	"github.com/contextos/ledger/kernel"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// calls records what a provider received.
type calls struct {
	mu   sync.Mutex
	n    int
	auth []string
	keys []string
	cns  []string
}

func (c *calls) handler(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	c.n++
	c.auth = append(c.auth, r.Header.Get("Authorization"))
	c.keys = append(c.keys, r.Header.Get("Idempotency-Key"))
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		c.cns = append(c.cns, r.TLS.PeerCertificates[0].Subject.CommonName)
	}
	c.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"status": "succeeded"})
}

func (c *calls) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// adapterFor parses validationBase with the http table's lines replaced.
func adapterFor(t *testing.T, replace ...string) *gateway.HTTPAdapter {
	t.Helper()
	s := validationBase
	for i := 0; i < len(replace); i += 2 {
		if !strings.Contains(s, replace[i]) {
			t.Fatalf("no %q in the base", replace[i])
		}
		s = strings.Replace(s, replace[i], replace[i+1], 1)
	}
	cfg, err := config.Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return gateway.NewHTTPAdapter(&cfg.Capabilities[0])
}

const baseURL = `url = "http://127.0.0.1:9/refunds"`

// TestProviderTLSPrivateCA: a provider on https with a certificate of a
// private CA made here, verifying the client's certificate of the same CA,
// is reached with ca_file, cert_file and key_file, and receives the bearer
// token from a file and another header from the environment. Without
// ca_file the system roots refuse its certificate and nothing is sent.
func TestProviderTLSPrivateCA(t *testing.T) {
	ca := testenv.NewCA(t)
	var got calls
	srv := httptest.NewUnstartedServer(http.HandlerFunc(got.handler))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, "provider", x509.ExtKeyUsageServerAuth)},
		ClientCAs: ca.Pool(), ClientAuth: tls.RequireAndVerifyClientCert}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	ca.Issue(t, "contextosd", x509.ExtKeyUsageClientAuth)
	token := filepath.Join(ca.Dir, "token")
	if err := os.WriteFile(token, []byte("s3cret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PROVIDER_TENANT", "acme-eu")
	tlsLines := `url = "` + srv.URL + `/refunds"
  ca_file = "` + filepath.Join(ca.Dir, "ca.pem") + `"
  cert_file = "` + filepath.Join(ca.Dir, "contextosd.pem") + `"
  key_file = "` + filepath.Join(ca.Dir, "contextosd-key.pem") + `"
  headers = [{ name = "Authorization", prefix = "Bearer ", value_file = "` + token + `" },
             { name = "X-Tenant", value_env = "PROVIDER_TENANT" }]`
	a := adapterFor(t, baseURL, tlsLines)
	obs := a.Dispatch(context.Background(), "att-tls-1", json.RawMessage(`{"order_id":"o1","amount_minor":5}`))
	if obs.Outcome != kernel.OutcomeApplied || got.count() != 1 {
		t.Fatalf("over TLS: %+v, %d calls", obs, got.count())
	}
	if got.auth[0] != "Bearer s3cret-token" || got.keys[0] != "att-tls-1" || got.cns[0] != "contextosd" {
		t.Fatalf("the provider saw auth %q key %q client %q", got.auth[0], got.keys[0], got.cns[0])
	}

	untrusted := adapterFor(t, baseURL, `url = "`+srv.URL+`/refunds"`)
	if obs := untrusted.Dispatch(context.Background(), "att-tls-2", json.RawMessage(`{}`)); obs.Outcome != kernel.OutcomeUnknown || got.count() != 1 {
		t.Fatalf("without the CA: %+v, %d calls", obs, got.count())
	}

	for _, c := range []struct{ lines, want string }{
		{`url = "` + srv.URL + `/refunds"` + "\n  ca_file = \"" + token + "\"", "no PEM certificate"},
		{`url = "` + srv.URL + `/refunds"` + "\n  cert_file = \"" + filepath.Join(ca.Dir, "contextosd.pem") + "\"", "http.cert_file and key_file go together"},
		{`url = "` + srv.URL + `/refunds"` + "\n  headers = [{ name = \"Authorization\", value_env = \"NOT_SET_ANYWHERE\" }]", "environment variable NOT_SET_ANYWHERE is not set"},
		{`url = "` + srv.URL + `/refunds"` + "\n  headers = [{ name = \"Authorization\" }]", "exactly one of value_file and value_env"},
		{`url = "` + srv.URL + `/refunds"` + "\n  headers = [{ name = \"Idempotency-Key\", value_env = \"PROVIDER_TENANT\" }]", "Idempotency-Key is set twice"},
	} {
		_, err := config.Parse([]byte(strings.Replace(validationBase, baseURL, c.lines, 1)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.lines, err, c.want)
		}
	}
}

// TestProviderRedirectNotFollowed: a provider answering 307 to another
// host does not get the call sent there; the outcome is unknown.
func TestProviderRedirectNotFollowed(t *testing.T) {
	var elsewhere calls
	other := httptest.NewServer(http.HandlerFunc(elsewhere.handler))
	t.Cleanup(other.Close)
	var hits atomic.Int32
	redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Redirect(w, r, other.URL+"/steal", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirecting.Close)
	a := adapterFor(t, baseURL, `url = "`+redirecting.URL+`/refunds"`)
	obs := a.Dispatch(context.Background(), "att-redirect", json.RawMessage(`{}`))
	if obs.Outcome != kernel.OutcomeUnknown || hits.Load() != 1 || elsewhere.count() != 0 {
		t.Fatalf("%+v: %d hits, %d elsewhere", obs, hits.Load(), elsewhere.count())
	}
}

// refusedURL is an address where nothing listens (connection refused).
func refusedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// TestProviderFallbackOnRefused: with the first endpoint refusing
// connections, the call and a query go to the fallback, once each.
func TestProviderFallbackOnRefused(t *testing.T) {
	var got calls
	fallback := httptest.NewServer(http.HandlerFunc(got.handler))
	t.Cleanup(fallback.Close)
	dead := refusedURL(t)
	a := adapterFor(t, baseURL, `url = "`+dead+`/refunds"`+"\n  fallback_urls = [\""+fallback.URL+"/refunds\"]",
		`query_url = "http://127.0.0.1:9/refunds/{idempotency_key}"`,
		`query_url = "`+dead+`/refunds/{idempotency_key}"`+"\n  fallback_query_urls = [\""+fallback.URL+"/refunds/{idempotency_key}\"]")
	if obs := a.Dispatch(context.Background(), "att-fb", json.RawMessage(`{}`)); obs.Outcome != kernel.OutcomeApplied || got.count() != 1 {
		t.Fatalf("dispatch: %+v, %d calls at the fallback", obs, got.count())
	}
	if obs := a.Query(context.Background(), "att-fb"); obs.Outcome != kernel.OutcomeApplied || got.count() != 2 {
		t.Fatalf("query: %+v, %d calls at the fallback", obs, got.count())
	}
}

// TestProviderNoFallbackAfterTimeout: an endpoint that accepted the call
// and then timed out may have applied it, so the fallback never sees it
// and the outcome is unknown.
func TestProviderNoFallbackAfterTimeout(t *testing.T) {
	var got calls
	fallback := httptest.NewServer(http.HandlerFunc(got.handler))
	t.Cleanup(fallback.Close)
	release := make(chan struct{})
	var received atomic.Int32
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		received.Add(1)
		<-release
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(release) })
	a := adapterFor(t, baseURL, `url = "`+slow.URL+`/refunds"`+"\n  fallback_urls = [\""+fallback.URL+"/refunds\"]",
		`timeout = "2s"`, `timeout = "200ms"`)
	obs := a.Dispatch(context.Background(), "att-slow", json.RawMessage(`{}`))
	if obs.Outcome != kernel.OutcomeUnknown || received.Load() != 1 || got.count() != 0 {
		t.Fatalf("%+v: slow endpoint received %d, fallback %d", obs, received.Load(), got.count())
	}
}

// TestProviderHTTPOnlyLoopback: plain http to another host is refused
// unless allow_http says so.
func TestProviderHTTPOnlyLoopback(t *testing.T) {
	remote := `url = "http://pay.internal:8080/refunds"`
	if _, err := config.Parse([]byte(strings.Replace(validationBase, baseURL, remote, 1))); err == nil || !strings.Contains(err.Error(), "plain http only to a loopback host") {
		t.Fatalf("http to a remote host: %v", err)
	}
	if _, err := config.Parse([]byte(strings.Replace(validationBase, baseURL, remote+"\n  allow_http = true", 1))); err != nil {
		t.Fatalf("with allow_http: %v", err)
	}
	if _, err := config.Parse([]byte(strings.Replace(validationBase, baseURL, baseURL+"\n  fallback_urls = [\"http://pay.internal/refunds\"]", 1))); err == nil {
		t.Fatal("a remote http fallback was accepted")
	}
}

// TestNATSTLSAndNkey: a runtime reaches a NATS server that requires TLS
// with a certificate of a private CA and verifies client certificates,
// authenticating with an nkey seed file; without tls_ca_file the server's
// certificate is refused and Boot fails saying so.
func TestNATSTLSAndNkey(t *testing.T) {
	ca := testenv.NewCA(t)
	serverCert := ca.Issue(t, "nats", x509.ExtKeyUsageServerAuth)
	ca.Issue(t, "runtime", x509.ExtKeyUsageClientAuth)
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := kp.Seed()
	pub, _ := kp.PublicKey()
	seedFile := filepath.Join(ca.Dir, "runtime.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	prov := httptest.NewServer(http.HandlerFunc((&calls{}).handler))
	t.Cleanup(prov.Close)
	cfg := testConfig(t, t.TempDir(), prov.URL)
	const pw = "tls-replies-secret"
	opts := &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true,
		TLS: true, TLSVerify: true, TLSTimeout: 2,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{serverCert}, ClientCAs: ca.Pool(), ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12},
		Users:     gateway.ServerUsers(cfg, pw)[1:], // the reply user and the principals; the runtime is the nkey
		Nkeys:     []*server.NkeyUser{{Nkey: pub}}}
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	external := func(withCA bool) *config.Config {
		c := testConfig(t, t.TempDir(), prov.URL)
		c.NATS.URL, c.NATS.Listen = srv.ClientURL(), ""
		c.NATS.NkeyFile = seedFile
		c.NATS.ReplyUser, c.NATS.ReplyPassword = gateway.ReplyUser, pw
		c.NATS.TLSCertFile, c.NATS.TLSKeyFile = filepath.Join(ca.Dir, "runtime.pem"), filepath.Join(ca.Dir, "runtime-key.pem")
		if withCA {
			c.NATS.TLSCAFile = filepath.Join(ca.Dir, "ca.pem")
		}
		c.Runtime.KeyFile = filepath.Join(t.TempDir(), "runtime.key")
		return c
	}
	rt, err := bootConfig(t, external(true), daemontest.Options{})
	if err != nil {
		t.Fatalf("Boot over TLS with an nkey: %v", err)
	}
	rt.Close()
	if rt, err := bootConfig(t, external(false), daemontest.Options{}); err == nil {
		rt.Close()
		t.Fatal("Boot trusted a certificate of an unknown CA")
	} else if !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("without tls_ca_file: %v", err)
	}
}
