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
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/contextos/ledger/wire"
	"github.com/nats-io/nats.go"
	"golang.org/x/time/rate"
)

// Limits bound the logins and the sessions of an operator door (the
// console, towerd) per tenant, so that one tenant's operators can neither
// lock out nor log out another tenant's.
type Limits struct {
	// Tenants are the configured tenants: only they get a login bucket and
	// a session bound. A login naming any other tenant is refused before
	// anything is dialled, through one bucket all unknown names share, so
	// that no name a client sends grows memory.
	Tenants []string
	// PerTenant bounds the logins of one tenant kept at once (default 64):
	// a login beyond it ends that tenant's least recently used login, never
	// another tenant's.
	PerTenant int
	// Idle ends a session nobody used for this long (default 30m).
	Idle time.Duration
	// Lifetime ends a session however busy it is (default 12h).
	Lifetime time.Duration
	// LoginRate and LoginBurst are each tenant's token bucket of login
	// attempts (default 5 a second, bursts of 10), right or wrong.
	LoginRate  rate.Limit
	LoginBurst int
	// Now is the clock of sessions and buckets (default time.Now).
	Now func() time.Time
}

func (l *Limits) defaults() {
	if l.PerTenant <= 0 {
		l.PerTenant = 64
	}
	if l.Idle <= 0 {
		l.Idle = 30 * time.Minute
	}
	if l.Lifetime <= 0 {
		l.Lifetime = 12 * time.Hour
	}
	if l.LoginRate <= 0 {
		l.LoginRate = 5
	}
	if l.LoginBurst <= 0 {
		l.LoginBurst = 10
	}
	if l.Now == nil {
		l.Now = time.Now
	}
}

// Login refusals of Sessions.Admit.
var (
	// ErrTooManyLogins is a tenant's login bucket (or the bucket of unknown
	// tenants) running dry.
	ErrTooManyLogins = errors.New("too many logins for this tenant; wait a moment")
	// ErrUnknownTenant is a login naming a tenant this door does not serve.
	ErrUnknownTenant = errors.New("login refused: no such tenant here")
)

// Login is one tenant's login in a session: the operator, and the
// operator's own NATS connection to each runtime the tenant is served by
// (the console has one, named ""). Its fields do not change once the login
// is added to a session.
type Login struct {
	Tenant   string
	Operator string
	// Conns are the operator's connections, by runtime name.
	Conns map[string]*nats.Conn
	// Problems are the runtimes the login could not reach, and why.
	Problems map[string]string

	sid  string        // the session it belongs to
	elem *list.Element // in its tenant's list, least recently used first
}

// Call sends one operator verb as the login's operator on the runtime's
// connection and decodes the reply into out.
func (l *Login) Call(ctx context.Context, runtime, verb string, req, out any) error {
	nc := l.Conns[runtime]
	if nc == nil {
		return fmt.Errorf("%s: %w: not logged in on runtime %q", verb, errUnreachable, runtime)
	}
	return call(ctx, nc, l.Tenant, l.Operator, verb, req, out)
}

// Runtimes lists the runtimes the login reaches, sorted.
func (l *Login) Runtimes() []string {
	out := make([]string, 0, len(l.Conns))
	for r := range l.Conns {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

func (l *Login) close() {
	for _, nc := range l.Conns {
		nc.Close()
	}
}

// dead reports whether a connection of the login closed: the server
// refused it again, or it was ended.
func (l *Login) dead() bool {
	for _, nc := range l.Conns {
		if nc.IsClosed() {
			return true
		}
	}
	return false
}

// opTimeout bounds one ops request.
const opTimeout = 15 * time.Second

// errUnreachable is a request the daemon did not answer.
var errUnreachable = errors.New("the runtime did not answer")

// call sends one operator verb through nc and decodes the reply into out.
func call(ctx context.Context, nc *nats.Conn, tenant, operator, verb string, req, out any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	m, err := nc.RequestWithContext(ctx, wire.OpSubject(tenant, verb, operator), body)
	if err != nil {
		return fmt.Errorf("%s: %w: %v", verb, errUnreachable, err)
	}
	if err := json.Unmarshal(m.Data, out); err != nil {
		return fmt.Errorf("%s: bad reply: %w", verb, err)
	}
	return nil
}

// Session is one browser's session: a random id (its cookie), the CSRF
// token every state-changing request must carry, the tenant logins it
// holds, and State, the door's own data (set once, when the session opens).
type Session[T any] struct {
	ID    string
	CSRF  string
	State T

	created time.Time

	mu       sync.Mutex
	lastSeen time.Time
	logins   map[string]*Login // by tenant
}

// CheckCSRF compares a request's token with the session's in constant time.
func (s *Session[T]) CheckCSRF(token string) bool { return SameToken(token, s.CSRF) }

// Logins returns the session's logins, by tenant.
func (s *Session[T]) Logins() []*Login {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Login, 0, len(s.logins))
	for _, l := range s.logins {
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tenant < out[j].Tenant })
	return out
}

// Login returns the session's login of tenant, or nil.
func (s *Session[T]) Login(tenant string) *Login {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logins[tenant]
}

// Sessions is a door's table of sessions under its Limits: a login bucket
// and a bound of logins per configured tenant. Safe for concurrent use.
type Sessions[T any] struct {
	lim     Limits
	buckets map[string]*rate.Limiter // configured tenants; never grows
	unknown *rate.Limiter

	mu   sync.Mutex
	byID map[string]*Session[T]
	lru  map[string]*list.List // configured tenant -> its *Login, least recently used first
}

// NewSessions returns an empty table.
func NewSessions[T any](l Limits) *Sessions[T] {
	l.defaults()
	ss := &Sessions[T]{lim: l, buckets: map[string]*rate.Limiter{}, unknown: rate.NewLimiter(l.LoginRate, l.LoginBurst),
		byID: map[string]*Session[T]{}, lru: map[string]*list.List{}}
	for _, t := range l.Tenants {
		ss.buckets[t] = rate.NewLimiter(l.LoginRate, l.LoginBurst)
		ss.lru[t] = list.New()
	}
	return ss
}

// Admit takes a login attempt of tenant from its bucket, before the
// credentials are checked: ErrTooManyLogins when the bucket is dry,
// ErrUnknownTenant (from the unknown names' shared bucket) for a tenant the
// door does not serve.
func (ss *Sessions[T]) Admit(tenant string) error {
	now := ss.lim.Now()
	b, ok := ss.buckets[tenant]
	if !ok {
		if !ss.unknown.AllowN(now, 1) {
			return ErrTooManyLogins
		}
		return ErrUnknownTenant
	}
	if !b.AllowN(now, 1) {
		return ErrTooManyLogins
	}
	return nil
}

// Open starts a session with its first login; state makes the session's
// State before anyone can see it. Beyond the tenant's bound, the tenant's
// least recently used login ends.
func (ss *Sessions[T]) Open(l *Login, state func(*Session[T]) T) (*Session[T], error) {
	id, err := NewToken()
	if err != nil {
		return nil, err
	}
	csrf, err := NewToken()
	if err != nil {
		return nil, err
	}
	now := ss.lim.Now()
	s := &Session[T]{ID: id, CSRF: csrf, created: now, lastSeen: now, logins: map[string]*Login{}}
	if state != nil {
		s.State = state(s)
	}
	ss.mu.Lock()
	if ss.lru[l.Tenant] == nil {
		ss.mu.Unlock()
		return nil, ErrUnknownTenant
	}
	ss.byID[id] = s
	closed := ss.addLocked(s, l)
	ss.mu.Unlock()
	closeAll(closed)
	return s, nil
}

// AddLogin adds a tenant's login to the session of id (a fleet operator
// logged into several tenants), replacing the session's earlier login of
// that tenant.
func (ss *Sessions[T]) AddLogin(id string, l *Login) error {
	ss.mu.Lock()
	s, ok := ss.byID[id]
	if !ok || ss.lru[l.Tenant] == nil {
		ss.mu.Unlock()
		if !ok {
			return errors.New("the session ended")
		}
		return ErrUnknownTenant
	}
	closed := ss.addLocked(s, l)
	ss.mu.Unlock()
	closeAll(closed)
	return nil
}

// addLocked adds l to s and returns the logins it ended: the session's
// earlier login of the tenant, and the tenant's least recently used logins
// beyond the bound.
func (ss *Sessions[T]) addLocked(s *Session[T], l *Login) []*Login {
	var ended []*Login
	if old := s.Login(l.Tenant); old != nil {
		ss.dropLocked(old)
		ended = append(ended, old)
	}
	lst := ss.lru[l.Tenant]
	for lst.Len() >= ss.lim.PerTenant {
		old := lst.Front().Value.(*Login)
		ss.dropLocked(old)
		ended = append(ended, old)
	}
	l.sid = s.ID
	l.elem = lst.PushBack(l)
	s.mu.Lock()
	s.logins[l.Tenant] = l
	s.mu.Unlock()
	return ended
}

// dropLocked takes a login out of its tenant's list and its session, and
// ends the session when it was the last.
func (ss *Sessions[T]) dropLocked(l *Login) {
	ss.lru[l.Tenant].Remove(l.elem)
	s, ok := ss.byID[l.sid]
	if !ok {
		return
	}
	s.mu.Lock()
	if s.logins[l.Tenant] == l {
		delete(s.logins, l.Tenant)
	}
	empty := len(s.logins) == 0
	s.mu.Unlock()
	if empty {
		delete(ss.byID, s.ID)
	}
}

// endLocked removes a session and returns its logins.
func (ss *Sessions[T]) endLocked(s *Session[T]) []*Login {
	logins := s.Logins()
	for _, l := range logins {
		ss.dropLocked(l)
	}
	delete(ss.byID, s.ID)
	return logins
}

func closeAll(logins []*Login) {
	for _, l := range logins {
		l.close()
	}
}

// Get returns the live session of id and marks it and its logins used. A
// session idle too long or past its lifetime ends; a login whose connection
// closed ends, and the session with it when it was the last.
func (ss *Sessions[T]) Get(id string) (*Session[T], bool) {
	now := ss.lim.Now()
	ss.mu.Lock()
	s, ok := ss.byID[id]
	if !ok {
		ss.mu.Unlock()
		return nil, false
	}
	var closed []*Login
	if ss.expired(s, now) {
		closed = ss.endLocked(s)
		ok = false
	} else {
		for _, l := range s.Logins() {
			if l.dead() {
				ss.dropLocked(l)
				closed = append(closed, l)
			} else {
				ss.lru[l.Tenant].MoveToBack(l.elem)
			}
		}
		_, ok = ss.byID[id]
	}
	if ok {
		s.mu.Lock()
		s.lastSeen = now
		s.mu.Unlock()
	}
	ss.mu.Unlock()
	closeAll(closed)
	if !ok {
		return nil, false
	}
	return s, true
}

// Alive reports whether the session of id still exists and has not
// expired, without marking it used: a live stream alone does not keep a
// session from ending when idle.
func (ss *Sessions[T]) Alive(id string) bool {
	now := ss.lim.Now()
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, ok := ss.byID[id]
	return ok && !ss.expired(s, now) && !slices.ContainsFunc(s.Logins(), (*Login).dead)
}

func (ss *Sessions[T]) expired(s *Session[T], now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return now.Sub(s.lastSeen) > ss.lim.Idle || now.Sub(s.created) > ss.lim.Lifetime
}

// End ends the session of id and closes its connections.
func (ss *Sessions[T]) End(id string) {
	ss.mu.Lock()
	var closed []*Login
	if s, ok := ss.byID[id]; ok {
		closed = ss.endLocked(s)
	}
	ss.mu.Unlock()
	closeAll(closed)
}

// EndLogin ends one tenant's login of the session of id; the session ends
// with its last login.
func (ss *Sessions[T]) EndLogin(id, tenant string) {
	ss.mu.Lock()
	var closed []*Login
	if s, ok := ss.byID[id]; ok {
		if l := s.Login(tenant); l != nil {
			ss.dropLocked(l)
			closed = append(closed, l)
		}
	}
	ss.mu.Unlock()
	closeAll(closed)
}

// Sweep ends every expired session and every login whose connection
// closed.
func (ss *Sessions[T]) Sweep() {
	now := ss.lim.Now()
	var closed []*Login
	ss.mu.Lock()
	for _, s := range ss.byID {
		if ss.expired(s, now) {
			closed = append(closed, ss.endLocked(s)...)
			continue
		}
		for _, l := range s.Logins() {
			if l.dead() {
				ss.dropLocked(l)
				closed = append(closed, l)
			}
		}
	}
	ss.mu.Unlock()
	closeAll(closed)
}

// CloseAll ends every session.
func (ss *Sessions[T]) CloseAll() {
	var closed []*Login
	ss.mu.Lock()
	for _, s := range ss.byID {
		closed = append(closed, ss.endLocked(s)...)
	}
	ss.mu.Unlock()
	closeAll(closed)
}

// Count returns the number of sessions.
func (ss *Sessions[T]) Count() int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return len(ss.byID)
}

// TenantCount returns the number of sessions logged into tenant.
func (ss *Sessions[T]) TenantCount(tenant string) int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if lst := ss.lru[tenant]; lst != nil {
		return lst.Len()
	}
	return 0
}

// SameToken compares a token a request carries with the expected one in
// constant time; an empty token never matches.
func SameToken(got, want string) bool {
	return got != "" && want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// NewToken returns 256 random bits in hex: a session id or a CSRF token.
func NewToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}
