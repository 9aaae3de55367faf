package projections

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/contextos/ledger/audit"
	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/codec"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// AuditStreamName is the default name of the audit stream.
const AuditStreamName = "CTX_AUDIT"

// AuditSubjectPrefix is the first two tokens of every audit subject. The
// audit stream captures AuditSubjectPrefix + ">".
const AuditSubjectPrefix = "ctx.audit."

// RecordSubject returns the subject of tenant's audit records:
// "ctx.audit.<tenant>". Its messages are the records in index order.
func RecordSubject(tenant string) string { return AuditSubjectPrefix + tenant }

// CheckpointSubject returns the subject of tenant's signed checkpoints:
// "ctx.audit.<tenant>.checkpoint", in increasing size.
func CheckpointSubject(tenant string) string { return AuditSubjectPrefix + tenant + ".checkpoint" }

// AuditStreamOptions configures EnsureAuditStream. Zero fields take defaults.
type AuditStreamOptions struct {
	Name     string // default AuditStreamName
	Replicas int    // default 1; 3 on a JetStream cluster
}

// EnsureAuditStream creates the audit stream on subjects "ctx.audit.>", or
// updates an existing one, as an append-only log (events.EnsureAppendOnly:
// file storage, no limits, discard new, DenyDelete, DenyPurge, no rollup,
// AllowDirect, AllowAtomicPublish for batches of records). It fails if the
// server does not keep a setting the log depends on.
func EnsureAuditStream(ctx context.Context, js jetstream.JetStream, o AuditStreamOptions) (jetstream.Stream, error) {
	if o.Name == "" {
		o.Name = AuditStreamName
	}
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	return events.EnsureAppendOnly(ctx, js, jetstream.StreamConfig{
		Name:        o.Name,
		Description: "ContextOS audit records and checkpoints (append-only)",
		Subjects:    []string{AuditSubjectPrefix + ">"},
		Replicas:    o.Replicas,
	})
}

// StoredRecord is an audit record as the audit stream holds it.
type StoredRecord struct {
	Seq    uint64       // stream sequence in the audit stream
	Raw    []byte       // the canonical record
	Record audit.Record // parsed (audit.Parse) from Raw
}

// StoredCheckpoint is a signed checkpoint as the audit stream holds it.
type StoredCheckpoint struct {
	Seq        uint64           // stream sequence in the audit stream
	Note       []byte           // the signed note
	Checkpoint audit.Checkpoint // read (unverified) from Note
}

// AuditLog reads and appends tenants' audit records and checkpoints on the
// audit stream. Appends carry Nats-Expected-Last-Subject-Sequence, so two
// writers can never fork a tenant's chain: the second gets a
// *events.ConflictError. Reads are Direct Gets (no consumer). Safe for
// concurrent use.
type AuditLog struct {
	js        jetstream.JetStream
	nc        *nats.Conn
	stream    string
	directGet string
	timeout   time.Duration
	// ReadBatch is the number of messages asked per Direct Get batch request
	// (default 256). Set before first use.
	ReadBatch int
}

// NewAuditLog returns the log on the stream named stream (see
// EnsureAuditStream), using js for its connection, API prefix and timeout.
func NewAuditLog(js jetstream.JetStream, stream string) *AuditLog {
	prefix, timeout := events.API(js)
	return &AuditLog{js: js, nc: js.Conn(), stream: stream, directGet: prefix + "DIRECT.GET." + stream, timeout: timeout, ReadBatch: 256}
}

func (l *AuditLog) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, l.timeout)
}

// Append stores a canonical record on tenant's record subject iff the
// subject's last sequence is expectedSeq (0 = no record yet), and returns its
// sequence. A mismatch returns a *events.ConflictError; any other error
// leaves the outcome unknown (re-read the tail).
func (l *AuditLog) Append(ctx context.Context, tenant string, expectedSeq uint64, raw []byte) (uint64, error) {
	return l.append(ctx, tenant, RecordSubject(tenant), expectedSeq, [][]byte{raw})
}

// AppendBatch stores records, in order, on tenant's record subject iff its
// last sequence is expectedSeq, all or nothing (one atomic batch), and
// returns the sequence of the last. A mismatch is an *events.ConflictError;
// any other error leaves the outcome unknown.
func (l *AuditLog) AppendBatch(ctx context.Context, tenant string, expectedSeq uint64, raws [][]byte) (uint64, error) {
	return l.append(ctx, tenant, RecordSubject(tenant), expectedSeq, raws)
}

// AppendCheckpoint stores a signed checkpoint note on tenant's checkpoint
// subject iff its last sequence is expectedSeq, like Append.
func (l *AuditLog) AppendCheckpoint(ctx context.Context, tenant string, expectedSeq uint64, note []byte) (uint64, error) {
	return l.append(ctx, tenant, CheckpointSubject(tenant), expectedSeq, [][]byte{note})
}

// append stores raws on one of tenant's subjects under the event store's
// concurrency rule (events.AppendRaw).
func (l *AuditLog) append(ctx context.Context, tenant, subject string, expected uint64, raws [][]byte) (uint64, error) {
	if err := codec.ValidToken(tenant); err != nil {
		return 0, fmt.Errorf("projections: audit subject %q: %w", subject, err)
	}
	ctx, cancel := l.withTimeout(ctx)
	defer cancel()
	return events.AppendRaw(ctx, l.nc, l.stream, subject, expected, raws)
}

// Tail returns tenant's last record; ok is false when the log is empty.
func (l *AuditLog) Tail(ctx context.Context, tenant string) (rec StoredRecord, ok bool, err error) {
	seq, data, ok, err := l.last(ctx, RecordSubject(tenant))
	if err != nil || !ok {
		return StoredRecord{}, false, err
	}
	r, _, err := audit.Parse(data)
	if err != nil {
		return StoredRecord{}, false, fmt.Errorf("projections: audit record at %d: %w", seq, err)
	}
	return StoredRecord{Seq: seq, Raw: data, Record: r}, true, nil
}

// LastCheckpoint returns tenant's last checkpoint; ok is false when none was
// published.
func (l *AuditLog) LastCheckpoint(ctx context.Context, tenant string) (cp StoredCheckpoint, ok bool, err error) {
	seq, data, ok, err := l.last(ctx, CheckpointSubject(tenant))
	if err != nil || !ok {
		return StoredCheckpoint{}, false, err
	}
	c, err := audit.ReadCheckpoint(data)
	if err != nil {
		return StoredCheckpoint{}, false, fmt.Errorf("projections: checkpoint at %d: %w", seq, err)
	}
	return StoredCheckpoint{Seq: seq, Note: data, Checkpoint: c}, true, nil
}

// Records calls fn for tenant's records stored at sequence fromSeq or later,
// in order, until the end of the log, limit records (0 = no limit) or fn's
// first error, which it returns.
func (l *AuditLog) Records(ctx context.Context, tenant string, fromSeq uint64, limit int, fn func(StoredRecord) error) error {
	return l.scan(ctx, RecordSubject(tenant), fromSeq, limit, func(seq uint64, data []byte) error {
		r, _, err := audit.Parse(data)
		if err != nil {
			return fmt.Errorf("projections: audit record at %d: %w", seq, err)
		}
		return fn(StoredRecord{Seq: seq, Raw: data, Record: r})
	})
}

// Checkpoints calls fn for tenant's checkpoints stored at sequence fromSeq
// or later, in order, like Records.
func (l *AuditLog) Checkpoints(ctx context.Context, tenant string, fromSeq uint64, limit int, fn func(StoredCheckpoint) error) error {
	return l.scan(ctx, CheckpointSubject(tenant), fromSeq, limit, func(seq uint64, data []byte) error {
		c, err := audit.ReadCheckpoint(data)
		if err != nil {
			return fmt.Errorf("projections: checkpoint at %d: %w", seq, err)
		}
		return fn(StoredCheckpoint{Seq: seq, Note: data, Checkpoint: c})
	})
}

// SeqOfIndex returns the stream sequence of tenant's record index, found by
// binary search over the record subject (O(log n) reads); ok is false when
// the log has no such record.
func (l *AuditLog) SeqOfIndex(ctx context.Context, tenant string, index int64) (seq uint64, ok bool, err error) {
	tail, ok, err := l.Tail(ctx, tenant)
	if err != nil || !ok || index < 0 || index > tail.Record.Index {
		return 0, false, err
	}
	lo, hi := uint64(1), tail.Seq // the record is at a sequence in [lo, hi]
	for lo < hi {
		mid := lo + (hi-lo)/2
		var found *StoredRecord
		if err := l.Records(ctx, tenant, mid, 1, func(r StoredRecord) error { found = &r; return nil }); err != nil {
			return 0, false, err
		}
		if found == nil {
			return 0, false, fmt.Errorf("projections: audit log of %q: no record at or after %d below the tail %d", tenant, mid, tail.Seq)
		}
		switch {
		case found.Record.Index == index:
			return found.Seq, true, nil
		case found.Record.Index < index:
			lo = found.Seq + 1
		default:
			hi = mid
		}
	}
	var found *StoredRecord
	if err := l.Records(ctx, tenant, lo, 1, func(r StoredRecord) error { found = &r; return nil }); err != nil {
		return 0, false, err
	}
	if found == nil || found.Record.Index != index {
		return 0, false, fmt.Errorf("projections: audit log of %q: record %d not found", tenant, index)
	}
	return found.Seq, true, nil
}

// last returns the last message of subject.
func (l *AuditLog) last(ctx context.Context, subject string) (seq uint64, data []byte, ok bool, err error) {
	ctx, cancel := l.withTimeout(ctx)
	defer cancel()
	body, _ := json.Marshal(directReq{LastFor: subject})
	m, err := l.nc.RequestWithContext(ctx, l.directGet, body)
	if err != nil {
		return 0, nil, false, fmt.Errorf("projections: last of %q: %w", subject, err)
	}
	if len(m.Data) == 0 {
		switch st := m.Header.Get("Status"); st {
		case "404":
			return 0, nil, false, nil
		case "":
		default:
			return 0, nil, false, fmt.Errorf("projections: last of %q: status %s %s", subject, st, m.Header.Get("Description"))
		}
	}
	seq, err = strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
	if err != nil || seq == 0 {
		return 0, nil, false, fmt.Errorf("projections: last of %q: reply without a sequence", subject)
	}
	return seq, m.Data, true, nil
}

// directReq is a Direct Get request ($JS.API.DIRECT.GET.<stream>).
type directReq struct {
	Seq     uint64 `json:"seq,omitempty"`
	NextFor string `json:"next_by_subj,omitempty"`
	LastFor string `json:"last_by_subj,omitempty"`
	Batch   int    `json:"batch,omitempty"`
}

// errStop ends a scan early without error.
var errStop = errors.New("stop")

// scan calls fn for the messages of subject from fromSeq on, with batched
// Direct Gets.
func (l *AuditLog) scan(ctx context.Context, subject string, fromSeq uint64, limit int, fn func(uint64, []byte) error) error {
	if fromSeq == 0 {
		fromSeq = 1
	}
	batch := l.ReadBatch
	if batch <= 0 {
		batch = 256
	}
	delivered := 0
	for {
		n := batch
		if limit > 0 && limit-delivered < n {
			n = limit - delivered
		}
		rctx, cancel := l.withTimeout(ctx)
		next, pending, got, err := l.directOnce(rctx, directReq{Seq: fromSeq, NextFor: subject, Batch: n}, fn)
		cancel()
		if err != nil {
			return err
		}
		delivered += got
		if got == 0 || pending == 0 || (limit > 0 && delivered >= limit) {
			return nil
		}
		fromSeq = next
	}
}

// directOnce sends one batch request; it returns the sequence after the last
// message delivered, the number still pending and the number delivered.
func (l *AuditLog) directOnce(ctx context.Context, req directReq, fn func(uint64, []byte) error) (next, pending uint64, n int, err error) {
	body, err := json.Marshal(req)
	if err != nil {
		return 0, 0, 0, err
	}
	inbox := l.nc.NewRespInbox()
	sub, err := l.nc.SubscribeSync(inbox)
	if err != nil {
		return 0, 0, 0, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := l.nc.PublishRequest(l.directGet, inbox, body); err != nil {
		return 0, 0, 0, err
	}
	next = req.Seq
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return 0, 0, 0, fmt.Errorf("projections: direct get on %s: %w", l.stream, err)
		}
		if len(m.Data) == 0 {
			switch st := m.Header.Get("Status"); st {
			case "204": // end of batch
				p, _ := strconv.ParseUint(m.Header.Get("Nats-Num-Pending"), 10, 64)
				return next, p, n, nil
			case "404": // nothing (more) to deliver
				return next, 0, n, nil
			case "":
			default:
				return 0, 0, 0, fmt.Errorf("projections: direct get on %s: status %s %s", l.stream, st, m.Header.Get("Description"))
			}
		}
		seq, perr := strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
		if perr != nil || seq == 0 {
			return 0, 0, 0, fmt.Errorf("projections: direct get on %s: reply without a sequence", l.stream)
		}
		n++
		next = seq + 1
		if err := fn(seq, m.Data); err != nil {
			return 0, 0, 0, err
		}
	}
}
