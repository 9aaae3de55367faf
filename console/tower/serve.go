package tower

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/contextos/ledger/console"
	"github.com/contextos/ledger/kernel"
	"github.com/nats-io/nats.go"
)

//go:embed templates/*.html
var pageFS embed.FS

var pages = template.Must(template.New("tower").Funcs(template.FuncMap{"short": short}).ParseFS(pageFS, "templates/*.html"))

func short(s string) string {
	if len(s) > 16 {
		return s[:16] + "…"
	}
	return s
}

// Cookies of the page: the session's, and the login form's CSRF token
// before any session exists.
const (
	cookieName  = "towerd"
	loginCookie = "towerd_login"
)

// Server is towerd's web page. Before an operator logs in it serves the
// login form and static files, nothing of any tenant. A session holds one
// login per tenant (a fleet operator adds tenants to it), each the
// operator's own connection to every runtime the tenant is configured on;
// the page shows and acts on those tenants only, through those
// connections.
type Server struct {
	URL string

	t        *Tower
	every    time.Duration
	sessions *console.Sessions[*sessionState]
	log      *slog.Logger
	http     *http.Server
	done     chan struct{}
	wg       sync.WaitGroup
}

// sessionState is what the page keeps for a session: the last fleet kill
// switch's acknowledgements.
type sessionState struct {
	mu     sync.Mutex
	acks   []Ack
	action string
	// outcome is the last review or guardrail action's answer per runtime
	// (review_serve.go).
	outcome     []Ack
	outcomeWhat string
}

type session = console.Session[*sessionState]

// Serve listens on the configured address. A logged-in operator's page
// shows the last verified reading of each log, read again through the
// operator's connections when it is older than every (0: only on request).
func (t *Tower) Serve(every time.Duration) (*Server, error) {
	if t.cfg.Listen == "" {
		return nil, errors.New("tower: no listen address")
	}
	ln, err := net.Listen("tcp", t.cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	if !ln.Addr().(*net.TCPAddr).IP.IsLoopback() {
		ln.Close()
		return nil, errors.New("listen: loopback only")
	}
	s := &Server{URL: "http://" + ln.Addr().String(), t: t, every: every, log: slog.Default(), done: make(chan struct{}),
		sessions: console.NewSessions[*sessionState](console.Limits{Tenants: t.Tenants(), PerTenant: t.cfg.MaxSessions,
			Idle: t.cfg.SessionIdle.Duration, Now: func() time.Time { return t.Now() }})}
	mux := http.NewServeMux()
	mux.Handle("GET /static/", http.StripPrefix("/static/", console.Static()))
	mux.HandleFunc("GET /{$}", s.show)
	mux.HandleFunc("POST /login", s.login)
	mux.HandleFunc("POST /logout", s.authed(s.logout))
	mux.HandleFunc("POST /refresh", s.authed(s.refresh))
	mux.HandleFunc("POST /kill-switch", s.authed(s.killSwitch))
	mux.HandleFunc("POST /approve", s.authed(s.approve))
	mux.HandleFunc("POST /deny", s.authed(s.approve))
	mux.HandleFunc("POST /confirm", s.authed(s.confirm))
	mux.HandleFunc("POST /guardrail", s.authed(s.guardrail))
	mux.HandleFunc("POST /waiver", s.authed(s.waiver))
	s.http = &http.Server{Handler: console.Protect(mux), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
	s.wg.Add(2)
	go func() { defer s.wg.Done(); _ = s.http.Serve(ln) }()
	go func() {
		defer s.wg.Done()
		tk := time.NewTicker(time.Minute)
		defer tk.Stop()
		for {
			select {
			case <-s.done:
				return
			case <-tk.C:
				s.sessions.Sweep()
			}
		}
	}()
	return s, nil
}

// Tenants lists the tenants an operator can log into on the page: those
// with a runtime that has a nats_url, whose NATS server checks the login.
func (t *Tower) Tenants() []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range t.cfg.Runtimes {
		if r.NATSURL == "" {
			continue
		}
		for _, s := range r.Tenants {
			if !seen[s.ID] {
				seen[s.ID] = true
				out = append(out, s.ID)
			}
		}
	}
	sort.Strings(out)
	return out
}

// Close stops the page and ends every session.
func (s *Server) Close() {
	close(s.done)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = s.http.Shutdown(ctx)
	_ = s.http.Close()
	s.sessions.CloseAll()
	s.wg.Wait()
}

func (s *Server) cookie(name, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: name, Value: value, Path: "/", MaxAge: maxAge, HttpOnly: true, SameSite: http.SameSiteStrictMode}
}

// current is the request's live session, or nil.
func (s *Server) current(r *http.Request) *session {
	c, err := r.Cookie(cookieName)
	if err != nil {
		return nil
	}
	sess, _ := s.sessions.Get(c.Value)
	return sess
}

// authed refuses a post without a session or without the session's CSRF
// token.
func (s *Server) authed(h func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sess := s.current(r)
		if sess == nil {
			http.Error(w, "no session: log in again", http.StatusForbidden)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
		if err := r.ParseForm(); err != nil || !sess.CheckCSRF(r.PostFormValue("csrf")) {
			http.Error(w, "missing or wrong CSRF token", http.StatusForbidden)
			return
		}
		h(w, r, sess)
	}
}

type loginPage struct {
	CSRF     string
	Error    string
	Tenant   string
	Operator string
}

func (s *Server) renderLogin(w http.ResponseWriter, v loginPage, status int) {
	tok, err := console.NewToken()
	if err != nil {
		http.Error(w, "no randomness", http.StatusInternalServerError)
		return
	}
	v.CSRF = tok
	http.SetCookie(w, s.cookie(loginCookie, tok, 600))
	s.render(w, status, "login", v)
}

// loginView is one of the session's tenant logins, as the page shows it.
type loginView struct {
	Tenant   string
	Operator string
	Runtimes []string
	Problems []string
}

type fleetPage struct {
	CSRF        string
	Logins      []loginView
	Fleet       *Fleet
	Acks        []Ack
	Action      string
	Outcome     []Ack
	OutcomeWhat string
	Error       string
	Risks       []string
}

// page is the fleet as the session sees it: its tenants' logs only.
func (s *Server) page(ctx context.Context, sess *session, force bool) fleetPage {
	p := fleetPage{CSRF: sess.CSRF}
	var tenants []string
	for _, l := range sess.Logins() {
		tenants = append(tenants, l.Tenant)
		v := loginView{Tenant: l.Tenant, Operator: l.Operator, Runtimes: l.Runtimes()}
		for rt, why := range l.Problems {
			v.Problems = append(v.Problems, rt+": "+why)
		}
		sort.Strings(v.Problems)
		p.Logins = append(p.Logins, v)
	}
	if len(tenants) > 0 {
		p.Fleet = s.t.fleet(ctx, s.t.sources(tenants...), s.through(sess), s.every, force)
	}
	sess.State.mu.Lock()
	p.Acks, p.Action = sess.State.acks, sess.State.action
	p.Outcome, p.OutcomeWhat = sess.State.outcome, sess.State.outcomeWhat
	sess.State.mu.Unlock()
	p.Risks = kernel.Risks
	return p
}

// through reaches a source's runtime through the session's login of its
// tenant.
func (s *Server) through(sess *session) reach {
	return func(_ context.Context, src source) (access, error) {
		l := sess.Login(src.t.ID)
		if l == nil {
			return access{}, fmt.Errorf("not logged into tenant %s", src.t.ID)
		}
		if src.rt.NATSURL == "" {
			return access{}, fmt.Errorf("runtime %s has no nats_url: its log is a file", src.rt.Name)
		}
		nc := l.Conns[src.rt.Name]
		if nc == nil {
			return access{}, fmt.Errorf("%s is not logged in on runtime %s: %s", l.Operator, src.rt.Name, l.Problems[src.rt.Name])
		}
		return access{nc: nc, tenant: l.Tenant, operator: l.Operator, done: func() {}}, nil
	}
}

func (s *Server) show(w http.ResponseWriter, r *http.Request) {
	sess := s.current(r)
	if sess == nil {
		s.renderLogin(w, loginPage{}, http.StatusOK)
		return
	}
	s.render(w, http.StatusOK, "fleet", s.page(r.Context(), sess, false))
}

// login logs an operator into a tenant on every runtime the tenant is
// configured on (with a nats_url), each through console.Dialer: the
// runtime's NATS server checks the password, and the operator's own ops
// subject that the user is an operator. Posted from a logged-in page (with
// the session's token) it adds the tenant to that session; otherwise
// (with the login form's token) it opens a session.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	sess := s.current(r)
	token := r.PostFormValue("csrf")
	switch c, err := r.Cookie(loginCookie); {
	case sess != nil && sess.CheckCSRF(token):
	case sess == nil && err == nil && console.SameToken(token, c.Value):
	default:
		http.Error(w, "missing or wrong CSRF token", http.StatusForbidden)
		return
	}
	tenant, operator, password := r.PostFormValue("tenant"), r.PostFormValue("operator"), r.PostFormValue("password")
	refuse := func(status int, msg string) {
		if sess != nil {
			p := s.page(r.Context(), sess, false)
			p.Error = msg
			s.render(w, status, "fleet", p)
			return
		}
		s.renderLogin(w, loginPage{Tenant: tenant, Operator: operator, Error: msg}, status)
	}
	if err := console.ValidLogin(tenant, operator, password); err != nil {
		refuse(http.StatusBadRequest, err.Error())
		return
	}
	if err := s.sessions.Admit(tenant); err != nil {
		status := http.StatusTooManyRequests
		if errors.Is(err, console.ErrUnknownTenant) {
			status = http.StatusUnauthorized
		}
		refuse(status, err.Error())
		return
	}
	l := s.dialAll(r.Context(), tenant, operator, password)
	if len(l.Conns) == 0 {
		s.log.Info("towerd login refused", "tenant", tenant, "operator", operator, "problems", l.Problems)
		refuse(http.StatusUnauthorized, "login refused: "+refusal(l.Problems))
		return
	}
	if sess != nil {
		if err := s.sessions.AddLogin(sess.ID, l); err != nil {
			closeConns(l)
			refuse(http.StatusForbidden, err.Error())
			return
		}
	} else {
		var err error
		if sess, err = s.sessions.Open(l, func(*session) *sessionState { return &sessionState{} }); err != nil {
			closeConns(l)
			http.Error(w, "no session", http.StatusInternalServerError)
			return
		}
		http.SetCookie(w, s.cookie(loginCookie, "", -1))
		http.SetCookie(w, s.cookie(cookieName, sess.ID, 0))
	}
	s.log.Info("towerd login", "tenant", tenant, "operator", operator, "runtimes", l.Runtimes())
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// dialAll connects as the operator to every runtime of the tenant, a few at
// a time; the runtimes it could not reach are the login's Problems.
func (s *Server) dialAll(ctx context.Context, tenant, operator, password string) *console.Login {
	var rts []RuntimeConfig
	for _, r := range s.t.cfg.Runtimes {
		for _, src := range r.Tenants {
			if src.ID == tenant && r.NATSURL != "" {
				rts = append(rts, r)
			}
		}
	}
	l := &console.Login{Tenant: tenant, Operator: operator, Conns: map[string]*nats.Conn{}, Problems: map[string]string{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for _, r := range rts {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			nc, err := console.Dialer{URL: r.NATSURL, TLS: r.tls, Name: "towerd"}.Dial(ctx, tenant, operator, password)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				l.Problems[r.Name] = err.Error()
				return
			}
			l.Conns[r.Name] = nc
		}()
	}
	wg.Wait()
	return l
}

// refusal says why no runtime took a login: the credentials when any
// runtime refused them, otherwise each runtime's problem.
func refusal(problems map[string]string) string {
	var all []string
	for rt, why := range problems {
		if why == console.ErrCredentials.Error() || why == console.ErrNotOperator.Error() {
			return why
		}
		all = append(all, rt+": "+why)
	}
	sort.Strings(all)
	return strings.Join(all, "; ")
}

func closeConns(l *console.Login) {
	for _, nc := range l.Conns {
		nc.Close()
	}
}

// logout ends the session's login of one tenant (the form's tenant), or
// the whole session.
func (s *Server) logout(w http.ResponseWriter, r *http.Request, sess *session) {
	if tenant := r.PostFormValue("tenant"); tenant != "" {
		s.sessions.EndLogin(sess.ID, tenant)
	} else {
		s.sessions.End(sess.ID)
	}
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// refresh reads the session's logs again through its connections.
func (s *Server) refresh(w http.ResponseWriter, r *http.Request, sess *session) {
	s.page(r.Context(), sess, true)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// killSwitch sends the kill switch to every runtime of the session's
// tenants, each as the operator logged into that tenant, then reads those
// logs again.
func (s *Server) killSwitch(w http.ResponseWriter, r *http.Request, sess *session) {
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	engage := r.PostFormValue("engaged") == "true"
	if reason == "" || len(reason) > 1024 || r.PostFormValue("confirm") != "yes" {
		p := s.page(r.Context(), sess, false)
		p.Error = "the fleet kill switch needs a reason (at most 1024 bytes) and the confirmation box ticked"
		s.render(w, http.StatusBadRequest, "fleet", p)
		return
	}
	var tenants []string
	for _, l := range sess.Logins() {
		tenants = append(tenants, l.Tenant)
	}
	ctx := context.WithoutCancel(r.Context())
	acks := s.t.killSwitch(ctx, s.t.sources(tenants...), s.through(sess), engage, reason)
	for _, a := range acks {
		s.log.Info("towerd kill switch", "runtime", a.Runtime, "tenant", a.Tenant, "operator", a.Operator, "engage", engage, "acknowledged", a.Acknowledged)
	}
	sess.State.mu.Lock()
	sess.State.acks, sess.State.action = acks, map[bool]string{true: "engage", false: "release"}[engage]
	sess.State.mu.Unlock()
	s.page(ctx, sess, true)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (s *Server) render(w http.ResponseWriter, status int, name string, data any) {
	var b bytes.Buffer
	if err := pages.ExecuteTemplate(&b, name, data); err != nil {
		s.log.Error("towerd template", "page", name, "err", err)
		http.Error(w, "page error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}
