package events_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/events/storetest"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
)

// benchEvents returns n distinct envelopes cheaply: a sealed template with
// fresh event ids. Their signatures do not verify (the store does not verify
// signatures), which keeps Ed25519 signing out of the measurements.
func benchEvents(b *testing.B, n int) []codec.Envelope {
	tmpl := storetest.Event(b, 1)
	out := make([]codec.Envelope, n)
	for i := range out {
		var id ulid.ULID
		_ = id.SetTime(1_800_000_000_000)
		binary.BigEndian.PutUint64(id[8:], uint64(i)+1<<40)
		out[i] = tmpl
		out[i].EventID = id.String()
	}
	return out
}

type benchStore struct {
	name string
	new  func(b *testing.B) events.Store
}

func benchStores() []benchStore {
	return []benchStore{
		{"jetstream_sync_always", func(b *testing.B) events.Store { s, _, _ := newJetStore(b, true); return s }},
		{"jetstream_relaxed", func(b *testing.B) events.Store { s, _, _ := newJetStore(b, false); return s }},
		{"mem", func(b *testing.B) events.Store { return events.NewMemStore() }},
	}
}

// BenchmarkAppend: one event per append, each expecting the subject's
// previous sequence (the load-decide-append loop's write).
func BenchmarkAppend(b *testing.B) {
	for _, bs := range benchStores() {
		b.Run(bs.name, func(b *testing.B) {
			s := bs.new(b)
			sub := storetest.Subject(b, "ord.bench")
			envs := benchEvents(b, b.N)
			ctx := context.Background()
			var seq uint64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				var err error
				if seq, err = s.Append(ctx, sub, seq, envs[i]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAppendBatch100: one atomic batch of 100 events over 10 subjects
// (10 each), each subject with its expected sequence.
func BenchmarkAppendBatch100(b *testing.B) {
	const subjects, per = 10, 10
	for _, bs := range benchStores() {
		b.Run(bs.name, func(b *testing.B) {
			s := bs.new(b)
			envs := benchEvents(b, b.N*subjects*per)
			subs := make([]string, subjects)
			for i := range subs {
				subs[i] = storetest.Subject(b, fmt.Sprint("ord.batch.", i))
			}
			last := make([]uint64, subjects)
			ctx := context.Background()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				items := make([]events.AppendItem, subjects)
				for j := range items {
					k := (i*subjects + j) * per
					items[j] = events.AppendItem{Subject: subs[j], ExpectedLastSeq: last[j], Envs: envs[k : k+per]}
				}
				seqs, err := s.AppendBatch(ctx, items)
				if err != nil {
					b.Fatal(err)
				}
				copy(last, seqs)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*subjects*per), "ns/event")
		})
	}
}

// BenchmarkRead10Of100k: Read of one subject holding 10 events spread over a
// stream of 100,000 events on other subjects, by Direct Get (the store) and,
// for comparison, by an ordered consumer filtered on the subject.
func BenchmarkRead10Of100k(b *testing.B) {
	const others, mine = 100_000, 10
	store, _, js := newJetStore(b, false)
	mem := events.NewMemStore()
	sub := storetest.Subject(b, "ord.read")
	envs := benchEvents(b, others+mine)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var last uint64
	var memLast uint64
	k := 0
	for chunk := 0; chunk < others/1000; chunk++ {
		items := make([]events.AppendItem, 1000)
		for j := range items {
			items[j] = events.AppendItem{Subject: storetest.Subject(b, fmt.Sprint("other.", chunk*1000+j)), Envs: envs[k : k+1]}
			k++
		}
		if _, err := store.AppendBatch(ctx, items); err != nil {
			b.Fatal(err)
		}
		if _, err := mem.AppendBatch(ctx, items); err != nil {
			b.Fatal(err)
		}
		if chunk%(others/1000/mine) == 0 {
			var err error
			if last, err = store.Append(ctx, sub, last, envs[k]); err != nil {
				b.Fatal(err)
			}
			if memLast, err = mem.Append(ctx, sub, memLast, envs[k]); err != nil {
				b.Fatal(err)
			}
			k++
		}
	}
	for _, v := range []struct {
		name string
		scan int
	}{{"direct_get_adaptive", 0}, {"direct_get_forward", 1 << 30}, {"direct_get_backward", -1}} {
		b.Run(v.name, func(b *testing.B) {
			store.ScanPerRoundTrip = v.scan
			defer func() { store.ScanPerRoundTrip = 0 }()
			for i := 0; i < b.N; i++ {
				got, err := store.Read(ctx, sub, 0)
				if err != nil || len(got) != mine {
					b.Fatalf("read %d: %v", len(got), err)
				}
			}
		})
	}
	b.Run("last_seq", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if s, err := store.LastSeq(ctx, sub); err != nil || s != last {
				b.Fatalf("last %d: %v", s, err)
			}
		}
	})
	b.Run("ordered_consumer", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if n := readWithConsumer(b, ctx, js, sub); n != mine {
				b.Fatalf("consumer read %d", n)
			}
		}
	})
	b.Run("mem", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			got, err := mem.Read(ctx, sub, 0)
			if err != nil || len(got) != mine {
				b.Fatalf("read %d: %v", len(got), err)
			}
		}
	})
}

// readWithConsumer reads every message of subject with an ordered consumer,
// decoding each like Read does, and returns the count.
func readWithConsumer(b *testing.B, ctx context.Context, js jetstream.JetStream, subject string) int {
	c, err := js.OrderedConsumer(ctx, events.StreamName, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		b.Fatal(err)
	}
	// Delete the server-side consumer when done, as a reader must (the
	// server limits how many may exist); the delete is part of the cost.
	defer func() {
		if info := c.CachedInfo(); info != nil {
			_ = js.DeleteConsumer(ctx, events.StreamName, info.Name)
		}
	}()
	n := 0
	for {
		msgs, err := c.Fetch(100, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			b.Fatal(err)
		}
		for m := range msgs.Messages() {
			if _, err := codec.Decode(m.Data()); err != nil {
				b.Fatal(err)
			}
			n++
			md, err := m.Metadata()
			if err != nil {
				b.Fatal(err)
			}
			if md.NumPending == 0 {
				return n
			}
		}
		if msgs.Error() != nil {
			b.Fatal(msgs.Error())
		}
	}
}

// BenchmarkReadDense100: Read of a subject whose 100 events were appended
// together (adjacent sequences) after 10,000 events on other subjects: the
// case where reading forward wins and the adaptive Read must pick it.
func BenchmarkReadDense100(b *testing.B) {
	store, _, _ := newJetStore(b, false)
	ctx := context.Background()
	envs := benchEvents(b, 10_100)
	for chunk := 0; chunk < 10; chunk++ {
		items := make([]events.AppendItem, 1000)
		for j := range items {
			k := chunk*1000 + j
			items[j] = events.AppendItem{Subject: storetest.Subject(b, fmt.Sprint("other.", k)), Envs: envs[k : k+1]}
		}
		if _, err := store.AppendBatch(ctx, items); err != nil {
			b.Fatal(err)
		}
	}
	sub := storetest.Subject(b, "ord.dense")
	if _, err := store.Append(ctx, sub, 0, envs[10_000:]...); err != nil {
		b.Fatal(err)
	}
	for _, v := range []struct {
		name string
		scan int
	}{{"adaptive", 0}, {"forward", 1 << 30}, {"backward", -1}} {
		b.Run(v.name, func(b *testing.B) {
			store.ScanPerRoundTrip = v.scan
			for i := 0; i < b.N; i++ {
				got, err := store.Read(ctx, sub, 0)
				if err != nil || len(got) != 100 {
					b.Fatalf("read %d: %v", len(got), err)
				}
			}
		})
	}
}

// BenchmarkAppendCPU: the CPU time (this process's: the embedded server and
// its client) and latency of one append by kind, on a durable and a relaxed
// server, one client: a single event, and atomic batches of one event on
// each of 2 and 5 subjects, each subject with its expected sequence. The
// kinds take turns in rounds so that all meet the same load of a shared
// machine. On a single server nats-server stages each atomic batch in a
// file store of its own, which an atomic batch's cpu-ms shows against a
// single append's (docs/performance.md, "Where a lone agent's proposal
// spends its CPU").
//
//	go test ./events -run '^$' -bench AppendCPU -benchtime 300x
func BenchmarkAppendCPU(b *testing.B) {
	for _, sync := range []bool{true, false} {
		name := "relaxed"
		if sync {
			name = "sync_always"
		}
		b.Run(name, func(b *testing.B) {
			s, _, _ := newJetStore(b, sync)
			type kind struct {
				name  string
				subs  []string
				last  []uint64
				cpu   time.Duration
				lat   []time.Duration
				count int
			}
			var kinds []*kind
			for _, n := range []int{1, 2, 5} {
				k := &kind{name: fmt.Sprint("batch", n), last: make([]uint64, n)}
				if n == 1 {
					k.name = "single"
				}
				for j := range n {
					k.subs = append(k.subs, storetest.Subject(b, fmt.Sprint("ord.cpu.", n, ".", j)))
				}
				kinds = append(kinds, k)
			}
			envs := benchEvents(b, b.N*8)
			next := 0
			ctx := context.Background()
			const rounds = 5
			b.ResetTimer()
			for r := range rounds {
				for i := range kinds {
					k := kinds[(i+r)%len(kinds)]
					for range max(b.N/rounds, 1) {
						items := make([]events.AppendItem, len(k.subs))
						for j, sub := range k.subs {
							items[j] = events.AppendItem{Subject: sub, ExpectedLastSeq: k.last[j], Envs: envs[next%len(envs) : next%len(envs)+1]}
							next++
						}
						t0, c0 := time.Now(), processCPU()
						seqs, err := s.AppendBatch(ctx, items)
						k.cpu += processCPU() - c0
						k.lat = append(k.lat, time.Since(t0))
						k.count++
						if err != nil {
							b.Fatal(err)
						}
						copy(k.last, seqs)
					}
				}
			}
			for _, k := range kinds {
				slices.Sort(k.lat)
				b.ReportMetric(float64(k.cpu.Microseconds())/1000/float64(k.count), k.name+"-cpu-ms")
				b.ReportMetric(float64(k.lat[len(k.lat)/2].Microseconds())/1000, k.name+"-p50-ms")
			}
		})
	}
}

// processCPU is the user and system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
