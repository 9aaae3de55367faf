package daemon

import (
	"errors"
	"strings"

	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/gateway"
	"github.com/nats-io/nats-server/v2/server"
)

// authWatch is the embedded server's logger: it logs nothing (the server
// runs quiet, as before) and counts every connection the server refused at
// authentication as contextos_auth_failures_total{door="nats"}. The server
// reports each refusal once, through its client error log (a wrong
// password, an unknown user, no credentials); the user name in it is the
// guesser's choice, so it is never a label.
//
// The server's $SYS authentication advisories say the same, but reading
// them needs a system account, and a configuration whose only account is
// the system account makes nats-server add an unauthenticated user to the
// global account.
type authWatch struct{ g *gateway.Gateway }

func (w authWatch) Errorf(format string, v ...any) {
	for _, a := range v {
		if err, ok := a.(error); ok && errors.Is(err, server.ErrAuthentication) {
			w.g.AuthFailed(gateway.DoorNATS)
			return
		}
	}
	if strings.HasSuffix(format, server.ErrAuthentication.Error()) {
		w.g.AuthFailed(gateway.DoorNATS)
	}
}

func (authWatch) Noticef(string, ...any) {}
func (authWatch) Warnf(string, ...any)   {}
func (authWatch) Fatalf(string, ...any)  {}
func (authWatch) Debugf(string, ...any)  {}
func (authWatch) Tracef(string, ...any)  {}

// watchAuthFailures makes authWatch the embedded server's logger.
func watchAuthFailures(emb *events.Embedded, g *gateway.Gateway) {
	emb.Server().SetLoggerV2(authWatch{g: g}, false, false, false)
}
