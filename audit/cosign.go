package audit

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/contextos/ledger/events/codec"
	"golang.org/x/mod/sumdb/note"
)

// cosignatureAlg is the C2SP tlog-cosignature signature type of an Ed25519
// cosignature/v1 key.
const cosignatureAlg = 0x04

// Cosigner is a witness's Ed25519 key in the C2SP tlog-cosignature sense: a
// cosignature is a note signature line "— <name> base64(key ID ||
// timestamp || signature)" whose signature covers "cosignature/v1\ntime
// <timestamp>\n" followed by the checkpoint's text. A Cosigner made from a
// public key verifies (it is a note.Verifier); one made from a private key
// also signs (note.Signer). Its verifier key, as an auditor writes it, is
// "<name>+<8 hex digits of key ID>+<base64(0x04 || public key)>"
// (VerifierKey).
type Cosigner struct {
	name string
	hash uint32
	pub  ed25519.PublicKey
	key  ed25519.PrivateKey // nil for a verifier
	now  func() uint64      // the signing time (POSIX seconds)
}

// cosignerHash is the key ID of a cosignature key: SHA-256(name || "\n" ||
// 0x04 || public key)[:4].
func cosignerHash(name string, pub ed25519.PublicKey) uint32 {
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte{'\n', cosignatureAlg})
	h.Write(pub)
	return binary.BigEndian.Uint32(h.Sum(nil)[:4])
}

// NewCosigner returns the cosigner of a witness named name (a note key
// name, for example "witness.example/w1") with its private key; now gives
// the cosignature's timestamp in POSIX seconds (the caller owns the clock).
func NewCosigner(name string, key ed25519.PrivateKey, now func() uint64) (*Cosigner, error) {
	if !validNoteName(name) {
		return nil, fmt.Errorf("audit: witness name %q is not a note key name", name)
	}
	if len(key) != ed25519.PrivateKeySize || now == nil {
		return nil, errors.New("audit: NewCosigner: needs an Ed25519 private key and a clock")
	}
	pub := key.Public().(ed25519.PublicKey)
	return &Cosigner{name: name, hash: cosignerHash(name, pub), pub: pub, key: key, now: now}, nil
}

// ParseCosignerKey parses a witness's verifier key
// "<name>+<8 hex digits>+<base64(0x04 || 32-byte key)>" strictly: the key ID
// must be the one the name and key give.
func ParseCosignerKey(vkey string) (*Cosigner, error) {
	name, rest, ok1 := strings.Cut(vkey, "+")
	hash16, key64, ok2 := strings.Cut(rest, "+")
	if !ok1 || !ok2 || !validNoteName(name) || len(hash16) != 8 {
		return nil, fmt.Errorf("audit: witness key %q: want <name>+<hash>+<key>", vkey)
	}
	h, err := strconv.ParseUint(hash16, 16, 32)
	if err != nil || fmt.Sprintf("%08x", h) != hash16 {
		return nil, fmt.Errorf("audit: witness key %q: hash is not 8 lowercase hex digits", vkey)
	}
	k, err := base64.StdEncoding.Strict().DecodeString(key64)
	if err != nil || len(k) != 1+ed25519.PublicKeySize || k[0] != cosignatureAlg {
		return nil, fmt.Errorf("audit: witness key %q: not a cosignature/v1 Ed25519 key (type 0x04)", vkey)
	}
	pub := ed25519.PublicKey(k[1:])
	if uint32(h) != cosignerHash(name, pub) {
		return nil, fmt.Errorf("audit: witness key %q: hash does not match the name and key", vkey)
	}
	return &Cosigner{name: name, hash: uint32(h), pub: pub}, nil
}

// VerifierKey returns the cosigner's verifier key (ParseCosignerKey's
// input).
func (c *Cosigner) VerifierKey() string {
	return fmt.Sprintf("%s+%08x+%s", c.name, c.hash, base64.StdEncoding.EncodeToString(append([]byte{cosignatureAlg}, c.pub...)))
}

// Verifier returns the verifying half of c (no private key).
func (c *Cosigner) Verifier() *Cosigner { return &Cosigner{name: c.name, hash: c.hash, pub: c.pub} }

// Name implements note.Verifier and note.Signer.
func (c *Cosigner) Name() string { return c.name }

// KeyHash implements note.Verifier and note.Signer.
func (c *Cosigner) KeyHash() uint32 { return c.hash }

// cosignedMessage is what a cosignature at time t of a checkpoint text
// signs.
func cosignedMessage(text []byte, t uint64) []byte {
	return append(fmt.Appendf(nil, "cosignature/v1\ntime %d\n", t), text...)
}

// Verify implements note.Verifier: sig is timestamp (8 bytes, big endian)
// || Ed25519 signature.
func (c *Cosigner) Verify(msg, sig []byte) bool {
	if len(sig) != 8+ed25519.SignatureSize {
		return false
	}
	t := binary.BigEndian.Uint64(sig[:8])
	if t > 1<<63-1 {
		return false
	}
	return codec.VerifyBytes(c.pub, cosignedMessage(msg, t), sig[8:])
}

// Sign implements note.Signer (a Cosigner from NewCosigner only).
func (c *Cosigner) Sign(msg []byte) ([]byte, error) {
	if c.key == nil {
		return nil, errors.New("audit: cosigner has no private key")
	}
	t := c.now()
	out := binary.BigEndian.AppendUint64(nil, t)
	return append(out, codec.SignBytes(c.key, cosignedMessage(msg, t))...), nil
}

// cosignTime reads the timestamp of a cosignature's signature bytes (after
// the key ID).
func cosignTime(sig []byte) uint64 {
	if len(sig) < 8 {
		return 0
	}
	return binary.BigEndian.Uint64(sig[:8])
}

// Cosign returns the signature line of c's cosignature of the checkpoint
// text ("— <name> <base64>\n"), as a witness returns it.
func (c *Cosigner) Cosign(text []byte) ([]byte, error) {
	signed, err := note.Sign(&note.Note{Text: string(text)}, c)
	if err != nil {
		return nil, err
	}
	return signed[len(text)+1:], nil
}

// AddCosignatures appends signature lines (a witness's reply) to a signed
// checkpoint note.
func AddCosignatures(signed, lines []byte) []byte {
	return append(append([]byte{}, signed...), lines...)
}
