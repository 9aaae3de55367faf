package tower

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/contextos/ledger/console"
)

//go:embed templates/fleet.html
var pageFS embed.FS

var page = template.Must(template.New("fleet.html").Funcs(template.FuncMap{"short": short}).ParseFS(pageFS, "templates/fleet.html"))

func short(s string) string {
	if len(s) > 16 {
		return s[:16] + "…"
	}
	return s
}

// Server is towerd's web page: the last reading of the fleet, a refresh,
// and the fleet kill switch.
type Server struct {
	URL string

	t      *Tower
	http   *http.Server
	csrf   string
	done   chan struct{}
	wg     sync.WaitGroup
	mu     sync.Mutex
	acks   []Ack
	action string
}

// Serve listens on the configured address and refreshes the reading every
// interval (0: only on request).
func (t *Tower) Serve(interval time.Duration) (*Server, error) {
	if t.cfg.Listen == "" {
		return nil, errors.New("tower: no listen address")
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", t.cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	if !ln.Addr().(*net.TCPAddr).IP.IsLoopback() {
		ln.Close()
		return nil, errors.New("listen: loopback only")
	}
	s := &Server{URL: "http://" + ln.Addr().String(), t: t, csrf: hex.EncodeToString(b), done: make(chan struct{})}
	mux := http.NewServeMux()
	mux.Handle("GET /static/", http.StripPrefix("/static/", console.Static()))
	mux.HandleFunc("GET /{$}", s.show)
	mux.HandleFunc("POST /refresh", s.post(func(r *http.Request) { t.Refresh(r.Context()) }))
	mux.HandleFunc("POST /kill-switch", s.killSwitch)
	s.http = &http.Server{Handler: console.Protect(mux), ReadHeaderTimeout: 5 * time.Second}
	s.wg.Add(1)
	go func() { defer s.wg.Done(); _ = s.http.Serve(ln) }()
	if t.Last() == nil {
		t.Refresh(context.Background())
	}
	if interval > 0 {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			tk := time.NewTicker(interval)
			defer tk.Stop()
			for {
				select {
				case <-s.done:
					return
				case <-tk.C:
					t.Refresh(context.Background())
				}
			}
		}()
	}
	return s, nil
}

// Close stops the page.
func (s *Server) Close() {
	close(s.done)
	_ = s.http.Close()
	s.wg.Wait()
}

type fleetPage struct {
	CSRF   string
	Fleet  *Fleet
	Acks   []Ack
	Action string
	Error  string
}

func (s *Server) show(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	p := fleetPage{CSRF: s.csrf, Fleet: s.t.Last(), Acks: s.acks, Action: s.action}
	s.mu.Unlock()
	s.render(w, http.StatusOK, p)
}

func (s *Server) render(w http.ResponseWriter, status int, p fleetPage) {
	var b bytes.Buffer
	if err := page.Execute(&b, p); err != nil {
		http.Error(w, "page error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// post checks the page's CSRF token before fn.
func (s *Server) post(fn func(*http.Request)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
		if err := r.ParseForm(); err != nil || subtle.ConstantTimeCompare([]byte(r.PostFormValue("csrf")), []byte(s.csrf)) != 1 {
			http.Error(w, "missing or wrong CSRF token", http.StatusForbidden)
			return
		}
		fn(r)
		http.Redirect(w, r, "/", http.StatusSeeOther)
	}
}

func (s *Server) killSwitch(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil || subtle.ConstantTimeCompare([]byte(r.PostFormValue("csrf")), []byte(s.csrf)) != 1 {
		http.Error(w, "missing or wrong CSRF token", http.StatusForbidden)
		return
	}
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	engage := r.PostFormValue("engaged") == "true"
	if reason == "" || len(reason) > 1024 || r.PostFormValue("confirm") != "yes" {
		s.render(w, http.StatusBadRequest, fleetPage{CSRF: s.csrf, Fleet: s.t.Last(), Error: "the fleet kill switch needs a reason (at most 1024 bytes) and the confirmation box ticked"})
		return
	}
	acks := s.t.KillSwitch(context.WithoutCancel(r.Context()), engage, reason)
	s.t.Refresh(r.Context())
	s.mu.Lock()
	s.acks, s.action = acks, map[bool]string{true: "engage", false: "release"}[engage]
	s.mu.Unlock()
	http.Redirect(w, r, "/", http.StatusSeeOther)
}
