package events

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/contextos/ledger/events/codec"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// StreamName is the default name of the one domain-event stream.
const StreamName = "CTX_EVENTS"

// DefaultDuplicateWindow is the stream's Nats-Msg-Id de-duplication window: a
// single-event append retried within it is recognised by the server even on
// paths where it checks the message id before the expected sequence. Two
// minutes covers any client retry loop; a longer window costs server memory
// (one entry per message in the window). Retries after the window are still
// safe: the expected sequence refuses them and the store recognises the stored
// copy (see Store).
const DefaultDuplicateWindow = 2 * time.Minute

// JetStream headers used by the store (ADR-50 for the batch ones).
const (
	hdrMsgID            = "Nats-Msg-Id"
	hdrExpectedLastSubj = "Nats-Expected-Last-Subject-Sequence"
	// hdrExpectedLastSubjSubj makes a message's expected sequence that of
	// another subject: a guard (see AppendItem).
	hdrExpectedLastSubjSubj = "Nats-Expected-Last-Subject-Sequence-Subject"
	hdrBatchID              = "Nats-Batch-Id"
	hdrBatchSeq             = "Nats-Batch-Sequence"
	hdrBatchCommit          = "Nats-Batch-Commit"
	hdrStatus               = "Status"
	hdrSequence             = "Nats-Sequence"
	hdrSubject              = "Nats-Subject"
	hdrNumPending           = "Nats-Num-Pending"
	// hdrPrevSeq holds the subject's previous sequence (0 = none), written by
	// every append: the expected sequence on a subject's first message of an
	// append, prevAdjacent (= this sequence - 1) on the following ones, which
	// an atomic batch stores right after it.
	hdrPrevSeq   = "Ctx-Prev-Seq"
	prevAdjacent = "adjacent"
)

// JetStream API error codes the store interprets.
const (
	errCodeWrongLastSeq         = 10071 // "wrong last sequence: {seq}"
	errCodeWrongLastSeqConstant = 10164 // "wrong last sequence" (replicated and batch paths)
	errCodeNoMessageFound       = 10037 // "no message found"
	errCodeBatchIncomplete      = 10176 // "atomic publish batch is incomplete"
)

// StreamOptions configures EnsureStream. Zero fields take the defaults.
type StreamOptions struct {
	Name       string        // default StreamName
	Subjects   []string      // default [SubjectPrefix + ">"]
	Replicas   int           // default 1; 3 on a JetStream cluster
	Duplicates time.Duration // default DefaultDuplicateWindow
}

// EnsureStream creates the event stream, or updates an existing one to this
// configuration: file storage, limits retention with no limits, discard new,
// DenyDelete, DenyPurge, AllowDirect (reads without a consumer), AllowAtomicPublish
// (batches) and the duplicate window. It fails if the server does not keep
// one of the settings the store depends on (for example a server older than
// 2.12 without atomic batches).
func EnsureStream(ctx context.Context, js jetstream.JetStream, o StreamOptions) (jetstream.Stream, error) {
	if o.Name == "" {
		o.Name = StreamName
	}
	if len(o.Subjects) == 0 {
		o.Subjects = []string{codec.SubjectPrefix + ">"}
	}
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.Duplicates == 0 {
		o.Duplicates = DefaultDuplicateWindow
	}
	return EnsureAppendOnly(ctx, js, jetstream.StreamConfig{
		Name:        o.Name,
		Description: "ContextOS domain events (append-only)",
		Subjects:    o.Subjects,
		Replicas:    o.Replicas,
		Duplicates:  o.Duplicates,
	})
}

// EnsureAppendOnly creates the stream cfg names, or updates an existing one,
// as an append-only log: cfg's name, description, subjects, replicas and
// duplicate window, with file storage, limits retention without limits,
// discard new, DenyDelete, DenyPurge, no rollup, AllowDirect (reads without
// a consumer) and AllowAtomicPublish (batches). It fails if the server does
// not keep one of the settings the logs depend on (for example a server
// older than 2.12 without atomic batches). The event stream and the audit
// stream are both made by it.
func EnsureAppendOnly(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	cfg.Retention = jetstream.LimitsPolicy
	cfg.MaxConsumers, cfg.MaxMsgs, cfg.MaxBytes, cfg.MaxAge, cfg.MaxMsgsPerSubject = -1, -1, -1, 0, -1
	cfg.Discard = jetstream.DiscardNew
	cfg.Storage = jetstream.FileStorage
	cfg.DenyDelete, cfg.DenyPurge, cfg.AllowRollup = true, true, false
	cfg.AllowDirect, cfg.AllowAtomicPublish = true, true
	s, err := js.CreateOrUpdateStream(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("events: ensure stream %s: %w", cfg.Name, err)
	}
	got := s.CachedInfo().Config
	switch {
	case got.Storage != jetstream.FileStorage:
		err = errors.New("storage is not file")
	case !got.DenyDelete || !got.DenyPurge:
		err = errors.New("deny_delete/deny_purge not kept")
	case got.AllowRollup:
		err = errors.New("allow_rollup is set")
	case !got.AllowDirect:
		err = errors.New("allow_direct not kept")
	case !got.AllowAtomicPublish:
		err = errors.New("allow_atomic not kept (atomic batch publish needs nats-server >= 2.12)")
	case got.PersistMode != jetstream.DefaultPersistMode:
		err = errors.New("persist_mode is not default (acks before persisting)")
	case got.NoAck:
		err = errors.New("no_ack is set")
	}
	if err != nil {
		return nil, fmt.Errorf("events: ensure stream %s: %w", cfg.Name, err)
	}
	return s, nil
}

// JetStore is the JetStream Store. Appends are publishes carrying
// Nats-Expected-Last-Subject-Sequence; a single event also carries Nats-Msg-Id
// = its event id; several events go as one ADR-50 atomic batch. Reads use
// Direct Get (no consumer), and the stream leader where a replica could be
// behind. Safe for concurrent use. See docs/storage.md.
type JetStore struct {
	js        jetstream.JetStream
	nc        *nats.Conn
	stream    string
	directGet string        // $JS.API.DIRECT.GET.<stream> (with the context's prefix)
	msgGet    string        // $JS.API.STREAM.MSG.GET.<stream>: answered by the stream leader only
	timeout   time.Duration // for calls whose context has no deadline

	mu         sync.Mutex
	replicated int // 0 unknown, 1 single replica, 2 replicated (see leaderReads)
	replies    batchReplies
	memo       decodeMemo
	// ReadBatch is the number of messages asked per Direct Get batch request
	// (default 256). Set before first use.
	ReadBatch int
	// ScanPerRoundTrip is how many stream messages a server-side scan may
	// step over per round trip saved before Read walks a subject backwards
	// instead (0 means DefaultScanPerRoundTrip; negative, always when the
	// links are there). Set before first use.
	ScanPerRoundTrip int
}

var _ Store = (*JetStore)(nil)

// API returns the JetStream API subject prefix js uses (its domain's or its
// API prefix, with the trailing dot) and its default timeout (5 s when it
// has none): what a direct request to the API, made without js, needs.
func API(js jetstream.JetStream) (prefix string, timeout time.Duration) {
	o := js.Options()
	prefix = jetstream.DefaultAPIPrefix
	switch {
	case o.Domain != "":
		prefix = "$JS." + o.Domain + ".API."
	case o.APIPrefix != "":
		prefix = strings.TrimSuffix(o.APIPrefix, ".") + "."
	}
	timeout = o.DefaultTimeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	return prefix, timeout
}

// NewJetStore returns a Store on the stream named stream (see EnsureStream),
// using js for its connection, API prefix or domain and default timeout.
func NewJetStore(js jetstream.JetStream, stream string) *JetStore {
	prefix, timeout := API(js)
	return &JetStore{
		js: js, nc: js.Conn(), stream: stream,
		directGet: prefix + "DIRECT.GET." + stream,
		msgGet:    prefix + "STREAM.MSG.GET." + stream,
		timeout:   timeout,
		ReadBatch: 256,
	}
}

func (s *JetStore) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.timeout)
}

// pubAck is a JetStream publish acknowledgement (single or batch commit).
type pubAck struct {
	Error     *jetstream.APIError `json:"error,omitempty"`
	Stream    string              `json:"stream"`
	Seq       uint64              `json:"seq"`
	Duplicate bool                `json:"duplicate,omitempty"`
	Batch     string              `json:"batch,omitempty"`
	Count     int                 `json:"count,omitempty"`
}

func (s *JetStore) request(ctx context.Context, m *nats.Msg) (*pubAck, error) {
	return requestAck(ctx, s.nc, s.stream, m)
}

// requestAck publishes m as a request and returns the JetStream ack of
// stream.
func requestAck(ctx context.Context, nc *nats.Conn, stream string, m *nats.Msg) (*pubAck, error) {
	resp, err := nc.RequestMsgWithContext(ctx, m)
	// No responders means no stream took the message (nothing is stored),
	// as while a replicated stream elects its leader: wait briefly and ask
	// again rather than fail the append.
	for wait := 10 * time.Millisecond; errors.Is(err, nats.ErrNoResponders) && wait <= 640*time.Millisecond; wait *= 2 {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		resp, err = nc.RequestMsgWithContext(ctx, m)
	}
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			return nil, fmt.Errorf("events: no stream is listening on %q: %w", m.Subject, err)
		}
		return nil, err
	}
	var ack pubAck
	if err := json.Unmarshal(resp.Data, &ack); err != nil {
		return nil, fmt.Errorf("events: invalid JetStream ack %q: %w", resp.Data, err)
	}
	if ack.Error == nil && (ack.Stream != stream || ack.Seq == 0) {
		return nil, fmt.Errorf("events: unexpected JetStream ack %q (want stream %s)", resp.Data, stream)
	}
	return &ack, nil
}

// publishAtomic sends msgs as one ADR-50 atomic batch: every message gets
// the batch id and its place, the last the commit, and only the commit is
// a request (a gap is reported in its reply). A successful ack is checked
// to be this batch's, whole.
func publishAtomic(ctx context.Context, nc *nats.Conn, stream string, msgs []*nats.Msg) (*pubAck, error) {
	batchID := nuid.Next()
	for k, m := range msgs {
		m.Header.Set(hdrBatchID, batchID)
		m.Header.Set(hdrBatchSeq, strconv.Itoa(k+1))
		if k < len(msgs)-1 {
			if err := nc.PublishMsg(m); err != nil {
				return nil, err
			}
		}
	}
	last := msgs[len(msgs)-1]
	last.Header.Set(hdrBatchCommit, "1")
	ack, err := requestAck(ctx, nc, stream, last)
	if err != nil {
		return nil, err
	}
	if ack.Error == nil && (ack.Batch != batchID || ack.Count != len(msgs)) {
		return nil, fmt.Errorf("events: unexpected batch ack: batch %q count %d, want %q %d", ack.Batch, ack.Count, batchID, len(msgs))
	}
	return ack, nil
}

// AppendRaw stores raws, in order, on subject of stream iff the subject's
// last sequence is expected (0 = empty): a plain publish for one message,
// one atomic batch for more (the stream must allow atomic publish). It
// returns the sequence of the last, or a *ConflictError. Any other error
// leaves the outcome unknown: read the subject before trying again. It is
// the append of logs that hold no events (the audit log), under the same
// concurrency rule as the event store's.
func AppendRaw(ctx context.Context, nc *nats.Conn, stream, subject string, expected uint64, raws [][]byte) (uint64, error) {
	if len(raws) == 0 || len(raws) > MaxBatch {
		return 0, fmt.Errorf("%w: %d messages for %q", ErrInvalidAppend, len(raws), subject)
	}
	msgs := make([]*nats.Msg, len(raws))
	for i, raw := range raws {
		msgs[i] = nats.NewMsg(subject)
		msgs[i].Data = raw
	}
	msgs[0].Header.Set(hdrExpectedLastSubj, strconv.FormatUint(expected, 10))
	var ack *pubAck
	var err error
	if len(msgs) == 1 {
		ack, err = requestAck(ctx, nc, stream, msgs[0])
	} else {
		ack, err = publishAtomic(ctx, nc, stream, msgs)
	}
	if err != nil {
		return 0, err
	}
	if ack.Error != nil {
		if actual, ok := conflictActual(ack.Error); ok {
			return 0, &ConflictError{Subject: subject, Expected: expected, Actual: actual}
		}
		return 0, fmt.Errorf("events: append to %q: %w", subject, ack.Error)
	}
	return ack.Seq, nil
}

// conflictActual returns the actual sequence stated by a wrong-last-sequence
// API error, and whether the error is one.
func conflictActual(e *jetstream.APIError) (uint64, bool) {
	switch e.ErrorCode {
	case errCodeWrongLastSeq:
		_, n, _ := strings.Cut(e.Description, ":")
		v, _ := strconv.ParseUint(strings.TrimSpace(n), 10, 64)
		return v, true
	case errCodeWrongLastSeqConstant:
		return 0, true
	}
	return 0, false
}

// Append implements Store.
func (s *JetStore) Append(ctx context.Context, subject string, expectedLastSeq uint64, envs ...codec.Envelope) (uint64, error) {
	seqs, err := s.AppendBatch(ctx, []AppendItem{{Subject: subject, ExpectedLastSeq: expectedLastSeq, Envs: envs}})
	if err != nil {
		return 0, err
	}
	return seqs[0], nil
}

// AppendBatch implements Store. One event goes as a plain publish with
// Nats-Msg-Id; more as one atomic batch whose first message per subject
// carries that subject's expected sequence.
func (s *JetStore) AppendBatch(ctx context.Context, items []AppendItem) ([]uint64, error) {
	enc, err := prepareAppend(items)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	if len(enc) == 1 && len(enc[0].raws) == 1 {
		seq, err := s.appendOne(ctx, enc[0])
		if err != nil {
			return nil, err
		}
		return []uint64{seq}, nil
	}
	return s.appendAtomic(ctx, enc)
}

func (s *JetStore) appendOne(ctx context.Context, it encodedItem) (uint64, error) {
	m := nats.NewMsg(it.subject)
	m.Data = it.raws[0]
	m.Header.Set(hdrMsgID, it.envs[0].EventID)
	m.Header.Set(hdrExpectedLastSubj, strconv.FormatUint(it.expected, 10))
	m.Header.Set(hdrPrevSeq, strconv.FormatUint(it.expected, 10))
	ack, err := s.request(ctx, m)
	if err != nil {
		return 0, err
	}
	if ack.Error != nil {
		actual, isConflict := conflictActual(ack.Error)
		if !isConflict {
			return 0, fmt.Errorf("events: append to %q: %w", it.subject, ack.Error)
		}
		// A standalone server checks the expected sequence before the message
		// id, so a retry after a lost ack lands here: look for our event.
		if seq, ok, err := s.retried(ctx, it); err != nil {
			return 0, err
		} else if ok {
			return seq, nil
		}
		return 0, &ConflictError{Subject: it.subject, Expected: it.expected, Actual: actual}
	}
	if ack.Duplicate {
		// The message id was seen within the window (the clustered path checks
		// it first): make sure the stored message is this very event.
		st, err := s.getSeq(ctx, ack.Seq)
		if err != nil {
			return 0, err
		}
		if st.Subject != it.subject || !bytes.Equal(st.Raw, it.raws[0]) {
			return 0, fmt.Errorf("%w: %s (stored at %d on %q)", ErrEventIDReused, it.envs[0].EventID, ack.Seq, st.Subject)
		}
	}
	s.memo.put(ack.Seq, it.raws[0], it.envs[0])
	return ack.Seq, nil
}

func (s *JetStore) appendAtomic(ctx context.Context, enc []encodedItem) ([]uint64, error) {
	total := 0
	for _, it := range enc {
		total += len(it.raws)
	}
	msgs := make([]*nats.Msg, 0, total)
	var carriers []*nats.Msg // messages after the first of their subject: they carry the guards
	for _, it := range enc {
		for j, raw := range it.raws {
			m := nats.NewMsg(it.subject)
			m.Data = raw
			if j == 0 {
				m.Header.Set(hdrExpectedLastSubj, strconv.FormatUint(it.expected, 10))
				m.Header.Set(hdrPrevSeq, strconv.FormatUint(it.expected, 10))
			} else {
				m.Header.Set(hdrPrevSeq, prevAdjacent)
				carriers = append(carriers, m)
			}
			msgs = append(msgs, m)
		}
	}
	for _, it := range enc {
		if len(it.raws) == 0 { // a guard (prepareAppend made sure there is a carrier for each)
			m := carriers[0]
			carriers = carriers[1:]
			m.Header.Set(hdrExpectedLastSubj, strconv.FormatUint(it.expected, 10))
			m.Header.Set(hdrExpectedLastSubjSubj, it.subject)
		}
	}
	var ack *pubAck
	for try := 0; ; try++ {
		var err error
		if ack, err = publishAtomic(ctx, s.nc, s.stream, msgs); err != nil {
			return nil, err
		}
		if ack.Error == nil {
			break
		}
		if ack.Error.ErrorCode == errCodeBatchIncomplete && try < maxUnmovedRetries {
			// A replicated stream's leader may see the commit of a batch
			// before all of its messages: it stores none of them, so the
			// same batch goes again (its expected sequences refuse a second
			// copy should the first have been stored after all).
			if err := pause(ctx, try); err != nil {
				return nil, err
			}
			continue
		}
		actual, isConflict := conflictActual(ack.Error)
		if !isConflict {
			return nil, fmt.Errorf("events: atomic batch of %d: %w", total, ack.Error)
		}
		seqs, err := s.batchConflict(ctx, enc, actual)
		var conflict *ConflictError
		if !errors.As(err, &conflict) || conflict.Subject != "" || try >= maxUnmovedRetries {
			return seqs, err
		}
		// Nothing moved: a replicated stream's leader refuses a batch that
		// expects a subject another batch expects while that one is being
		// applied (every proposal of a tenant guards its control subject),
		// though no expectation is wrong. The same batch goes again.
		if err := pause(ctx, try); err != nil {
			return nil, err
		}
	}
	// The server commits a batch as one contiguous run of sequences in
	// publish order, acknowledging the last.
	seqs := make([]uint64, len(enc))
	seq := ack.Seq - uint64(total)
	for i, it := range enc {
		if len(it.raws) == 0 {
			seqs[i] = it.expected // a guard: it held
			continue
		}
		for j, raw := range it.raws {
			s.memo.put(seq+1+uint64(j), raw, it.envs[j])
		}
		seq += uint64(len(it.raws))
		seqs[i] = seq
	}
	return seqs, nil
}

// maxUnmovedRetries bounds how often appendAtomic sends a batch again that
// was refused though none of its expectations was wrong. Writers that all
// guard one subject are admitted one batch at a time by a replicated
// stream's leader; six of them sending without pause needed up to some
// dozens of tries (TestGuardsDoNotCollideR3).
const maxUnmovedRetries = 200

// pause waits a jittered, growing interval (at most about 5 ms) before a
// batch is sent again.
func pause(ctx context.Context, try int) error {
	d := time.Duration(100+rand.IntN(200*(1<<min(try, 5)))) * time.Microsecond
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// batchConflict handles a batch refused for a wrong last sequence. An exact
// retry of a batch that was committed is a success: it returns the committed
// sequences. Otherwise the server's error does not say which subject
// conflicted, so it reads every subject's last sequence, in parallel, and
// attributes the conflict to those past the expected one (read now:
// sequences only grow, so a subject that mismatched at commit still does).
// Naming them all lets the caller refresh them in one go: named one per
// refused batch, a group holding k stale subjects would take k+1 appends,
// each after a read of the subjects one by one, which on a replicated
// stream holds a large group for seconds.
func (s *JetStore) batchConflict(ctx context.Context, enc []encodedItem, actual uint64) ([]uint64, error) {
	seqs := make([]uint64, len(enc))
	all := true
	for i, it := range enc {
		if len(it.raws) == 0 {
			seqs[i] = it.expected // a guard: it held if the rest was stored
			continue
		}
		seq, ok, err := s.retried(ctx, it)
		if err != nil {
			return nil, err
		}
		if !ok {
			all = false
			break
		}
		seqs[i] = seq
	}
	if all {
		return seqs, nil
	}
	if len(enc) == 1 {
		return nil, &ConflictError{Subject: enc[0].subject, Expected: enc[0].expected, Actual: actual}
	}
	lasts := make([]uint64, len(enc))
	errs := make([]error, len(enc))
	var wg sync.WaitGroup
	limit := make(chan struct{}, conflictReads)
	for i, it := range enc {
		wg.Add(1)
		limit <- struct{}{}
		go func() {
			defer func() { <-limit; wg.Done() }()
			lasts[i], errs[i] = s.LastSeq(ctx, it.subject)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var conflict *ConflictError
	for i, it := range enc {
		if lasts[i] != it.expected {
			if conflict == nil {
				conflict = &ConflictError{Subject: it.subject, Expected: it.expected, Actual: lasts[i]}
			}
			conflict.Stale = append(conflict.Stale, it.subject)
		}
	}
	if conflict == nil {
		return nil, &ConflictError{Actual: 0}
	}
	return nil, conflict
}

// conflictReads bounds the last-sequence reads batchConflict has in flight.
const conflictReads = 16

// retried reports whether the events right after it.expected on it.subject
// are exactly it.raws, and the sequence of the last of them.
func (s *JetStore) retried(ctx context.Context, it encodedItem) (uint64, bool, error) {
	var got []Stored
	if s.leaderReads(ctx) {
		// A follower may lag: ask the leader, one message at a time (a rare path).
		from := it.expected + 1
		for range it.raws {
			f, found, err := s.leaderGet(ctx, directReq{Seq: from, NextFor: it.subject})
			if err != nil {
				return 0, false, err
			}
			if !found {
				break
			}
			got = append(got, f.Stored)
			from = f.Seq + 1
		}
	} else if err := s.directBatch(ctx, directReq{Seq: it.expected + 1, NextFor: it.subject, Batch: len(it.raws)}, func(f fetched) error {
		got = append(got, f.Stored)
		return nil
	}, len(it.raws)); err != nil {
		return 0, false, err
	}
	if len(got) != len(it.raws) {
		return 0, false, nil
	}
	for i, st := range got {
		if !bytes.Equal(st.Raw, it.raws[i]) {
			return 0, false, nil
		}
	}
	return got[len(got)-1].Seq, true, nil
}
