package storetest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/codec"
	"github.com/oklog/ulid/v2"
)

// EventType is the event type the suite appends (registered by Run at
// version 1).
const EventType = "storetest.event"

// Tenant is the tenant of every event the suite appends.
const Tenant = "acme"

var (
	signer  = codec.NewSigner(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize)))
	counter atomic.Uint64
	regOnce sync.Once
)

// Event returns a new sealed event of the suite's type for Tenant, with a
// fresh ULID and body {"n": n}. It fails t on error.
func Event(t testing.TB, n int) codec.Envelope {
	t.Helper()
	return tenantEvent(t, Tenant, n)
}

// tenantEvent is Event for tenant.
func tenantEvent(t testing.TB, tenant string, n int) codec.Envelope {
	t.Helper()
	regOnce.Do(func() { codec.Register(EventType, 1) })
	var id ulid.ULID
	if err := id.SetTime(1_700_000_000_000); err != nil {
		t.Fatal(err)
	}
	binary.BigEndian.PutUint64(id[8:], counter.Add(1))
	e, err := signer.Seal(EventType, 1, id.String(), tenant, "2026-01-02T03:04:05.000000006Z", map[string]int{"n": n})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// Subject returns the exposure subject of resource for Tenant and guarantee "g1".
func Subject(t testing.TB, resource string) string {
	t.Helper()
	s, err := codec.ExposureSubject(Tenant, "g1", resource)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Run runs the conformance suite; newStore must return a new, empty store
// for each subtest (and clean it up with t.Cleanup).
func Run(t *testing.T, newStore func(t *testing.T) events.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s events.Store)
	}{
		{"AppendReadLastSeq", testAppendRead},
		{"AppendSeveral", testAppendSeveral},
		{"ConflictTyped", testConflict},
		{"EmptySubjectExpectation", testEmptySubject},
		{"RetryNotDoubled", testRetry},
		{"RetryOfSeveralNotDoubled", testRetrySeveral},
		{"RetryAfterOthersAppended", testRetryAfterOthers},
		{"BatchAtomicity", testBatchAtomic},
		{"BatchConflictNamesEveryStaleSubject", testBatchStale},
		{"BatchRetryNotDoubled", testBatchRetry},
		{"ReadFromSeq", testReadFrom},
		{"ReplayOrder", testReplay},
		{"ReplayTenantReadsOnlyItsEvents", testReplayTenant},
		{"ReplayKindReadsOnlyItsSubjects", testReplayKind},
		{"InvalidAppends", testInvalid},
		{"ConcurrentWriters", testConcurrent},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func mustAppend(t *testing.T, s events.Store, subject string, exp uint64, envs ...codec.Envelope) uint64 {
	t.Helper()
	seq, err := s.Append(ctx(t), subject, exp, envs...)
	if err != nil {
		t.Fatalf("Append(%q, %d): %v", subject, exp, err)
	}
	return seq
}

func mustRead(t *testing.T, s events.Store, subject string, from uint64) []events.Stored {
	t.Helper()
	got, err := s.Read(ctx(t), subject, from)
	if err != nil {
		t.Fatalf("Read(%q, %d): %v", subject, from, err)
	}
	return got
}

func mustLast(t *testing.T, s events.Store, subject string) uint64 {
	t.Helper()
	seq, err := s.LastSeq(ctx(t), subject)
	if err != nil {
		t.Fatalf("LastSeq(%q): %v", subject, err)
	}
	return seq
}

func checkStored(t *testing.T, got []events.Stored, subject string, want ...codec.Envelope) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d events stored, want %d", subject, len(got), len(want))
	}
	var prev uint64
	for i, st := range got {
		raw, err := codec.Encode(want[i])
		if err != nil {
			t.Fatal(err)
		}
		if st.Subject != subject || !bytes.Equal(st.Raw, raw) || st.Envelope.EventID != want[i].EventID || st.Seq <= prev {
			t.Fatalf("%s: event %d = {seq %d, subject %q, id %s}, want id %s after seq %d", subject, i, st.Seq, st.Subject, st.Envelope.EventID, want[i].EventID, prev)
		}
		prev = st.Seq
	}
}

func wantConflict(t *testing.T, err error, subject string, expected, actual uint64) {
	t.Helper()
	if !errors.Is(err, events.ErrConflict) {
		t.Fatalf("err = %v, want ErrConflict", err)
	}
	var ce *events.ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %T, want *ConflictError", err)
	}
	if ce.Subject != subject || ce.Expected != expected || ce.Actual != actual {
		t.Fatalf("conflict = %+v, want {Subject:%s Expected:%d Actual:%d}", *ce, subject, expected, actual)
	}
}

func testAppendRead(t *testing.T, s events.Store) {
	sub := Subject(t, "ord_1")
	if got := mustLast(t, s, sub); got != 0 {
		t.Fatalf("LastSeq of empty subject = %d", got)
	}
	if got := mustRead(t, s, sub, 0); len(got) != 0 {
		t.Fatalf("Read of empty subject = %d events", len(got))
	}
	e1 := Event(t, 1)
	s1 := mustAppend(t, s, sub, 0, e1)
	if s1 == 0 {
		t.Fatal("Append returned sequence 0")
	}
	if got := mustLast(t, s, sub); got != s1 {
		t.Fatalf("LastSeq = %d, want %d", got, s1)
	}
	e2 := Event(t, 2)
	s2 := mustAppend(t, s, sub, s1, e2)
	if s2 <= s1 {
		t.Fatalf("second seq %d <= first %d", s2, s1)
	}
	got := mustRead(t, s, sub, 0)
	checkStored(t, got, sub, e1, e2)
	if got[0].Seq != s1 || got[1].Seq != s2 {
		t.Fatalf("read seqs %d,%d want %d,%d", got[0].Seq, got[1].Seq, s1, s2)
	}
	if string(got[0].Envelope.Body) != `{"n":1}` || got[0].Envelope.Sig != e1.Sig || got[0].Envelope.Time != e1.Time {
		t.Fatalf("decoded envelope differs: %+v", got[0].Envelope)
	}
}

func testAppendSeveral(t *testing.T, s events.Store) {
	sub := Subject(t, "ord 2")
	e := []codec.Envelope{Event(t, 1), Event(t, 2), Event(t, 3)}
	last := mustAppend(t, s, sub, 0, e...)
	got := mustRead(t, s, sub, 0)
	checkStored(t, got, sub, e...)
	if got[2].Seq != last || mustLast(t, s, sub) != last {
		t.Fatalf("last seq %d, read %d", last, got[2].Seq)
	}
	e4 := Event(t, 4)
	mustAppend(t, s, sub, last, e4)
	checkStored(t, mustRead(t, s, sub, 0), sub, append(e, e4)...)
}

func testConflict(t *testing.T, s events.Store) {
	sub := Subject(t, "ord.3")
	s1 := mustAppend(t, s, sub, 0, Event(t, 1))
	s2 := mustAppend(t, s, sub, s1, Event(t, 2))
	// Stale expectation (the decision was made on s1).
	_, err := s.Append(ctx(t), sub, s1, Event(t, 3))
	wantConflict(t, err, sub, s1, s2)
	// Several events: refused as a whole.
	_, err = s.Append(ctx(t), sub, s1, Event(t, 4), Event(t, 5))
	wantConflict(t, err, sub, s1, s2)
	// An expectation beyond the end.
	_, err = s.Append(ctx(t), sub, s2+10, Event(t, 6))
	wantConflict(t, err, sub, s2+10, s2)
	if got := mustRead(t, s, sub, 0); len(got) != 2 {
		t.Fatalf("%d events stored after conflicts, want 2", len(got))
	}
}

func testEmptySubject(t *testing.T, s events.Store) {
	a, b := Subject(t, "ord_a"), Subject(t, "ord_b")
	sa := mustAppend(t, s, a, 0, Event(t, 1))
	// "Subject empty" expectation on a non-empty subject.
	_, err := s.Append(ctx(t), a, 0, Event(t, 2))
	wantConflict(t, err, a, 0, sa)
	// A non-zero expectation on an empty subject, even one equal to another
	// subject's sequence.
	_, err = s.Append(ctx(t), b, sa, Event(t, 3))
	wantConflict(t, err, b, sa, 0)
	if got := mustRead(t, s, b, 0); len(got) != 0 {
		t.Fatalf("%d events on b", len(got))
	}
	mustAppend(t, s, b, 0, Event(t, 4))
}

func testRetry(t *testing.T, s events.Store) {
	sub := Subject(t, "ord*retry")
	e := Event(t, 1)
	s1 := mustAppend(t, s, sub, 0, e)
	// The client lost the ack and publishes the very same envelope again.
	for range 3 {
		got, err := s.Append(ctx(t), sub, 0, e)
		if err != nil {
			t.Fatalf("retried Append: %v", err)
		}
		if got != s1 {
			t.Fatalf("retried Append = %d, want original %d", got, s1)
		}
	}
	checkStored(t, mustRead(t, s, sub, 0), sub, e)
	// A different event on the same expectation is a conflict, not a retry.
	_, err := s.Append(ctx(t), sub, 0, Event(t, 1))
	wantConflict(t, err, sub, 0, s1)
}

func testRetrySeveral(t *testing.T, s events.Store) {
	sub := Subject(t, "ord>retry")
	e := []codec.Envelope{Event(t, 1), Event(t, 2)}
	last := mustAppend(t, s, sub, 0, e...)
	got, err := s.Append(ctx(t), sub, 0, e...)
	if err != nil || got != last {
		t.Fatalf("retried Append = %d, %v; want %d", got, err, last)
	}
	checkStored(t, mustRead(t, s, sub, 0), sub, e...)
	// The same events in another order, or not right after the expectation,
	// are not a retry.
	_, err = s.Append(ctx(t), sub, 0, e[1], e[0])
	wantConflict(t, err, sub, 0, last)
	_, err = s.Append(ctx(t), sub, 0, e[1])
	wantConflict(t, err, sub, 0, last)
}

func testRetryAfterOthers(t *testing.T, s events.Store) {
	sub := Subject(t, "ord_retry_late")
	e := Event(t, 1)
	s1 := mustAppend(t, s, sub, 0, e)
	e2 := Event(t, 2)
	mustAppend(t, s, sub, s1, e2)
	mustAppend(t, s, Subject(t, "other"), 0, Event(t, 3))
	// The retry of e arrives after e2 was appended on top of it.
	got, err := s.Append(ctx(t), sub, 0, e)
	if err != nil || got != s1 {
		t.Fatalf("late retry = %d, %v; want %d", got, err, s1)
	}
	checkStored(t, mustRead(t, s, sub, 0), sub, e, e2)
}

// testBatchStale: a batch refused for several stale subjects names each of
// them (Stale, in batch order, the first as Subject), and no fresh one.
func testBatchStale(t *testing.T, s events.Store) {
	a, b, c, d := Subject(t, "stale_a"), Subject(t, "fresh_b"), Subject(t, "stale_c"), Subject(t, "fresh_d")
	sa := mustAppend(t, s, a, 0, Event(t, 1))
	sc := mustAppend(t, s, c, 0, Event(t, 2))
	sb := mustAppend(t, s, b, 0, Event(t, 3))
	_, err := s.AppendBatch(ctx(t), []events.AppendItem{
		{Subject: a, ExpectedLastSeq: 0, Envs: []codec.Envelope{Event(t, 4)}}, // stale: a holds sa
		{Subject: b, ExpectedLastSeq: sb, Envs: []codec.Envelope{Event(t, 5)}},
		{Subject: c, ExpectedLastSeq: 0, Envs: []codec.Envelope{Event(t, 6)}}, // stale: c holds sc
		{Subject: d, ExpectedLastSeq: 0, Envs: []codec.Envelope{Event(t, 7)}},
	})
	wantConflict(t, err, a, 0, sa)
	var ce *events.ConflictError
	errors.As(err, &ce)
	if !slices.Equal(ce.Stale, []string{a, c}) || !ce.Names(c) || ce.Names(b) || ce.Names(d) {
		t.Fatalf("stale subjects %q, want %q (c at %d)", ce.Stale, []string{a, c}, sc)
	}
}

func testBatchAtomic(t *testing.T, s events.Store) {
	a, b, c := Subject(t, "ord_1"), Subject(t, "ORD_1"), Subject(t, "ord 1")
	sb := mustAppend(t, s, b, 0, Event(t, 1))
	items := []events.AppendItem{
		{Subject: a, ExpectedLastSeq: 0, Envs: []codec.Envelope{Event(t, 2), Event(t, 3)}},
		{Subject: b, ExpectedLastSeq: 0, Envs: []codec.Envelope{Event(t, 4)}}, // stale: b holds sb
		{Subject: c, ExpectedLastSeq: 0, Envs: []codec.Envelope{Event(t, 5)}},
	}
	_, err := s.AppendBatch(ctx(t), items)
	wantConflict(t, err, b, 0, sb)
	for _, sub := range []string{a, c} {
		if got := mustRead(t, s, sub, 0); len(got) != 0 {
			t.Fatalf("conflicting batch stored %d events on %s", len(got), sub)
		}
	}
	if got := mustRead(t, s, b, 0); len(got) != 1 {
		t.Fatalf("conflicting batch changed b: %d events", len(got))
	}
	var n int
	if err := s.Replay(ctx(t), 0, func(events.Stored) error { n++; return nil }); err != nil || n != 1 {
		t.Fatalf("stream holds %d events (%v), want 1", n, err)
	}
	items[1].ExpectedLastSeq = sb
	seqs, err := s.AppendBatch(ctx(t), items)
	if err != nil {
		t.Fatalf("AppendBatch: %v", err)
	}
	if len(seqs) != 3 {
		t.Fatalf("AppendBatch returned %d seqs", len(seqs))
	}
	for i, it := range items {
		got := mustRead(t, s, it.Subject, 0)
		if i == 1 {
			got = got[1:]
		}
		checkStored(t, got, it.Subject, it.Envs...)
		if got[len(got)-1].Seq != seqs[i] || mustLast(t, s, it.Subject) != seqs[i] {
			t.Fatalf("item %d: seq %d, stored last %d", i, seqs[i], got[len(got)-1].Seq)
		}
	}
	// One item whose expectation is beyond the end is refused too.
	_, err = s.AppendBatch(ctx(t), []events.AppendItem{
		{Subject: a, ExpectedLastSeq: seqs[0], Envs: []codec.Envelope{Event(t, 6)}},
		{Subject: Subject(t, "fresh"), ExpectedLastSeq: 99, Envs: []codec.Envelope{Event(t, 7)}},
	})
	wantConflict(t, err, Subject(t, "fresh"), 99, 0)
	if mustLast(t, s, a) != seqs[0] {
		t.Fatal("refused batch appended to a")
	}
}

func testBatchRetry(t *testing.T, s events.Store) {
	a, b := Subject(t, "x"), Subject(t, "y")
	items := []events.AppendItem{
		{Subject: a, Envs: []codec.Envelope{Event(t, 1)}},
		{Subject: b, Envs: []codec.Envelope{Event(t, 2), Event(t, 3)}},
	}
	seqs, err := s.AppendBatch(ctx(t), items)
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.AppendBatch(ctx(t), items)
	if err != nil || fmt.Sprint(again) != fmt.Sprint(seqs) {
		t.Fatalf("retried batch = %v, %v; want %v", again, err, seqs)
	}
	checkStored(t, mustRead(t, s, a, 0), a, items[0].Envs...)
	checkStored(t, mustRead(t, s, b, 0), b, items[1].Envs...)
	// A batch that matches only partly is a conflict.
	_, err = s.AppendBatch(ctx(t), []events.AppendItem{items[0], {Subject: b, Envs: []codec.Envelope{Event(t, 4)}}})
	if !errors.Is(err, events.ErrConflict) {
		t.Fatalf("partial retry: %v, want conflict", err)
	}
}

func testReadFrom(t *testing.T, s events.Store) {
	sub, other := Subject(t, "r"), Subject(t, "o")
	var want []codec.Envelope
	var seqs []uint64
	var last, olast uint64
	for i := range 6 {
		e := Event(t, i)
		last = mustAppend(t, s, sub, last, e)
		want, seqs = append(want, e), append(seqs, last)
		olast = mustAppend(t, s, other, olast, Event(t, 100+i))
	}
	checkStored(t, mustRead(t, s, sub, 0), sub, want...)
	checkStored(t, mustRead(t, s, sub, 1), sub, want...)
	checkStored(t, mustRead(t, s, sub, seqs[3]), sub, want[3:]...)
	checkStored(t, mustRead(t, s, sub, seqs[3]-1), sub, want[3:]...) // an other subject's seq
	checkStored(t, mustRead(t, s, sub, seqs[5]+1), sub)
}

func testReplay(t *testing.T, s events.Store) {
	var all []codec.Envelope
	var lasts [3]uint64
	for i := range 9 {
		sub := Subject(t, fmt.Sprint("res", i%3))
		e := Event(t, i)
		lasts[i%3] = mustAppend(t, s, sub, lasts[i%3], e)
		all = append(all, e)
	}
	var got []events.Stored
	if err := s.Replay(ctx(t), 0, func(st events.Stored) error { got = append(got, st); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(all) {
		t.Fatalf("replayed %d, want %d", len(got), len(all))
	}
	for i, st := range got {
		if st.Envelope.EventID != all[i].EventID || (i > 0 && st.Seq <= got[i-1].Seq) {
			t.Fatalf("replay[%d] = seq %d id %s, want id %s in increasing order", i, st.Seq, st.Envelope.EventID, all[i].EventID)
		}
		if st.Subject != Subject(t, fmt.Sprint("res", i%3)) {
			t.Fatalf("replay[%d] subject %q", i, st.Subject)
		}
	}
	var tail []events.Stored
	if err := s.Replay(ctx(t), got[4].Seq, func(st events.Stored) error { tail = append(tail, st); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(tail) != 5 || tail[0].Seq != got[4].Seq {
		t.Fatalf("replay from %d gave %d events", got[4].Seq, len(tail))
	}
	stop := errors.New("stop")
	n := 0
	err := s.Replay(ctx(t), 0, func(events.Stored) error {
		n++
		if n == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 3 {
		t.Fatalf("Replay with failing fn: n=%d err=%v", n, err)
	}
}

// testReplayTenant: ReplayTenant delivers one tenant's events, in order,
// from the sequence given; a tenant whose name begins another's ("acme",
// "acme2") does not see the other's.
func testReplayTenant(t *testing.T, s events.Store) {
	tenants := []string{Tenant, Tenant + "2", "globex"}
	want := map[string][]events.Stored{}
	lasts := map[string]uint64{}
	for i := range 12 {
		tenant := tenants[i%len(tenants)]
		if i%4 == 3 {
			tenant = Tenant // runs of one tenant, too
		}
		sub, err := codec.ExposureSubject(tenant, "g1", fmt.Sprint("res", i%2))
		if err != nil {
			t.Fatal(err)
		}
		e := tenantEvent(t, tenant, i)
		seq := mustAppend(t, s, sub, lasts[sub], e)
		lasts[sub] = seq
		want[tenant] = append(want[tenant], events.Stored{Seq: seq, Subject: sub, Envelope: e})
	}
	replay := func(tenant string, from uint64) []events.Stored {
		t.Helper()
		var got []events.Stored
		if err := s.ReplayTenant(ctx(t), tenant, from, func(st events.Stored) error { got = append(got, st); return nil }); err != nil {
			t.Fatal(err)
		}
		return got
	}
	same := func(got, want []events.Stored) bool {
		if len(got) != len(want) {
			return false
		}
		for i := range got {
			if got[i].Seq != want[i].Seq || got[i].Subject != want[i].Subject || got[i].Envelope.EventID != want[i].Envelope.EventID {
				return false
			}
		}
		return true
	}
	for _, tenant := range append(tenants, "initech") {
		if got := replay(tenant, 0); !same(got, want[tenant]) {
			t.Fatalf("ReplayTenant(%s) = %+v, want %+v", tenant, got, want[tenant])
		}
	}
	from := want[Tenant][2].Seq
	if got := replay(Tenant, from); !same(got, want[Tenant][2:]) {
		t.Fatalf("ReplayTenant(%s) from %d = %+v, want %+v", Tenant, from, got, want[Tenant][2:])
	}
	if got := replay(Tenant, from+1); !same(got, want[Tenant][3:]) {
		t.Fatalf("ReplayTenant(%s) from %d = %+v, want %+v", Tenant, from+1, got, want[Tenant][3:])
	}
	if err := s.ReplayTenant(ctx(t), "no.dots", 0, func(events.Stored) error { return nil }); err == nil {
		t.Fatal("ReplayTenant accepted an invalid tenant")
	}
}

func testInvalid(t *testing.T, s events.Store) {
	sub := Subject(t, "inv")
	bad := Event(t, 1)
	bad.Sig = "x"
	tmpl := Event(t, 2)
	other, err := signer.Seal(tmpl.Type, tmpl.V, tmpl.EventID, "globex", tmpl.Time, map[string]int{"n": 2})
	if err != nil {
		t.Fatal(err)
	}
	e := Event(t, 3)
	cases := []struct {
		name string
		call func() error
	}{
		{"no events", func() error { _, err := s.Append(ctx(t), sub, 0); return err }},
		{"wildcard subject", func() error { _, err := s.Append(ctx(t), "ctx.ev.acme.*", 0, Event(t, 4)); return err }},
		{"empty token", func() error { _, err := s.Append(ctx(t), "ctx.ev..x", 0, Event(t, 4)); return err }},
		{"invalid envelope", func() error { _, err := s.Append(ctx(t), sub, 0, bad); return err }},
		{"tenant mismatch", func() error { _, err := s.Append(ctx(t), sub, 0, other); return err }},
		{"duplicate event id", func() error { _, err := s.Append(ctx(t), sub, 0, e, e); return err }},
		{"no items", func() error { _, err := s.AppendBatch(ctx(t), nil); return err }},
		{"duplicate subject", func() error {
			_, err := s.AppendBatch(ctx(t), []events.AppendItem{{Subject: sub, Envs: []codec.Envelope{Event(t, 5)}}, {Subject: sub, Envs: []codec.Envelope{Event(t, 6)}}})
			return err
		}},
		{"too many events", func() error {
			many := make([]codec.Envelope, events.MaxBatch+1)
			for i := range many {
				many[i] = Event(t, i)
			}
			_, err := s.Append(ctx(t), sub, 0, many...)
			return err
		}},
	}
	for _, c := range cases {
		if err := c.call(); !errors.Is(err, events.ErrInvalidAppend) {
			t.Errorf("%s: err = %v, want ErrInvalidAppend", c.name, err)
		}
	}
	if got := mustRead(t, s, sub, 0); len(got) != 0 {
		t.Fatalf("invalid appends stored %d events", len(got))
	}
}

func testConcurrent(t *testing.T, s events.Store) {
	sub := Subject(t, "hot")
	const writers, each = 4, 8
	var wg sync.WaitGroup
	var conflicts, unstated atomic.Int64
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				e := Event(t, w*100+i)
				for attempt := 0; ; attempt++ {
					if attempt > 1000 {
						errs <- fmt.Errorf("writer %d: contention not resolved", w)
						return
					}
					last, err := s.LastSeq(context.Background(), sub)
					if err != nil {
						errs <- err
						return
					}
					_, err = s.Append(context.Background(), sub, last, e)
					if err == nil {
						break
					}
					var ce *events.ConflictError
					if !errors.As(err, &ce) || ce.Subject != sub || ce.Expected != last {
						errs <- fmt.Errorf("writer %d: %v, want a conflict on %s expecting %d", w, err, sub, last)
						return
					}
					conflicts.Add(1)
					if ce.Actual == 0 {
						unstated.Add(1) // the server did not say (10164)
					} else if ce.Actual <= last {
						errs <- fmt.Errorf("writer %d: conflict with actual %d <= expected %d", w, ce.Actual, last)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d conflicts, %d without an actual sequence", conflicts.Load(), unstated.Load())
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got := mustRead(t, s, sub, 0)
	if len(got) != writers*each {
		t.Fatalf("%d events stored, want %d", len(got), writers*each)
	}
	ids := map[string]bool{}
	for i, st := range got {
		if ids[st.Envelope.EventID] || (i > 0 && st.Seq <= got[i-1].Seq) {
			t.Fatalf("event %d duplicated or out of order", i)
		}
		ids[st.Envelope.EventID] = true
	}
}

// testReplayKind: ReplayKind delivers one kind of one tenant's subjects, in
// order, and nothing of another kind, another tenant or a kind whose name
// begins this one's.
func testReplayKind(t *testing.T, s events.Store) {
	var want []events.Stored
	subjects := []struct{ tenant, kind, key string }{
		{Tenant, "guarantee", "g1"}, {Tenant, "control", ""}, {Tenant + "2", "guarantee", "g1"},
		{Tenant, "guarantees", "g1"}, {Tenant, "guarantee", "g2"}, {"globex", "guarantee", "g3"},
	}
	for i, c := range subjects {
		var keys []string
		if c.key != "" {
			keys = []string{c.key}
		}
		sub, err := codec.Subject(c.tenant, c.kind, keys...)
		if err != nil {
			t.Fatal(err)
		}
		e := tenantEvent(t, c.tenant, i)
		seq := mustAppend(t, s, sub, 0, e)
		if c.tenant == Tenant && c.kind == "guarantee" {
			want = append(want, events.Stored{Seq: seq, Subject: sub, Envelope: e})
		}
	}
	var got []events.Stored
	if err := s.ReplayKind(ctx(t), Tenant, "guarantee", func(st events.Stored) error { got = append(got, st); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("ReplayKind = %d events, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].Seq != want[i].Seq || got[i].Subject != want[i].Subject || got[i].Envelope.EventID != want[i].Envelope.EventID {
			t.Fatalf("ReplayKind event %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if err := s.ReplayKind(ctx(t), Tenant, "no.dots", func(events.Stored) error { return nil }); err == nil {
		t.Fatal("ReplayKind accepted an invalid kind")
	}
}
