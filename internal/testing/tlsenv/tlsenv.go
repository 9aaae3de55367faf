package tlsenv

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/daemon"
	"github.com/contextos/ledger/gateway"
	"github.com/contextos/ledger/internal/testing/provider"
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// Options say which configuration the runtime serves and where the files go.
type Options struct {
	// Config is a contextosd configuration template with {{DATA}},
	// {{LISTEN}} and {{PROVIDER}} placeholders (the demo's); its [nats]
	// section is replaced by the TLS server.
	Config string
	// Dir receives the CA, the certificates, the seeds, the creds files and
	// the runtime's data; it must exist.
	Dir string
	// Log, when set, receives the runtime's log; nothing is logged otherwise.
	Log *os.File
}

// Info is what a client needs to connect; cmd/tlsenv prints it as JSON.
type Info struct {
	// URL is the TLS-only server with the runtime behind it (nats://, the
	// server asks for TLS in its INFO).
	URL string `json:"url"`
	// CredsURL is the TLS-only server in operator mode (creds users only,
	// no runtime behind it).
	CredsURL string `json:"creds_url"`
	// Provider is the synthetic provider's base URL (/admin/stats, /admin/script).
	Provider string `json:"provider"`
	Tenant   string `json:"tenant"`
	// CAFile is the PEM of the private CA both servers' certificates come from.
	CAFile string `json:"ca_file"`
	// CertFile and KeyFile are a client certificate of that CA (both servers
	// require one).
	CertFile string `json:"cert_file"`
	KeyFile  string `json:"key_file"`
	// Passwords, NKeys (seed files) and Creds (creds files) name each
	// principal's credentials: passwords and nkeys on URL, creds on CredsURL.
	Passwords map[string]string `json:"passwords"`
	NKeys     map[string]string `json:"nkeys"`
	Creds     map[string]string `json:"creds"`
	// StrangerCreds is a creds file signed by an account CredsURL does not
	// trust: the server refuses it.
	StrangerCreds string `json:"stranger_creds"`
}

// Env is a running environment.
type Env struct {
	Info Info

	mu       sync.Mutex
	opts     *server.Options
	srv      *server.Server
	credsSrv *server.Server
	rt       *daemon.Runtime
	prov     *http.Server
}

// Start makes the CA and the credentials, starts both servers, the
// provider and the runtime, and returns once the runtime answers.
func Start(o Options) (_ *Env, err error) {
	e := &Env{Info: Info{Passwords: map[string]string{}, NKeys: map[string]string{}, Creds: map[string]string{}}}
	defer func() {
		if err != nil {
			e.Close()
		}
	}()
	ca, err := newCA(o.Dir)
	if err != nil {
		return nil, err
	}
	serverCert, err := ca.issue("nats", x509.ExtKeyUsageServerAuth)
	if err != nil {
		return nil, err
	}
	if _, err := ca.issue("client", x509.ExtKeyUsageClientAuth); err != nil {
		return nil, err
	}
	e.Info.CAFile = filepath.Join(o.Dir, "ca.pem")
	e.Info.CertFile, e.Info.KeyFile = filepath.Join(o.Dir, "client.pem"), filepath.Join(o.Dir, "client-key.pem")

	// The provider, then the configuration that names it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	e.prov = &http.Server{Handler: provider.New().Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = e.prov.Serve(ln) }()
	e.Info.Provider = "http://" + ln.Addr().String()
	raw, err := os.ReadFile(o.Config)
	if err != nil {
		return nil, err
	}
	data := filepath.Join(o.Dir, "data")
	cfg, err := config.Parse([]byte(strings.NewReplacer("{{DATA}}", data, "{{LISTEN}}", "127.0.0.1:0",
		"{{PROVIDER}}", e.Info.Provider).Replace(string(raw))))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.Config, err)
	}
	if len(cfg.Tenants) == 0 {
		return nil, fmt.Errorf("%s: no tenant", o.Config)
	}
	tenant := cfg.Tenants[0]
	e.Info.Tenant = tenant.ID

	// The server with the runtime: the reply user and the principals by
	// password (gateway.ServerUsers), the runtime and the principals by nkey.
	runtimeSeed, runtimeUser, err := e.nkey(o.Dir, "contextosd", nil)
	if err != nil {
		return nil, err
	}
	nkeyUsers := []*server.NkeyUser{runtimeUser}
	pw := make([]byte, 16)
	if _, err := rand.Read(pw); err != nil {
		return nil, err
	}
	replyPassword := hex.EncodeToString(pw)
	users := gateway.ServerUsers(cfg, replyPassword)[1:] // the runtime is an nkey
	for _, u := range users[1:] {
		principal := strings.TrimPrefix(u.Username, tenant.ID+".")
		if principal == u.Username {
			continue // another tenant's
		}
		e.Info.Passwords[principal] = u.Password
		seed, nu, err := e.nkey(o.Dir, principal, u.Permissions)
		if err != nil {
			return nil, err
		}
		e.Info.NKeys[principal] = seed
		nkeyUsers = append(nkeyUsers, nu)
	}
	e.opts = &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: filepath.Join(o.Dir, "jetstream"),
		NoLog: true, NoSigs: true, TLS: true, TLSVerify: true, TLSTimeout: 5, TLSConfig: ca.serverTLS(serverCert),
		Users: users, Nkeys: nkeyUsers}
	if err := e.startServer(); err != nil {
		return nil, err
	}
	e.opts.Port = e.srv.Addr().(*net.TCPAddr).Port
	e.Info.URL = fmt.Sprintf("nats://127.0.0.1:%d", e.opts.Port)

	if err := e.startCredsServer(o.Dir, ca, users); err != nil {
		return nil, err
	}

	cfg.NATS.URL, cfg.NATS.Listen, cfg.NATS.DataDir = e.Info.URL, "", ""
	cfg.NATS.NkeyFile = runtimeSeed
	cfg.NATS.ReplyUser, cfg.NATS.ReplyPassword = gateway.ReplyUser, replyPassword
	cfg.NATS.TLSCAFile = e.Info.CAFile
	if _, err := ca.issue("contextosd", x509.ExtKeyUsageClientAuth); err != nil {
		return nil, err
	}
	cfg.NATS.TLSCertFile, cfg.NATS.TLSKeyFile = filepath.Join(o.Dir, "contextosd.pem"), filepath.Join(o.Dir, "contextosd-key.pem")
	cfg.Runtime.KeyFile = filepath.Join(o.Dir, "runtime.key")
	log := slog.New(slog.DiscardHandler)
	if o.Log != nil {
		log = slog.New(slog.NewTextHandler(o.Log, nil))
	}
	if e.rt, err = daemon.Boot(cfg, daemon.BootOptions{Logger: log}); err != nil {
		return nil, fmt.Errorf("boot the runtime over TLS: %w", err)
	}
	return e, nil
}

// nkey makes a user nkey, writes its seed to <name>.nk and returns the
// file and the server's entry for it with perms.
func (e *Env) nkey(dir, name string, perms *server.Permissions) (string, *server.NkeyUser, error) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		return "", nil, err
	}
	seed, err := kp.Seed()
	if err != nil {
		return "", nil, err
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return "", nil, err
	}
	path := filepath.Join(dir, name+".nk")
	if err := os.WriteFile(path, seed, 0o600); err != nil {
		return "", nil, err
	}
	return path, &server.NkeyUser{Nkey: pub, Permissions: perms}, nil
}

func (e *Env) startServer() error {
	s, err := server.NewServer(e.opts)
	if err != nil {
		return err
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return errors.New("the TLS nats-server did not start")
	}
	e.srv = s
	return nil
}

// startCredsServer starts the operator-mode server: one trusted account,
// each principal a JWT user of it with the same permissions as on the
// other server, and a creds file for each.
func (e *Env) startCredsServer(dir string, ca *ca, users []*server.User) error {
	okp, err := nkeys.CreateOperator()
	if err != nil {
		return err
	}
	opub, _ := okp.PublicKey()
	ojwt, err := jwt.NewOperatorClaims(opub).Encode(okp)
	if err != nil {
		return err
	}
	oclaims, err := jwt.DecodeOperatorClaims(ojwt)
	if err != nil {
		return err
	}
	account := func() (nkeys.KeyPair, string, string, error) {
		akp, err := nkeys.CreateAccount()
		if err != nil {
			return nil, "", "", err
		}
		apub, _ := akp.PublicKey()
		ajwt, err := jwt.NewAccountClaims(apub).Encode(okp)
		return akp, apub, ajwt, err
	}
	creds := func(akp nkeys.KeyPair, name string, perms *server.Permissions) (string, error) {
		ukp, err := nkeys.CreateUser()
		if err != nil {
			return "", err
		}
		upub, _ := ukp.PublicKey()
		useed, _ := ukp.Seed()
		uc := jwt.NewUserClaims(upub)
		uc.Name = name
		if perms != nil {
			uc.Pub.Allow.Add(perms.Publish.Allow...)
			uc.Sub.Allow.Add(perms.Subscribe.Allow...)
		}
		ujwt, err := uc.Encode(akp)
		if err != nil {
			return "", err
		}
		b, err := jwt.FormatUserConfig(ujwt, useed)
		if err != nil {
			return "", err
		}
		path := filepath.Join(dir, name+".creds")
		return path, os.WriteFile(path, b, 0o600)
	}
	akp, apub, ajwt, err := account()
	if err != nil {
		return err
	}
	resolver := &server.MemAccResolver{}
	if err := resolver.Store(apub, ajwt); err != nil {
		return err
	}
	for _, u := range users[1:] {
		principal := strings.TrimPrefix(u.Username, e.Info.Tenant+".")
		if principal == u.Username {
			continue
		}
		if e.Info.Creds[principal], err = creds(akp, principal, u.Permissions); err != nil {
			return err
		}
	}
	stranger, _, _, err := account()
	if err != nil {
		return err
	}
	if e.Info.StrangerCreds, err = creds(stranger, "stranger", nil); err != nil {
		return err
	}
	tlsCfg := ca.serverTLS(e.opts.TLSConfig.Certificates[0])
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
		TLS: true, TLSVerify: true, TLSTimeout: 5, TLSConfig: tlsCfg,
		TrustedOperators: []*jwt.OperatorClaims{oclaims}, AccountResolver: resolver})
	if err != nil {
		return err
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return errors.New("the operator-mode nats-server did not start")
	}
	e.credsSrv = s
	e.Info.CredsURL = fmt.Sprintf("nats://127.0.0.1:%d", s.Addr().(*net.TCPAddr).Port)
	return nil
}

// Restart stops the server with the runtime and starts it again on the
// same port with the same JetStream directory: every client connected to
// it loses its connection and must reconnect.
func (e *Env) Restart() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
	return e.startServer()
}

// Close stops the runtime, the servers and the provider.
func (e *Env) Close() {
	if e.rt != nil {
		e.rt.Close()
	}
	e.mu.Lock()
	if e.srv != nil {
		e.srv.Shutdown()
	}
	e.mu.Unlock()
	if e.credsSrv != nil {
		e.credsSrv.Shutdown()
	}
	if e.prov != nil {
		_ = e.prov.Close()
	}
}
