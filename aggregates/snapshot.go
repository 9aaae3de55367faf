package aggregates

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/kernel"
)

// Snapshots. A snapshot is the folded state of one subject at one of its
// sequences, with the event id stored there (the anchor):
//
//	{"v":1,"subject":S,"seq":N,"event_id":ID,"sha256":H,"key_id":K,"sig":G,"state":{...}}
//
// H is the SHA-256 of the state's bytes and G the runtime key's Ed25519
// signature over subject, seq, event id and H (see snapshotSigningBytes), so
// a snapshot is as trustworthy as the events, which the same key signs.
// A cold load reads the subject's latest snapshot, then the subject's events
// from N on: the first must be the anchor (sequence N, event id ID), the rest
// is the tail to fold. A snapshot is an optimization only: one that is
// missing, unreadable, for another subject, whose checksum, signature or
// anchor does not match, whose state does not decode strictly, fails Snapshotter.Rebuild or
// Ref.CheckState, or whose tail does not fold, is ignored and the whole
// subject is folded instead. Snapshots are written after the events they
// describe are stored, asynchronously and coalesced per subject, so the
// latest may lag: the longer tail costs time, never correctness.

// Snapshot is one subject's encoded snapshot.
type Snapshot struct {
	Subject string
	Data    []byte
}

// SnapshotStore keeps the latest snapshot of each subject. Implementations
// are safe for concurrent use; they need not be durable (a lost snapshot only
// makes a cold load fold more).
type SnapshotStore interface {
	// Get returns the latest snapshot of subject; found is false when
	// there is none.
	Get(ctx context.Context, subject string) (data []byte, found bool, err error)
	// Put stores snapshots, replacing each subject's previous one.
	Put(ctx context.Context, snaps []Snapshot) error
}

type snapshotDoc struct {
	V       int             `json:"v"`
	Subject string          `json:"subject"`
	Seq     uint64          `json:"seq"`
	EventID string          `json:"event_id"`
	SHA256  string          `json:"sha256"`
	KeyID   string          `json:"key_id"`
	Sig     string          `json:"sig"`
	State   json.RawMessage `json:"state"`
}

// snapshotSigningBytes is what a snapshot's signature covers.
func snapshotSigningBytes(d snapshotDoc) []byte {
	return []byte(fmt.Sprintf("ctx-snapshot-v%d\n%s\n%d\n%s\n%s\n%s", d.V, d.Subject, d.Seq, d.EventID, d.SHA256, d.KeyID))
}

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
// where event eventID is stored.
func EncodeSnapshot(signer events.Signer, subject string, seq uint64, eventID string, state []byte) ([]byte, error) {
	if len(signer.Key) != ed25519.PrivateKeySize {
		return nil, errors.New("aggregates: snapshot signer has no key")
	}
	sum := sha256.Sum256(state)
	d := snapshotDoc{V: 1, Subject: subject, Seq: seq, EventID: eventID, SHA256: hex.EncodeToString(sum[:]), KeyID: signer.KeyID, State: state}
	d.Sig = base64.RawURLEncoding.EncodeToString(ed25519.Sign(signer.Key, snapshotSigningBytes(d)))
	return json.Marshal(d)
}

// decodeSnapshot checks a snapshot of ref's subject, signed by pub, and
// decodes its state.
func decodeSnapshot(ref Ref, pub ed25519.PublicKey, data []byte) (State, snapshotDoc, error) {
	var doc snapshotDoc
	// The fields decoded here are what the signature is checked against,
	// and the state is decoded only once its checksum, which the signature
	// covers, matches: kernel.KnownJSON (no duplicate-member walk) suffices.
	if err := kernel.KnownJSON(data, &doc); err != nil {
		return nil, doc, err
	}
	switch {
	case doc.V != 1:
		return nil, doc, fmt.Errorf("snapshot version %d", doc.V)
	case doc.Subject != ref.Subject:
		return nil, doc, fmt.Errorf("snapshot of %q", doc.Subject)
	case doc.Seq == 0 || doc.EventID == "":
		return nil, doc, errors.New("snapshot without an anchor")
	case doc.KeyID != events.KeyIDFor(pub):
		return nil, doc, fmt.Errorf("snapshot signed by %q", doc.KeyID)
	}
	sig, err := base64.RawURLEncoding.DecodeString(doc.Sig)
	if err != nil || !ed25519.Verify(pub, snapshotSigningBytes(doc), sig) {
		return nil, doc, errors.New("snapshot signature does not verify")
	}
	sum := sha256.Sum256(doc.State)
	if hex.EncodeToString(sum[:]) != doc.SHA256 {
		return nil, doc, errors.New("snapshot checksum mismatch")
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

// putSnapshot queues a snapshot for the background writer, replacing any
// older one of the subject still queued.
func (e *Engine) putSnapshot(subject string, seq uint64, eventID string, state []byte) {
	data, err := EncodeSnapshot(e.Sealer.Signer, subject, seq, eventID, state)
	if err != nil {
		return
	}
	w := &e.snapw
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.queued == nil {
		w.queued = map[string]queuedSnap{}
	}
	if q, ok := w.queued[subject]; ok && q.seq >= seq {
		return
	}
	w.queued[subject] = queuedSnap{seq: seq, data: data}
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
	seq  uint64
	data []byte
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
		snaps := make([]Snapshot, 0, len(w.queued))
		for s, q := range w.queued {
			snaps = append(snaps, Snapshot{Subject: s, Data: q.data})
		}
		w.queued = nil
		w.mu.Unlock()
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
