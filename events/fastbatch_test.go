package events_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/internal/testing/testenv"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// fastMsg is a message on subject expecting the subject's last sequence
// to be expected (or, with guard, guard's last sequence).
func fastMsg(subject, data string, expected uint64, guard ...string) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Data = []byte(data)
	m.Header.Set("Nats-Expected-Last-Subject-Sequence", strconv.FormatUint(expected, 10))
	if len(guard) > 0 {
		m.Header.Set("Nats-Expected-Last-Subject-Sequence-Subject", guard[0])
	}
	return m
}

// TestServerFastBatch records nats-server 2.15's fast batch publishing as
// events.FastPublisher uses it: every message's expected last subject
// sequence is checked on its own, against what is stored when it arrives;
// one acknowledgement at the commit names the last sequence and the count;
// in gap-fail mode a refused message ends the batch, so exactly the
// messages before it are stored; a guard rides on a message as in an atomic
// batch; and a stream without allow_batched refuses it.
func TestServerFastBatch(t *testing.T) {
	srv := startServer(t, t.TempDir(), true)
	nc, js := connect(t, srv)
	ctx := testenv.Context(t)
	if _, err := events.EnsureAppendOnly(ctx, js, jetstream.StreamConfig{Name: "FAST", Subjects: []string{"fast.>"}, AllowBatchPublish: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := events.EnsureAppendOnly(ctx, js, jetstream.StreamConfig{Name: "NOFAST", Subjects: []string{"nofast.>"}}); err != nil {
		t.Fatal(err)
	}
	p := events.NewFastPublisher(nc, "FAST")
	last := func(subject string) uint64 {
		t.Helper()
		m, err := js.Stream(ctx, "FAST")
		if err != nil {
			t.Fatal(err)
		}
		msg, err := m.GetLastMsgForSubject(ctx, subject)
		if err != nil {
			return 0
		}
		return msg.Sequence
	}

	// Three subjects, each expecting its empty state: all stored, one ack.
	r, err := p.Publish(ctx, []*nats.Msg{fastMsg("fast.a", "a1", 0), fastMsg("fast.b", "b1", 0), fastMsg("fast.c", "c1", 0)})
	if err != nil || r.Stored != 3 || r.Seq != 3 || r.Refused != nil {
		t.Fatalf("first batch: %+v %v, want 3 stored, last at 3", r, err)
	}

	// The second message's expectation is stale: the first is stored, the
	// third is not, though its own expectation holds.
	r, err = p.Publish(ctx, []*nats.Msg{fastMsg("fast.a", "a2", 1), fastMsg("fast.b", "b2", 0), fastMsg("fast.c", "c2", 3)})
	if err != nil || r.Stored != 1 || r.Seq != 4 || r.Refused == nil || r.Refused.ErrorCode != 10071 || r.Refused.Description != "wrong last sequence: 2" {
		t.Fatalf("stale second message: %+v %v, want the first stored at 4 and 10071 for the second", r, err)
	}
	if a, b, c := last("fast.a"), last("fast.b"), last("fast.c"); a != 4 || b != 2 || c != 3 {
		t.Fatalf("after the stale batch: a %d b %d c %d, want 4 2 3", a, b, c)
	}

	// The first message refused: nothing stored.
	r, err = p.Publish(ctx, []*nats.Msg{fastMsg("fast.a", "a3", 1), fastMsg("fast.c", "c3", 3)})
	if err != nil || r.Stored != 0 || r.Refused == nil || r.Refused.ErrorCode != 10071 {
		t.Fatalf("stale first message: %+v %v, want nothing stored and 10071", r, err)
	}
	if c := last("fast.c"); c != 3 {
		t.Fatalf("c moved to %d after a refused batch", c)
	}

	// A guard: the message is stored on its subject only while the guarded
	// subject is at the expected sequence.
	r, err = p.Publish(ctx, []*nats.Msg{fastMsg("fast.d", "d1", 2, "fast.b")})
	if err != nil || r.Stored != 1 || r.Seq != 5 {
		t.Fatalf("guard held: %+v %v", r, err)
	}
	r, err = p.Publish(ctx, []*nats.Msg{fastMsg("fast.c", "c3", 3), fastMsg("fast.e", "e1", 1, "fast.b")})
	if err != nil || r.Stored != 1 || r.Refused == nil || r.Refused.ErrorCode != 10071 {
		t.Fatalf("stale guard: %+v %v, want the first stored, the guarded one refused", r, err)
	}
	if e := last("fast.e"); e != 0 {
		t.Fatalf("guarded message stored at %d", e)
	}

	// One message alone is a batch too.
	r, err = p.Publish(ctx, []*nats.Msg{fastMsg("fast.f", "f1", 0)})
	if err != nil || r.Stored != 1 || r.Seq != 7 {
		t.Fatalf("batch of one: %+v %v, want stored at 7", r, err)
	}

	// A stream without allow_batched.
	r, err = events.NewFastPublisher(nc, "NOFAST").Publish(ctx, []*nats.Msg{fastMsg("nofast.a", "x", 0)})
	if err != nil || r.Stored != 0 || r.Refused == nil {
		t.Fatalf("stream without batch publishing: %+v %v, want a refusal", r, err)
	}
	t.Logf("without allow_batched: %d %q", r.Refused.ErrorCode, r.Refused.Description)
}

// TestFastBatchesConcurrent: many fast batches in flight from one
// publisher, each on subjects of its own, are answered to their own callers.
func TestFastBatchesConcurrent(t *testing.T) {
	srv := startServer(t, t.TempDir(), false)
	nc, js := connect(t, srv)
	ctx := testenv.Context(t)
	if _, err := events.EnsureAppendOnly(ctx, js, jetstream.StreamConfig{Name: "FAST", Subjects: []string{"fast.>"}, AllowBatchPublish: true}); err != nil {
		t.Fatal(err)
	}
	p := events.NewFastPublisher(nc, "FAST")
	const writers, rounds = 16, 20
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		go func(w int) {
			var last [2]uint64
			for i := 0; i < rounds; i++ {
				subj := [2]string{fmt.Sprintf("fast.w%d.x", w), fmt.Sprintf("fast.w%d.y", w)}
				r, err := p.Publish(context.Background(), []*nats.Msg{fastMsg(subj[0], "x", last[0]), fastMsg(subj[1], "y", last[1])})
				if err == nil && r.Stored != 2 {
					err = fmt.Errorf("writer %d round %d: %+v", w, i, r)
				}
				if err != nil {
					errs <- err
					return
				}
				// Only the last message's sequence is acknowledged; the
				// first's is read back (another writer may lie between).
				st, err := js.Stream(context.Background(), "FAST")
				if err == nil {
					var m *jetstream.RawStreamMsg
					if m, err = st.GetLastMsgForSubject(context.Background(), subj[0]); err == nil {
						last = [2]uint64{m.Sequence, r.Seq}
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}(w)
	}
	for w := 0; w < writers; w++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestServerPipelinedAppends records what single appends sent together on
// one connection, each waiting for nothing, give: the stream takes them in
// publish order, each checked on its own, and a refused one stops nothing
// after it (unlike a gap-fail fast batch). Each acknowledgement names its
// own message's sequence.
func TestServerPipelinedAppends(t *testing.T) {
	srv := startServer(t, t.TempDir(), true)
	nc, js := connect(t, srv)
	ctx := testenv.Context(t)
	if _, err := events.EnsureAppendOnly(ctx, js, jetstream.StreamConfig{Name: "PIPE", Subjects: []string{"pipe.>"}}); err != nil {
		t.Fatal(err)
	}
	if ack := rawRequest(t, nc, "pipe.b", "b0"); ack.Error != nil || ack.Seq != 1 {
		t.Fatal(ack)
	}
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox + ".*")
	if err != nil {
		t.Fatal(err)
	}
	for k, m := range []*nats.Msg{fastMsg("pipe.a", "a1", 0), fastMsg("pipe.b", "b1", 0), fastMsg("pipe.c", "c1", 0)} {
		m.Reply = fmt.Sprint(inbox, ".", k)
		if err := nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	acks := map[string]rawAck{}
	for range 3 {
		m, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var a rawAck
		if err := json.Unmarshal(m.Data, &a); err != nil {
			t.Fatal(err)
		}
		acks[m.Subject[len(inbox)+1:]] = a
	}
	if a, b, c := acks["0"], acks["1"], acks["2"]; a.Error != nil || a.Seq != 2 || b.Error == nil || b.Error.ErrCode != 10071 || c.Error != nil || c.Seq != 3 {
		t.Fatalf("pipelined appends: a %v, b %v, c %v; want a at 2, b refused (10071), c at 3", a, b, c)
	}
}
