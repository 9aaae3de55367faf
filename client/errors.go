package client

import (
	"errors"
	"fmt"

	"github.com/contextos/ledger/wire"
)

// Refused is a refusal by the daemon (or by the NATS server, for a subject
// or credentials the principal may not use), with its stable code. Test for
// it with errors.As(err, &client.Refused{}), or for one code with
// errors.Is(err, client.Refused{Code: client.CodeExceeded}).
type Refused struct {
	Code   Code
	Reason string
	// Decision is the full reply of a refused proposal (balances, action
	// digest, evidence gate); nil for an operator verb.
	Decision *Decision
}

// Error implements error.
func (r Refused) Error() string {
	if r.Reason == "" {
		return "refused " + string(r.Code)
	}
	return "refused " + string(r.Code) + ": " + r.Reason
}

// Retry is the retry class of the refusal's code (wire.RetryOf,
// docs/errors.md): never, same, later or operator; "" for a code this
// version does not know.
func (r Refused) Retry() wire.Retry { return wire.RetryOf(r.Code) }

// Is matches a Refused target of the same code (any code when the target's
// is empty).
func (r Refused) Is(target error) bool {
	var t Refused
	if !errors.As(target, &t) {
		return false
	}
	return t.Code == "" || t.Code == r.Code
}

// Unreachable is a daemon that could not be reached: no connection, no
// responder, or no reply before the deadline. For an operator verb the
// outcome is then unknown; for a proposal see Unresolved.
type Unreachable struct {
	Op  string
	Err error
}

// Error implements error.
func (u Unreachable) Error() string {
	return fmt.Sprintf("%s: contextosd unreachable: %v", u.Op, u.Err)
}

// Unwrap returns the cause.
func (u Unreachable) Unwrap() error { return u.Err }

// Unresolved is a proposal whose outcome was still unknown at the deadline:
// the daemon never answered, or answered unknown every time. The operation
// may exist; resend the same proposal (same run id and operation key)
// later to learn its outcome, never a new key.
type Unresolved struct {
	// Last is the last decision received (status unknown), or nil when no
	// reply arrived at all.
	Last    *Decision
	Resends int
	Err     error
}

// Error implements error.
func (u Unresolved) Error() string {
	return fmt.Sprintf("outcome unknown after %d resends: %v; resend the same operation key to learn it", u.Resends, u.Err)
}

// Unwrap returns the cause.
func (u Unresolved) Unwrap() error { return u.Err }
