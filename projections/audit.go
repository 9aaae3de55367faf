package projections

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/contextos/ledger/audit"
	"github.com/contextos/ledger/audit/witness"
	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
	"github.com/nats-io/nats.go"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// Clock gives the projections their time (checkpoint intervals). Tests
// inject a fake one.
type Clock interface{ Now() time.Time }

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns the current time.
func (SystemClock) Now() time.Time { return time.Now() }

// Defaults of AuditConfig.
const (
	DefaultCheckpointEvery    = 1000
	DefaultCheckpointInterval = 10 * time.Second
	DefaultPollInterval       = time.Second
	DefaultLinger             = 100 * time.Millisecond
)

// AuditConfig configures an AuditProjector.
type AuditConfig struct {
	Tenant string       // the tenant whose events are recorded
	Events events.Store // the event stream (source)
	Log    *AuditLog    // the audit stream (destination)
	Signer codec.Signer
	// CheckpointEvery publishes a checkpoint once this many records are not
	// covered by one (default DefaultCheckpointEvery).
	CheckpointEvery int
	// CheckpointInterval publishes a checkpoint of uncovered records once
	// this much time (by Clock) has passed since the last one (default
	// DefaultCheckpointInterval).
	CheckpointInterval time.Duration
	Clock              Clock // default SystemClock
	// PollInterval is the longest Run waits between two Syncs (default
	// DefaultPollInterval); Notify wakes it earlier.
	PollInterval time.Duration
	// Notify, when set, is subscribed (core NATS) to the tenant's event
	// subjects so that Run syncs soon after an event is published. Lost or
	// repeated notifications are harmless: Sync reads the stream itself.
	Notify *nats.Conn
	// Linger is how long Run lets events gather after a notification before
	// it syncs (default DefaultLinger; negative: none). Every append to the
	// audit stream is a durable write on the disk the proposals' own appends
	// wait for: recorded as they come, the nine events of one agent's
	// proposal would be nine synced appends; gathered for a tenth of a
	// second, a quiet tenant's events are one append, and a busy tenant's
	// audit ends about that tenth of a second of events behind.
	Linger time.Duration
	// Logf, when set, receives Run's errors before it retries.
	Logf func(format string, args ...any)
	// Active, when set, says whether Run records now: replicas that divide
	// the tenants among them (docs/replicas.md) leave a tenant's records to
	// the replica that serves it instead of racing for every append. Any
	// replica may record (the log stays one chain whoever appends), so it
	// only saves work.
	Active func() bool
	// Witnesses are asked to cosign each checkpoint before it is
	// appended; their cosignatures travel with it (in the log and in
	// exports). A witness that refuses or cannot be reached is logged and
	// skipped: the log never waits for one.
	Witnesses []*witness.Client
	// WitnessTimeout bounds one witness's answer (default 5 s).
	WitnessTimeout time.Duration
	// OnWitness, when set, receives every witness's answer to every
	// checkpoint submitted (metrics, logs, and the integrity incident of a
	// log a witness says shrank or forked).
	OnWitness func(WitnessReport)
}

// AuditProjector appends one audit record per event of a tenant to the
// audit stream, in stream order, exactly once, and publishes signed
// checkpoints of the Merkle tree over the records.
//
// The cursor is the audit log itself: the last record names the last event
// recorded (event_seq), so a projector resumes exactly where the log ends,
// whoever wrote it. Each record is appended with the expected last sequence
// of the record subject; when another replica appended first, the projector
// reads the records it missed and skips the events they cover. Any number of
// replicas may run at once; the chain never forks and no event is recorded
// twice or skipped.
type AuditProjector struct {
	cfg        AuditConfig
	noteSigner note.Signer
	syncMu     sync.Mutex // one Sync or Checkpoint at a time

	mu     sync.Mutex // guards the fields below against Status
	loaded bool
	chain  chain
	ckSize int64     // size of the last checkpoint on the log
	ckSeq  uint64    // its stream sequence (0 = none)
	ckTime time.Time // when it was published or seen
	// expect is a checkpoint read from the log to check when the fold
	// reaches its size; the chain keeps only the compact range of its
	// current size, so that is when its root is known.
	expect *audit.Checkpoint
	// snaps are the chain as folded at a few sizes: the last checkpoint's
	// and each witness's, so that a consistency proof for a witness or the
	// check of another replica's checkpoint reads only the records after
	// one. At most one per witness plus one.
	snaps []chain

	appended, batches, conflicts int64
	cosigned, witnessErrors      int64

	// The witnesses' answer to the latest submission (audit_witness.go).
	wstate     kernel.Witnessing
	wreason    string
	wlast      time.Time // when it was submitted (by Clock)
	wintegrity bool      // a witness said the log shrank or forked

	// feed, when set, hands Sync the tenant's events the read model has
	// folded, and wakes Run (see feed).
	feed *feed
	// scanned is the last stream sequence up to which every event of the
	// tenant is recorded, as far as the feed showed: other tenants' events
	// may follow the last record. Guarded by syncMu.
	scanned uint64
}

// NewAuditProjector checks cfg and returns a projector.
func NewAuditProjector(cfg AuditConfig) (*AuditProjector, error) {
	if err := codec.ValidToken(cfg.Tenant); err != nil {
		return nil, fmt.Errorf("projections: audit tenant: %w", err)
	}
	if cfg.Events == nil || cfg.Log == nil {
		return nil, errors.New("projections: audit projector needs Events and Log")
	}
	ns, err := audit.NewNoteSigner(audit.Origin(cfg.Tenant), cfg.Signer.Key)
	if err != nil {
		return nil, err
	}
	if cfg.CheckpointEvery <= 0 {
		cfg.CheckpointEvery = DefaultCheckpointEvery
	}
	if cfg.CheckpointInterval <= 0 {
		cfg.CheckpointInterval = DefaultCheckpointInterval
	}
	if cfg.Clock == nil {
		cfg.Clock = SystemClock{}
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.Linger == 0 {
		cfg.Linger = DefaultLinger
	}
	return &AuditProjector{cfg: cfg, noteSigner: ns, chain: newChain(cfg.Tenant), wstate: kernel.WitnessPending}, nil
}

// AuditStatus is a projector's position.
type AuditStatus struct {
	Records        int64  // records in the log as this projector knows it
	LastEventSeq   uint64 // event sequence of the last record
	CheckpointSize int64  // size of the last checkpoint
	Appended       int64  // records this projector appended
	Batches        int64  // appends that carried them (atomic batches of up to MaxRecordBatch)
	Conflicts      int64  // appends refused because another writer appended first
	Cosigned       int64  // cosignatures witnesses returned
	WitnessErrors  int64  // checkpoints a witness refused or did not answer
}

// Status returns the projector's position.
func (p *AuditProjector) Status() AuditStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	return AuditStatus{Records: p.chain.Size(), LastEventSeq: p.chain.LastEventSeq(), CheckpointSize: p.ckSize,
		Appended: p.appended, Batches: p.batches, Conflicts: p.conflicts, Cosigned: p.cosigned, WitnessErrors: p.witnessErrors}
}

// Sync records every event of the tenant stored after the log's last record,
// up to the end of the event stream, and publishes the checkpoints that are
// due. It returns the first error; calling it again resumes where the log
// ends. Calls of Sync and Checkpoint on one projector are serialized.
func (p *AuditProjector) Sync(ctx context.Context) error {
	p.syncMu.Lock()
	defer p.syncMu.Unlock()
	if !p.isLoaded() {
		if err := p.load(ctx); err != nil {
			return err
		}
	}
	from := max(p.lastEventSeq(), p.scanned) + 1
	var folded uint64 // where the model was: the replay below reads up to it at least
	if p.feed != nil {
		fed, to, ok := p.feed.take(from)
		folded = to
		if ok {
			if err := p.record(ctx, fed); err != nil {
				return err
			}
			p.scanned = max(p.scanned, to)
			from = max(from, to+1)
		}
	}
	var pending []events.Stored
	err := p.cfg.Events.ReplayTenant(ctx, p.cfg.Tenant, from, func(st events.Stored) error {
		if st.Seq <= p.lastEventSeq() {
			return nil
		}
		pending = append(pending, st)
		if len(pending) < MaxRecordBatch {
			return nil
		}
		err := p.record(ctx, pending)
		pending = pending[:0]
		return err
	})
	if len(pending) > 0 {
		// What was read before an error is recorded all the same.
		err = errors.Join(err, p.record(ctx, pending))
	}
	if err != nil {
		return err
	}
	p.scanned = max(p.scanned, folded)
	if err := p.checkpoint(ctx, false); err != nil {
		return err
	}
	return p.checkWitnesses(ctx)
}

// MaxRecordBatch bounds the records appended as one atomic batch. Records
// went one durable append each before: past about two thousand events a
// second the projector fell behind the event stream, and its fsyncs
// competed with the request path's.
const MaxRecordBatch = 1000

// MinRecordBatch is the fewest records worth an atomic batch; fewer go one
// append each.
const MinRecordBatch = 16

// Checkpoint publishes a checkpoint of every record now, unless the last
// checkpoint already covers them all (for example at shutdown).
func (p *AuditProjector) Checkpoint(ctx context.Context) error {
	p.syncMu.Lock()
	defer p.syncMu.Unlock()
	if !p.isLoaded() {
		if err := p.load(ctx); err != nil {
			return err
		}
	}
	return p.checkpoint(ctx, true)
}

// Run syncs until ctx is done: at start, on each notification and at least
// every PollInterval. Errors are logged (Logf) and retried at the next
// tick. It returns ctx's error.
func (p *AuditProjector) Run(ctx context.Context) error {
	var fed <-chan struct{}
	if p.feed != nil {
		fed = p.feed.wake
	}
	sync := p.Sync
	if p.cfg.Active != nil {
		sync = func(ctx context.Context) error {
			if !p.cfg.Active() {
				return nil
			}
			return p.Sync(ctx)
		}
	}
	return runLoop(ctx, p.cfg.Notify, fed, codec.TenantPrefix(p.cfg.Tenant)+">", p.cfg.PollInterval, p.cfg.Linger, p.cfg.Logf, sync)
}

func (p *AuditProjector) isLoaded() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.loaded
}

func (p *AuditProjector) lastEventSeq() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.chain.LastEventSeq()
}

// load reads the log's last checkpoint and the whole log (to rebuild the
// compact range of its Merkle tree), checking the checkpoint as the fold
// passes its size.
func (p *AuditProjector) load(ctx context.Context) error {
	cp, ok, err := p.cfg.Log.LastCheckpoint(ctx, p.cfg.Tenant)
	if err != nil {
		return err
	}
	if ok {
		p.mu.Lock()
		p.expect = &cp.Checkpoint
		p.mu.Unlock()
	}
	if err := p.catchUp(ctx); err != nil {
		return err
	}
	if ok {
		if err := p.checkAt(ctx, cp.Checkpoint); err != nil {
			return err
		}
	}
	known := p.witnessSizes()
	p.mu.Lock()
	defer p.mu.Unlock()
	if ok {
		p.ckSize, p.ckSeq = cp.Checkpoint.Size, cp.Seq
	}
	p.ckTime = p.cfg.Clock.Now()
	p.loaded = true
	p.prune(known)
	return nil
}

// checkAt checks a checkpoint read from the log against the records: at a
// snapshot's size from that snapshot (the fold takes one where it checks
// expect), at the chain's size from its compact range, at a smaller one by
// reading the records from the nearest snapshot below it. A larger one
// cannot be checked yet and is accepted.
func (p *AuditProjector) checkAt(ctx context.Context, cp audit.Checkpoint) error {
	p.mu.Lock()
	if p.expect != nil && p.expect.Size <= p.chain.Size() {
		// The fold has passed it (and checked it) or is there now.
		p.expect = nil
	}
	if s := p.snapAt(cp.Size); s != nil && s.Root() == cp.Root && cp.Origin == audit.Origin(p.cfg.Tenant) {
		p.mu.Unlock()
		return nil
	}
	if cp.Size >= p.chain.Size() {
		defer p.mu.Unlock()
		if err := p.chain.checkCheckpoint(cp); err != nil {
			return err
		}
		if cp.Size == p.chain.Size() {
			p.snapshot()
		}
		return nil
	}
	start := p.seed(cp.Size)
	p.mu.Unlock()
	ps, err := logPass(ctx, p.cfg.Log, start, cp.Size, nil, []audit.Checkpoint{cp}, -1)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.snaps = append(p.snaps, ps.end)
	return nil
}

// snapshot keeps the chain as folded now. Callers hold p.mu.
func (p *AuditProjector) snapshot() {
	if p.snapAt(p.chain.Size()) == nil {
		p.snaps = append(p.snaps, chain{Chain: p.chain.Clone(), lastSubjSeq: p.chain.lastSubjSeq, rotation: p.chain.rotation})
	}
}

// snapAt returns the snapshot of size records, or nil. Callers hold p.mu.
func (p *AuditProjector) snapAt(size int64) *chain {
	for i := range p.snaps {
		if p.snaps[i].Size() == size {
			return &p.snaps[i]
		}
	}
	return nil
}

// seed returns the largest snapshot of at most size records, or the empty
// chain. Callers hold p.mu.
func (p *AuditProjector) seed(size int64) chain {
	best := newChain(p.cfg.Tenant)
	for _, s := range p.snaps {
		if s.Size() <= size && s.Size() > best.Size() {
			best = s
		}
	}
	return best
}

// witnessSizes returns the sizes the witnesses last cosigned. Callers do
// not hold p.mu: a witness client holds its own lock while it asks
// ProveTree for a proof.
func (p *AuditProjector) witnessSizes() []int64 {
	out := make([]int64, 0, len(p.cfg.Witnesses))
	for _, w := range p.cfg.Witnesses {
		out = append(out, w.Known())
	}
	return out
}

// prune drops the snapshots neither the last checkpoint nor a witness (at
// one of known) is at. Callers hold p.mu.
func (p *AuditProjector) prune(known []int64) {
	keep := p.snaps[:0]
	for _, s := range p.snaps {
		if s.Size() == p.ckSize || slices.Contains(known, s.Size()) {
			keep = append(keep, s)
		}
	}
	clear(p.snaps[len(keep):])
	p.snaps = keep
}

// ProveTree implements witness.Prover: the consistency proof of the log's
// first oldSize records in its first size records, from the snapshot of
// oldSize records when there is one (the common case: the witness
// cosigned the last checkpoint), else from the log's start.
func (p *AuditProjector) ProveTree(ctx context.Context, size, oldSize int64) (tlog.TreeProof, error) {
	ranges, err := audit.ConsistencyRanges(oldSize, size)
	if err != nil || len(ranges) == 0 {
		return nil, err
	}
	p.mu.Lock()
	start := newChain(p.cfg.Tenant)
	if s := p.snapAt(oldSize); s != nil {
		start = *s
	}
	p.mu.Unlock()
	ps, err := logPass(ctx, p.cfg.Log, start, size, ranges, nil, -1)
	if err != nil {
		return nil, err
	}
	return ps.hashes, nil
}

// catchUp folds the records appended after the last one known.
func (p *AuditProjector) catchUp(ctx context.Context) error {
	p.mu.Lock()
	from := p.chain.lastSubjSeq + 1
	p.mu.Unlock()
	return p.cfg.Log.Records(ctx, p.cfg.Tenant, from, 0, func(r StoredRecord) error {
		p.mu.Lock()
		defer p.mu.Unlock()
		if err := p.chain.apply(r); err != nil {
			return err
		}
		if p.expect != nil && p.expect.Size == p.chain.Size() {
			cp := *p.expect
			p.expect = nil
			if err := p.chain.checkCheckpoint(cp); err != nil {
				return err
			}
			p.snapshot()
		}
		return nil
	})
}

// record appends one record per stored event, in order, chained to the
// log's tail, in atomic batches of at most MaxRecordBatch that never cross
// the next checkpoint's size (so checkpoints fall where they did when each
// record was its own append), and publishes the checkpoints that are due.
func (p *AuditProjector) record(ctx context.Context, sts []events.Stored) error {
	for {
		p.mu.Lock()
		// The chain may have moved past some of sts since they were read:
		// a lost race for an append or for a checkpoint reads the records
		// another replica wrote. Those events are recorded already.
		for len(sts) > 0 && p.chain.Size() > 0 && sts[0].Seq <= p.chain.LastEventSeq() {
			sts = sts[1:]
		}
		if len(sts) == 0 {
			p.mu.Unlock()
			return nil
		}
		index, prev, expected := p.chain.Size(), p.chain.PrevHash(), p.chain.lastSubjSeq
		n := min(len(sts), MaxRecordBatch)
		if every := int64(p.cfg.CheckpointEvery); every > 0 {
			if room := every - (index - p.ckSize); room > 0 && int64(n) > room {
				n = int(room)
			}
		}
		p.mu.Unlock()
		if n < MinRecordBatch {
			// A few records cost less one by one than one atomic batch,
			// which a single server stages on disk (docs/performance.md).
			n = 1
		}
		raws := make([][]byte, n)
		recs := make([]audit.Record, n)
		for i, st := range sts[:n] {
			rec, raw, err := audit.Seal(p.cfg.Tenant, index+int64(i), prev, st.Seq, st.Subject, st.Raw, st.Envelope)
			if err != nil {
				return fmt.Errorf("projections: audit record of event %d: %w", st.Seq, err)
			}
			recs[i], raws[i], prev = rec, raw, audit.HexHash(audit.RecordHash(raw))
		}
		var last uint64
		var err error
		if n == 1 {
			last, err = p.cfg.Log.Append(ctx, p.cfg.Tenant, expected, raws[0])
		} else {
			last, err = p.cfg.Log.AppendBatch(ctx, p.cfg.Tenant, expected, raws)
		}
		if err == nil {
			// An atomic batch is stored as one run of sequences.
			p.mu.Lock()
			for i := range raws {
				if err = p.chain.apply(StoredRecord{Seq: last - uint64(n-1-i), Raw: raws[i], Record: recs[i]}); err != nil {
					break
				}
				p.appended++
			}
			p.batches++
			p.mu.Unlock()
			if err != nil {
				return err
			}
			if err := p.checkpoint(ctx, false); err != nil {
				return err
			}
			sts = sts[n:]
			continue
		}
		// A conflict (another replica appended first) or an unknown outcome
		// (our batch may have been stored): read what the log holds now and
		// go on after the events it records.
		if errors.Is(err, events.ErrConflict) {
			p.mu.Lock()
			p.conflicts++
			p.mu.Unlock()
		}
		if cerr := p.catchUp(ctx); cerr != nil {
			return errors.Join(err, cerr)
		}
		if !errors.Is(err, events.ErrConflict) && p.lastEventSeq() < sts[len(sts)-1].Seq {
			return err
		}
	}
}

// checkpoint publishes a checkpoint of the whole log when one is due (or
// always when force is set and records are uncovered).
func (p *AuditProjector) checkpoint(ctx context.Context, force bool) error {
	p.mu.Lock()
	size := p.chain.Size()
	due := size > p.ckSize && (force || size-p.ckSize >= int64(p.cfg.CheckpointEvery) ||
		p.cfg.Clock.Now().Sub(p.ckTime) >= p.cfg.CheckpointInterval)
	if !due {
		p.mu.Unlock()
		return nil
	}
	root := p.chain.Root()
	expected := p.ckSeq
	p.snapshot()
	p.mu.Unlock()
	msg, err := audit.SignCheckpoint(audit.Checkpoint{Origin: audit.Origin(p.cfg.Tenant), Size: size, Root: root}, p.noteSigner)
	if err != nil {
		return err
	}
	msg = p.cosign(ctx, msg)
	seq, err := p.cfg.Log.AppendCheckpoint(ctx, p.cfg.Tenant, expected, msg)
	if err == nil {
		known := p.witnessSizes()
		p.mu.Lock()
		p.ckSize, p.ckSeq, p.ckTime = size, seq, p.cfg.Clock.Now()
		p.prune(known)
		p.mu.Unlock()
		return nil
	}
	// Another replica published one (or ours was stored and its ack lost):
	// adopt the log's last checkpoint after checking it against our tree
	// where it can be checked.
	cp, ok, cerr := p.cfg.Log.LastCheckpoint(ctx, p.cfg.Tenant)
	if cerr != nil || !ok {
		return errors.Join(err, cerr)
	}
	if cp.Checkpoint.Size > size {
		p.mu.Lock()
		p.expect = &cp.Checkpoint
		p.mu.Unlock()
		if cerr := p.catchUp(ctx); cerr != nil {
			return errors.Join(err, cerr)
		}
	}
	if cerr := p.checkAt(ctx, cp.Checkpoint); cerr != nil {
		return cerr
	}
	known := p.witnessSizes()
	p.mu.Lock()
	defer p.mu.Unlock()
	if cp.Seq != p.ckSeq {
		p.ckSize, p.ckSeq, p.ckTime = cp.Checkpoint.Size, cp.Seq, p.cfg.Clock.Now()
	}
	p.prune(known)
	if errors.Is(err, events.ErrConflict) {
		return nil
	}
	return err
}

// cosign asks every witness to cosign the signed checkpoint msg of the
// whole chain and returns it with the cosignatures that came back. A
// witness that refuses is logged: a refusal is what a witness is for (a
// log that shrank or forked since it last cosigned), and the checkpoint is
// appended without its cosignature, which an auditor's witness policy then
// refuses.
func (p *AuditProjector) cosign(ctx context.Context, msg []byte) []byte {
	timeout := p.cfg.WitnessTimeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	size := int64(-1)
	if cp, err := audit.ReadCheckpoint(msg); err == nil {
		size = cp.Size
	}
	var reports []WitnessReport
	for _, w := range p.cfg.Witnesses {
		wctx, cancel := context.WithTimeout(ctx, timeout)
		line, err := w.Submit(wctx, p, msg)
		cancel()
		p.mu.Lock()
		if err != nil {
			p.witnessErrors++
		} else {
			p.cosigned++
		}
		p.mu.Unlock()
		reports = append(reports, p.report(w, size, err))
		if err != nil {
			if p.cfg.Logf != nil {
				p.cfg.Logf("projections: audit of %s: witness %s: %v", p.cfg.Tenant, w.URL, err)
			}
			continue
		}
		msg = audit.AddCosignatures(msg, line)
	}
	p.witnessed(reports)
	return msg
}

// chain is a tenant's audit log as read: the fold of its records
// (audit.Chain, the rules the verifier applies to an export) and the
// stream sequence of the last one.
type chain struct {
	*audit.Chain
	lastSubjSeq uint64 // stream sequence of the last record (0 = none)
	rotation    int64  // index + 1 of the latest key rotation's record (0 = none)
}

func newChain(tenant string) chain { return chain{Chain: audit.NewChain(tenant)} }

// apply appends the next record of the log after checking that it
// continues the chain (audit.Chain.Append) and was stored after the last.
func (c *chain) apply(r StoredRecord) error {
	if r.Seq <= c.lastSubjSeq {
		return fmt.Errorf("projections: audit record at %d read after %d", r.Seq, c.lastSubjSeq)
	}
	if err := c.Append(r.Record, r.Raw); err != nil {
		return fmt.Errorf("projections: audit log corrupt at sequence %d: %w", r.Seq, err)
	}
	c.lastSubjSeq = r.Seq
	if r.Record.Subject == audit.KeyRotationSubject(c.Tenant) {
		c.rotation = r.Record.Index + 1
	}
	return nil
}

// checkCheckpoint checks a checkpoint read from the log against the
// records, when the chain is large enough to know its root.
func (c *chain) checkCheckpoint(cp audit.Checkpoint) error {
	if err := c.CheckCheckpoint(cp); err != nil {
		return fmt.Errorf("projections: audit log corrupt: checkpoint of size %d: %w", cp.Size, err)
	}
	return nil
}

// runLoop calls sync at start, linger after a message on subject (when nc
// is set) or on fed (the messages of that time are one wake-up), and every
// interval, until ctx is done.
func runLoop(ctx context.Context, nc *nats.Conn, fed <-chan struct{}, subject string, interval, linger time.Duration, logf func(string, ...any), sync func(context.Context) error) error {
	wake := make(chan struct{}, 1)
	if nc != nil {
		sub, err := nc.Subscribe(subject, func(*nats.Msg) {
			select {
			case wake <- struct{}{}:
			default:
			}
		})
		if err != nil {
			return fmt.Errorf("projections: subscribe %q: %w", subject, err)
		}
		defer func() { _ = sub.Unsubscribe() }()
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	var failing string // the error last logged: a lasting one is logged once
	for {
		err := sync(ctx)
		switch {
		case ctx.Err() != nil || logf == nil:
		case err != nil && err.Error() != failing:
			failing = err.Error()
			logf("projections: %v", err)
		case err == nil && failing != "":
			failing = ""
			logf("projections: %s resumed", subject)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		case <-fed:
		case <-t.C:
			continue
		}
		if linger > 0 {
			gather := time.NewTimer(linger)
			select {
			case <-ctx.Done():
				gather.Stop()
				return ctx.Err()
			case <-gather.C:
			}
			for _, c := range []<-chan struct{}{wake, fed} {
				select {
				case <-c:
				default:
				}
			}
		}
	}
}
