package audit

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

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
// log), 409 (old size is not the witness's; Size is the witness's), 422
// (the consistency proof does not verify, or same size and another root).
type WitnessError struct {
	Status int
	Size   int64 // the witness's size for the log, with 409
	Reason string
}

// Error implements error.
func (e *WitnessError) Error() string { return fmt.Sprintf("witness: %d: %s", e.Status, e.Reason) }

// WitnessState is what a witness remembers: per log origin, the last
// checkpoint it cosigned (the log-signed note). A witness persists it
// before it answers.
type WitnessState map[string][]byte

// Witness cosigns a log's checkpoints only after checking that each is
// consistent with the last one it cosigned for that log: the C2SP
// tlog-witness add-checkpoint rules, without the HTTP. Safe for concurrent
// use; checks and state updates are atomic.
type Witness struct {
	cosigner *Cosigner
	logs     map[string]note.Verifier // origin -> the log's key
	persist  func(WitnessState) error

	mu    sync.Mutex
	state WitnessState
}

// NewWitness returns a witness cosigning with c for the logs whose note
// verifier keys are given (one per origin), starting from state (nil: has
// seen nothing). persist is called with the new state before a cosignature
// is returned; an error refuses the cosignature.
func NewWitness(c *Cosigner, logKeys []string, state WitnessState, persist func(WitnessState) error) (*Witness, error) {
	if c == nil || c.key == nil {
		return nil, errors.New("audit: NewWitness: needs a cosigner with its private key")
	}
	w := &Witness{cosigner: c, logs: map[string]note.Verifier{}, persist: persist, state: WitnessState{}}
	for _, k := range logKeys {
		v, err := note.NewVerifier(k)
		if err != nil {
			return nil, fmt.Errorf("audit: witness log key %q: %w", k, err)
		}
		if _, dup := w.logs[v.Name()]; dup {
			return nil, fmt.Errorf("audit: witness: two keys for log %q", v.Name())
		}
		w.logs[v.Name()] = v
	}
	for origin, msg := range state {
		if _, err := w.open(origin, msg); err != nil {
			return nil, fmt.Errorf("audit: witness state of %q: %w", origin, err)
		}
		w.state[origin] = msg
	}
	return w, nil
}

// open verifies a note by origin's log key.
func (w *Witness) open(origin string, msg []byte) (Checkpoint, error) {
	v, ok := w.logs[origin]
	if !ok {
		return Checkpoint{}, &WitnessError{Status: 404, Reason: fmt.Sprintf("unknown log %q", origin)}
	}
	n, err := note.Open(msg, note.VerifierList(v))
	if err != nil {
		return Checkpoint{}, &WitnessError{Status: 403, Reason: fmt.Sprintf("no valid signature of log %q: %v", origin, err)}
	}
	c, err := ParseCheckpointText([]byte(n.Text))
	if err != nil || c.Origin != origin {
		return Checkpoint{}, &WitnessError{Status: 403, Reason: fmt.Sprintf("not a checkpoint of %q", origin)}
	}
	return c, nil
}

// Last returns the last checkpoint the witness cosigned for origin.
func (w *Witness) Last(origin string) (Checkpoint, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	msg, ok := w.state[origin]
	if !ok {
		return Checkpoint{}, false
	}
	c, err := ReadCheckpoint(msg)
	return c, err == nil
}

// Add checks a request and returns the cosignature line, or a
// *WitnessError saying why not: a shrunk checkpoint, a fork (a proof that
// does not verify, or the same size with another root), an old size that is
// not the witness's.
func (w *Witness) Add(req AddCheckpoint) ([]byte, error) {
	c, err := ReadCheckpoint(req.Note)
	if err != nil {
		return nil, &WitnessError{Status: 403, Reason: err.Error()}
	}
	if _, err := w.open(c.Origin, req.Note); err != nil {
		return nil, err
	}
	if req.OldSize > c.Size {
		return nil, &WitnessError{Status: 400, Reason: fmt.Sprintf("old size %d is larger than the checkpoint's %d", req.OldSize, c.Size)}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var last Checkpoint
	if msg, ok := w.state[c.Origin]; ok {
		if last, err = ReadCheckpoint(msg); err != nil {
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
		return nil, &WitnessError{Status: 422, Reason: fmt.Sprintf("fork: a checkpoint of %d records with another root than the one cosigned", c.Size)}
	case last.Size > 0 && last.Size < c.Size:
		if err := tlog.CheckTree(req.Proof, c.Size, c.Root, last.Size, last.Root); err != nil {
			return nil, &WitnessError{Status: 422, Reason: fmt.Sprintf("fork: the %d records cosigned are not a prefix of the %d records: %v", last.Size, c.Size, err)}
		}
	}
	line, err := w.cosigner.Cosign(c.Text())
	if err != nil {
		return nil, err
	}
	next := WitnessState{}
	for k, v := range w.state {
		next[k] = v
	}
	next[c.Origin] = req.Note
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
