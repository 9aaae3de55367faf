package bench

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/contextos/ledger/aggregates"
	"github.com/contextos/ledger/aggregates/jetsnap"
	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/internal/testing/refundcfg"
	"github.com/contextos/ledger/kernel"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Def is the guarantee the reservation workloads reserve under: a limit
// high enough that a resource fills its 1,024 receipts before its ceiling.
var Def = kernel.Definition{ID: refundcfg.Guarantee, CapabilityIDs: []string{refundcfg.Capability},
	ResourcePointer: "/order_id", AmountPointer: "/amount_minor", Limit: 1 << 40, Unit: "INR_minor"}

// Tenant is the tenant of every bench event.
const Tenant = "bench"

// Resources is the size of the uniform workloads' resource set.
const Resources = 10_000

// HotSpan is how many reservations one hot resource takes before the hot
// workloads move on to the next (a ledger holds at most 1,024 receipts).
const HotSpan = 1000

// NATS is an embedded JetStream server with the event stream, the snapshot
// stream and a store on them.
type NATS struct {
	Dir     string
	Durable bool
	Srv     *events.Embedded
	NC      *nats.Conn
	JS      jetstream.JetStream
	Store   *events.JetStore
	Snaps   *jetsnap.Store
	Sealer  *aggregates.Sealer
}

// StartNATS starts a server in a new directory under parent; durable
// fsyncs every write before acknowledging it.
func StartNATS(parent string, durable bool) (*NATS, error) {
	dir, err := os.MkdirTemp(parent, "nats-")
	if err != nil {
		return nil, err
	}
	srv, err := events.StartEmbedded(events.EmbeddedConfig{DataDir: dir, Port: -1, SyncAlways: &durable})
	if err != nil {
		return nil, err
	}
	n := &NATS{Dir: dir, Durable: durable, Srv: srv}
	if n.NC, err = events.Connect(srv.ClientURL()); err != nil {
		n.Close()
		return nil, err
	}
	if n.JS, err = jetstream.New(n.NC); err != nil {
		n.Close()
		return nil, err
	}
	ctx := context.Background()
	if _, err := events.EnsureStream(ctx, n.JS, events.StreamOptions{}); err != nil {
		n.Close()
		return nil, err
	}
	if n.Snaps, err = jetsnap.Ensure(ctx, n.JS, 1); err != nil {
		n.Close()
		return nil, err
	}
	n.Store = events.NewJetStore(n.JS, events.StreamName)
	n.Sealer = NewSealer()
	return n, nil
}

// NewSealer returns a sealer with a fixed key.
func NewSealer() *aggregates.Sealer {
	key := ed25519.NewKeyFromSeed(make([]byte, 32))
	return &aggregates.Sealer{Signer: codec.NewSigner(key), Clock: aggregates.SystemClock{}, IDs: aggregates.NewIDs(aggregates.SystemClock{}, nil)}
}

// Engine returns a new engine (a process's worth of warm state) on the
// server, writing snapshots.
func (n *NATS) Engine() *aggregates.Engine {
	e := aggregates.NewEngine(n.Store, n.Sealer)
	e.Snapshots = n.Snaps
	return e
}

// Close stops the server and removes its directory.
func (n *NATS) Close() {
	if n.NC != nil {
		n.NC.Close()
	}
	if n.Srv != nil {
		n.Srv.Shutdown()
	}
	_ = os.RemoveAll(n.Dir)
}

// Durability names a setting.
func Durability(durable bool) string {
	if durable {
		return "durable"
	}
	return "relaxed"
}

// envelopes returns n distinct valid envelopes of tenant Tenant cheaply: one
// sealed event copied under fresh event ids (the store does not check
// signatures, so signing stays out of the raw measurements).
func envelopes(s *aggregates.Sealer, n int) []codec.Envelope {
	tmpl, err := s.Seal(Tenant, []kernel.Event{kernel.ExposureTombstoned{AttemptID: "raw", Reason: "bench"}})
	if err != nil {
		panic(err)
	}
	out := make([]codec.Envelope, n)
	for i := range out {
		out[i] = tmpl[0]
		out[i].EventID = s.IDs.New()
	}
	return out
}

// RawAppend is one event per append on the worker's own subject, each
// expecting the subject's previous sequence: the engine's write without the
// engine.
func (n *NATS) RawAppend(workers int) Op {
	last := make([]uint64, workers)
	subs := make([]string, workers)
	for w := range subs {
		subs[w], _ = codec.Subject(Tenant, "raw", fmt.Sprint("w", w, "-", rand.Uint64()))
	}
	pool := envelopes(n.Sealer, 4096)
	return func(ctx context.Context, w, i int) error {
		env := pool[(w*7919+i)%len(pool)]
		env.EventID = n.Sealer.IDs.New()
		seq, err := n.Store.Append(ctx, subs[w], last[w], env)
		if err == nil {
			last[w] = seq
		}
		return err
	}
}

// RawReservations is RawAppend with the engine's reservations workload
// without the engine: per append one event of a reservation's kind and size
// (exposure.reserved), on one of Resources subjects picked at random among
// the worker's own share of them (so no two workers conflict), expecting the
// subject's previous sequence. Fill with fill first stores one event on each
// subject, as the engine's resources hold one reservation before its points.
func (n *NATS) RawReservations(workers int) (fill, op Op) {
	subs := make([]string, Resources)
	last := make([]uint64, Resources)
	tag := rand.Uint64()
	for j := range subs {
		subs[j], _ = codec.Subject(Tenant, "rawreserve", fmt.Sprint("ord-", j, "-", tag))
	}
	tmpl, err := n.Sealer.Seal(Tenant, []kernel.Event{kernel.ExposureReserved{GuaranteeID: Def.ID, Resource: "ord-durable-1234",
		AttemptID: n.Sealer.IDs.New(), OperationID: "op-" + n.Sealer.IDs.New(), Amount: 1, Limit: Def.Limit, DefinitionDigest: Def.Digest()}})
	if err != nil {
		panic(err)
	}
	appendTo := func(ctx context.Context, j int) error {
		env := tmpl[0]
		env.EventID = n.Sealer.IDs.New()
		seq, err := n.Store.Append(ctx, subs[j], last[j], env)
		if err == nil {
			last[j] = seq
		}
		return err
	}
	fill = func(ctx context.Context, _, i int) error { return appendTo(ctx, i) }
	op = func(ctx context.Context, w, _ int) error {
		return appendTo(ctx, w+workers*rand.IntN(Resources/workers))
	}
	return fill, op
}

// RawBatch is one atomic batch of size events on size distinct subjects per
// operation, each with its expected sequence: the ceiling group commit
// approaches.
func (n *NATS) RawBatch(workers, size int) Op {
	subjects := make([]int, size)
	for j := range subjects {
		subjects[j] = 1
	}
	return n.RawBatches(workers, subjects)
}

// RawBatches appends, per operation, one atomic batch per element of
// shape in turn, each waited for before the next: shape[b][k] events on
// the batch's k-th subject, every subject the worker's own, with its
// expected last sequence. It is what the engine's appends cost without
// the engine: ProposalShape gives the shape of a governed proposal's.
func (n *NATS) RawBatches(workers int, shape ...[]int) Op {
	total := 0
	for _, b := range shape {
		total += len(b)
	}
	last := make([][]uint64, workers)
	subs := make([][]string, workers)
	tag := rand.Uint64()
	for w := range subs {
		last[w] = make([]uint64, total)
		subs[w] = make([]string, total)
		for j := range subs[w] {
			subs[w][j], _ = codec.Subject(Tenant, "rawbatch", fmt.Sprint("w", w, "-", j, "-", tag))
		}
	}
	pool := envelopes(n.Sealer, 4096)
	return func(ctx context.Context, w, i int) error {
		off := 0
		for _, b := range shape {
			items := make([]events.AppendItem, len(b))
			for j, count := range b {
				envs := make([]codec.Envelope, count)
				for e := range envs {
					envs[e] = pool[(w*total+off+j+e+i*31)%len(pool)]
					envs[e].EventID = n.Sealer.IDs.New()
				}
				items[j] = events.AppendItem{Subject: subs[w][off+j], ExpectedLastSeq: last[w][off+j], Envs: envs}
			}
			seqs, err := n.Store.AppendBatch(ctx, items)
			if err != nil {
				return err
			}
			copy(last[w][off:], seqs)
			off += len(b)
		}
		return nil
	}
}

// Reserve reserves amount 1 for a new attempt on resource through eng.
func Reserve(ctx context.Context, eng *aggregates.Engine, resource, attempt string) error {
	res, _, err := eng.Exposure(ctx, Tenant, Def.ID, resource, kernel.Reserve{GuaranteeID: Def.ID, Resource: resource,
		AttemptID: attempt, OperationID: "op-" + attempt, Amount: 1, Limit: Def.Limit, DefinitionDigest: Def.Digest()})
	if err == nil && res.Refusal != nil {
		err = fmt.Errorf("refused %s: %s", res.Refusal.Code, res.Refusal.Reason)
	}
	return err
}

// Uniform picks one of Resources resources at random per operation.
func Uniform(tag string) func(w, i int) string {
	return func(w, i int) string { return fmt.Sprintf("ord-%s-%d", tag, rand.IntN(Resources)) }
}

// Every picks the i-th resource of Uniform's set: Fill with it reserves once
// on each.
func Every(tag string) func(w, i int) string {
	return func(w, i int) string { return fmt.Sprintf("ord-%s-%d", tag, i) }
}

// Hot sends every operation to the same resource, moving to a fresh one
// after HotSpan reservations.
func Hot(tag string) func(w, i int) string {
	var n atomic.Int64
	return func(w, i int) string { return fmt.Sprintf("hot-%s-%d", tag, (n.Add(1)-1)/HotSpan) }
}

// Reservations reserves through eng on the resources pick chooses.
func Reservations(eng *aggregates.Engine, pick func(w, i int) string) Op {
	run := rand.Uint64()
	return func(ctx context.Context, w, i int) error {
		return Reserve(ctx, eng, pick(w, i), fmt.Sprintf("a%x-%d-%d", run, w, i))
	}
}

// KernelDecisions decides and folds reservations on in-memory ledgers:
// the kernel's share of a reservation.
func KernelDecisions(workers int) Op {
	ledgers := make([]*kernel.Ledger, workers) // one per worker: no sharing
	return func(_ context.Context, w, i int) error {
		l := ledgers[w]
		if l == nil || i%HotSpan == 0 {
			l = &kernel.Ledger{}
			ledgers[w] = l
		}
		att := fmt.Sprint("a", i)
		d := kernel.DecideExposure(l, kernel.Reserve{GuaranteeID: Def.ID, Resource: "ord", AttemptID: att, OperationID: att,
			Amount: 1, Limit: Def.Limit, DefinitionDigest: Def.Digest()})
		if d.Refusal != nil {
			return fmt.Errorf("refused %s", d.Refusal.Code)
		}
		for _, ev := range d.Events {
			if err := l.Apply(ev); err != nil {
				return err
			}
		}
		return nil
	}
}

// ColdLoads builds a stream of total events in which targets resources each
// hold perTarget ledger events spread evenly through it (written through an
// engine that keeps snapshots), the rest being events of other subjects
// appended in atomic batches. It returns the targets' refs.
func (n *NATS) ColdLoads(ctx context.Context, total, targets, perTarget int, progress Progress) ([]aggregates.Ref, error) {
	eng := n.Engine()
	refs := make([]aggregates.Ref, targets)
	for k := range refs {
		refs[k], _ = aggregates.ExposureRef(Tenant, Def.ID, fmt.Sprint("cold-", k))
	}
	filler := total - targets*perTarget
	const batch = 1000
	rounds := filler / batch
	every := max(rounds/perTarget, 1)
	pool := envelopes(n.Sealer, batch)
	subs := make([]string, batch)
	last := make([]uint64, batch)
	for j := range subs {
		subs[j], _ = codec.Subject(Tenant, "fill", fmt.Sprint(j))
	}
	started := time.Now()
	done := 0
	for r := 0; r < rounds; r++ {
		items := make([]events.AppendItem, batch)
		for j := range items {
			env := pool[j]
			env.EventID = n.Sealer.IDs.New()
			items[j] = events.AppendItem{Subject: subs[j], ExpectedLastSeq: last[j], Envs: []codec.Envelope{env}}
		}
		seqs, err := n.Store.AppendBatch(ctx, items)
		if err != nil {
			return nil, err
		}
		copy(last, seqs)
		done += batch
		if r%every == 0 && done < total {
			for k := range refs {
				res := fmt.Sprint("cold-", k)
				if err := Reserve(ctx, eng, res, fmt.Sprint("c", r, "-", k)); err != nil {
					return nil, err
				}
				done++
			}
		}
		if progress != nil && r%100 == 99 {
			progress("  cold-load stream: %d of %d events (%.0f s)", done, total, time.Since(started).Seconds())
		}
	}
	eng.FlushSnapshots()
	return refs, nil
}

// ColdLoad loads ref cold through an engine: from its snapshot and tail
// when snaps is true, by a full fold otherwise.
func (n *NATS) ColdLoad(refs []aggregates.Ref, snaps bool) Op {
	eng := aggregates.NewEngine(n.Store, n.Sealer)
	if snaps {
		eng.Snapshots = n.Snaps
	}
	return func(ctx context.Context, w, i int) error {
		ref := refs[(w*131+i)%len(refs)]
		st, _, err := eng.Load(ctx, ref)
		if err == nil && len(st.(*kernel.Ledger).Receipts) == 0 {
			err = fmt.Errorf("%s loaded empty", ref.Subject)
		}
		return err
	}
}

// TempDir returns a directory for the bench's servers.
func TempDir() (string, error) {
	return os.MkdirTemp("", "ctx-bench-")
}

// Cleanup removes a TempDir.
func Cleanup(dir string) { _ = os.RemoveAll(filepath.Clean(dir)) }
