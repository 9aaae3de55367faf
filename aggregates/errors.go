package aggregates

import (
	"errors"
	"fmt"

	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/wire"
)

// UnavailableError is the store not answering: a read, a sequence check or
// an append that failed or timed out. The outcome of the call is unknown
// (its append may have been stored): ledger_unavailable, resend.
type UnavailableError struct {
	Subject string // the subject the store did not answer for; "" for an append of several
	Err     error
}

// Error returns the store's error.
func (e *UnavailableError) Error() string { return e.Err.Error() }

// Unwrap returns the store's error.
func (e *UnavailableError) Unwrap() error { return e.Err }

// Code is wire.CodeLedgerUnavailable.
func (e *UnavailableError) Code() wire.Code { return wire.CodeLedgerUnavailable }

// StoredEventError is a stored event that the kernel refuses to fold (or
// that is no valid event): the subject's state cannot be known, so nothing
// is decided on it until an operator looks. It is not an outage, and
// resending does not help: stored_event_refused.
type StoredEventError struct {
	Subject string
	Seq     uint64
	Err     error
}

// Error names the subject and sequence of the refused event.
func (e *StoredEventError) Error() string {
	return fmt.Sprintf("aggregates: %s seq %d: %v", e.Subject, e.Seq, e.Err)
}

// Unwrap returns why the event was refused.
func (e *StoredEventError) Unwrap() error { return e.Err }

// Code is wire.CodeStoredEventRefused.
func (e *StoredEventError) Code() wire.Code { return wire.CodeStoredEventRefused }

// CodeOf is the stable code of an error of the engine:
// CodeStoredEventRefused for a StoredEventError, CodeLedgerUnavailable for
// any other (the outcome is unknown).
func CodeOf(err error) wire.Code {
	var se *StoredEventError
	if errors.As(err, &se) {
		return se.Code()
	}
	return wire.CodeLedgerUnavailable
}

// readError types an error of the store's Read of subject: a stored
// message that is no valid event, or the store not answering.
func readError(subject string, err error) error {
	var ce *events.CorruptError
	if errors.As(err, &ce) {
		return &StoredEventError{Subject: ce.Subject, Seq: ce.Seq, Err: err}
	}
	return &UnavailableError{Subject: subject, Err: err}
}
