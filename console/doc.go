// Package console is the operator web console: an HTTP server that contextosd
// starts when its configuration has a [console] listen address.
//
// It is an operator client of the daemon's operator API and nothing more. An
// operator logs in with the NATS credentials the server already checks
// (tenant, operator id, password); the console opens a NATS connection as that
// operator and keeps it for the session, so every page is read and every
// action is sent through ctx.v1.<tenant>.ops.<verb>.<operator> on the
// operator's own connection: the NATS server's permissions confine it to the
// operator's tenant, and the daemon records each action under the operator's
// name. The console holds no business rule: balances, states, next safe steps
// and refusals are what the daemon replies, and an action the kernel refuses
// is shown refused.
//
// Sessions are random ids in HTTP-only, SameSite=Strict cookies, ended when
// idle. Logins and sessions are bounded per tenant (Limits): each configured
// tenant has its own token bucket of login attempts and its own bound of
// sessions, so one tenant's operators can neither lock out nor log out
// another's. Every state-changing request must carry the session's CSRF
// token and pass net/http's cross-origin protection. The session table
// (Sessions, Login), the limits and the operator dialer (Dialer) are shared
// with towerd's page (package tower), which holds logins of several
// tenants in one session. Pages are
// html/template (everything an agent controls is escaped) with one small
// script for live updates, which arrive as server-sent events of re-rendered
// fragments.
//
// The usage loop:
//
//	srv, err := console.Start(console.Options{Config: cfg.Console, NATSURL: rt.URL, Manifest: cfg})
//	...
//	defer srv.Close()
package console
