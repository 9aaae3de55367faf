package audit

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/contextos/ledger/events/codec"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// AddCheckpoint is the body of a C2SP tlog-witness add-checkpoint request:
// the size of the last checkpoint the witness cosigned for the log, the
// RFC 6962 consistency proof from that size, and the new signed
// checkpoint. Its wire form is "old <size>\n", one base64 hash per line, an
// empty line, then the note.
type AddCheckpoint struct {
	OldSize int64
	Proof   tlog.TreeProof
	Note    []byte
}

// MaxProofLines bounds the consistency proof of a request (the spec's 63).
const MaxProofLines = 63

// Marshal returns the wire form of a.
func (a AddCheckpoint) Marshal() []byte {
	b := fmt.Appendf(nil, "old %d\n", a.OldSize)
	for _, h := range a.Proof {
		b = append(b, h.String()...)
		b = append(b, '\n')
	}
	b = append(b, '\n')
	return append(b, a.Note...)
}

// ParseAddCheckpoint parses an add-checkpoint body strictly (canonical
// decimal and base64, at most MaxProofLines hashes).
func ParseAddCheckpoint(b []byte) (AddCheckpoint, error) {
	if len(b) > MaxNoteSize+8*1024 {
		return AddCheckpoint{}, errors.New("add-checkpoint: body too large")
	}
	head, rest, ok := bytes.Cut(b, []byte("\n"))
	s, isOld := strings.CutPrefix(string(head), "old ")
	if !ok || !isOld {
		return AddCheckpoint{}, errors.New("add-checkpoint: the first line is not \"old <size>\"")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != s {
		return AddCheckpoint{}, errors.New("add-checkpoint: old size is not a canonical decimal")
	}
	a := AddCheckpoint{OldSize: n}
	for {
		line, after, ok := bytes.Cut(rest, []byte("\n"))
		if !ok {
			return AddCheckpoint{}, errors.New("add-checkpoint: no empty line before the checkpoint")
		}
		rest = after
		if len(line) == 0 {
			break
		}
		if len(a.Proof) == MaxProofLines {
			return AddCheckpoint{}, fmt.Errorf("add-checkpoint: more than %d proof lines", MaxProofLines)
		}
		h, err := base64.StdEncoding.Strict().DecodeString(string(line))
		if err != nil || len(h) != tlog.HashSize || base64.StdEncoding.EncodeToString(h) != string(line) {
			return AddCheckpoint{}, errors.New("add-checkpoint: a proof line is not base64 of 32 bytes")
		}
		var x tlog.Hash
		copy(x[:], h)
		a.Proof = append(a.Proof, x)
	}
	a.Note = rest
	return a, nil
}

// WitnessError is a refused add-checkpoint, with the HTTP status the C2SP
// tlog-witness protocol gives it: 400 (old size larger than the
// checkpoint), 403 (no valid signature by the log's key), 404 (unknown
// log), 409 (old size is not the witness's, or the same size and another
// root; Size is the witness's), 422 (the consistency proof does not
// verify).
type WitnessError struct {
	Status int
	Size   int64 // the witness's size for the log, with 409
	Reason string
}

// Error implements error.
func (e *WitnessError) Error() string { return fmt.Sprintf("witness: %d: %s", e.Status, e.Reason) }

// WitnessState is what a witness remembers, per log origin: the last
// checkpoint it cosigned and the key that signed it. A witness persists it
// before it answers.
type WitnessState map[string]WitnessLog

// WitnessLog is a witness's state of one log.
type WitnessLog struct {
	// Key is the note verifier key of the log key that signed Checkpoint:
	// one of the configured keys, or the new key of a key rotation the
	// witness verified in the log (AddRotated).
	Key        string
	Checkpoint []byte // the last checkpoint cosigned, as the log signed it
}

// Witness cosigns a log's checkpoints only after checking that each is
// consistent with the last one it cosigned for that log: the C2SP
// tlog-witness add-checkpoint rules, without the HTTP. A log is trusted
// under its configured keys and under the key of the last checkpoint
// cosigned, which a key rotation recorded in the log itself hands on
// (AddRotated). Safe for concurrent use; checks and state updates are
// atomic.
type Witness struct {
	cosigner *Cosigner
	logs     map[string][]string // origin -> its configured note verifier keys
	persist  func(WitnessState) error

	mu    sync.Mutex
	state WitnessState
}

// NewWitness returns a witness cosigning with c for the logs whose note
// verifier keys are given (one or more per origin: a log's old and new
// keys may both be configured), starting from state (nil: has seen
// nothing). persist is called with the new state before a cosignature is
// returned; an error refuses the cosignature. A log of the state keeps the
// key it recorded, configured or not: it was configured or handed on by a
// rotation the witness verified.
func NewWitness(c *Cosigner, logKeys []string, state WitnessState, persist func(WitnessState) error) (*Witness, error) {
	if c == nil || c.key == nil {
		return nil, errors.New("audit: NewWitness: needs a cosigner with its private key")
	}
	w := &Witness{cosigner: c, logs: map[string][]string{}, persist: persist, state: WitnessState{}}
	for _, k := range logKeys {
		v, err := note.NewVerifier(k)
		if err != nil {
			return nil, fmt.Errorf("audit: witness log key %q: %w", k, err)
		}
		if !slices.Contains(w.logs[v.Name()], k) {
			w.logs[v.Name()] = append(w.logs[v.Name()], k)
		}
	}
	for origin, l := range state {
		if _, ok := w.logs[origin]; !ok {
			return nil, fmt.Errorf("audit: witness state of %q: the log is not configured", origin)
		}
		keys := w.logs[origin]
		if l.Key != "" {
			keys = []string{l.Key}
		}
		_, key, err := openNote(origin, l.Checkpoint, keys)
		if err != nil {
			return nil, fmt.Errorf("audit: witness state of %q: %w", origin, err)
		}
		w.state[origin] = WitnessLog{Key: key, Checkpoint: l.Checkpoint}
	}
	return w, nil
}

// trusted returns the keys origin's checkpoints may be signed with: the
// configured ones and the key of the last checkpoint cosigned. Callers
// hold w.mu.
func (w *Witness) trusted(origin string) []string {
	keys := slices.Clone(w.logs[origin])
	if l, ok := w.state[origin]; ok && !slices.Contains(keys, l.Key) {
		keys = append(keys, l.Key)
	}
	return keys
}

// openNote verifies a note of origin by one of keys and returns its
// checkpoint and the key that signed it.
func openNote(origin string, msg []byte, keys []string) (Checkpoint, string, error) {
	if len(keys) == 0 {
		return Checkpoint{}, "", &WitnessError{Status: 404, Reason: fmt.Sprintf("unknown log %q", origin)}
	}
	var vs []note.Verifier
	byHash := map[uint32]string{}
	for _, k := range keys {
		v, err := note.NewVerifier(k)
		if err != nil {
			return Checkpoint{}, "", &WitnessError{Status: 403, Reason: err.Error()}
		}
		if _, dup := byHash[v.KeyHash()]; dup {
			continue
		}
		byHash[v.KeyHash()] = k
		vs = append(vs, v)
	}
	n, err := note.Open(msg, note.VerifierList(vs...))
	if err != nil {
		return Checkpoint{}, "", &WitnessError{Status: 403, Reason: fmt.Sprintf("no valid signature of log %q: %v", origin, err)}
	}
	c, err := ParseCheckpointText([]byte(n.Text))
	if err != nil || c.Origin != origin {
		return Checkpoint{}, "", &WitnessError{Status: 403, Reason: fmt.Sprintf("not a checkpoint of %q", origin)}
	}
	return c, byHash[n.Sigs[0].Hash], nil
}

// Last returns the last checkpoint the witness cosigned for origin.
func (w *Witness) Last(origin string) (Checkpoint, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	l, ok := w.state[origin]
	if !ok {
		return Checkpoint{}, false
	}
	c, err := ReadCheckpoint(l.Checkpoint)
	return c, err == nil
}

// Key returns the log key the witness last cosigned a checkpoint of origin
// under ("" when it cosigned none).
func (w *Witness) Key(origin string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.state[origin].Key
}

// Add checks a request and returns the cosignature line, or a
// *WitnessError saying why not: a shrunk checkpoint, a fork (a proof that
// does not verify, or the same size with another root), an old size that is
// not the witness's, a checkpoint no trusted key of its log signed (403:
// a log whose key was rotated submits with AddRotated).
func (w *Witness) Add(req AddCheckpoint) ([]byte, error) {
	return w.add(req, nil)
}

// AddRotated is Add for a checkpoint signed by a key the witness does not
// trust yet: it trusts it when the checkpoint includes (by the inclusion
// proof of rot) the audit record of a key rotation to that key, signed by
// a key the witness trusts for the log. A rotation asserted by an operator
// (the old key lost) proves nothing to a witness and is refused (403): its
// operator adds the new key to the witness's configuration instead.
func (w *Witness) AddRotated(rot KeyChange, req AddCheckpoint) ([]byte, error) {
	return w.add(req, &rot)
}

// KeyChange is the audit record of a key rotation and its inclusion proof
// in the checkpoint it comes with (the leaf at Index).
type KeyChange struct {
	Index  int64
	Record []byte // the canonical audit record (Encode)
	Proof  tlog.RecordProof
}

// newKey checks a key change for the checkpoint c and returns the note
// verifier key it hands the log to. Callers hold w.mu.
func (w *Witness) newKey(c Checkpoint, rot KeyChange) (string, error) {
	deny := func(format string, args ...any) (string, error) {
		return "", &WitnessError{Status: 403, Reason: "key rotation: " + fmt.Sprintf(format, args...)}
	}
	rec, env, err := Parse(rot.Record)
	if err != nil {
		return deny("%v", err)
	}
	if Origin(rec.Tenant) != c.Origin || rec.Index != rot.Index {
		return deny("the record is not record %d of %q", rot.Index, c.Origin)
	}
	k, err := ParseKeyRotation(env)
	if err != nil {
		return deny("%v", err)
	}
	if k.AssertedBy != "" {
		return deny("asserted by %s, not signed by the old key: the witness's operator must add the new key", k.AssertedBy)
	}
	from, to, _, err := k.PublicKeys()
	if err != nil {
		return deny("%v", err)
	}
	fromKey, err := NoteVerifierKey(c.Origin, from)
	if err != nil {
		return deny("%v", err)
	}
	if !slices.Contains(w.trusted(c.Origin), fromKey) {
		return deny("it retires a key the witness does not trust for %q", c.Origin)
	}
	if err := VerifyEvent(rec, env, codec.Keyring{codec.KeyIDFor(from): from}); err != nil {
		return deny("%v", err)
	}
	if err := tlog.CheckRecord(rot.Proof, c.Size, c.Root, rot.Index, RecordHash(rot.Record)); err != nil {
		return deny("the record is not in the checkpoint: %v", err)
	}
	return NoteVerifierKey(c.Origin, to)
}

func (w *Witness) add(req AddCheckpoint, rot *KeyChange) ([]byte, error) {
	c, err := ReadCheckpoint(req.Note)
	if err != nil {
		return nil, &WitnessError{Status: 403, Reason: err.Error()}
	}
	if _, ok := w.logs[c.Origin]; !ok {
		return nil, &WitnessError{Status: 404, Reason: fmt.Sprintf("unknown log %q", c.Origin)}
	}
	if req.OldSize > c.Size {
		return nil, &WitnessError{Status: 400, Reason: fmt.Sprintf("old size %d is larger than the checkpoint's %d", req.OldSize, c.Size)}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	keys := w.trusted(c.Origin)
	if rot != nil {
		k, err := w.newKey(c, *rot)
		if err != nil {
			return nil, err
		}
		keys = []string{k}
	}
	_, signer, err := openNote(c.Origin, req.Note, keys)
	if err != nil {
		return nil, err
	}
	// A log the witness has seen nothing of is the empty tree.
	last := Checkpoint{Origin: c.Origin, Root: emptyRoot()}
	if l, ok := w.state[c.Origin]; ok {
		if last, err = ReadCheckpoint(l.Checkpoint); err != nil {
			return nil, err
		}
	}
	switch {
	case req.OldSize != last.Size:
		reason := fmt.Sprintf("old size %d, the last checkpoint cosigned for %q has %d records", req.OldSize, c.Origin, last.Size)
		if c.Size < last.Size {
			reason = fmt.Sprintf("the log shrank: a checkpoint of %d records after one of %d was cosigned", c.Size, last.Size)
		}
		return nil, &WitnessError{Status: 409, Size: last.Size, Reason: reason}
	case c.Size == 0 && c.Root != emptyRoot():
		return nil, &WitnessError{Status: 422, Reason: "a checkpoint of size 0 must have the empty tree's root"}
	case last.Size == 0 && len(req.Proof) != 0:
		return nil, &WitnessError{Status: 422, Reason: "a proof from size 0 must be empty"}
	case last.Size == c.Size && last.Root != c.Root:
		// C2SP tlog-witness: the same size with another root is a 409.
		return nil, &WitnessError{Status: 409, Size: last.Size, Reason: fmt.Sprintf("fork: a checkpoint of %d records with another root than the one cosigned", c.Size)}
	case last.Size > 0 && last.Size < c.Size:
		if err := tlog.CheckTree(req.Proof, c.Size, c.Root, last.Size, last.Root); err != nil {
			return nil, &WitnessError{Status: 422, Reason: fmt.Sprintf("fork: the %d records cosigned are not a prefix of the %d records: %v", last.Size, c.Size, err)}
		}
	}
	line, err := w.cosigner.Cosign(c.Text())
	if err != nil {
		return nil, err
	}
	next := maps.Clone(w.state)
	if next == nil {
		next = WitnessState{}
	}
	next[c.Origin] = WitnessLog{Key: signer, Checkpoint: req.Note}
	if w.persist != nil {
		if err := w.persist(next); err != nil {
			return nil, fmt.Errorf("audit: witness: persist: %w", err)
		}
	}
	w.state = next
	return line, nil
}

// emptyRoot is the RFC 6962 hash of the empty tree, SHA-256 of nothing.
func emptyRoot() tlog.Hash {
	h, _ := tlog.TreeHash(0, nil)
	return h
}

// MaxRotationRecord bounds the audit record of a key rotation in an
// add-rotation request.
const MaxRotationRecord = 8 * 1024

// MarshalRotated returns the body of an add-rotation request: the key
// change ("rotation <index>", the record in standard base64, one proof
// hash per line, an empty line) followed by the add-checkpoint body of the
// checkpoint it comes with.
func MarshalRotated(rot KeyChange, req AddCheckpoint) []byte {
	b := fmt.Appendf(nil, "rotation %d\n%s\n", rot.Index, base64.StdEncoding.EncodeToString(rot.Record))
	for _, h := range rot.Proof {
		b = append(b, h.String()...)
		b = append(b, '\n')
	}
	b = append(b, '\n')
	return append(b, req.Marshal()...)
}

// ParseRotated parses an add-rotation body strictly (MarshalRotated's
// layout, canonical decimal and base64, at most MaxProofLines hashes).
func ParseRotated(b []byte) (KeyChange, AddCheckpoint, error) {
	fail := func(format string, args ...any) (KeyChange, AddCheckpoint, error) {
		return KeyChange{}, AddCheckpoint{}, fmt.Errorf("add-rotation: "+format, args...)
	}
	if len(b) > MaxNoteSize+16*1024+2*MaxRotationRecord {
		return fail("body too large")
	}
	head, rest, ok := bytes.Cut(b, []byte("\n"))
	s, isRot := strings.CutPrefix(string(head), "rotation ")
	if !ok || !isRot {
		return fail("the first line is not \"rotation <index>\"")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != s {
		return fail("index is not a canonical decimal")
	}
	line, rest, ok := bytes.Cut(rest, []byte("\n"))
	rec, err := base64.StdEncoding.Strict().DecodeString(string(line))
	if !ok || err != nil || len(rec) == 0 || len(rec) > MaxRotationRecord || base64.StdEncoding.EncodeToString(rec) != string(line) {
		return fail("the record is not canonical base64 of at most %d bytes", MaxRotationRecord)
	}
	rot := KeyChange{Index: n, Record: rec}
	for {
		line, after, ok := bytes.Cut(rest, []byte("\n"))
		if !ok {
			return fail("no empty line after the proof")
		}
		rest = after
		if len(line) == 0 {
			break
		}
		if len(rot.Proof) == MaxProofLines {
			return fail("more than %d proof lines", MaxProofLines)
		}
		h, err := base64.StdEncoding.Strict().DecodeString(string(line))
		if err != nil || len(h) != tlog.HashSize || base64.StdEncoding.EncodeToString(h) != string(line) {
			return fail("a proof line is not base64 of 32 bytes")
		}
		var x tlog.Hash
		copy(x[:], h)
		rot.Proof = append(rot.Proof, x)
	}
	req, err := ParseAddCheckpoint(rest)
	if err != nil {
		return KeyChange{}, AddCheckpoint{}, err
	}
	return rot, req, nil
}
