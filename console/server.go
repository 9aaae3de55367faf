package console

import (
	"bytes"
	"context"
	"crypto/tls"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/kernel"
	"github.com/nats-io/nats.go"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Options configure a console.
type Options struct {
	// Config is the [console] section (validated: config.Parse).
	Config config.ConsoleConfig
	// NATSURL is where operators' connections go: the runtime's URL.
	NATSURL string
	// TLS is the TLS configuration of the operators' connections (nil:
	// none); Boot makes it from the runtime's nats.tls_ca_file and the
	// console's nats_tls_cert_file and nats_tls_key_file.
	TLS *tls.Config
	// Manifest is the runtime's configuration: the console reads the
	// capabilities' risk (what approve binds), guarantees' units and the
	// tenant's agents from it, for display only, and its tenants, the
	// only ones that get a login bucket (without it every login is
	// refused).
	Manifest *config.Config
	Logger   *slog.Logger
	// Now is the clock of sessions and login buckets (default time.Now).
	Now func() time.Time
	// Poll is how often live updates read the runtime (default 1s).
	Poll time.Duration
	// AuthFailed, when set, is called for every login refused for its
	// credentials (a wrong password, an unknown user, a user who is not
	// an operator): the runtime counts it as an authentication failure of
	// the console door.
	AuthFailed func()
}

// Server is a running console.
type Server struct {
	// URL is where the console listens, "http://host:port".
	URL string

	o        Options
	sessions *Sessions[*session]
	pages    map[string]*template.Template
	http     *http.Server
	done     chan struct{}
	wg       sync.WaitGroup
}

// cookieName is the session cookie; loginCookie carries the login form's
// CSRF token before any session exists.
const (
	cookieName  = "ctx_console"
	loginCookie = "ctx_console_login"
)

// Start listens on o.Config.Listen and serves the console until Close.
func Start(o Options) (*Server, error) {
	if o.Config.Listen == "" {
		return nil, errors.New("console: no listen address")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	var tenants []string
	if o.Manifest != nil {
		for _, t := range o.Manifest.Tenants {
			tenants = append(tenants, t.ID)
		}
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", o.Config.Listen)
	if err != nil {
		return nil, fmt.Errorf("console.listen: %w", err)
	}
	if ip := ln.Addr().(*net.TCPAddr).IP; !o.Config.AllowNonLoopback && !ip.IsLoopback() {
		ln.Close()
		return nil, fmt.Errorf("console.listen: loopback only, not %s", ip)
	}
	s := &Server{URL: "http://" + ln.Addr().String(), o: o, pages: pages, done: make(chan struct{}),
		sessions: NewSessions[*session](Limits{Tenants: tenants, PerTenant: o.Config.MaxSessions, Idle: o.Config.SessionIdle.Duration, Now: o.Now})}
	s.http = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		_ = s.http.Serve(ln)
	}()
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(time.Minute)
		defer t.Stop()
		for {
			select {
			case <-s.done:
				return
			case <-t.C:
				s.sessions.Sweep()
			}
		}
	}()
	return s, nil
}

// Close stops serving and ends every session.
func (s *Server) Close() {
	close(s.done)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = s.http.Shutdown(ctx)
	_ = s.http.Close()
	s.sessions.CloseAll()
	s.wg.Wait()
}

// Handler returns the console's routes behind its security headers and
// cross-origin protection.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /static/", http.StripPrefix("/static/", Static()))
	mux.HandleFunc("GET /login", s.loginPage)
	mux.HandleFunc("POST /login", s.login)
	mux.HandleFunc("POST /logout", s.authed(s.logout))
	mux.HandleFunc("GET /{$}", s.authed(func(w http.ResponseWriter, r *http.Request, _ *session) {
		http.Redirect(w, r, "/exposure", http.StatusSeeOther)
	}))
	mux.HandleFunc("GET /exposure", s.authed(s.exposurePage))
	mux.HandleFunc("GET /exposure/live", s.authed(s.exposureLive))
	mux.HandleFunc("GET /confirm/{action}", s.authed(s.confirmPage))
	mux.HandleFunc("POST /act/{action}", s.authed(s.act))
	mux.HandleFunc("GET /kill-switch", s.authed(s.killSwitchPage))
	mux.HandleFunc("GET /approvals", s.authed(s.approvalsPage))
	mux.HandleFunc("GET /incidents", s.authed(s.incidentsPage))
	mux.HandleFunc("GET /decisions", s.authed(s.decisionsPage))
	mux.HandleFunc("GET /outcomes", s.authed(s.outcomesPage))
	mux.HandleFunc("GET /authority", s.authed(s.authorityPage))
	mux.HandleFunc("GET /audit", s.authed(s.auditPage))
	mux.HandleFunc("POST /audit/verify", s.authed(s.auditVerify))
	return Protect(mux)
}

// Protect wraps a handler of the console (or of towerd's page) in its
// security headers (a strict content security policy, no framing, no
// caching) and net/http's cross-origin protection, which refuses a
// state-changing request another origin's page sent.
func Protect(h http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "cross-origin request refused", http.StatusForbidden)
	}))
	h = cop.Handler(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	})
}

// authed resolves the session of the request, refusing a state-changing
// request without the session's CSRF token. Without a session a page
// redirects to the login form.
func (s *Server) authed(h func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var base *Session[*session]
		if c, err := r.Cookie(cookieName); err == nil {
			base, _ = s.sessions.Get(c.Value)
		}
		if base == nil {
			if r.Method != http.MethodGet {
				http.Error(w, "no session: log in again", http.StatusForbidden)
				return
			}
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
		if r.Method != http.MethodGet {
			r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
			if err := r.ParseForm(); err != nil || !base.CheckCSRF(r.PostFormValue("csrf")) {
				http.Error(w, "missing or wrong CSRF token", http.StatusForbidden)
				return
			}
		}
		h(w, r, base.State)
	}
}

func (s *Server) cookie(name, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: name, Value: value, Path: "/", MaxAge: maxAge, HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: s.o.Config.AllowNonLoopback}
}

type loginView struct {
	CSRF     string
	Error    string
	Tenant   string
	Operator string
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	s.renderLogin(w, loginView{}, http.StatusOK)
}

func (s *Server) renderLogin(w http.ResponseWriter, v loginView, status int) {
	tok, err := NewToken()
	if err != nil {
		http.Error(w, "no randomness", http.StatusInternalServerError)
		return
	}
	v.CSRF = tok
	http.SetCookie(w, s.cookie(loginCookie, tok, 600))
	s.render(w, status, "login", v)
}

// login opens a NATS connection as the operator (Dialer.Dial): the NATS
// server checks the credentials, and a first verb on the operator's own ops
// subject checks that the user is an operator of that tenant. The tenant's
// login bucket is taken first, so wrong passwords for one tenant never
// refuse another's operator.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	c, err := r.Cookie(loginCookie)
	if err != nil || c.Value == "" || !SameToken(r.PostFormValue("csrf"), c.Value) {
		http.Error(w, "missing or wrong CSRF token", http.StatusForbidden)
		return
	}
	tenant, operator, password := r.PostFormValue("tenant"), r.PostFormValue("operator"), r.PostFormValue("password")
	v := loginView{Tenant: tenant, Operator: operator}
	if err := ValidLogin(tenant, operator, password); err != nil {
		v.Error = err.Error()
		s.renderLogin(w, v, http.StatusBadRequest)
		return
	}
	if err := s.sessions.Admit(tenant); err != nil {
		v.Error = err.Error()
		status := http.StatusTooManyRequests
		if errors.Is(err, ErrUnknownTenant) {
			status = http.StatusUnauthorized
		}
		s.renderLogin(w, v, status)
		return
	}
	d := Dialer{URL: s.o.NATSURL, TLS: s.o.TLS, Name: "contextos-console"}
	nc, err := d.Dial(r.Context(), tenant, operator, password)
	if err != nil {
		s.o.Logger.Info("console login refused", "tenant", tenant, "operator", operator, "err", err)
		if s.o.AuthFailed != nil && (errors.Is(err, ErrCredentials) || errors.Is(err, ErrNotOperator)) {
			s.o.AuthFailed()
		}
		v.Error = "login refused: " + err.Error()
		s.renderLogin(w, v, http.StatusUnauthorized)
		return
	}
	l := &Login{Tenant: tenant, Operator: operator, Conns: map[string]*nats.Conn{"": nc}}
	base, err := s.sessions.Open(l, func(b *Session[*session]) *session {
		return &session{id: b.ID, csrf: b.CSRF, tenant: tenant, operator: operator, login: l}
	})
	if err != nil {
		nc.Close()
		http.Error(w, "no session", http.StatusInternalServerError)
		return
	}
	s.o.Logger.Info("console login", "tenant", tenant, "operator", operator)
	http.SetCookie(w, s.cookie(loginCookie, "", -1))
	http.SetCookie(w, s.cookie(cookieName, base.ID, 0))
	http.Redirect(w, r, "/exposure", http.StatusSeeOther)
}

// ValidLogin checks the fields of a login form before anything is dialled.
func ValidLogin(tenant, operator, password string) error {
	if kernel.ValidToken(tenant) != nil || kernel.ValidToken(operator) != nil || password == "" || len(password) > 1024 {
		return errors.New("name a tenant, an operator id and a password")
	}
	return nil
}

// OperatorTLS is the TLS configuration of a console's operator
// connections: the runtime's nats.tls_ca_file and the console's
// nats_tls_cert_file and nats_tls_key_file; nil when none is set.
func OperatorTLS(cfg *config.Config) (*tls.Config, error) {
	tc, err := config.LoadTLS(cfg.NATS.TLSCAFile, cfg.Console.NATSTLSCertFile, cfg.Console.NATSTLSKeyFile)
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	return tc, nil
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request, sess *session) {
	s.sessions.End(sess.id)
	http.SetCookie(w, s.cookie(cookieName, "", -1))
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// view is what every page's layout shows.
type view struct {
	Title    string
	Nav      string
	Tenant   string
	Operator string
	CSRF     string
	Flash    *result
	Error    string
	Data     any
}

func (s *Server) page(sess *session, nav, title string, data any) view {
	return view{Title: title, Nav: nav, Tenant: sess.tenant, Operator: sess.operator, CSRF: sess.csrf, Flash: sess.takeFlash(), Data: data}
}

// render executes a page into a buffer first, so that a template error
// never sends half a page.
func (s *Server) render(w http.ResponseWriter, status int, name string, data any) {
	var b bytes.Buffer
	if err := s.pages[name].ExecuteTemplate(&b, name, data); err != nil {
		s.o.Logger.Error("console template", "page", name, "err", err)
		http.Error(w, "page error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// back redirects to a console page after an action.
func back(w http.ResponseWriter, r *http.Request, path string) {
	if u, err := url.Parse(path); err != nil || u.IsAbs() || !strings.HasPrefix(path, "/") || strings.HasPrefix(path, "//") {
		path = "/exposure"
	}
	http.Redirect(w, r, path, http.StatusSeeOther)
}

// Static serves the console's stylesheet and script (towerd's page uses
// them too).
func Static() http.Handler {
	static, _ := fs.Sub(staticFS, "static")
	return http.FileServerFS(static)
}
