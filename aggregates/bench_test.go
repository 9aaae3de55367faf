package aggregates

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
)

// runParallel runs b.N operations on c goroutines and reports ops/s.
func runParallel(b *testing.B, c int, unit string, op func(w, i int) error) {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	b.ResetTimer()
	for w := 0; w < c; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				if err := op(w, i); err != nil {
					failed.CompareAndSwap(nil, err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), unit+"/s")
}

// BenchmarkReservations: reservations per second through the engine on an
// embedded JetStream that fsyncs before every ack, over 10k resources
// (uniform) and on one hot resource (a fresh one every 1,000 reservations:
// a ledger holds at most 1,024 receipts), at 1, 8 and 64 goroutines; and,
// in the same run, the raw expected-sequence append one at a time (each
// goroutine on its own subject) that the engine's group commit is measured
// against. cmd/bench measures the same with latencies and a PostgreSQL peer.
func BenchmarkReservations(b *testing.B) {
	_, store := startStore(b, b.TempDir())
	sealer := testSealer()
	ctx := context.Background()
	tmpl, err := sealer.Seal("acme", []kernel.Event{kernel.ExposureTombstoned{AttemptID: "raw", Reason: "bench"}})
	if err != nil {
		b.Fatal(err)
	}
	conc := []int{1, 8, 64}
	for _, c := range conc {
		b.Run(fmt.Sprint("raw_append/c", c), func(b *testing.B) {
			last := make([]uint64, c)
			subs := make([]string, c)
			tag := rand.Uint64()
			for w := range subs {
				subs[w], _ = codec.Subject("acme", "raw", fmt.Sprint(tag, "-", w))
			}
			runParallel(b, c, "appends", func(w, i int) error {
				env := tmpl[0]
				env.EventID = sealer.IDs.New()
				seq, err := store.Append(ctx, subs[w], last[w], env)
				last[w] = seq
				return err
			})
		})
	}
	reserve := func(eng *Engine, resource string, w, i int, tag uint64) error {
		att := fmt.Sprintf("a%x-%d-%d", tag, w, i)
		res, _, err := eng.Exposure(ctx, "acme", testDef.ID, resource, kernel.Reserve{GuaranteeID: testDef.ID, Resource: resource,
			AttemptID: att, OperationID: "o" + att, Amount: 1, Limit: testDef.Limit, DefinitionDigest: testDef.Digest()})
		if err == nil && res.Refusal != nil {
			err = fmt.Errorf("refused %s", res.Refusal.Code)
		}
		return err
	}
	// The engine as configured, and, side by side, without each of its
	// adaptive parts: without its linger (the group commit sends whatever
	// is ready the moment an append returns), and with the way a group is
	// appended fixed instead of measured (always one atomic batch, or single
	// appends whenever every transaction appends one event).
	for _, mode := range []struct {
		name    string
		linger  time.Duration
		appends AppendMode
	}{{"", 0, AppendMeasured}, {"nolinger_", -1, AppendMeasured}, {"batches_", 0, AppendBatches}, {"singles_", 0, AppendSingles}} {
		eng := NewEngine(store, sealer)
		eng.Linger, eng.Appends = mode.linger, mode.appends
		for _, c := range conc {
			b.Run(fmt.Sprint(mode.name, "uniform10k/c", c), func(b *testing.B) {
				tag := rand.Uint64()
				before := eng.Stats()
				runParallel(b, c, "reservations", func(w, i int) error {
					return reserve(eng, fmt.Sprint(mode.name, "ord-", rand.IntN(10_000)), w, i, tag)
				})
				reportGroups(b, before, eng.Stats())
			})
		}
		for _, c := range conc {
			b.Run(fmt.Sprint(mode.name, "hot/c", c), func(b *testing.B) {
				tag := rand.Uint64()
				before := eng.Stats()
				runParallel(b, c, "reservations", func(w, i int) error {
					return reserve(eng, fmt.Sprintf("hot-%x-%d", tag, i/1000), w, i, tag)
				})
				reportGroups(b, before, eng.Stats())
			})
		}
	}
}

// reportGroups reports the engine's average group commit between two
// readings of its statistics.
func reportGroups(b *testing.B, before, after EngineStats) {
	if n := after.Batches - before.Batches; n > 0 {
		b.ReportMetric(float64(after.BatchedTxs-before.BatchedTxs)/float64(n), "tx/append")
	}
	b.ReportMetric(float64(after.ColdLoads-before.ColdLoads), "coldloads")
}

// BenchmarkCarriedRead: what reading the ledger of a replaced guarantee
// costs a reservation that, like a proposal, guards the tenant's control
// subject: the reservation alone ("own") and with the replaced ledger of
// the same resource read without a guard (Read, what the gateway does), at
// 8 goroutines over 10k resources (mostly cold loads) and over 100 (warm).
// A guard on it instead would not fit every batch: an atomic batch carries
// only as many guards as it has events after the first of a subject, and a
// reservation of two events on one ledger has room for the control's alone.
func BenchmarkCarriedRead(b *testing.B) {
	_, store := startStore(b, b.TempDir())
	ctx := context.Background()
	for _, n := range []int{10_000, 100} {
		for _, mode := range []string{"own", "read"} {
			eng := NewEngine(store, testSealer())
			b.Run(fmt.Sprintf("%s/resources%d", mode, n), func(b *testing.B) {
				tag := rand.Uint64()
				runParallel(b, 8, "reservations", func(w, i int) error {
					res := fmt.Sprintf("ord-%x-%d", tag, rand.IntN(n))
					ledger := ledgerKey(res)
					old := kernel.LedgerKey{GuaranteeID: "replaced", Resource: res}.Key()
					reads := kernel.Reads{{Key: ledger, Access: kernel.Write}, {Key: kernel.KeyControl, Access: kernel.Guard}}
					if mode == "read" {
						reads = append(reads, kernel.Read{Key: old, Access: kernel.Stale})
					}
					att := fmt.Sprintf("c%x-%d-%d", tag, w, i)
					r, err := eng.Run(ctx, "acme", funcStep{reads: reads, decide: func(l kernel.Loaded) (map[kernel.Key][]kernel.Event, *kernel.Refusal) {
						var carried int64
						if o, ok := l[old].(*kernel.Ledger); ok {
							carried = o.Committed + o.Held
						}
						d := kernel.DecideExposure(l[ledger].(*kernel.Ledger), kernel.ReserveStarted{Reserve: kernel.Reserve{GuaranteeID: testDef.ID, Resource: res,
							AttemptID: att, OperationID: "o" + att, Amount: 1, Limit: testDef.Limit, DefinitionDigest: testDef.Digest(), Carried: carried}})
						return map[kernel.Key][]kernel.Event{ledger: d.Events}, d.Refusal
					}})
					if err == nil && r.Refusal != nil {
						err = r.Refusal
					}
					return err
				})
			})
		}
	}
}
