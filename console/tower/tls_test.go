package tower

import (
	"context"
	"crypto/x509"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/exposure"
	"github.com/contextos/ledger/gateway"
	"github.com/contextos/ledger/internal/testing/daemontest"
	"github.com/contextos/ledger/internal/testing/testenv"
	"github.com/contextos/ledger/wire"
	"github.com/nats-io/nats.go"
)

// TestTowerNATSTLS: a runtime on a NATS server that speaks only TLS, with a
// private CA's certificate, and verifies client certificates. With the
// runtime's tls_ca_file, tls_cert_file and tls_key_file, towerd reads the
// live log (as the configured operator) and logs an operator in; without
// the CA both fail saying the certificate is not trusted.
func TestTowerNATSTLS(t *testing.T) {
	ca := testenv.NewCA(t)
	ca.Issue(t, "runtime", x509.ExtKeyUsageClientAuth)
	ca.Issue(t, "towerd", x509.ExtKeyUsageClientAuth)
	const pw = "tls-runtime-secret"
	d := daemontest.Boot(t, daemontest.Options{Console: true, Config: func(cfg *config.Config) {
		srv := testenv.TLSServer(t, ca, true, gateway.ServerUsers(cfg, pw))
		n := &cfg.NATS
		n.URL, n.Listen, n.User, n.Password, n.ReplyUser, n.ReplyPassword = srv.ClientURL(), "", gateway.RuntimeUser, pw, gateway.ReplyUser, pw
		n.TLSCAFile, n.TLSCertFile, n.TLSKeyFile = ca.File("ca.pem"), ca.File("runtime.pem"), ca.File("runtime-key.pem")
		cfg.Runtime.KeyFile = filepath.Join(t.TempDir(), "runtime.key")
	}})
	rt, prov := d.RT, d.Provider
	b := &runtime{t: t, rt: rt, prov: prov, opts: []nats.Option{nats.RootCAs(ca.File("ca.pem")), nats.ClientCert(ca.File("runtime.pem"), ca.File("runtime-key.pem"))}}
	if r := b.propose("acme", "agent_email", "k1", "ord_tls", 700); r.Status != wire.StatusApplied {
		t.Fatalf("%+v", r)
	}
	_, keys := b.export(t.TempDir(), "acme", "ops_alice", func(v exposure.View) bool { return len(v.Resources) == 1 })
	t.Setenv("TOWER_TEST_TOWER", passwords["acme.ops_tower"])
	config := func(withCA bool) *Config {
		t.Helper()
		tlsLines := `tls_cert_file = "` + ca.File("towerd.pem") + `"` + "\n" + `tls_key_file = "` + ca.File("towerd-key.pem") + `"` + "\n"
		if withCA {
			tlsLines += `tls_ca_file = "` + ca.File("ca.pem") + `"` + "\n"
		}
		c, err := ParseConfig([]byte(`listen = "127.0.0.1:0"
[[runtimes]]
name = "tls-1"
nats_url = "`+rt.URL+`"
`+tlsLines+`  [[runtimes.tenants]]
  id = "acme"
  keys = "`+keys+`"
  operator = "ops_tower"
  password_env = "TOWER_TEST_TOWER"
`), "")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	tw := New(config(true))
	if l := logOf(t, tw.Refresh(context.Background()), "tls-1", "acme"); !l.Verified || l.Source != "live (read as ops_tower)" {
		t.Fatalf("the live log over TLS: %+v", l)
	}
	web, err := tw.Serve(0)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	if page := newClient(t, web.URL).login("acme", "ops_alice"); !strings.Contains(page, `data-resource="tls-1/acme/ord_tls"`) {
		t.Fatalf("alice's page over TLS:\n%s", page)
	}

	untrusting := New(config(false))
	if l := logOf(t, untrusting.Refresh(context.Background()), "tls-1", "acme"); l.Verified || !strings.Contains(l.Error, "certificate signed by unknown authority") {
		t.Fatalf("the live log without the CA: %+v", l)
	}
	web2, err := untrusting.Serve(0)
	if err != nil {
		t.Fatal(err)
	}
	defer web2.Close()
	status, page := newClient(t, web2.URL).tryLogin("acme", "ops_alice", passwords["acme.ops_alice"])
	if status != http.StatusUnauthorized || !strings.Contains(page, "certificate signed by unknown authority") {
		t.Fatalf("a login without the CA: %d\n%s", status, page)
	}
}
