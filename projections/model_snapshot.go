package projections

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/kernel"
)

// ModelSnapshotKey is the key of the read model's snapshot in the
// SnapshotStore. The model's state may exceed one message, so it is stored
// in parts (ModelSnapshotKey + ".p<i>", at most modelPartSize bytes each)
// and the key holds the signed snapshot (events.EncodeSnapshot) of the list
// of the parts' SHA-256, anchored to the last valid event folded.
const ModelSnapshotKey = "ctx.model.v1"

const modelPartSize = 512 * 1024

var errNoSnapshot = errors.New("no snapshot stored")

// modelHead is the state of the signed head snapshot.
type modelHead struct {
	Seq   uint64   `json:"seq"` // the model's sequence (may follow the anchor: refused messages)
	Size  int      `json:"size"`
	Parts []string `json:"parts"` // SHA-256 hex of each part, in order
}

func (m *Model) snapshotting() bool {
	return m.cfg.Snapshots != nil && len(m.cfg.Signer.Key) == ed25519.PrivateKeySize
}

// snapshotSpacing bounds the time spent encoding snapshots: the next one is
// due no sooner than this many times the last encoding took after it. A
// state of 13 MB took 0.15-0.4 s to encode under 64 agents' proposals; every
// 10,000 events (about 1.5 s) that was 5-6% of the runtime's CPU. Spaced, it
// is at most a fortieth of one core, and a restart folds at most
// max(SnapshotEvery events, 40 encodings' time of traffic) after the snapshot.
const snapshotSpacing = 40

// writeSnapshot encodes the model and hands it to a background writer (at
// most one at a time; a snapshot due while one is written is skipped, the
// next one is due SnapshotEvery events later). Called with syncMu held.
func (m *Model) writeSnapshot() {
	m.snapMu.Lock()
	if m.snapRunning {
		m.snapMu.Unlock()
		return
	}
	m.snapRunning = true
	m.snapMu.Unlock()
	m.snapAt = time.Now()
	m.mu.RLock()
	state, err := json.Marshal(m.st)
	anchor, seq := m.st.Anchor, m.st.Seq
	m.mu.RUnlock()
	m.snapCost = time.Since(m.snapAt)
	if err != nil || anchor.Seq == 0 {
		m.snapDone(false)
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := m.putSnapshot(ctx, state, anchor, seq)
		if err != nil {
			m.cfg.Logf("projections: read model snapshot: %v", err)
		}
		m.snapDone(err == nil)
	}()
}

func (m *Model) snapDone(ok bool) {
	m.snapMu.Lock()
	m.snapRunning = false
	if ok {
		m.snapStats.Written++
	}
	m.snapMu.Unlock()
}

// FlushSnapshot writes a snapshot of the model now and waits for it (tests,
// shutdown).
func (m *Model) FlushSnapshot(ctx context.Context) error {
	if !m.snapshotting() {
		return errors.New("projections: the read model has no snapshot store")
	}
	m.syncMu.Lock()
	defer m.syncMu.Unlock()
	m.mu.RLock()
	state, err := json.Marshal(m.st)
	anchor, seq := m.st.Anchor, m.st.Seq
	m.mu.RUnlock()
	if err != nil {
		return err
	}
	if anchor.Seq == 0 {
		return errors.New("projections: nothing folded yet")
	}
	if err := m.putSnapshot(ctx, state, anchor, seq); err != nil {
		return err
	}
	m.since = 0
	m.snapDone(true)
	return nil
}

func (m *Model) putSnapshot(ctx context.Context, state []byte, anchor modelAnchor, seq uint64) error {
	head := modelHead{Seq: seq, Size: len(state), Parts: []string{}}
	var parts []events.Snapshot
	for i := 0; i < len(state); i += m.partSize {
		p := state[i:min(i+m.partSize, len(state))]
		sum := sha256.Sum256(p)
		head.Parts = append(head.Parts, hex.EncodeToString(sum[:]))
		parts = append(parts, events.Snapshot{Subject: ModelSnapshotKey + ".p" + strconv.Itoa(len(parts)), Data: p})
	}
	// The parts first: a head is written only once what it names is
	// stored.
	for _, p := range parts {
		if err := m.cfg.Snapshots.Put(ctx, []events.Snapshot{p}); err != nil {
			return err
		}
	}
	hb, err := json.Marshal(head)
	if err != nil {
		return err
	}
	doc, err := events.EncodeSnapshot(m.cfg.Signer, ModelSnapshotKey, anchor.Seq, anchor.EventID, hb)
	if err != nil {
		return err
	}
	return m.cfg.Snapshots.Put(ctx, []events.Snapshot{{Subject: ModelSnapshotKey, Data: doc}})
}

// loadSnapshot replaces the (empty) model with its latest usable snapshot.
// Any defect (missing part, checksum, signature, anchor not in the store)
// leaves the model empty: the fold then starts from the stream's start.
func (m *Model) loadSnapshot(ctx context.Context) {
	if !m.snapshotting() {
		return
	}
	st, err := m.readSnapshot(ctx)
	if errors.Is(err, errNoSnapshot) {
		return
	}
	if err != nil {
		m.cfg.Logf("projections: read model: no usable snapshot, folding the whole stream: %v", err)
		return
	}
	m.mu.Lock()
	m.st = st
	m.mu.Unlock()
	m.snapMu.Lock()
	m.snapStats.Loaded, m.snapStats.LoadedAt = true, st.Seq
	m.snapMu.Unlock()
}

func (m *Model) readSnapshot(ctx context.Context) (*modelState, error) {
	data, found, err := m.cfg.Snapshots.Get(ctx, ModelSnapshotKey)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, errNoSnapshot
	}
	doc, err := events.ParseSnapshot(m.cfg.Signer.Key.Public().(ed25519.PublicKey), ModelSnapshotKey, data)
	if err != nil {
		return nil, err
	}
	var head modelHead
	if err := kernel.KnownJSON(doc.State, &head); err != nil {
		return nil, fmt.Errorf("head: %w", err)
	}
	var state bytes.Buffer
	for i, want := range head.Parts {
		p, found, err := m.cfg.Snapshots.Get(ctx, ModelSnapshotKey+".p"+strconv.Itoa(i))
		if err != nil || !found {
			return nil, fmt.Errorf("part %d: missing (%v)", i, err)
		}
		sum := sha256.Sum256(p)
		if hex.EncodeToString(sum[:]) != want {
			return nil, fmt.Errorf("part %d: checksum mismatch", i)
		}
		state.Write(p)
	}
	if state.Len() != head.Size {
		return nil, errors.New("size mismatch")
	}
	st := &modelState{}
	if err := kernel.KnownJSON(state.Bytes(), st); err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	switch {
	case st.V != modelVersion:
		return nil, fmt.Errorf("state version %d", st.V)
	case st.Anchor.Seq != doc.Seq || st.Anchor.EventID != doc.EventID || st.Seq != head.Seq || st.Seq < st.Anchor.Seq:
		return nil, errors.New("state does not match its head")
	}
	if st.Tenants == nil {
		st.Tenants = map[string]*tenantState{}
	}
	for id, ts := range st.Tenants {
		if ts == nil {
			return nil, fmt.Errorf("tenant %q: empty", id)
		}
		if ts.Ledgers == nil {
			ts.Ledgers = map[string]*kernel.Ledger{}
		}
		if ts.Ops == nil {
			ts.Ops = map[string]*opState{}
		}
		if ts.Attempts == nil {
			ts.Attempts = map[string]string{}
		}
		if ts.Reasons == nil {
			ts.Reasons = map[string]string{}
		}
		for subject, l := range ts.Ledgers {
			if l == nil {
				return nil, fmt.Errorf("ledger %s: empty", subject)
			}
			if err := l.Rebuild(); err != nil {
				return nil, fmt.Errorf("ledger %s: %w", subject, err)
			}
		}
		for subject, o := range ts.Ops {
			if o == nil {
				return nil, fmt.Errorf("operation %s: empty", subject)
			}
			if o.ReservedAt == nil {
				o.ReservedAt = map[string]time.Time{}
			}
			if o.StartedAt == nil {
				o.StartedAt = map[string]time.Time{}
			}
		}
	}
	// The anchor must be the event the store holds at that sequence: a
	// snapshot of another stream (or of one since recreated) is useless.
	at, err := m.cfg.Store.Read(ctx, st.Anchor.Subject, st.Anchor.Seq)
	if err != nil {
		return nil, fmt.Errorf("anchor: %w", err)
	}
	if len(at) == 0 || at[0].Seq != st.Anchor.Seq || at[0].Envelope.EventID != st.Anchor.EventID {
		return nil, errors.New("anchor is not in the store")
	}
	return st, nil
}
