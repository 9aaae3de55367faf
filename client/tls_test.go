package client_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextos/ledger/client"
	"github.com/contextos/ledger/internal/testing/testenv"
	"github.com/contextos/ledger/internal/testing/tlsenv"
)

// startTLS starts the TLS environment of the clients' suites: a TLS-only
// nats-server verifying client certificates, with nkey and password users
// and a runtime behind it, and an operator-mode one with creds users.
func startTLS(t *testing.T) *tlsenv.Env {
	t.Helper()
	env, err := tlsenv.Start(tlsenv.Options{Config: "../examples/shared-guarantees/contextos.toml", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Close)
	return env
}

// withTLS gives o the environment's CA and client certificate.
func withTLS(env *tlsenv.Env, o client.Options) client.Options {
	o.TLSCAFile, o.TLSCertFile, o.TLSKeyFile = env.Info.CAFile, env.Info.CertFile, env.Info.KeyFile
	if o.Tenant == "" {
		o.Tenant = env.Info.Tenant
	}
	return o
}

func mustConnect(t *testing.T, o client.Options) *client.Client {
	t.Helper()
	c, err := client.Connect(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestTLSCredentials: over TLS with a private CA and a client certificate,
// an agent proposes with its nkey and an operator admits its run with a
// password; on the operator-mode server a creds file is accepted (and,
// nobody being behind the subject, the proposal stays unresolved) and
// one signed by an untrusted account is refused authority_denied. After
// the server restarts, the clients reconnect under their inbox prefix.
func TestTLSCredentials(t *testing.T) {
	env := startTLS(t)
	ops := mustConnect(t, withTLS(env, client.Options{URL: env.Info.URL, Principal: "ops_alice", Password: env.Info.Passwords["ops_alice"]}))
	if _, err := ops.AdmitRun(ctxT(t), client.AdmitRunRequest{RunID: "tls_run", Principal: "agent_email", Calls: 5, Amount: 100000}); err != nil {
		t.Fatal(err)
	}
	agent := mustConnect(t, withTLS(env, client.Options{URL: env.Info.URL, Principal: "agent_email", NKeyFile: env.Info.NKeys["agent_email"]}))
	d, err := agent.Propose(ctxT(t), refund("tls_run", "tls-1", "tls_ord", 1000))
	if err != nil || d.Status != client.StatusApplied {
		t.Fatalf("propose over TLS with an nkey: %+v %v", d, err)
	}
	if st, err := agent.Conn().TLSConnectionState(); err != nil || len(st.PeerCertificates) == 0 {
		t.Fatalf("not a TLS connection: %v", err)
	}

	credsAgent := mustConnect(t, withTLS(env, client.Options{URL: env.Info.CredsURL, Principal: "agent_chat", CredsFile: env.Info.Creds["agent_chat"],
		Timeout: 50 * time.Millisecond}))
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	var u client.Unresolved
	if _, err := credsAgent.Propose(ctx, refund("r", "k", "o", 1)); !errors.As(err, &u) {
		t.Fatalf("creds user with nobody behind the subject: %v", err)
	}
	_, err = client.Connect(withTLS(env, client.Options{URL: env.Info.CredsURL, Principal: "agent_chat", CredsFile: env.Info.StrangerCreds}))
	if !errors.Is(err, client.Refused{Code: client.CodeAuthorityDenied}) {
		t.Fatalf("creds of an untrusted account: %v", err)
	}
	if _, err := client.Connect(withTLS(env, client.Options{URL: env.Info.URL, Principal: "agent_email", Password: "wrong"})); !errors.Is(err, client.Refused{Code: client.CodeAuthorityDenied}) {
		t.Fatalf("a wrong password over TLS: %v", err)
	}

	if err := env.Restart(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		d, err := agent.Propose(ctx, refund("tls_run", "tls-2", "tls_ord", 1000))
		return err == nil && d.Status == client.StatusApplied
	}, 60*time.Second, "a proposal after the server restarted")
}

// TestNATSContextTLS: a NATS context carries the CA and the client
// certificate with the nkey.
func TestNATSContextTLS(t *testing.T) {
	env := startTLS(t)
	path := filepath.Join(t.TempDir(), "acme-tls.json")
	b, _ := json.Marshal(map[string]string{"url": env.Info.URL, "user": "acme.ops_alice", "nkey": env.Info.NKeys["ops_alice"],
		"ca": env.Info.CAFile, "cert": env.Info.CertFile, "key": env.Info.KeyFile})
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	c := mustConnect(t, client.Options{Context: path})
	if _, err := c.Exposure(ctxT(t), "", ""); err != nil {
		t.Fatal(err)
	}
	// The same context without its CA: the private CA is not trusted.
	b, _ = json.Marshal(map[string]string{"url": env.Info.URL, "user": "acme.ops_alice", "nkey": env.Info.NKeys["ops_alice"], "cert": env.Info.CertFile, "key": env.Info.KeyFile})
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Connect(client.Options{Context: path}); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("without the CA: %v", err)
	}
}

// fakeServer is a loopback NATS server that records what clients send:
// it speaks INFO (with tlsRequired as said), answers PING with PONG and
// never upgrades to TLS.
type fakeServer struct {
	ln       net.Listener
	mu       sync.Mutex
	accepted int
	got      bytes.Buffer
}

func newFakeServer(t *testing.T, tlsRequired bool) *fakeServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeServer{ln: ln}
	t.Cleanup(func() { ln.Close() })
	info := `INFO {"server_id":"fake","version":"2.12.0","proto":1,"headers":true,"max_payload":1048576,"tls_required":` + map[bool]string{true: "true", false: "false"}[tlsRequired] + "}\r\n"
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			f.mu.Lock()
			f.accepted++
			f.mu.Unlock()
			go func() {
				defer conn.Close()
				_, _ = conn.Write([]byte(info))
				r := bufio.NewReader(conn)
				for {
					_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
					line, err := r.ReadBytes('\n')
					f.mu.Lock()
					f.got.Write(line)
					f.mu.Unlock()
					if err != nil {
						return
					}
					if bytes.HasPrefix(line, []byte("PING")) {
						_, _ = conn.Write([]byte("PONG\r\n"))
					}
				}
			}()
		}
	}()
	return f
}

// port is ":<port>", to follow a host.
func (f *fakeServer) port() string { return ":" + strconv.Itoa(f.ln.Addr().(*net.TCPAddr).Port) }

func (f *fakeServer) seen() (int, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.accepted, f.got.String()
}

// TestRefusesSecretInClear: a server that asks for TLS gets no CONNECT
// (and no password) from a client given no TLS setting, the real TLS
// server included; a password is not sent over plain TCP to a host that
// is not loopback (0.0.0.0, which the kernel routes to this machine, so
// a mistake would show here) unless AllowPlaintext says so.
func TestRefusesSecretInClear(t *testing.T) {
	const secret = "s3cret-password"
	tlsFake := newFakeServer(t, true)
	_, err := client.Connect(client.Options{URL: "nats://127.0.0.1" + tlsFake.port(), Tenant: "acme", Principal: "agent_email", Password: secret, Timeout: 2 * time.Second})
	if !errors.Is(err, client.ErrInsecureTransport) {
		t.Fatalf("a server asking for TLS, no TLS setting: %v", err)
	}
	if n, got := tlsFake.seen(); n == 0 || strings.Contains(got, "CONNECT") || strings.Contains(got, secret) {
		t.Fatalf("the server that asked for TLS received %q over %d connections", got, n)
	}

	env := startTLS(t)
	_, err = client.Connect(client.Options{URL: env.Info.URL, Tenant: "acme", Principal: "agent_email", Password: env.Info.Passwords["agent_email"]})
	if !errors.Is(err, client.ErrInsecureTransport) {
		t.Fatalf("the TLS server without TLS settings: %v", err)
	}

	plain := newFakeServer(t, false)
	_, err = client.Connect(client.Options{URL: "nats://0.0.0.0" + plain.port(), Tenant: "acme", Principal: "agent_email", Password: secret})
	if !errors.Is(err, client.ErrInsecureTransport) {
		t.Fatalf("a password in clear to 0.0.0.0: %v", err)
	}
	if n, got := plain.seen(); n != 0 || got != "" {
		t.Fatalf("refused, yet %d connections and %q", n, got)
	}
	c, err := client.Connect(client.Options{URL: "nats://0.0.0.0" + plain.port(), Tenant: "acme", Principal: "agent_email", Password: secret, AllowPlaintext: true})
	if err != nil {
		t.Fatalf("with AllowPlaintext: %v", err)
	}
	c.Close()
	if _, got := plain.seen(); !strings.Contains(got, secret) {
		t.Fatalf("with AllowPlaintext the password was not sent: %q", got)
	}
	// A client certificate without its key is refused before connecting.
	if _, err := client.Connect(withTLS(env, client.Options{URL: env.Info.URL, Principal: "agent_email", Password: "x", TLSKeyFile: ""})); err == nil || errors.Is(err, client.ErrInsecureTransport) {
		t.Fatalf("a certificate without its key: %v", err)
	}
}
