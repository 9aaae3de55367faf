package console

// Hooks for the tests that boot a whole runtime (package console_test,
// since the runtime imports this package).

// CookieName is the session cookie's name.
const CookieName = cookieName

// SessionLogin returns the login behind a session cookie's value.
func (s *Server) SessionLogin(id string) (*Login, bool) {
	ss, ok := s.sessions.Get(id)
	if !ok {
		return nil, false
	}
	return ss.State.login, true
}

// SessionCounts returns the number of sessions, of every tenant and of
// each one named.
func (s *Server) SessionCounts(tenants ...string) (all int, each []int) {
	for _, t := range tenants {
		each = append(each, s.sessions.TenantCount(t))
	}
	return s.sessions.Count(), each
}
