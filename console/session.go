package console

import (
	"container/list"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/contextos/ledger/gateway"
	"github.com/nats-io/nats.go"
)

// session is one logged-in operator: the operator's own NATS connection and
// the CSRF token every state-changing request must carry.
type session struct {
	id       string
	csrf     string
	tenant   string
	operator string
	nc       *nats.Conn
	created  time.Time

	mu        sync.Mutex
	lastSeen  time.Time
	flash     *result      // shown once, on the next page
	audit     *auditResult // the last verification of the audit chain
	verifying bool         // a verification is running
	streams   int          // live-update streams open
	elem      *list.Element
}

// maxStreamsPerSession bounds the live-update streams (browser tabs) of a
// session.
const maxStreamsPerSession = 4

// opTimeout bounds one ops request.
const opTimeout = 15 * time.Second

// errUnreachable is a request the daemon did not answer.
var errUnreachable = errors.New("the runtime did not answer")

// call sends one operator verb through the session's connection and decodes
// the reply into out.
func (s *session) call(ctx context.Context, verb string, req, out any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	m, err := s.nc.RequestWithContext(ctx, gateway.OpSubject(s.tenant, verb, s.operator), body)
	if err != nil {
		return fmt.Errorf("%s: %w: %v", verb, errUnreachable, err)
	}
	if err := json.Unmarshal(m.Data, out); err != nil {
		return fmt.Errorf("%s: bad reply: %w", verb, err)
	}
	return nil
}

func (s *session) checkCSRF(token string) bool { return sameToken(token, s.csrf) }

// sameToken compares a token a request carries with the expected one in
// constant time; an empty token never matches.
func sameToken(got, want string) bool {
	return got != "" && want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

func (s *session) takeFlash() *result {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.flash
	s.flash = nil
	return f
}

func (s *session) setFlash(r *result) {
	s.mu.Lock()
	s.flash = r
	s.mu.Unlock()
}

// sessions is the bounded set of sessions, least recently used first.
type sessions struct {
	max  int
	idle time.Duration
	now  func() time.Time

	mu   sync.Mutex
	byID map[string]*session
	lru  *list.List
}

func newSessions(max int, idle time.Duration, now func() time.Time) *sessions {
	return &sessions{max: max, idle: idle, now: now, byID: map[string]*session{}, lru: list.New()}
}

// maxLifetime ends a session however busy it is.
const maxLifetime = 12 * time.Hour

// add registers a new session for nc, ending the least recently used one
// when the set is full.
func (ss *sessions) add(tenant, operator string, nc *nats.Conn) (*session, error) {
	id, err := randomToken()
	if err != nil {
		return nil, err
	}
	csrf, err := randomToken()
	if err != nil {
		return nil, err
	}
	now := ss.now()
	s := &session{id: id, csrf: csrf, tenant: tenant, operator: operator, nc: nc, created: now, lastSeen: now}
	ss.mu.Lock()
	var evicted []*session
	for ss.lru.Len() >= ss.max {
		old := ss.lru.Remove(ss.lru.Front()).(*session)
		delete(ss.byID, old.id)
		evicted = append(evicted, old)
	}
	s.elem = ss.lru.PushBack(s)
	ss.byID[id] = s
	ss.mu.Unlock()
	for _, old := range evicted {
		old.nc.Close()
	}
	return s, nil
}

// get returns the live session of id and marks it used.
func (ss *sessions) get(id string) (*session, bool) {
	now := ss.now()
	ss.mu.Lock()
	s, ok := ss.byID[id]
	if ok && ss.expired(s, now) {
		ss.removeLocked(s)
		ss.mu.Unlock()
		s.nc.Close()
		return nil, false
	}
	if ok {
		ss.lru.MoveToBack(s.elem)
	}
	ss.mu.Unlock()
	if !ok {
		return nil, false
	}
	s.mu.Lock()
	s.lastSeen = now
	s.mu.Unlock()
	return s, true
}

// alive reports whether the session of id still exists and has not
// expired, without marking it used: a live stream alone does not keep a
// session from ending when idle.
func (ss *sessions) alive(id string) bool {
	now := ss.now()
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, ok := ss.byID[id]
	return ok && !ss.expired(s, now)
}

func (ss *sessions) expired(s *session, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return now.Sub(s.lastSeen) > ss.idle || now.Sub(s.created) > maxLifetime || s.nc.IsClosed()
}

func (ss *sessions) removeLocked(s *session) {
	if _, ok := ss.byID[s.id]; ok {
		delete(ss.byID, s.id)
		ss.lru.Remove(s.elem)
	}
}

// end closes one session.
func (ss *sessions) end(s *session) {
	ss.mu.Lock()
	ss.removeLocked(s)
	ss.mu.Unlock()
	s.nc.Close()
}

// sweep ends every expired session.
func (ss *sessions) sweep() {
	now := ss.now()
	var gone []*session
	ss.mu.Lock()
	for _, s := range ss.byID {
		if ss.expired(s, now) {
			gone = append(gone, s)
		}
	}
	for _, s := range gone {
		ss.removeLocked(s)
	}
	ss.mu.Unlock()
	for _, s := range gone {
		s.nc.Close()
	}
}

// closeAll ends every session.
func (ss *sessions) closeAll() {
	ss.mu.Lock()
	all := make([]*session, 0, len(ss.byID))
	for _, s := range ss.byID {
		all = append(all, s)
	}
	ss.byID = map[string]*session{}
	ss.lru.Init()
	ss.mu.Unlock()
	for _, s := range all {
		s.nc.Close()
	}
}

func (ss *sessions) count() int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return len(ss.byID)
}

func randomToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}
