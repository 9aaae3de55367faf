package events

// The read side of JetStore: Direct Get (any replica), message get through
// the stream leader (current), and the Read strategies.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/contextos/ledger/events/codec"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// directReq is a Direct Get request ($JS.API.DIRECT.GET.<stream>).
type directReq struct {
	Seq     uint64 `json:"seq,omitempty"`
	NextFor string `json:"next_by_subj,omitempty"`
	LastFor string `json:"last_by_subj,omitempty"`
	Batch   int    `json:"batch,omitempty"`
}

// fetched is a message returned by Direct Get, decoded.
type fetched struct {
	Stored
	prev    uint64 // the subject's previous sequence, from hdrPrevSeq
	hasPrev bool
}

// toFetched decodes a Direct Get reply message.
func (s *JetStore) toFetched(m *nats.Msg) (fetched, error) {
	seq, err := strconv.ParseUint(m.Header.Get(hdrSequence), 10, 64)
	if err != nil || seq == 0 {
		return fetched{}, errors.New("events: direct get reply without a sequence")
	}
	return s.makeFetched(seq, m.Header.Get(hdrSubject), m.Header, m.Data, true)
}

// makeFetched decodes a stored message.
func (s *JetStore) makeFetched(seq uint64, subject string, hdr nats.Header, data []byte, decode bool) (fetched, error) {
	f := fetched{Stored: Stored{Seq: seq, Subject: subject, Raw: data}}
	var err error
	if !decode {
		// Only the position is wanted (LastSeq).
	} else if f.Envelope, err = s.memo.decode(seq, data); err != nil {
		return fetched{}, &CorruptError{Seq: seq, Subject: subject, Err: err}
	}
	switch p := hdr.Get(hdrPrevSeq); p {
	case "":
	case prevAdjacent:
		f.prev, f.hasPrev = seq-1, true
	default:
		if v, err := strconv.ParseUint(p, 10, 64); err == nil && v < seq {
			f.prev, f.hasPrev = v, true
		}
	}
	return f, nil
}

// leaderReads reports whether reads that must be current go to the stream
// leader. Direct Get is answered by any replica, and a follower may not yet
// have applied an acknowledged message; on a replicated stream the store
// therefore takes the last message of a subject (and anything a replica
// lacks) from the leader. The replica count is looked up once; if the lookup
// fails the leader is used.
func (s *JetStore) leaderReads(ctx context.Context) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.replicated == 0 {
		st, err := s.js.Stream(ctx, s.stream)
		if err != nil {
			return true
		}
		s.replicated = 1
		if st.CachedInfo().Config.Replicas > 1 {
			s.replicated = 2
		}
	}
	return s.replicated == 2
}

// leaderGet gets one message through the stream leader
// ($JS.API.STREAM.MSG.GET), which is current.
func (s *JetStore) leaderGet(ctx context.Context, req directReq) (fetched, bool, error) {
	return s.leaderGetDecode(ctx, req, true)
}

func (s *JetStore) leaderGetDecode(ctx context.Context, req directReq, decode bool) (fetched, bool, error) {
	req.Batch = 0
	body, err := json.Marshal(req)
	if err != nil {
		return fetched{}, false, err
	}
	m, err := s.nc.RequestWithContext(ctx, s.msgGet, body)
	if err != nil {
		return fetched{}, false, fmt.Errorf("events: message get on %s: %w", s.stream, err)
	}
	var resp struct {
		Error   *jetstream.APIError `json:"error"`
		Message *struct {
			Subject string `json:"subject"`
			Seq     uint64 `json:"seq"`
			Header  []byte `json:"hdrs"`
			Data    []byte `json:"data"`
		} `json:"message"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return fetched{}, false, fmt.Errorf("events: message get on %s: %w", s.stream, err)
	}
	if resp.Error != nil {
		if resp.Error.ErrorCode == errCodeNoMessageFound {
			return fetched{}, false, nil
		}
		return fetched{}, false, fmt.Errorf("events: message get on %s: %w", s.stream, resp.Error)
	}
	if resp.Message == nil || resp.Message.Seq == 0 {
		return fetched{}, false, fmt.Errorf("events: message get on %s: empty reply", s.stream)
	}
	var hdr nats.Header
	if len(resp.Message.Header) > 0 {
		if hdr, err = nats.DecodeHeadersMsg(resp.Message.Header); err != nil {
			return fetched{}, false, fmt.Errorf("events: message get on %s: %w", s.stream, err)
		}
	}
	f, err := s.makeFetched(resp.Message.Seq, resp.Message.Subject, hdr, resp.Message.Data, decode)
	return f, err == nil, err
}

// currentGet gets one message so that the answer is current: from the
// leader on a replicated stream, else by Direct Get.
func (s *JetStore) currentGet(ctx context.Context, req directReq) (fetched, bool, error) {
	if s.leaderReads(ctx) {
		return s.leaderGet(ctx, req)
	}
	return s.directOne(ctx, req)
}

// seqGet gets the message at seq: by Direct Get, and from the leader when the
// answering replica does not have it yet.
func (s *JetStore) seqGet(ctx context.Context, seq uint64) (fetched, bool, error) {
	f, found, err := s.directOne(ctx, directReq{Seq: seq})
	if err != nil || found || !s.leaderReads(ctx) {
		return f, found, err
	}
	return s.leaderGet(ctx, directReq{Seq: seq})
}

// directStatus interprets an empty Direct Get reply: found is false for 404
// (no such message), err is set for any other status.
func (s *JetStore) directStatus(m *nats.Msg) (found bool, err error) {
	if len(m.Data) > 0 {
		return true, nil
	}
	switch st := m.Header.Get(hdrStatus); st {
	case "":
		return true, nil // an empty stored message: Decode reports it
	case "404":
		return false, nil
	case "503":
		return false, fmt.Errorf("events: direct get on %s: no responders (stream missing or allow_direct off)", s.stream)
	default:
		return false, fmt.Errorf("events: direct get on %s: status %s %s", s.stream, st, m.Header.Get("Description"))
	}
}

// directOne runs a single-message Direct Get (by seq or last_by_subj).
func (s *JetStore) directOne(ctx context.Context, req directReq) (fetched, bool, error) {
	return s.directOneDecode(ctx, req, true)
}

func (s *JetStore) directOneDecode(ctx context.Context, req directReq, decode bool) (fetched, bool, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return fetched{}, false, err
	}
	m, err := s.nc.RequestWithContext(ctx, s.directGet, body)
	if err != nil {
		return fetched{}, false, fmt.Errorf("events: direct get on %s: %w", s.stream, err)
	}
	if found, err := s.directStatus(m); !found || err != nil {
		return fetched{}, false, err
	}
	seq, err := strconv.ParseUint(m.Header.Get(hdrSequence), 10, 64)
	if err != nil || seq == 0 {
		return fetched{}, false, errors.New("events: direct get reply without a sequence")
	}
	f, err := s.makeFetched(seq, m.Header.Get(hdrSubject), m.Header, m.Data, decode)
	return f, err == nil, err
}

// directBatch runs batch Direct Get requests from req.Seq on, calling fn for
// each message in order, until the server reports nothing pending or limit
// messages (0 = no limit) were delivered.
func (s *JetStore) directBatch(ctx context.Context, req directReq, fn func(fetched) error, limit int) error {
	if req.Seq == 0 {
		req.Seq = 1
	}
	if req.Batch <= 0 {
		req.Batch = s.readBatch()
	}
	delivered := 0
	for {
		if limit > 0 && limit-delivered < req.Batch {
			req.Batch = limit - delivered
		}
		next, pending, n, err := s.directOnce(ctx, req, fn)
		if err != nil {
			return err
		}
		delivered += n
		if n == 0 || pending == 0 || (limit > 0 && delivered >= limit) {
			return nil
		}
		req.Seq = next
	}
}

func (s *JetStore) readBatch() int {
	if s.ReadBatch > 0 {
		return s.ReadBatch
	}
	return 256
}

// directOnce sends one batch request (req.Batch >= 1) and returns the
// sequence after the last message delivered, the number of matching messages
// still pending after it and the number delivered.
func (s *JetStore) directOnce(ctx context.Context, req directReq, fn func(fetched) error) (next, pending uint64, n int, err error) {
	body, err := json.Marshal(req)
	if err != nil {
		return 0, 0, 0, err
	}
	inbox, replies, done, err := s.batchInbox(req.Batch)
	if err != nil {
		return 0, 0, 0, err
	}
	defer done()
	if err := s.nc.PublishRequest(s.directGet, inbox, body); err != nil {
		return 0, 0, 0, err
	}
	next = req.Seq
	for {
		var m *nats.Msg
		select {
		case m = <-replies:
		case <-ctx.Done():
			return 0, 0, 0, fmt.Errorf("events: direct get on %s: %w", s.stream, ctx.Err())
		}
		if len(m.Data) == 0 && m.Header.Get(hdrStatus) == "204" { // end of batch
			p, _ := strconv.ParseUint(m.Header.Get(hdrNumPending), 10, 64)
			return next, p, n, nil
		}
		if found, err := s.directStatus(m); err != nil {
			return 0, 0, 0, err
		} else if !found {
			return next, 0, n, nil
		}
		f, err := s.toFetched(m)
		if err != nil {
			return 0, 0, 0, err
		}
		n++
		next = f.Seq + 1
		if err := fn(f); err != nil {
			return 0, 0, 0, err
		}
	}
}

// getSeq returns the message at sequence seq.
func (s *JetStore) getSeq(ctx context.Context, seq uint64) (Stored, error) {
	f, found, err := s.seqGet(ctx, seq)
	if err != nil {
		return Stored{}, err
	}
	if !found || f.Seq != seq {
		return Stored{}, fmt.Errorf("events: message %d not found in %s", seq, s.stream)
	}
	return f.Stored, nil
}

// DefaultScanPerRoundTrip is the default of JetStore.ScanPerRoundTrip.
const DefaultScanPerRoundTrip = 2000

// Read implements Store without a consumer. The subject's last message is
// read first from a current source (Direct Get on a single-replica stream,
// the stream leader on a replicated one), so the result holds everything
// acknowledged before the call. The rest is read by one of two Direct Get
// strategies, chosen from the subject's first and last messages:
//
//   - forward: batched next_by_subj requests. nats-server finds a subject's
//     first message in each file block from its per-block subject index, but
//     reaches each further one by scanning the block's messages, so the cost
//     grows with the stream traffic between the subject's events;
//   - backward: from the last message, one Direct Get by sequence per event,
//     following the Ctx-Prev-Seq header every append writes (the subject's
//     previous sequence, exact because the expected-sequence check made it
//     so). The cost grows with the subject's events only.
//
// Backward is chosen when at most two events remain between first and last
// (no more round trips than forward), or when the span between first and last
// exceeds ScanPerRoundTrip stream messages per event to fetch. Whatever a
// lagging replica did not have is fetched from the leader.
func (s *JetStore) Read(ctx context.Context, subject string, fromSeq uint64) ([]Stored, error) {
	if err := codec.ValidSubject(subject); err != nil {
		return nil, err
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	if fromSeq == 0 {
		fromSeq = 1
	}
	// The last message comes from a current source, so the result holds at
	// least everything acknowledged before Read was called.
	last, found, err := s.currentGet(ctx, directReq{LastFor: subject})
	if err != nil || !found || last.Seq < fromSeq {
		return nil, err
	}
	if last.hasPrev && last.prev < fromSeq {
		return []Stored{last.Stored}, nil
	}
	// The first message from fromSeq on, and how many follow it.
	var first fetched
	var pending uint64
	var n int
	if _, pending, n, err = s.directOnce(ctx, directReq{Seq: fromSeq, NextFor: subject, Batch: 1}, func(f fetched) error {
		first = f
		return nil
	}); err != nil {
		return nil, err
	}
	if n > 0 && first.Seq == last.Seq {
		return []Stored{last.Stored}, nil
	}
	scan := s.ScanPerRoundTrip
	if scan == 0 {
		scan = DefaultScanPerRoundTrip
	}
	// Backward costs pending-1 round trips (the first and last are in hand),
	// forward one plus the scan: backward wins outright for up to two more.
	if n > 0 && last.hasPrev && pending > 0 && (scan < 0 || pending <= 2 || (last.Seq-first.Seq)/pending > uint64(scan)) {
		// The walk must meet exactly the messages the server counted, or a
		// link skipped one (or appends raced the probes): then read forward.
		if out, ok, err := s.readBackward(ctx, subject, first, last); err != nil || (ok && uint64(len(out)) == pending+1) {
			return out, err
		}
	}
	var out []Stored
	next := fromSeq
	if n > 0 {
		out = append(out, first.Stored)
		next = first.Seq + 1
		if err := s.directBatch(ctx, directReq{Seq: next, NextFor: subject}, func(f fetched) error {
			out = append(out, f.Stored)
			return nil
		}, 0); err != nil {
			return nil, err
		}
		next = out[len(out)-1].Seq + 1
	}
	// A replica that answered the Direct Gets may lag behind the last
	// message: fetch what it lacked from the leader.
	for next <= last.Seq {
		f, found, err := s.leaderGet(ctx, directReq{Seq: next, NextFor: subject})
		if err != nil {
			return nil, err
		}
		if !found {
			return nil, fmt.Errorf("events: read %q: message %d vanished", subject, last.Seq)
		}
		out = append(out, f.Stored)
		next = f.Seq + 1
	}
	return out, nil
}

// readBackward walks from last to first by the Ctx-Prev-Seq links; ok is
// false when a link is missing or inconsistent (then the caller reads forward).
func (s *JetStore) readBackward(ctx context.Context, subject string, first, last fetched) ([]Stored, bool, error) {
	rev := []Stored{last.Stored}
	cur := last
	for cur.Seq != first.Seq {
		if !cur.hasPrev || cur.prev < first.Seq {
			return nil, false, nil
		}
		var f fetched
		if cur.prev == first.Seq {
			f = first
		} else {
			var found bool
			var err error
			if f, found, err = s.seqGet(ctx, cur.prev); err != nil {
				return nil, false, err
			} else if !found || f.Seq != cur.prev || f.Subject != subject {
				return nil, false, nil
			}
		}
		rev = append(rev, f.Stored)
		cur = f
	}
	slices.Reverse(rev)
	return rev, true, nil
}

// LastSeq implements Store with a Direct Get of the subject's last message.
func (s *JetStore) LastSeq(ctx context.Context, subject string) (uint64, error) {
	if err := codec.ValidSubject(subject); err != nil {
		return 0, err
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	get := s.directOneDecode
	if s.leaderReads(ctx) {
		get = s.leaderGetDecode
	}
	f, found, err := get(ctx, directReq{LastFor: subject}, false)
	if err != nil || !found {
		return 0, err
	}
	return f.Seq, nil
}

// Replay implements Store with batched Direct Get requests over the whole
// stream (no consumer). Each request has the default timeout when ctx has no
// deadline; the whole replay is bounded only by ctx.
func (s *JetStore) Replay(ctx context.Context, fromSeq uint64, fn func(Stored) error) error {
	return s.replay(ctx, fromSeq, "", fn)
}

// ReplayTenant implements Store like Replay, with the tenant's subjects as
// the Direct Get filter: the server skips the other tenants' messages
// (finding a filter's next message from each file block's subject index),
// so they are neither sent nor decoded.
func (s *JetStore) ReplayTenant(ctx context.Context, tenant string, fromSeq uint64, fn func(Stored) error) error {
	if err := codec.ValidToken(tenant); err != nil {
		return err
	}
	return s.replay(ctx, fromSeq, codec.TenantPrefix(tenant)+">", fn)
}

// ReplayKind implements Store like ReplayTenant, with the kind's subjects
// as the Direct Get filter.
func (s *JetStore) ReplayKind(ctx context.Context, tenant, kind string, fn func(Stored) error) error {
	if err := codec.ValidToken(tenant); err != nil {
		return err
	}
	if err := codec.ValidToken(kind); err != nil {
		return err
	}
	return s.replay(ctx, 1, codec.TenantPrefix(tenant)+kind+".>", fn)
}

// replay reads the stream's messages from fromSeq on, those on subjects
// matching filter when it is set.
func (s *JetStore) replay(ctx context.Context, fromSeq uint64, filter string, fn func(Stored) error) error {
	// On a replicated stream Direct Get may be answered by a follower that
	// has not applied everything the leader acknowledged: learn the
	// leader's last sequence first and fetch from the leader whatever the
	// replica lacked, so a replay reads every event acknowledged before it
	// began (read-your-writes across replicas).
	var upTo uint64
	if s.leaderReads(ctx) {
		rctx, cancel := s.withTimeout(ctx)
		st, err := s.js.Stream(rctx, s.stream)
		cancel()
		if err != nil {
			return fmt.Errorf("events: stream info of %s: %w", s.stream, err)
		}
		upTo = st.CachedInfo().State.LastSeq
	}
	next := max(fromSeq, 1)
	deliver := func(f fetched) error {
		next = f.Seq + 1
		return fn(f.Stored)
	}
	req := directReq{Seq: next, NextFor: filter, Batch: s.readBatch()}
	for {
		rctx, cancel := s.withTimeout(ctx)
		nxt, pending, n, err := s.directOnce(rctx, req, deliver)
		cancel()
		if err != nil {
			return err
		}
		if n == 0 || pending == 0 {
			break
		}
		req.Seq = nxt
	}
	for next <= upTo {
		rctx, cancel := s.withTimeout(ctx)
		f, found, err := s.leaderGet(rctx, directReq{Seq: next, NextFor: filter})
		cancel()
		if err != nil {
			return err
		}
		if !found || f.Seq > upTo {
			return nil
		}
		if err := deliver(f); err != nil {
			return err
		}
	}
	return nil
}

// batchReplies routes the replies to Direct Get batch requests, several
// messages to one reply subject each, through one wildcard subscription on
// the connection's inbox. A subscription per request cost a SUB and an
// UNSUB on the server and a channel of 64k messages (SubscribeSync's
// default) each: a tenth of a cold load's CPU, and garbage.
type batchReplies struct {
	mu      sync.Mutex
	prefix  string // replies go to prefix + token
	sub     *nats.Subscription
	waiting map[string]chan *nats.Msg
	next    uint64
}

// batchInbox returns a reply subject for one batch request of up to batch
// messages, the channel its replies arrive on, and the function that
// retires it.
func (s *JetStore) batchInbox(batch int) (string, <-chan *nats.Msg, func(), error) {
	r := &s.replies
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sub == nil || !r.sub.IsValid() {
		prefix := s.nc.NewInbox() + "."
		sub, err := s.nc.Subscribe(prefix+"*", func(m *nats.Msg) {
			r.mu.Lock()
			ch := r.waiting[strings.TrimPrefix(m.Subject, prefix)]
			r.mu.Unlock()
			if ch != nil {
				select {
				case ch <- m:
				default: // cannot happen: the channel holds a whole batch
				}
			}
		})
		if err != nil {
			return "", nil, nil, err
		}
		r.prefix, r.sub, r.waiting = prefix, sub, map[string]chan *nats.Msg{}
	}
	r.next++
	tok := strconv.FormatUint(r.next, 36)
	// The server sends at most batch messages, then an end-of-batch or
	// status message.
	ch := make(chan *nats.Msg, batch+2)
	r.waiting[tok] = ch
	return r.prefix + tok, ch, func() {
		r.mu.Lock()
		delete(r.waiting, tok)
		r.mu.Unlock()
	}, nil
}

// LastStreamSeq returns the stream's last sequence (0 when empty), from the
// stream's info.
func (s *JetStore) LastStreamSeq(ctx context.Context) (uint64, error) {
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	st, err := s.js.Stream(ctx, s.stream)
	if err != nil {
		return 0, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.State.LastSeq, nil
}
