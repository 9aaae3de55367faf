package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// Fast batch publishing (nats-server 2.14+, ADR-50's "fast" mode): the
// messages of a batch are stored one by one as they arrive, each checked on
// its own (its Nats-Expected-Last-Subject-Sequence included), with no
// staging; the server acknowledges every N messages and sends one publish
// acknowledgement when the batch commits. In gap-fail mode the first message
// refused ends the batch: the messages before it are stored, none after it
// (a stored prefix). nats.go v1.55 and v1.56 know only the stream flag
// (StreamConfig.AllowBatchPublish, "allow_batched"), so the batch is written
// as the server reads it: every message's reply subject is
//
//	<inbox>.<batch id>.<ack every N>.<fail|ok>.<batch sequence>.<operation>.$FI
//
// with operation 0 for the first message, 1 for the next ones, 2 for the
// last (the commit). docs/storage.md (Fast batches) says what the store can
// build on it.

// FastResult is what a fast batch stored: its first Stored messages (a
// prefix), the last of them at stream sequence Seq. When fewer than all were
// stored, Refused is the server's error for the first message it refused
// (a wrong last sequence is a *ConflictError's cause: see conflictActual).
// The stream sequences of the other stored messages are not acknowledged:
// messages of other publishers may lie between them.
type FastResult struct {
	Stored  int
	Seq     uint64
	Refused *jetstream.APIError
}

// FastPublisher sends fast batches on one connection, with one wildcard
// subscription for the replies of all its batches. Safe for concurrent use.
type FastPublisher struct {
	nc     *nats.Conn
	stream string

	mu      sync.Mutex
	prefix  string
	sub     *nats.Subscription
	waiting map[string]chan *nats.Msg
}

// NewFastPublisher returns a publisher of fast batches into stream (which
// must allow batch publishing) over nc.
func NewFastPublisher(nc *nats.Conn, stream string) *FastPublisher {
	return &FastPublisher{nc: nc, stream: stream}
}

// fastReply is any reply of the server to a fast batch message: a flow
// acknowledgement, a gap or error notice (Type set), or the publish
// acknowledgement (Stream or Error set).
type fastReply struct {
	Type     string              `json:"type"`
	Sequence uint64              `json:"seq"` // a flow ack's batch sequence; the publish ack's stream sequence
	Error    *jetstream.APIError `json:"error"`
	Stream   string              `json:"stream"`
	Batch    string              `json:"batch"`
	Count    int                 `json:"count"`
}

func (p *FastPublisher) register(id string, n int) (chan *nats.Msg, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sub == nil || !p.sub.IsValid() {
		prefix := p.nc.NewInbox()
		sub, err := p.nc.Subscribe(prefix+".>", func(m *nats.Msg) {
			tok, _, _ := strings.Cut(strings.TrimPrefix(m.Subject, prefix+"."), ".")
			p.mu.Lock()
			ch := p.waiting[tok]
			p.mu.Unlock()
			if ch != nil {
				select {
				case ch <- m:
				default: // at most a flow ack, an error and an ack per message reach a batch's channel
				}
			}
		})
		if err != nil {
			return nil, err
		}
		p.prefix, p.sub, p.waiting = prefix, sub, map[string]chan *nats.Msg{}
	}
	ch := make(chan *nats.Msg, 3*n+2)
	p.waiting[id] = ch
	return ch, nil
}

func (p *FastPublisher) retire(id string) {
	p.mu.Lock()
	delete(p.waiting, id)
	p.mu.Unlock()
}

// Publish sends msgs (at most MaxBatch, each with its subject, headers and
// data; their reply subjects are set here) as one fast batch in gap-fail
// mode and waits for its acknowledgement. An error leaves the outcome
// unknown: any prefix of the batch may be stored.
func (p *FastPublisher) Publish(ctx context.Context, msgs []*nats.Msg) (FastResult, error) {
	if len(msgs) == 0 || len(msgs) > MaxBatch {
		return FastResult{}, fmt.Errorf("%w: fast batch of %d messages", ErrInvalidAppend, len(msgs))
	}
	id := nuid.Next()
	ch, err := p.register(id, len(msgs))
	if err != nil {
		return FastResult{}, err
	}
	defer p.retire(id)
	// Acknowledge at the commit only: a batch here is a handful of messages.
	flow := len(msgs)
	for k, m := range msgs {
		op := 1
		switch {
		case k == len(msgs)-1:
			op = 2
		case k == 0:
			op = 0
		}
		m.Reply = p.prefix + "." + id + "." + strconv.Itoa(flow) + ".fail." + strconv.Itoa(k+1) + "." + strconv.Itoa(op) + ".$FI"
		if err := p.nc.PublishMsg(m); err != nil {
			return FastResult{}, err
		}
	}
	var refused *jetstream.APIError
	for {
		select {
		case <-ctx.Done():
			return FastResult{}, ctx.Err()
		case m := <-ch:
			var r fastReply
			if err := json.Unmarshal(m.Data, &r); err != nil {
				return FastResult{}, fmt.Errorf("events: invalid fast batch reply %q: %w", m.Data, err)
			}
			switch {
			case r.Type == "err":
				if refused == nil {
					refused = r.Error
				}
			case r.Type == "gap":
				return FastResult{}, fmt.Errorf("events: fast batch %s lost messages: %s", id, m.Data)
			case r.Type != "":
				// a flow acknowledgement
			case r.Error != nil:
				// The first message refused: nothing stored (later messages
				// of the batch find it gone).
				return FastResult{Refused: r.Error}, nil
			case r.Stream != p.stream || r.Batch != id:
				return FastResult{}, fmt.Errorf("events: unexpected fast batch ack %q (want stream %s, batch %s)", m.Data, p.stream, id)
			default:
				if r.Count < len(msgs) && refused == nil {
					return FastResult{}, errors.New("events: fast batch acknowledged short without an error")
				}
				return FastResult{Stored: r.Count, Seq: r.Sequence, Refused: refused}, nil
			}
		}
	}
}
