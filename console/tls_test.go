package console_test

import (
	"crypto/x509"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/console"
	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/gateway"
	"github.com/contextos/ledger/internal/testing/daemontest"
	"github.com/contextos/ledger/internal/testing/testenv"
)

// TestConsoleNATSTLS: a runtime on a NATS server that speaks only TLS, with
// a private CA's certificate, and verifies client certificates. The
// console's operator connections check the server against the runtime's
// nats.tls_ca_file and present the console's own client certificate: the
// operator logs in. A console without the CA, or without a client
// certificate, refuses the login saying the runtime cannot be reached over
// TLS, and why when the client can tell.
func TestConsoleNATSTLS(t *testing.T) {
	ca := testenv.NewCA(t)
	ca.Issue(t, "runtime", x509.ExtKeyUsageClientAuth)
	ca.Issue(t, "console", x509.ExtKeyUsageClientAuth)
	const pw = "tls-runtime-secret"
	var srv *events.Embedded
	var cfg *config.Config
	rt := daemontest.Boot(t, daemontest.Options{Console: true, Config: func(c *config.Config) {
		cfg = c
		srv = testenv.TLSServer(t, ca, true, gateway.ServerUsers(cfg, pw))
		n := &cfg.NATS
		n.URL, n.Listen, n.User, n.Password, n.ReplyUser, n.ReplyPassword = srv.ClientURL(), "", gateway.RuntimeUser, pw, gateway.ReplyUser, pw
		n.TLSCAFile, n.TLSCertFile, n.TLSKeyFile = ca.File("ca.pem"), ca.File("runtime.pem"), ca.File("runtime-key.pem")
		cfg.Console.Listen = "127.0.0.1:0"
		cfg.Console.NATSTLSCertFile, cfg.Console.NATSTLSKeyFile = ca.File("console.pem"), ca.File("console-key.pem")
		cfg.Runtime.KeyFile = filepath.Join(t.TempDir(), "runtime.key")
	}}).RT
	n := &cfg.NATS
	if rt.ConsoleURL == "" {
		t.Fatal("the runtime serves no console with console.listen set")
	}
	if rt.URL != srv.ClientURL() || !strings.HasPrefix(rt.URL, "tls://") {
		t.Fatalf("the runtime is not on the TLS server: %s", rt.URL)
	}
	jar, _ := cookiejar.New(nil)
	c := &client{t: t, base: rt.ConsoleURL, hc: &http.Client{Jar: jar, Timeout: 30 * time.Second}}
	if page, _ := c.login("acme", "ops_alice"); !strings.Contains(page, `id="exposure"`) {
		t.Fatalf("the operator's page over TLS:\n%s", page)
	}

	noCA, err := console.OperatorTLS(&config.Config{Console: cfg.Console})
	if err != nil {
		t.Fatal(err)
	}
	noCert, err := console.OperatorTLS(&config.Config{NATS: config.NATSConfig{TLSCAFile: n.TLSCAFile}})
	if err != nil {
		t.Fatal(err)
	}
	// Without a client certificate the server ends the handshake; under
	// TLS 1.3 the client may see that only as the connection closing.
	for _, tc := range []struct {
		name, want string
		o          console.Options
	}{
		{"without the CA", "certificate signed by unknown authority", console.Options{TLS: noCA}},
		{"without TLS", "certificate signed by unknown authority", console.Options{}},
		{"without a client certificate", "tls", console.Options{TLS: noCert}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			o.Config, o.NATSURL, o.Manifest = config.ConsoleConfig{Listen: "127.0.0.1:0"}, rt.URL, cfg
			con, err := console.Start(o)
			if err != nil {
				t.Fatal(err)
			}
			defer con.Close()
			jar, _ := cookiejar.New(nil)
			c := &client{t: t, base: con.URL, hc: &http.Client{Jar: jar, Timeout: 30 * time.Second}}
			_, page := c.get("/login")
			status, page := c.post("/login", url.Values{"csrf": {csrfOf(t, page)}, "tenant": {"acme"}, "operator": {"ops_alice"},
				"password": {passwords["acme.ops_alice"]}}, nil)
			if status != http.StatusUnauthorized || !strings.Contains(page, "cannot be reached") || !strings.Contains(page, tc.want) {
				t.Fatalf("%d, want a refusal naming %q:\n%s", status, tc.want, page)
			}
			t.Logf("refused: %s", loginError(page))
		})
	}
}

// loginError is the error the login page shows.
func loginError(page string) string {
	i := strings.Index(page, `id="login-error">`)
	if i < 0 {
		return ""
	}
	rest := page[i+len(`id="login-error">`):]
	if j := strings.Index(rest, "<"); j >= 0 {
		return rest[:j]
	}
	return rest
}
