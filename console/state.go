package console

import (
	"context"
	"sync"
)

// session is the console's state of one Session: its one tenant login,
// the flash shown on the next page, the last audit verification and the
// live streams open.
type session struct {
	id, csrf         string
	tenant, operator string
	login            *Login

	mu        sync.Mutex
	flash     *result      // shown once, on the next page
	audit     *auditResult // the last verification of the audit chain
	verifying bool         // a verification is running
	streams   int          // live-update streams open
}

// maxStreamsPerSession bounds the live-update streams (browser tabs) of a
// session.
const maxStreamsPerSession = 4

// call sends one operator verb through the session's connection.
func (s *session) call(ctx context.Context, verb string, req, out any) error {
	return s.login.Call(ctx, "", verb, req, out)
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
