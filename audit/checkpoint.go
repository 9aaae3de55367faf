package audit

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"

	"github.com/contextos/ledger/events/codec"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// Origin returns the origin of tenant's audit log: the first line of its
// checkpoints and the name of the note key that signs them.
func Origin(tenant string) string { return "contextos/audit/" + tenant }

// Checkpoint is a commitment to the first Size records of a log: the RFC 6962
// Merkle tree hash of their RecordHashes. Its text form (C2SP
// tlog-checkpoint) is three lines: origin, size in decimal, root in standard
// base64; it is published as a signed note (golang.org/x/mod/sumdb/note),
// to which witnesses add cosignatures (Cosigner).
type Checkpoint struct {
	Origin string
	Size   int64
	Root   tlog.Hash
}

// Text returns the checkpoint's note text.
func (c Checkpoint) Text() []byte {
	return fmt.Appendf(nil, "%s\n%d\n%s\n", c.Origin, c.Size, c.Root)
}

// ParseCheckpointText parses a checkpoint's note text strictly: exactly three
// lines, a note key name as origin, a canonical decimal size and a canonical
// base64 root.
func ParseCheckpointText(text []byte) (Checkpoint, error) {
	lines := bytes.Split(text, []byte("\n"))
	if len(lines) != 4 || len(lines[3]) != 0 {
		return Checkpoint{}, errors.New("checkpoint: want exactly three lines")
	}
	origin := string(lines[0])
	if !validNoteName(origin) {
		return Checkpoint{}, errors.New("checkpoint: invalid origin")
	}
	n, err := strconv.ParseInt(string(lines[1]), 10, 64)
	if err != nil || n < 0 || n > MaxIndex || strconv.FormatInt(n, 10) != string(lines[1]) {
		return Checkpoint{}, errors.New("checkpoint: size is not a canonical decimal")
	}
	h, err := base64.StdEncoding.Strict().DecodeString(string(lines[2]))
	if err != nil || len(h) != tlog.HashSize || base64.StdEncoding.EncodeToString(h) != string(lines[2]) {
		return Checkpoint{}, errors.New("checkpoint: root is not canonical base64 of 32 bytes")
	}
	c := Checkpoint{Origin: origin, Size: n}
	copy(c.Root[:], h)
	return c, nil
}

// validNoteName mirrors note's rule for key names: non-empty UTF-8 without
// spaces or '+'. Origins and witness names are ASCII here, so a byte check
// is exact.
func validNoteName(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c == '+' || c >= 0x7f {
			return false
		}
	}
	return true
}

// NoteVerifierKey returns the note verifier key ("<origin>+<hash>+<key>") of
// the checkpoints of the log named origin signed with pub: the runtime's
// Ed25519 public key in note's encoding (algorithm byte 0x01 then the key).
func NoteVerifierKey(origin string, pub ed25519.PublicKey) (string, error) {
	return note.NewEd25519VerifierKey(origin, pub)
}

// noteSigner signs notes with an Ed25519 key under a name.
type noteSigner struct {
	name string
	hash uint32
	key  ed25519.PrivateKey
}

func (s noteSigner) Name() string                    { return s.name }
func (s noteSigner) KeyHash() uint32                 { return s.hash }
func (s noteSigner) Sign(msg []byte) ([]byte, error) { return codec.SignBytes(s.key, msg), nil }

// NewNoteSigner returns the note signer of origin's checkpoints made from the
// runtime's Ed25519 key; its verifier key is NoteVerifierKey(origin, public
// half of key). The key hash is taken from note itself, so it is computed
// exactly as every note verifier computes it.
func NewNoteSigner(origin string, key ed25519.PrivateKey) (note.Signer, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, errors.New("audit: NewNoteSigner: not an Ed25519 private key")
	}
	vkey, err := NoteVerifierKey(origin, key.Public().(ed25519.PublicKey))
	if err != nil {
		return nil, err
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return nil, err
	}
	return noteSigner{name: v.Name(), hash: v.KeyHash(), key: key}, nil
}

// SignCheckpoint returns c as a note signed by the log.
func SignCheckpoint(c Checkpoint, s note.Signer) ([]byte, error) {
	if s.Name() != c.Origin {
		return nil, fmt.Errorf("audit: SignCheckpoint: signer %q does not sign origin %q", s.Name(), c.Origin)
	}
	return note.Sign(&note.Note{Text: string(c.Text())}, s)
}

// MaxNoteSize bounds a checkpoint note, with its cosignatures.
const MaxNoteSize = 16 * 1024

// Opened is a checkpoint note whose signatures verified: the log's and each
// witness's cosignature.
type Opened struct {
	Checkpoint Checkpoint
	Cosigned   []Cosignature // in the note's order
}

// Cosignature is one witness's verified cosignature of a checkpoint.
type Cosignature struct {
	Name string // the witness's key name
	Time uint64 // when it cosigned (POSIX seconds)
}

// OpenCheckpoint verifies a checkpoint note and parses it. It is strict:
// exactly one signature by a log key named after the checkpoint's origin
// (logKeys), every other signature line a valid cosignature by one of
// witnesses, and the note in its one encoding. Errors are *Failure with
// ReasonUnknownKey (a line no trusted key verifies: an unknown witness),
// ReasonBadSignature or ReasonNonCanonical.
func OpenCheckpoint(msg []byte, logKeys note.Verifiers, witnesses []*Cosigner) (Opened, error) {
	fail := func(r Reason, format string, args ...any) (Opened, error) { return Opened{}, Fail(r, format, args...) }
	if len(msg) > MaxNoteSize {
		return fail(ReasonNonCanonical, "checkpoint note longer than %d bytes", MaxNoteSize)
	}
	vs := verifierSet{log: logKeys, witnesses: witnesses}
	n, err := note.Open(msg, vs)
	if err != nil {
		var unverified *note.UnverifiedNoteError
		var invalid *note.InvalidSignatureError
		var unknown *note.UnknownVerifierError
		switch {
		case errors.As(err, &unverified), errors.As(err, &unknown):
			return fail(ReasonUnknownKey, "checkpoint: %v", err)
		case errors.As(err, &invalid):
			return fail(ReasonBadSignature, "checkpoint: %v", err)
		}
		return fail(ReasonNonCanonical, "checkpoint: %v", err)
	}
	if len(n.UnverifiedSigs) != 0 {
		return fail(ReasonUnknownKey, "checkpoint: signature by %q, a key nobody trusts here", n.UnverifiedSigs[0].Name)
	}
	c, err := ParseCheckpointText([]byte(n.Text))
	if err != nil {
		return fail(ReasonNonCanonical, "%v", err)
	}
	out := Opened{Checkpoint: c}
	logSigs := 0
	again := append([]byte(n.Text), '\n')
	for _, s := range n.Sigs {
		// note decodes signatures leniently (non-zero padding bits); one
		// note has one spelling.
		if sig, err := base64.StdEncoding.Strict().DecodeString(s.Base64); err != nil || base64.StdEncoding.EncodeToString(sig) != s.Base64 {
			return fail(ReasonNonCanonical, "checkpoint: signature of %q is not canonical base64", s.Name)
		}
		again = append(again, "— "+s.Name+" "+s.Base64+"\n"...)
		if w := vs.witness(s.Name, s.Hash); w != nil {
			sig, _ := base64.StdEncoding.DecodeString(s.Base64)
			out.Cosigned = append(out.Cosigned, Cosignature{Name: s.Name, Time: cosignTime(sig[4:])})
			continue
		}
		if s.Name != c.Origin {
			return fail(ReasonUnknownKey, "checkpoint of %q signed by key %q", c.Origin, s.Name)
		}
		logSigs++
	}
	if logSigs != 1 {
		return fail(ReasonNonCanonical, "checkpoint must carry exactly one signature of its log, not %d", logSigs)
	}
	// A note has one encoding per text and signatures: re-encode to refuse
	// anything note.Open tolerates.
	if !bytes.Equal(again, msg) {
		return fail(ReasonNonCanonical, "checkpoint note is not in its one encoding")
	}
	return out, nil
}

// verifierSet finds a log key or a witness's cosignature key by name and
// hash.
type verifierSet struct {
	log       note.Verifiers
	witnesses []*Cosigner
}

func (v verifierSet) witness(name string, hash uint32) *Cosigner {
	for _, w := range v.witnesses {
		if w.name == name && w.hash == hash {
			return w
		}
	}
	return nil
}

func (v verifierSet) Verifier(name string, hash uint32) (note.Verifier, error) {
	if w := v.witness(name, hash); w != nil {
		return w, nil
	}
	if v.log == nil {
		return nil, &note.UnknownVerifierError{Name: name, KeyHash: hash}
	}
	return v.log.Verifier(name, hash)
}

// ReadCheckpoint parses a signed checkpoint note without verifying its
// signatures: for a writer reading back its own log. Auditors use
// OpenCheckpoint.
func ReadCheckpoint(msg []byte) (Checkpoint, error) {
	i := bytes.Index(msg, []byte("\n\n"))
	if i < 0 {
		return Checkpoint{}, errors.New("checkpoint: not a signed note")
	}
	return ParseCheckpointText(msg[:i+1])
}

// Tree holds the RFC 6962 stored hashes (tlog's layout) of a log's first
// Size() records and answers tree hashes, inclusion and consistency proofs
// for any size up to it. It is a tlog.HashReader. Not safe for concurrent
// use.
type Tree struct {
	hashes []tlog.Hash
	n      int64
}

// Size returns the number of records appended.
func (t *Tree) Size() int64 { return t.n }

// Append adds the next record, given its RecordHash.
func (t *Tree) Append(leaf tlog.Hash) error {
	hs, err := tlog.StoredHashesForRecordHash(t.n, leaf, t)
	if err != nil {
		return err
	}
	t.hashes = append(t.hashes, hs...)
	t.n++
	return nil
}

// ReadHashes implements tlog.HashReader.
func (t *Tree) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		if x < 0 || x >= int64(len(t.hashes)) {
			return nil, fmt.Errorf("audit: stored hash %d not available (have %d)", x, len(t.hashes))
		}
		out[i] = t.hashes[x]
	}
	return out, nil
}

// Root returns the tree hash of the first size records.
func (t *Tree) Root(size int64) (tlog.Hash, error) {
	if size < 0 || size > t.n {
		return tlog.Hash{}, fmt.Errorf("audit: tree of %d records has no root for size %d", t.n, size)
	}
	return tlog.TreeHash(size, t)
}

// Prove returns the inclusion proof of record index in the tree of the first
// size records.
func (t *Tree) Prove(index, size int64) (tlog.RecordProof, error) {
	if size > t.n || index < 0 || index >= size {
		return nil, fmt.Errorf("audit: no proof of record %d in a tree of size %d (have %d)", index, size, t.n)
	}
	return tlog.ProveRecord(size, index, t)
}

// ProveTree returns the consistency proof of the tree of oldSize records in
// the tree of size records.
func (t *Tree) ProveTree(size, oldSize int64) (tlog.TreeProof, error) {
	if size > t.n || oldSize < 0 || oldSize > size {
		return nil, fmt.Errorf("audit: no consistency proof of %d in %d records (have %d)", oldSize, size, t.n)
	}
	return tlog.ProveTree(size, oldSize, t)
}
