package gateway

import (
	"errors"
	"fmt"

	"github.com/contextos/ledger/aggregates"
	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/wire"
)

// storeFault is the code and reason of an error met loading, deciding on or
// appending to the store, the one mapping every door and verb answers with:
//
//   - a stored event the kernel refuses (*aggregates.StoredEventError), or
//     a stored message that is no valid event (*events.CorruptError):
//     stored_event_refused, naming its subject and sequence. Nothing is
//     decided on that subject until an operator looks; resending cannot help.
//   - anything else, the store not answering first among them:
//     ledger_unavailable. The outcome is unknown (an append may have been
//     stored); resending the same request learns it.
func storeFault(err error) (wire.Code, string) {
	var se *aggregates.StoredEventError
	if errors.As(err, &se) {
		return wire.CodeStoredEventRefused, refusedEventReason(se.Subject, se.Seq, se.Err)
	}
	var ce *events.CorruptError
	if errors.As(err, &ce) {
		return wire.CodeStoredEventRefused, refusedEventReason(ce.Subject, ce.Seq, ce.Err)
	}
	return wire.CodeLedgerUnavailable, "the store did not answer; the outcome is unknown, resend the same request to learn it: " + err.Error()
}

func refusedEventReason(subject string, seq uint64, err error) string {
	return fmt.Sprintf("the stored event %s seq %d is refused by the kernel; nothing is decided on that subject until an operator looks: %v", subject, seq, err)
}

// storeRefusal is the operator reply to an error of the store (storeFault).
func storeRefusal(err error) wire.OpReply {
	code, reason := storeFault(err)
	return wire.OpReply{Code: code, Reason: reason}
}
