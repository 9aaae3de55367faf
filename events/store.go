package events

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/contextos/ledger/events/codec"
)

// Stored is one event as the store holds it. Raw (and Envelope.Body) may be
// shared with the store: do not modify them.
type Stored struct {
	Seq      uint64         // stream sequence, >= 1, strictly increasing across the whole stream
	Subject  string         // the subject it was appended to
	Envelope codec.Envelope // decoded (strictly) from Raw
	Raw      []byte         // the stored bytes: Encode(Envelope)
}

// AppendItem is one subject's share of an AppendBatch. An item with no
// events is a guard: the batch is stored only if the subject's last
// sequence is still ExpectedLastSeq, for a subject the decision read and
// does not append to. JetStream checks one expected sequence per message,
// so each guard rides on an event after the first one of another item
// (Nats-Expected-Last-Subject-Sequence-Subject): a batch needs at least one
// such event per guard, or it is refused as ErrInvalidAppend.
type AppendItem struct {
	Subject         string
	ExpectedLastSeq uint64 // the subject's last sequence the decision was made on; 0 = subject empty
	Envs            []codec.Envelope
}

// Store is an append-only event store with optimistic concurrency per
// subject. Sequences are stream-wide (like JetStream's): the events of one
// subject have increasing, usually non-contiguous sequences.
//
// Every append is idempotent for an exact retry: when the events right after
// expectedLastSeq on the subject are byte for byte the ones being appended (a
// retry after a lost acknowledgement), the call returns their sequence(s)
// instead of a conflict, and nothing is stored twice. Any error other than a
// *ConflictError or ErrInvalidAppend leaves the outcome unknown: retry the same
// call with the same envelopes.
//
// Implementations are safe for concurrent use.
type Store interface {
	// Append stores envs, in order, on subject iff the subject's last
	// sequence is expectedLastSeq (0 = subject empty), all or nothing. It
	// returns the sequence of the last appended event. A mismatch returns a
	// *ConflictError (errors.Is(err, ErrConflict)).
	Append(ctx context.Context, subject string, expectedLastSeq uint64, envs ...codec.Envelope) (uint64, error)
	// AppendBatch appends several subjects' events atomically (all or
	// nothing), each subject (distinct) with its own expected sequence. It
	// returns, per item, the sequence of the item's last event. One
	// mismatching item stores nothing and returns a *ConflictError.
	AppendBatch(ctx context.Context, items []AppendItem) ([]uint64, error)
	// Read returns the events of subject with seq >= fromSeq, in order.
	Read(ctx context.Context, subject string, fromSeq uint64) ([]Stored, error)
	// LastSeq returns the sequence of the subject's last event, 0 if none.
	LastSeq(ctx context.Context, subject string) (uint64, error)
	// Replay calls fn for every event of the stream with seq >= fromSeq, in
	// sequence order, until the end of the stream or fn's first error, which
	// it returns.
	Replay(ctx context.Context, fromSeq uint64, fn func(Stored) error) error
	// ReplayTenant is Replay of one tenant's events (the subjects
	// codec.TenantPrefix(tenant) + ">"); the other tenants' events are
	// not read.
	ReplayTenant(ctx context.Context, tenant string, fromSeq uint64, fn func(Stored) error) error
	// ReplayKind is ReplayTenant of one kind of the tenant's subjects
	// (codec.TenantPrefix(tenant) + kind + ".>"), from the start: the
	// other subjects' events are not read (the pins of a tenant's
	// guarantees, say, without its ledgers).
	ReplayKind(ctx context.Context, tenant, kind string, fn func(Stored) error) error
}

// ErrConflict is matched (errors.Is) by *ConflictError.
var ErrConflict = errors.New("events: expected last subject sequence mismatch")

// ConflictError reports an append whose expected last subject sequence was not
// the subject's last sequence: someone else appended first. Re-read, decide
// again and append with the new sequence.
type ConflictError struct {
	Subject  string // the subject; "" when a batch conflict could not be attributed
	Expected uint64 // the sequence the append expected
	Actual   uint64 // the subject's last sequence as the server reported it; 0 when it did not say
	// Stale lists every subject of a refused batch found past its expected
	// sequence, Subject first, so that a caller refreshes them all at once
	// rather than one per attempt. Nil for a single append.
	Stale []string
}

// Names reports whether the conflict is attributed to subject: it is Subject
// or among Stale.
func (e *ConflictError) Names(subject string) bool {
	return subject == e.Subject || slices.Contains(e.Stale, subject)
}

// Error describes the conflict.
func (e *ConflictError) Error() string {
	return fmt.Sprintf("events: conflict on %q: expected last subject sequence %d, actual %d", e.Subject, e.Expected, e.Actual)
}

// Is reports whether target is ErrConflict.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// ErrInvalidAppend is wrapped by errors for appends refused before reaching the
// store: no events, an invalid envelope or subject, a tenant that does not match
// the subject, duplicate event ids or subjects, a batch too large.
var ErrInvalidAppend = errors.New("events: invalid append")

// ErrEventIDReused is returned when the store reports an event id as a
// duplicate but holds different bytes under it: two different events were
// given the same id.
var ErrEventIDReused = errors.New("events: event id reused for a different event")

// CorruptError reports a stored message that is not a valid event.
type CorruptError struct {
	Seq     uint64
	Subject string
	Err     error
}

// Error describes the corrupt message.
func (e *CorruptError) Error() string {
	return fmt.Sprintf("events: stored message %d on %q is not a valid event: %v", e.Seq, e.Subject, e.Err)
}

// Unwrap returns the decoding error.
func (e *CorruptError) Unwrap() error { return e.Err }

// MaxBatch is the largest number of events one Append or AppendBatch may carry:
// nats-server's default atomic batch limit (jetstream max_batch_size).
const MaxBatch = 1000

// encodedItem is an AppendItem checked and encoded.
type encodedItem struct {
	subject  string
	expected uint64
	envs     []codec.Envelope
	raws     [][]byte
}

// prepareAppend validates items and encodes their envelopes. Rules shared by
// every Store: at least one event per item, distinct subjects, valid literal
// subjects, valid envelopes, distinct event ids, at most MaxBatch events, and on
// "ctx.ev.<tenant>...." subjects every envelope's tenant equals <tenant>.
func prepareAppend(items []AppendItem) ([]encodedItem, error) {
	if len(items) == 0 {
		return nil, fmt.Errorf("%w: no items", ErrInvalidAppend)
	}
	out := make([]encodedItem, len(items))
	subjects := make(map[string]struct{}, len(items))
	ids := make(map[string]struct{})
	total, guards, carriers := 0, 0, 0
	for i, it := range items {
		if err := codec.ValidSubject(it.Subject); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidAppend, err)
		}
		if _, dup := subjects[it.Subject]; dup {
			return nil, fmt.Errorf("%w: subject %q appears twice in one batch", ErrInvalidAppend, it.Subject)
		}
		subjects[it.Subject] = struct{}{}
		if len(it.Envs) == 0 {
			guards++
		} else {
			carriers += len(it.Envs) - 1
		}
		total += len(it.Envs)
		if total > MaxBatch {
			return nil, fmt.Errorf("%w: more than %d events in one append", ErrInvalidAppend, MaxBatch)
		}
		tenant, scoped := codec.SubjectTenant(it.Subject)
		raws := make([][]byte, len(it.Envs))
		for j, e := range it.Envs {
			if scoped && e.Tenant != tenant {
				return nil, fmt.Errorf("%w: event %s of tenant %q on subject %q", ErrInvalidAppend, e.EventID, e.Tenant, it.Subject)
			}
			if _, dup := ids[e.EventID]; dup {
				return nil, fmt.Errorf("%w: event id %s appears twice", ErrInvalidAppend, e.EventID)
			}
			ids[e.EventID] = struct{}{}
			b, err := codec.Encode(e)
			if err != nil {
				return nil, fmt.Errorf("%w: %w", ErrInvalidAppend, err)
			}
			raws[j] = b
		}
		out[i] = encodedItem{subject: it.Subject, expected: it.ExpectedLastSeq, envs: it.Envs, raws: raws}
	}
	if total == 0 {
		return nil, fmt.Errorf("%w: no events", ErrInvalidAppend)
	}
	if guards > carriers {
		return nil, fmt.Errorf("%w: %d guards need as many events after the first of a subject; the batch has %d", ErrInvalidAppend, guards, carriers)
	}
	return out, nil
}

// ReplayValid is s.Replay for followers that must not be blinded for good
// by one stored message that is not a valid event (nobody but the runtime
// may write the stream, so such a message is a defect or an attack stopped
// elsewhere): it skips each one, after calling skipped with its error, and
// goes on. last returns the follower's last folded sequence (fn advances
// it); the replay resumes after it, or after the skipped message.
func ReplayValid(ctx context.Context, s Store, last func() uint64, fn func(Stored) error, skipped func(*CorruptError)) error {
	from := last() + 1
	for {
		err := s.Replay(ctx, from, fn)
		var corrupt *CorruptError
		if !errors.As(err, &corrupt) || corrupt.Seq < from || corrupt.Seq <= last() {
			return err
		}
		skipped(corrupt)
		from = corrupt.Seq + 1
	}
}
