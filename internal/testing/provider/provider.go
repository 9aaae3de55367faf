package provider

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"
)

// Mode is how the provider answers one refund call.
type Mode string

// Modes.
const (
	Applied  Mode = "applied"  // 200 {"refund":{"status":"succeeded"}}
	Pending  Mode = "pending"  // 202 {"refund":{"status":"pending"}}; a later settle decides
	Timeout  Mode = "timeout"  // record the refund as succeeded, answer after Delay (past the client's timeout)
	Conflict Mode = "conflict" // 409, nothing recorded
	Weird    Mode = "weird"    // 200 {"refund":{"status":"on_hold"}}, a state the contract does not list
	Failed   Mode = "failed"   // 200 {"refund":{"status":"failed"}}
)

// Refund is what the provider holds for one idempotency key.
type Refund struct {
	Key     string          `json:"idempotency_key"`
	Status  string          `json:"status"`
	Args    json.RawMessage `json:"args"`
	Calls   int             `json:"calls"`
	Applied bool            `json:"applied"`
}

// Server is the provider's state; its Handler serves:
//
//	POST /refunds                 issue a refund (Idempotency-Key header)
//	GET  /refunds/{key}           look a refund up (404 if never seen)
//	POST /admin/script            {"modes": [...]} answers for the next calls
//	POST /admin/settle            {"idempotency_key": k, "status": "succeeded"|"failed"}
//	GET  /admin/stats             call counts
type Server struct {
	Delay time.Duration // how long a Timeout answer takes (default 3s)

	mu      sync.Mutex
	script  []Mode
	refunds map[string]*Refund
	calls   int
	queries int
	applied int
}

// New returns an empty provider.
func New() *Server { return &Server{refunds: map[string]*Refund{}, Delay: 3 * time.Second} }

// Script sets the answers of the next calls, in order; afterwards every call
// is Applied.
func (s *Server) Script(modes ...Mode) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, modes...)
}

// Settle decides a pending refund.
func (s *Server) Settle(key, status string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.refunds[key]
	if !ok {
		return false
	}
	if status == "succeeded" && !r.Applied {
		r.Applied = true
		s.applied++
	}
	r.Status = status
	return true
}

// Stats are the provider's counters.
type Stats struct {
	Calls   int `json:"calls"`   // POST /refunds received
	Queries int `json:"queries"` // GET /refunds/{key} received
	Applied int `json:"applied"` // refunds that took effect
	Keys    int `json:"keys"`    // distinct idempotency keys seen
}

// Stats returns the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{Calls: s.calls, Queries: s.queries, Applied: s.applied, Keys: len(s.refunds)}
}

// Refunds returns a copy of every refund.
func (s *Server) Refunds() []Refund {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Refund, 0, len(s.refunds))
	for _, r := range s.refunds {
		out = append(out, *r)
	}
	return out
}

// Handler serves the provider's HTTP API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /refunds", s.refund)
	mux.HandleFunc("GET /refunds/{key}", s.lookup)
	mux.HandleFunc("POST /admin/script", func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Modes []Mode }
		if json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, "bad script", http.StatusBadRequest)
			return
		}
		s.Script(req.Modes...)
	})
	mux.HandleFunc("POST /admin/settle", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Key    string `json:"idempotency_key"`
			Status string `json:"status"`
		}
		if json.NewDecoder(r.Body).Decode(&req) != nil || !s.Settle(req.Key, req.Status) {
			http.Error(w, "unknown refund", http.StatusNotFound)
		}
	})
	mux.HandleFunc("GET /admin/stats", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, s.Stats()) })
	mux.HandleFunc("GET /admin/refunds", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, s.Refunds()) })
	return mux
}

func (s *Server) refund(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	var args json.RawMessage
	if key == "" || json.NewDecoder(r.Body).Decode(&args) != nil {
		http.Error(w, "idempotency key and JSON body required", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.calls++
	if prev, ok := s.refunds[key]; ok {
		// Idempotent replay: the same key never refunds twice.
		prev.Calls++
		st := prev.Status
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"refund": map[string]string{"id": key, "status": st}})
		return
	}
	mode := Applied
	if len(s.script) > 0 {
		mode, s.script = s.script[0], s.script[1:]
	}
	rec := &Refund{Key: key, Args: args, Calls: 1}
	switch mode {
	case Applied, Timeout:
		rec.Status, rec.Applied = "succeeded", true
		s.applied++
	case Pending:
		rec.Status = "pending"
	case Weird:
		rec.Status = "on_hold"
	case Failed:
		rec.Status = "failed"
	case Conflict:
		rec = nil
	}
	if rec != nil {
		s.refunds[key] = rec
	}
	delay := s.Delay
	s.mu.Unlock()
	switch mode {
	case Conflict:
		writeJSON(w, http.StatusConflict, map[string]string{"error": "order not refundable"})
	case Timeout:
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
		}
		writeJSON(w, http.StatusOK, map[string]any{"refund": map[string]string{"id": key, "status": "succeeded"}})
	case Pending:
		writeJSON(w, http.StatusAccepted, map[string]any{"refund": map[string]string{"id": key, "status": rec.Status}})
	default:
		writeJSON(w, http.StatusOK, map[string]any{"refund": map[string]string{"id": key, "status": rec.Status}})
	}
}

func (s *Server) lookup(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	s.mu.Lock()
	s.queries++
	rec, ok := s.refunds[key]
	var st string
	if ok {
		st = rec.Status
	}
	s.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no refund with this idempotency key"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"refund": map[string]string{"id": key, "status": st}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
