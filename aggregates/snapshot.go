package aggregates

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
)

// Snapshots. A snapshot is the folded state of one subject at one of its
// sequences, with the event id stored there (the anchor), in the one signed
// format of events.EncodeSnapshot (JCS bytes, signed by the runtime key like
// the events), so a snapshot is as trustworthy as the events.
// A cold load reads the subject's latest snapshot, then the subject's events
// from its sequence on: the first must be the anchor, the rest is the tail
// to fold. A snapshot is an optimization only: one that is missing,
// unreadable, for another subject, whose encoding, signature or anchor does
// not match, whose state does not decode strictly, fails Snapshotter.Rebuild
// or Ref.CheckState, or whose tail does not fold, is ignored and the whole
// subject is folded instead. Snapshots are written after the events they
// describe are stored, asynchronously and coalesced per subject, so the
// latest may lag: the longer tail costs time, never correctness.

// Snapshot is one subject's encoded snapshot (events.Snapshot).
type Snapshot = events.Snapshot

// SnapshotStore keeps the latest snapshot of each subject
// (events.SnapshotStore).
type SnapshotStore = events.SnapshotStore

func (e *Engine) snapshots(ref Ref, st State) bool {
	if e.Snapshots == nil || !ref.Snapshot || e.Sealer == nil || len(e.Sealer.Signer.Key) != ed25519.PrivateKeySize {
		return false
	}
	_, ok := st.(Snapshotter)
	return ok
}

func (e *Engine) snapshotEvery() int {
	if e.SnapshotEvery > 0 {
		return e.SnapshotEvery
	}
	return DefaultSnapshotEvery
}

func marshalState(st State) ([]byte, error) { return json.Marshal(st) }

// EncodeSnapshot encodes and signs the state of subject at sequence seq,
// where event eventID is stored (events.EncodeSnapshot).
func EncodeSnapshot(signer codec.Signer, subject string, seq uint64, eventID string, state []byte) ([]byte, error) {
	return events.EncodeSnapshot(signer, subject, seq, eventID, state)
}

// decodeSnapshot checks a snapshot of ref's subject, signed by pub, and
// decodes its state.
func decodeSnapshot(ref Ref, pub ed25519.PublicKey, data []byte) (State, events.SnapshotDoc, error) {
	doc, err := events.ParseSnapshot(pub, ref.Subject, data)
	if err != nil {
		return nil, doc, err
	}
	st := ref.New()
	sn, ok := st.(Snapshotter)
	if !ok {
		return nil, doc, fmt.Errorf("state %T cannot be restored from a snapshot", st)
	}
	if err := kernel.KnownJSON(doc.State, sn); err != nil {
		return nil, doc, err
	}
	if err := sn.Rebuild(); err != nil {
		return nil, doc, err
	}
	if ref.CheckState != nil {
		if err := ref.CheckState(sn); err != nil {
			return nil, doc, err
		}
	}
	return sn, doc, nil
}

// fromSnapshot restores ref's state from its latest snapshot and the tail
// after it. ok is false when there is no usable snapshot.
func (e *Engine) fromSnapshot(ctx context.Context, ref Ref) (st State, seq uint64, n int, last string, ok bool) {
	data, found, err := e.Snapshots.Get(ctx, ref.Subject)
	if err != nil || !found {
		return nil, 0, 0, "", false
	}
	st, doc, err := decodeSnapshot(ref, e.Sealer.Signer.Key.Public().(ed25519.PublicKey), data)
	if err != nil {
		return nil, 0, 0, "", false
	}
	tail, err := e.Store.Read(ctx, ref.Subject, doc.Seq)
	if err != nil || len(tail) == 0 || tail[0].Seq != doc.Seq || tail[0].Envelope.EventID != doc.EventID {
		return nil, 0, 0, "", false
	}
	seq, last = doc.Seq, doc.EventID
	for _, s := range tail[1:] {
		if err := foldOne(ref, st, s); err != nil {
			return nil, 0, 0, "", false
		}
		seq, last = s.Seq, s.Envelope.EventID
	}
	return st, seq, len(tail) - 1, last, true
}

// snapshotLoaded writes a snapshot of a state just loaded (n events folded,
// the last one lastID at seq) when it holds SnapshotEvery events after its
// last snapshot, and returns how many it holds after the latest.
func (e *Engine) snapshotLoaded(ref Ref, st State, seq uint64, lastID string, since, n int) int {
	if n == 0 || since < e.snapshotEvery() || !e.snapshots(ref, st) {
		return since
	}
	data, err := marshalState(st)
	if err != nil {
		return since
	}
	e.putSnapshot(ref.Subject, seq, lastID, data)
	return 0
}

// putSnapshot queues a snapshot of state (the subject's state at seq,
// where event eventID is stored) for the background writer, replacing any
// older one of the subject still queued. The writer encodes and signs it:
// a hot ledger's state is large, and canonicalizing it on the committer
// held up every group commit behind it, while a snapshot superseded before
// the writer reaches it need not be encoded at all.
func (e *Engine) putSnapshot(subject string, seq uint64, eventID string, state []byte) {
	w := &e.snapw
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.queued == nil {
		w.queued = map[string]queuedSnap{}
	}
	if q, ok := w.queued[subject]; ok && q.seq >= seq {
		return
	}
	w.queued[subject] = queuedSnap{seq: seq, eventID: eventID, state: state}
	if !w.running {
		w.running = true
		go e.writeSnapshots()
	}
}

// FlushSnapshots waits until every snapshot queued so far was handed to the
// SnapshotStore (tests and benchmarks, before they measure cold loads).
func (e *Engine) FlushSnapshots() {
	for {
		e.snapw.mu.Lock()
		idle := !e.snapw.running
		e.snapw.mu.Unlock()
		if idle {
			return
		}
		time.Sleep(200 * time.Microsecond)
	}
}

type snapWriter struct {
	mu      sync.Mutex
	queued  map[string]queuedSnap
	running bool
}

type queuedSnap struct {
	seq     uint64
	eventID string
	state   []byte
}

func (e *Engine) writeSnapshots() {
	w := &e.snapw
	for {
		w.mu.Lock()
		if len(w.queued) == 0 {
			w.running = false
			w.mu.Unlock()
			return
		}
		queued := w.queued
		w.queued = nil
		w.mu.Unlock()
		snaps := make([]Snapshot, 0, len(queued))
		for s, q := range queued {
			if data, err := EncodeSnapshot(e.Sealer.Signer, s, q.seq, q.eventID, q.state); err == nil {
				snaps = append(snaps, Snapshot{Subject: s, Data: data})
			}
		}
		if len(snaps) == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := e.Snapshots.Put(ctx, snaps); err == nil {
			e.stats.snapshotsPut.Add(uint64(len(snaps)))
		}
		cancel()
	}
}

// MemSnapshots is an in-memory SnapshotStore (tests, benchmarks).
type MemSnapshots struct {
	mu sync.Mutex
	m  map[string][]byte
}

// Get implements SnapshotStore.
func (m *MemSnapshots) Get(_ context.Context, subject string) ([]byte, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.m[subject]
	return bytes.Clone(b), ok, nil
}

// Put implements SnapshotStore.
func (m *MemSnapshots) Put(_ context.Context, snaps []Snapshot) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = map[string][]byte{}
	}
	for _, s := range snaps {
		m.m[s.Subject] = bytes.Clone(s.Data)
	}
	return nil
}

// Load folds ref's subject from the store as a cold load does (from its
// snapshot when there is a usable one, then the tail) without using or
// changing warm state, and returns the state and its last sequence
// (recovery tools, benchmarks).
func (e *Engine) Load(ctx context.Context, ref Ref) (State, uint64, error) {
	st, seq, _, err := e.load(ctx, ref, nil, 0, 0)
	return st, seq, err
}
