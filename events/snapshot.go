package events

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
)

// Snapshots. A snapshot is the folded state of something (one subject's
// aggregate, or a read model) at a stream sequence, anchored to the event
// stored there, and signed by the runtime key like every event:
//
//	{"event_id":ID,"key_id":K,"seq":N,"sig":G,"state":{...},"subject":S,"v":2}
//
// The document is stored as its JCS bytes (kernel.Canonical), and G is the
// Ed25519 signature over the JCS bytes of the same document without "sig".
// ParseSnapshot decodes, re-encodes and compares, so a snapshot has exactly
// one valid encoding. A snapshot is a cache: one that does not parse or
// verify is ignored and the state is folded from the events instead.

// SnapshotVersion is the version of the snapshot format.
const SnapshotVersion = 2

// Snapshot is one encoded snapshot, stored under Subject (the subject it
// describes, or a read model's key).
type Snapshot struct {
	Subject string
	Data    []byte
}

// SnapshotStore keeps the latest snapshot stored under each subject.
// Implementations are safe for concurrent use; they need not be durable (a
// lost snapshot only makes a cold load fold more).
type SnapshotStore interface {
	// Get returns the latest snapshot of subject; found is false when
	// there is none.
	Get(ctx context.Context, subject string) (data []byte, found bool, err error)
	// Put stores snapshots, replacing each subject's previous one.
	Put(ctx context.Context, snaps []Snapshot) error
}

// SnapshotDoc is the snapshot format: one struct, one encoding.
type SnapshotDoc struct {
	V       int             `json:"v"`
	Subject string          `json:"subject"`
	Seq     uint64          `json:"seq"`
	EventID string          `json:"event_id"`
	KeyID   string          `json:"key_id"`
	Sig     string          `json:"sig,omitempty"`
	State   json.RawMessage `json:"state"`
}

// snapshotSigningBytes is what a snapshot's signature covers: the JCS bytes
// of the document without its signature.
func snapshotSigningBytes(d SnapshotDoc) ([]byte, error) {
	d.Sig = ""
	return snapshotJCS(d)
}

// snapshotJCS is kernel.Canonical(d). A snapshot's state is most of its
// bytes (a hot ledger's is a thousand receipts), and the state is stored
// canonical already, so when kernel.CanonicalPrefix finds it so and every
// other member is plain, the document is put together around the state by
// kernel.CanonicalObject instead of parsing the state again; anything else
// goes through kernel.Canonical. FuzzSnapshotJCS holds the two to the same
// bytes.
func snapshotJCS(d SnapshotDoc) ([]byte, error) {
	if b, ok := spliceSnapshot(d); ok {
		return b, nil
	}
	return kernel.Canonical(d)
}

// EncodeCanonical implements kernel.CanonicalEncoder (snapshotJCS), so
// kernel.DecodeCanonical checks a stored snapshot without a JCS parse of
// its state.
func (d *SnapshotDoc) EncodeCanonical() ([]byte, error) { return snapshotJCS(*d) }

func spliceSnapshot(d SnapshotDoc) ([]byte, bool) {
	// A sequence past 2^53 is left to kernel.Canonical (and int64(d.Seq)
	// below stays exact).
	if n, ok := kernel.CanonicalPrefix(d.State); !ok || n != len(d.State) || d.Seq >= 1<<53 {
		return nil, false
	}
	v, okV := kernel.CanonicalInt(int64(d.V))
	seq, okSeq := kernel.CanonicalInt(int64(d.Seq))
	if !okV || !okSeq {
		return nil, false
	}
	members := []kernel.Member{{Name: "v", Value: v}, {Name: "seq", Value: seq}, {Name: "state", Value: d.State}}
	strs := [][2]string{{"subject", d.Subject}, {"event_id", d.EventID}, {"key_id", d.KeyID}}
	if d.Sig != "" { // omitempty
		strs = append(strs, [2]string{"sig", d.Sig})
	}
	for _, m := range strs {
		b, ok := kernel.CanonicalString(m[1])
		if !ok {
			return nil, false
		}
		members = append(members, kernel.Member{Name: m[0], Value: b})
	}
	return kernel.CanonicalObject(members)
}

// EncodeSnapshot encodes and signs state (a JSON value), the state of
// subject at sequence seq, where event eventID is stored.
func EncodeSnapshot(signer codec.Signer, subject string, seq uint64, eventID string, state []byte) ([]byte, error) {
	if len(signer.Key) != ed25519.PrivateKeySize {
		return nil, errors.New("events: snapshot signer has no key")
	}
	if seq == 0 || eventID == "" {
		return nil, errors.New("events: snapshot without an anchor")
	}
	// The state is canonicalized once here; both encodings below are then
	// put together around it.
	if n, ok := kernel.CanonicalPrefix(state); !ok || n != len(state) {
		canon, err := kernel.Canonical(json.RawMessage(state))
		if err != nil {
			return nil, fmt.Errorf("events: snapshot: %w", err)
		}
		state = canon
	}
	d := SnapshotDoc{V: SnapshotVersion, Subject: subject, Seq: seq, EventID: eventID, KeyID: signer.KeyID, State: state}
	msg, err := snapshotSigningBytes(d)
	if err != nil {
		return nil, fmt.Errorf("events: snapshot: %w", err)
	}
	d.Sig = base64.RawURLEncoding.EncodeToString(codec.SignBytes(signer.Key, msg))
	return snapshotJCS(d)
}

// ParseSnapshot parses a snapshot of subject signed by pub: strictly (one
// object, known members, its exact JCS encoding), with a valid anchor and a
// signature that verifies. The state is returned as stored (canonical JSON);
// decode it with kernel.KnownJSON.
func ParseSnapshot(pub ed25519.PublicKey, subject string, data []byte) (SnapshotDoc, error) {
	var d SnapshotDoc
	if err := kernel.DecodeCanonical(data, &d); err != nil {
		return d, fmt.Errorf("events: snapshot: %w", err)
	}
	switch {
	case d.V != SnapshotVersion:
		return d, fmt.Errorf("events: snapshot version %d", d.V)
	case d.Subject != subject:
		return d, fmt.Errorf("events: snapshot of %q, not %q", d.Subject, subject)
	case d.Seq == 0 || d.EventID == "":
		return d, errors.New("events: snapshot without an anchor")
	case d.KeyID != codec.KeyIDFor(pub):
		return d, fmt.Errorf("events: snapshot signed by %q", d.KeyID)
	}
	sig, err := base64.RawURLEncoding.DecodeString(d.Sig)
	if err != nil {
		return d, errors.New("events: snapshot signature does not verify")
	}
	msg, err := snapshotSigningBytes(d)
	if err != nil || !codec.VerifyBytes(pub, msg, sig) {
		return d, errors.New("events: snapshot signature does not verify")
	}
	return d, nil
}
