package jetsnap_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/contextos/ledger/aggregates"
	"github.com/contextos/ledger/aggregates/jetsnap"
	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/internal/testing/testenv"
	"github.com/contextos/ledger/kernel"
)

var def = kernel.Definition{ID: "refunds-per-order", CapabilityIDs: []string{"adp_payments.issue_refund"},
	ResourcePointer: "/order_id", AmountPointer: "/amount_minor", Limit: 100000, Unit: "INR_minor"}

func sealer() *aggregates.Sealer {
	key := ed25519.NewKeyFromSeed(make([]byte, 32))
	return &aggregates.Sealer{Signer: codec.NewSigner(key), Clock: aggregates.SystemClock{}, IDs: aggregates.NewIDs(aggregates.SystemClock{}, nil)}
}

// start runs an embedded server in dir and returns the event store and the
// snapshot store on it.
func start(t *testing.T, dir string) (*events.Embedded, *events.JetStore, *jetsnap.Store) {
	t.Helper()
	srv := testenv.Server(t, testenv.Options{Dir: dir})
	_, js := testenv.Connect(t, srv.ClientURL())
	store := testenv.Store(t, js)
	snaps, err := jetsnap.Ensure(testenv.Context(t), js, 1)
	if err != nil {
		t.Fatal(err)
	}
	return srv, store, snaps
}

func command(r *rand.Rand, resource string) kernel.Command {
	att := fmt.Sprintf("a%02d", r.IntN(16))
	switch r.IntN(4) {
	case 0, 1:
		return kernel.Reserve{GuaranteeID: def.ID, Resource: resource, AttemptID: att, OperationID: "op_" + att,
			Amount: int64(1 + r.IntN(20000)), Limit: def.Limit, DefinitionDigest: def.Digest()}
	case 2:
		return kernel.StartDispatch{AttemptID: att}
	default:
		return kernel.Observe{AttemptID: att, Outcome: []kernel.Outcome{kernel.OutcomeApplied, kernel.OutcomeNotApplied, kernel.OutcomePending}[r.IntN(3)], Source: "provider"}
	}
}

func fullFold(t *testing.T, store events.Store, resource string) []byte {
	t.Helper()
	subject, _ := codec.ExposureSubject("acme", def.ID, resource)
	all, err := store.Read(context.Background(), subject, 1)
	if err != nil {
		t.Fatal(err)
	}
	var l kernel.Ledger
	for _, st := range all {
		ev, err := kernel.DecodeEvent(st.Envelope.Type, st.Envelope.V, st.Envelope.Body)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Apply(ev); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := json.Marshal(&l)
	return b
}

func cold(t *testing.T, store events.Store, snaps aggregates.SnapshotStore, resource string) ([]byte, aggregates.EngineStats) {
	t.Helper()
	eng := aggregates.NewEngine(store, sealer())
	eng.Snapshots = snaps
	eff, err := eng.Run(context.Background(), "acme", kernel.ReadStep(kernel.LedgerKey{GuaranteeID: def.ID, Resource: resource}.Key(), func(l *kernel.Ledger) any {
		b, _ := json.Marshal(l)
		return b
	}))
	if err != nil {
		t.Fatal(err)
	}
	return eff.Reply.Data.([]byte), eng.Stats()
}

// TestSnapshotsOnJetStream: concurrent random commands on interleaved
// resources through one engine writing snapshots to the stream; a cold
// engine loads each resource from its snapshot and tail and gets what a full
// fold gets, also after a server restart.
func TestSnapshotsOnJetStream(t *testing.T) {
	dir := t.TempDir()
	srv, store, snaps := start(t, dir)
	eng := aggregates.NewEngine(store, sealer())
	eng.Snapshots = snaps
	eng.SnapshotEvery = 16
	ctx := context.Background()
	var wg sync.WaitGroup
	for k := 0; k < 4; k++ {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(k), 9))
			res := fmt.Sprint("ord_js", k)
			for i := 0; i < 120; i++ {
				if _, _, err := eng.Exposure(ctx, "acme", def.ID, res, command(r, res)); err != nil {
					t.Error(err)
					return
				}
			}
		}(k)
	}
	wg.Wait()
	eng.FlushSnapshots()
	for k := 0; k < 4; k++ {
		res := fmt.Sprint("ord_js", k)
		want := fullFold(t, store, res)
		got, st := cold(t, store, snaps, res)
		if st.SnapshotLoads != 1 || string(got) != string(want) {
			t.Fatalf("%s: stats %+v\n got %s\nwant %s", res, st, got, want)
		}
	}
	srv.Shutdown()
	_, store2, snaps2 := start(t, dir)
	for k := 0; k < 4; k++ {
		res := fmt.Sprint("ord_js", k)
		want := fullFold(t, store2, res)
		got, st := cold(t, store2, snaps2, res)
		if string(got) != string(want) {
			t.Fatalf("%s after restart: stats %+v\n got %s\nwant %s", res, st, got, want)
		}
	}
}
