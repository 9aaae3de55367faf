package gateway

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/contextos/ledger/aggregates"
	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/wire"
)

// TestStoreFault: a stored event the kernel refuses, typed by the engine
// or met as a message that is no valid event, however wrapped, is
// stored_event_refused naming its subject and sequence; anything else is
// ledger_unavailable.
func TestStoreFault(t *testing.T) {
	const subject = "ctx.ev.acme.control"
	bad := errors.New("invalid envelope")
	for _, c := range []struct {
		err  error
		code wire.Code
		want string
	}{
		{&aggregates.StoredEventError{Subject: subject, Seq: 14, Err: bad}, wire.CodeStoredEventRefused, subject + " seq 14 "},
		{fmt.Errorf("load: %w", &events.CorruptError{Subject: subject, Seq: 15, Err: bad}), wire.CodeStoredEventRefused, subject + " seq 15 "},
		{&aggregates.UnavailableError{Subject: subject, Err: errors.New("nats: timeout")}, wire.CodeLedgerUnavailable, "nats: timeout"},
		{errors.New("nats: no responders available for request"), wire.CodeLedgerUnavailable, "no responders"},
	} {
		code, reason := storeFault(c.err)
		if code != c.code || !strings.Contains(reason, c.want) {
			t.Errorf("%v: %s %q, want %s naming %q", c.err, code, reason, c.code, c.want)
		}
		if r := storeRefusal(c.err); r.OK || r.Code != code || r.Reason != reason {
			t.Errorf("%v: operator reply %+v", c.err, r)
		}
	}
}
