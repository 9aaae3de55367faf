package events_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/events/storetest"
)

// guardedBatches has w writers append n atomic batches each, every batch
// two events on the writer's own subject guarded by one shared subject that
// nobody writes (a tenant's kill switch, released). It returns how many
// batches were refused as conflicts.
func guardedBatches(t *testing.T, store events.Store, w, n int) int {
	t.Helper()
	shared := storetest.Subject(t, "shared-guard")
	var mu sync.Mutex
	conflicts := 0
	var wg sync.WaitGroup
	for i := 0; i < w; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			own := storetest.Subject(t, fmt.Sprint("own-", i))
			var last uint64
			for j := 0; j < n; j++ {
				seqs, err := store.AppendBatch(context.Background(), []events.AppendItem{
					{Subject: own, ExpectedLastSeq: last, Envs: []codec.Envelope{storetest.Event(t, 2*j), storetest.Event(t, 2*j+1)}},
					{Subject: shared, ExpectedLastSeq: 0},
				})
				switch {
				case errors.Is(err, events.ErrConflict):
					mu.Lock()
					conflicts++
					mu.Unlock()
					if last, err = store.LastSeq(context.Background(), own); err != nil {
						t.Error(err)
						return
					}
				case err != nil:
					t.Error(err)
					return
				default:
					last = seqs[0]
				}
			}
		}(i)
	}
	wg.Wait()
	return conflicts
}

// TestGuardsDoNotCollideR3: on a replicated stream the leader holds a
// subject with an expected sequence "in process" until its batch is
// applied, and refuses another batch expecting the same subject meanwhile,
// though nothing moved. Batches of several writers that only guard one
// shared subject must all be stored: the store sends such a batch again
// instead of reporting a conflict nobody caused.
func TestGuardsDoNotCollideR3(t *testing.T) {
	js, _ := startCluster(t)
	store := freshR3Store(t, js)
	if n := guardedBatches(t, store, 6, 40); n != 0 {
		t.Fatalf("%d of 240 guarded batches refused as conflicts, though the guarded subject never moved", n)
	}
}

// TestGuardHolds: a guard refuses the batch once its subject moved, on the
// real server and in memory alike.
func TestGuardHolds(t *testing.T) {
	js, _, _ := newJetStore(t, false)
	for name, store := range map[string]events.Store{"memory": events.NewMemStore(), "jetstream": js} {
		ctx := context.Background()
		guard, own := storetest.Subject(t, "guard-"+name), storetest.Subject(t, "own-"+name)
		moved, err := store.Append(ctx, guard, 0, storetest.Event(t, 1))
		if err != nil {
			t.Fatal(err)
		}
		stale := []events.AppendItem{{Subject: own, Envs: []codec.Envelope{storetest.Event(t, 2), storetest.Event(t, 3)}}, {Subject: guard, ExpectedLastSeq: 0}}
		var conflict *events.ConflictError
		if _, err := store.AppendBatch(ctx, stale); !errors.As(err, &conflict) || conflict.Subject != guard {
			t.Fatalf("%s: a stale guard: %v, want a conflict on %s", name, err, guard)
		}
		fresh := []events.AppendItem{{Subject: own, Envs: stale[0].Envs}, {Subject: guard, ExpectedLastSeq: moved}}
		seqs, err := store.AppendBatch(ctx, fresh)
		if err != nil || seqs[1] != moved {
			t.Fatalf("%s: a fresh guard: %v %v", name, seqs, err)
		}
		if _, err := store.AppendBatch(ctx, []events.AppendItem{{Subject: storetest.Subject(t, "lone-"+name), Envs: []codec.Envelope{storetest.Event(t, 4)}},
			{Subject: guard, ExpectedLastSeq: moved}}); !errors.Is(err, events.ErrInvalidAppend) {
			t.Fatalf("%s: a guard with no event to carry it: %v", name, err)
		}
	}
}
