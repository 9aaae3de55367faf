package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/contextos/ledger/wire"
	"github.com/nats-io/nats.go"
)

// DefaultProposeDeadline bounds Propose when its context has no deadline.
const DefaultProposeDeadline = 2 * time.Minute

// Propose sends a proposal and returns its decision. It resends the same
// bytes (same run id and operation key, so the daemon answers from the
// operation it already opened and never dispatches twice) when no reply
// comes within the timeout, the reply is unknown or the daemon refused it
// overloaded (before storing anything), waiting longer each
// time, until a definitive status or ctx's deadline (DefaultProposeDeadline
// when ctx has none).
//
// applied, not_applied and pending return the decision and no error (a
// pending operation settles later; resending its key reports the
// settlement). refused, and unknown with a code of retry class never,
// return the decision and a Refused. At the deadline it returns an
// Unresolved.
func (c *Client) Propose(ctx context.Context, p Proposal) (Decision, error) {
	body, err := json.Marshal(p)
	if err != nil {
		return Decision{}, fmt.Errorf("proposal: %w", err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultProposeDeadline)
		defer cancel()
	}
	subject := wire.ProposeSubject(c.tenant, c.principal)
	wait := c.timeout
	backoff := 50 * time.Millisecond
	var last *Decision
	var lastErr error
	for resends := 0; ; resends++ {
		m, err := c.request(ctx, subject, body, wait)
		var r Refused
		switch {
		case errors.As(err, &r):
			return Decision{}, r
		case err == nil:
			d, final, err := readDecision(m.Data)
			if final {
				return d, err
			}
			last, lastErr = &d, err
		case errors.Is(err, nats.ErrTimeout), errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrNoResponders):
			lastErr = err
		default:
			if ctx.Err() == nil {
				return Decision{}, Unreachable{Op: "propose", Err: err}
			}
			lastErr = err
		}
		// The reply was lost, late or unknown: the same key again, later.
		select {
		case <-ctx.Done():
			return Decision{}, Unresolved{Last: last, Resends: resends, Err: lastErr}
		case <-time.After(backoff):
		}
		if c.onResend != nil {
			c.onResend(resends+1, lastErr)
		}
		backoff = min(2*backoff, 2*time.Second)
		wait = min(2*wait, 30*time.Second)
	}
}

// readDecision decodes a decision reply. final is false when the same
// proposal is to be resent (unknown, or refused overloaded before anything
// was stored); err then says why. An unknown whose code's retry class is
// never is final: a Refused. A final refusal is the decision and a
// Refused; applied, not_applied and pending are the decision and no error.
func readDecision(data []byte) (d Decision, final bool, err error) {
	if err := json.Unmarshal(data, &d); err != nil {
		return Decision{}, true, fmt.Errorf("propose: bad reply: %w", err)
	}
	switch {
	case d.Status == StatusRefused && d.Code == CodeOverloaded:
		return d, false, fmt.Errorf("refused %s: %s", d.Code, d.Reason)
	case d.Status == StatusRefused:
		return d, true, Refused{Code: d.Code, Reason: d.Reason, Decision: &d}
	case d.Status == StatusUnknown && wire.RetryOf(d.Code) == wire.RetryNever:
		// The outcome is open (stored_event_refused after the dispatch),
		// but the code says resending cannot learn it.
		return d, true, Refused{Code: d.Code, Reason: d.Reason, Decision: &d}
	case d.Status == StatusApplied || d.Status == StatusNotApplied || d.Status == StatusPending:
		return d, true, nil
	default:
		return d, false, fmt.Errorf("status %s: %s", d.Status, d.Reason)
	}
}
