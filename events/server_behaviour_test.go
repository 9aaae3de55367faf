package events_test

// Tests of nats-server behaviour the store relies on, run against the real
// embedded server. docs/storage.md quotes their results; if a server upgrade
// changes one, these fail first.

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/storetest"
	"github.com/contextos/ledger/internal/testing/testenv"
	"github.com/nats-io/nats.go"
)

type rawAck struct {
	Error *struct {
		Code        int    `json:"code"`
		ErrCode     int    `json:"err_code"`
		Description string `json:"description"`
	} `json:"error"`
	Stream    string `json:"stream"`
	Seq       uint64 `json:"seq"`
	Duplicate bool   `json:"duplicate"`
	Batch     string `json:"batch"`
	Count     int    `json:"count"`
}

func (a rawAck) String() string {
	if a.Error != nil {
		return fmt.Sprintf("error %d %q", a.Error.ErrCode, a.Error.Description)
	}
	return fmt.Sprintf("seq %d dup %v batch %q count %d", a.Seq, a.Duplicate, a.Batch, a.Count)
}

func rawRequest(t *testing.T, nc *nats.Conn, subj string, data string, hdr ...string) rawAck {
	t.Helper()
	m := nats.NewMsg(subj)
	m.Data = []byte(data)
	for i := 0; i+1 < len(hdr); i += 2 {
		m.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := nc.RequestMsg(m, 5*time.Second)
	if err != nil {
		t.Fatalf("request %s: %v", subj, err)
	}
	var a rawAck
	if err := json.Unmarshal(resp.Data, &a); err != nil {
		t.Fatalf("ack %q: %v", resp.Data, err)
	}
	return a
}

func rawPublish(t *testing.T, nc *nats.Conn, subj string, data string, hdr ...string) {
	t.Helper()
	m := nats.NewMsg(subj)
	m.Data = []byte(data)
	for i := 0; i+1 < len(hdr); i += 2 {
		m.Header.Set(hdr[i], hdr[i+1])
	}
	if err := nc.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
}

func wantAckErr(t *testing.T, a rawAck, code int, desc string) {
	t.Helper()
	if a.Error == nil || a.Error.ErrCode != code || a.Error.Description != desc {
		t.Fatalf("ack = %v, want error %d %q", a, code, desc)
	}
}

// TestServerRetryChecksExpectedSequenceBeforeMsgID: on a standalone (R1)
// stream the expected-last-subject-sequence check runs before de-duplication,
// so a retried publish (same Nats-Msg-Id, same expectation) after the first
// was stored gets error 10071 with the actual sequence, not a duplicate ack.
func TestServerRetryChecksExpectedSequenceBeforeMsgID(t *testing.T) {
	_, srv, _ := newJetStore(t, true)
	nc, _ := connect(t, srv)
	const subj = "ctx.ev.acme.k.a"
	a := rawRequest(t, nc, subj, "x", "Nats-Msg-Id", "id1", "Nats-Expected-Last-Subject-Sequence", "0")
	if a.Error != nil || a.Seq != 1 {
		t.Fatalf("first publish: %v", a)
	}
	a = rawRequest(t, nc, subj, "x", "Nats-Msg-Id", "id1", "Nats-Expected-Last-Subject-Sequence", "0")
	wantAckErr(t, a, 10071, "wrong last sequence: 1")
	// With a matching expectation the message id is checked: duplicate ack
	// naming the original sequence, nothing stored.
	a = rawRequest(t, nc, subj, "x", "Nats-Msg-Id", "id1", "Nats-Expected-Last-Subject-Sequence", "1")
	if a.Error != nil || !a.Duplicate || a.Seq != 1 {
		t.Fatalf("retry with matching expectation: %v, want duplicate of 1", a)
	}
	// Without any expectation the same: a duplicate ack.
	a = rawRequest(t, nc, subj, "x", "Nats-Msg-Id", "id1")
	if a.Error != nil || !a.Duplicate || a.Seq != 1 {
		t.Fatalf("retry without expectation: %v", a)
	}
}

// TestServerAtomicBatch records the ADR-50 behaviour the store uses: one ack
// for the commit naming the last sequence, the batch id and the count; the
// batch stored contiguously in publish order; a wrong expectation anywhere
// refuses the whole batch with 10071 and the failing subject's sequence; an
// expectation on a subject already written in the batch is 10164.
func TestServerAtomicBatch(t *testing.T) {
	store, srv, _ := newJetStore(t, true)
	nc, _ := connect(t, srv)
	ctx := testenv.Context(t)
	const a, b = "ctx.ev.acme.k.a", "ctx.ev.acme.k.b"
	if ack := rawRequest(t, nc, "ctx.ev.acme.k.z", "z"); ack.Error != nil {
		t.Fatal(ack)
	}

	// Three messages, two subjects; only the commit asks for a reply.
	rawPublish(t, nc, a, "a1", "Nats-Batch-Id", "b1", "Nats-Batch-Sequence", "1", "Nats-Expected-Last-Subject-Sequence", "0")
	rawPublish(t, nc, b, "b1", "Nats-Batch-Id", "b1", "Nats-Batch-Sequence", "2", "Nats-Expected-Last-Subject-Sequence", "0")
	ack := rawRequest(t, nc, a, "a2", "Nats-Batch-Id", "b1", "Nats-Batch-Sequence", "3", "Nats-Batch-Commit", "1")
	if ack.Error != nil || ack.Seq != 4 || ack.Batch != "b1" || ack.Count != 3 {
		t.Fatalf("commit ack = %v, want seq 4 batch b1 count 3", ack)
	}
	for i, want := range []struct {
		subj, data string
	}{{a, "a1"}, {b, "b1"}, {a, "a2"}} {
		m, err := nc.Request("$JS.API.DIRECT.GET."+events.StreamName, fmt.Appendf(nil, `{"seq":%d}`, i+2), 5*time.Second)
		if err != nil || m.Header.Get("Nats-Subject") != want.subj || string(m.Data) != want.data {
			t.Fatalf("seq %d: %v %q %q, want %s %s", i+2, err, m.Header.Get("Nats-Subject"), m.Data, want.subj, want.data)
		}
	}

	// A wrong expectation on the second subject refuses everything; the
	// error names b's actual last sequence (3) but not the subject.
	rawPublish(t, nc, a, "a3", "Nats-Batch-Id", "b2", "Nats-Batch-Sequence", "1", "Nats-Expected-Last-Subject-Sequence", "4")
	ack = rawRequest(t, nc, b, "b2", "Nats-Batch-Id", "b2", "Nats-Batch-Sequence", "2", "Nats-Batch-Commit", "1", "Nats-Expected-Last-Subject-Sequence", "0")
	wantAckErr(t, ack, 10071, "wrong last sequence: 3")
	if last, err := store.LastSeq(ctx, a); err != nil || last != 4 {
		t.Fatalf("refused batch wrote a: last %d %v", last, err)
	}

	// A second expectation for a subject already in the batch: 10164.
	rawPublish(t, nc, a, "a3", "Nats-Batch-Id", "b3", "Nats-Batch-Sequence", "1", "Nats-Expected-Last-Subject-Sequence", "4")
	ack = rawRequest(t, nc, a, "a4", "Nats-Batch-Id", "b3", "Nats-Batch-Sequence", "2", "Nats-Batch-Commit", "1", "Nats-Expected-Last-Subject-Sequence", "5")
	wantAckErr(t, ack, 10164, "wrong last sequence")

	// A gap in batch sequences: the batch is abandoned as incomplete.
	rawPublish(t, nc, a, "a3", "Nats-Batch-Id", "b4", "Nats-Batch-Sequence", "1")
	ack = rawRequest(t, nc, a, "a4", "Nats-Batch-Id", "b4", "Nats-Batch-Sequence", "3", "Nats-Batch-Commit", "1")
	wantAckErr(t, ack, 10176, "atomic publish batch is incomplete")

	if last, err := store.LastSeq(ctx, a); err != nil || last != 4 {
		t.Fatalf("refused batches wrote a: last %d %v", last, err)
	}
}

// TestServerMsgIDInsideAtomicBatch records what this server version does with
// Nats-Msg-Id inside an atomic batch. The store never sends it there (the
// design forbids it and the expected sequences already refuse a replayed
// batch); the test documents the server's behaviour.
func TestServerMsgIDInsideAtomicBatch(t *testing.T) {
	_, srv, _ := newJetStore(t, true)
	nc, _ := connect(t, srv)
	const a = "ctx.ev.acme.k.a"
	rawPublish(t, nc, a, "1", "Nats-Batch-Id", "m1", "Nats-Batch-Sequence", "1", "Nats-Msg-Id", "x1")
	ack := rawRequest(t, nc, a, "2", "Nats-Batch-Id", "m1", "Nats-Batch-Sequence", "2", "Nats-Batch-Commit", "1", "Nats-Msg-Id", "x2")
	t.Logf("batch with Nats-Msg-Id: %v", ack)
	if ack.Error != nil {
		t.Fatalf("nats-server 2.15 accepted Nats-Msg-Id in atomic batches; now: %v", ack)
	}
	// Replaying the batch: the whole batch is refused as a duplicate.
	rawPublish(t, nc, a, "1", "Nats-Batch-Id", "m2", "Nats-Batch-Sequence", "1", "Nats-Msg-Id", "x1")
	ack = rawRequest(t, nc, a, "2", "Nats-Batch-Id", "m2", "Nats-Batch-Sequence", "2", "Nats-Batch-Commit", "1", "Nats-Msg-Id", "x2")
	wantAckErr(t, ack, 10201, "atomic publish batch contains duplicate message id")
}

// TestServerDirectGetBatch records the Direct Get batch protocol Read uses:
// messages with Nats-Sequence/Nats-Subject/Nats-Num-Pending headers, then an
// empty "204 EOB" message with the remaining count; 404 when nothing matches.
func TestServerDirectGetBatch(t *testing.T) {
	store, srv, _ := newJetStore(t, true)
	nc, _ := connect(t, srv)
	ctx := testenv.Context(t)
	sub := storetest.Subject(t, "r")
	var last uint64
	for i := range 5 {
		var err error
		if last, err = store.Append(ctx, sub, last, storetest.Event(t, i)); err != nil {
			t.Fatal(err)
		}
	}
	inbox := nc.NewRespInbox()
	s, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Unsubscribe()
	if err := nc.PublishRequest("$JS.API.DIRECT.GET."+events.StreamName, inbox, fmt.Appendf(nil, `{"seq":1,"next_by_subj":%q,"batch":2}`, sub)); err != nil {
		t.Fatal(err)
	}
	var trace []string
	for {
		m, err := s.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		trace = append(trace, fmt.Sprintf("status=%q seq=%s pending=%s", m.Header.Get("Status"), m.Header.Get("Nats-Sequence"), m.Header.Get("Nats-Num-Pending")))
		if m.Header.Get("Status") != "" {
			break
		}
	}
	want := `status="" seq=1 pending=4|status="" seq=2 pending=3|status="204" seq= pending=3`
	if got := strings.Join(trace, "|"); got != want {
		t.Fatalf("direct get batch:\n got %s\nwant %s", got, want)
	}
	m, err := nc.Request("$JS.API.DIRECT.GET."+events.StreamName, []byte(`{"seq":1,"next_by_subj":"ctx.ev.acme.none","batch":2}`), 5*time.Second)
	if err != nil || m.Header.Get("Status") != "404" {
		t.Fatalf("empty subject: %v status %q", err, m.Header.Get("Status"))
	}
}

// TestServerRefusesDeleteAndPurge: the stream denies message deletion and
// purge, so no API user can rewrite history.
func TestServerRefusesDeleteAndPurge(t *testing.T) {
	store, _, js := newJetStore(t, true)
	ctx := testenv.Context(t)
	seq, err := store.Append(ctx, storetest.Subject(t, "x"), 0, storetest.Event(t, 1))
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, events.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteMsg(ctx, seq); err == nil {
		t.Fatal("DeleteMsg succeeded")
	}
	if err := st.Purge(ctx); err == nil {
		t.Fatal("Purge succeeded")
	}
	if last, err := store.LastSeq(ctx, storetest.Subject(t, "x")); err != nil || last != seq {
		t.Fatalf("after refused delete/purge: %d %v", last, err)
	}
}
