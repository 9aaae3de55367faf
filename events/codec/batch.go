package codec

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/contextos/ledger/kernel"
	"golang.org/x/mod/sumdb/tlog"
)

// One signature may cover several events (DESIGN allows it through the list
// of their hashes, if each event stays verifiable on its own). Sealing the
// events of one decision is then one Ed25519 signature instead of one per
// event: the signature is over the root of the RFC 6962 Merkle tree whose
// leaves are the events' signing bytes (SigningBytes, in order), and each
// event carries its inclusion proof in Envelope.Proof, so it verifies alone:
// its leaf, folded with its proof, gives the root the signature covers.
//
// The proof's text is "<index>.<size>.<hash>...": the event's place in the
// batch and the batch's size in decimal without leading zeros (0 <= index <
// size, 2 <= size <= MaxBatch), then exactly the hashes of RFC 6962's
// inclusion path for that place, each unpadded base64url of 32 bytes. A
// batch signature signs batchMessage (a text that is not JSON, so it can
// never be taken for an event's own signing bytes) and names the size, so a
// proof cannot claim another tree shape. An event without a proof is signed
// alone, over its signing bytes, as every event was before batches.

// MaxBatch is the most events one signature covers; SealAll signs longer
// lists in runs of MaxBatch.
const MaxBatch = 1024

// batchDomain starts every message a batch signature signs.
const batchDomain = "contextos/events/batch/v1\n"

// batchMessage is what the signature of a batch of size events with Merkle
// root root signs.
func batchMessage(size int, root tlog.Hash) []byte {
	b := make([]byte, 0, len(batchDomain)+8+len(root))
	b = append(b, batchDomain...)
	b = strconv.AppendInt(b, int64(size), 10)
	b = append(b, '\n')
	return append(b, root[:]...)
}

// maxpow2 is the largest power of two below n (n >= 2): RFC 6962's split.
func maxpow2(n int) int { return 1 << (bits.Len(uint(n-1)) - 1) }

// pathLen is the length of RFC 6962's inclusion path of leaf i in a tree of n.
func pathLen(i, n int) int {
	l := 0
	for n > 1 {
		k := maxpow2(n)
		if i < k {
			n = k
		} else {
			i, n = i-k, n-k
		}
		l++
	}
	return l
}

// tree returns RFC 6962's MTH(leaves) and appends to paths[i] the
// inclusion path PATH(i, leaves) of each leaf, leaf side first: every
// subtree is hashed once.
func tree(leaves []tlog.Hash, paths [][]tlog.Hash) tlog.Hash {
	if len(leaves) == 1 {
		return leaves[0]
	}
	k := maxpow2(len(leaves))
	l, r := tree(leaves[:k], paths[:k]), tree(leaves[k:], paths[k:])
	for i := range paths[:k] {
		paths[i] = append(paths[i], r)
	}
	for i := range paths[k:] {
		paths[k+i] = append(paths[k+i], l)
	}
	return tlog.NodeHash(l, r)
}

// rootFromPath folds leaf with its inclusion path (RFC 9162, 2.1.3.2) and
// returns the root it proves, or false when the path does not fit (i, n).
func rootFromPath(leaf tlog.Hash, i, n int, path []tlog.Hash) (tlog.Hash, bool) {
	if i < 0 || i >= n {
		return tlog.Hash{}, false
	}
	fn, sn, r := i, n-1, leaf
	for _, p := range path {
		if sn == 0 {
			return tlog.Hash{}, false
		}
		if fn&1 == 1 || fn == sn {
			r = tlog.NodeHash(p, r)
			for fn&1 == 0 && fn != 0 {
				fn, sn = fn>>1, sn>>1
			}
		} else {
			r = tlog.NodeHash(r, p)
		}
		fn, sn = fn>>1, sn>>1
	}
	return r, sn == 0
}

// proof is a parsed Envelope.Proof.
type proof struct {
	index, size int
	path        []tlog.Hash
}

// formatProof writes p in its one accepted text.
func formatProof(p proof) string {
	var sb strings.Builder
	sb.WriteString(strconv.Itoa(p.index))
	sb.WriteByte('.')
	sb.WriteString(strconv.Itoa(p.size))
	for _, h := range p.path {
		sb.WriteByte('.')
		sb.WriteString(base64.RawURLEncoding.EncodeToString(h[:]))
	}
	return sb.String()
}

// parseProof reads Envelope.Proof strictly: every text it accepts is what
// formatProof writes for the result (FuzzParseProof holds it to that).
func parseProof(s string) (proof, error) {
	bad := func(format string, args ...any) (proof, error) {
		return proof{}, envErr(ReasonInvalidField, "proof", format, args...)
	}
	if len(s) > maxProofLen {
		return bad("longer than any proof (%d bytes)", maxProofLen)
	}
	parts := strings.Split(s, ".")
	if len(parts) < 3 {
		return bad("want <index>.<size>.<hash>...")
	}
	index, ok1 := decimal(parts[0])
	size, ok2 := decimal(parts[1])
	if !ok1 || !ok2 {
		return bad("index and size must be decimal without leading zeros")
	}
	if size < 2 || size > MaxBatch || index >= size {
		return bad("index %d of size %d: want 0 <= index < size, 2 <= size <= %d", index, size, MaxBatch)
	}
	if want := pathLen(index, size); len(parts)-2 != want {
		return bad("%d hashes for index %d of size %d, want %d", len(parts)-2, index, size, want)
	}
	p := proof{index: index, size: size, path: make([]tlog.Hash, len(parts)-2)}
	for k, h := range parts[2:] {
		// The length check refuses line breaks, which the decoder skips.
		b, err := base64.RawURLEncoding.Strict().DecodeString(h)
		if err != nil || len(b) != len(tlog.Hash{}) || len(h) != 43 {
			return bad("hash %d is not unpadded base64url of 32 bytes", k)
		}
		copy(p.path[k][:], b)
	}
	return p, nil
}

// maxProofLen is the longest proof text: a 4-digit index and size, and the
// 10 hashes of a path in a tree of MaxBatch leaves. Longer input is refused
// before it is split.
const maxProofLen = 4 + 1 + 4 + 10*(1+43)

// decimal reads a non-negative decimal of at most 4 digits without leading
// zeros (every index and size is below MaxBatch).
func decimal(s string) (int, bool) {
	if s == "" || len(s) > 4 || (s[0] == '0' && len(s) > 1) {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}

// validProof checks that s is a proof's one accepted text: parseProof's
// verdict (FuzzValidProof holds the two together) without its allocations,
// as every append encodes, and so validates, each event's proof.
func validProof(s string) error {
	dot := strings.IndexByte(s, '.')
	if dot < 0 {
		return validProofSlow(s)
	}
	index, ok1 := decimal(s[:dot])
	rest := s[dot+1:]
	dot = strings.IndexByte(rest, '.')
	if dot < 0 || !ok1 {
		return validProofSlow(s)
	}
	size, ok2 := decimal(rest[:dot])
	if !ok2 || size < 2 || size > MaxBatch || index >= size {
		return validProofSlow(s)
	}
	hashes := rest[dot:]
	const hashLen = 1 + 43 // ".", then 32 bytes in unpadded base64url
	if len(hashes) != pathLen(index, size)*hashLen {
		return validProofSlow(s)
	}
	for i := 0; i < len(hashes); i += hashLen {
		if hashes[i] != '.' || !base64URL(hashes[i+1:i+hashLen]) {
			return validProofSlow(s)
		}
	}
	return nil
}

// validProofSlow is validProof's verdict with parseProof's error.
func validProofSlow(s string) error {
	_, err := parseProof(s)
	if err == nil {
		// validProof refused what parseProof accepts: a bug, refused
		// all the same rather than stored in two spellings.
		return envErr(ReasonInvalidField, "proof", "not in the one form a proof has")
	}
	return err
}

// base64URL reports whether h is the unpadded base64url text of 32 bytes:
// 43 characters of the alphabet, the last one's two unused bits zero (as the
// strict decoder requires).
func base64URL(h string) bool {
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return strings.IndexByte("AEIMQUYcgkosw048", h[len(h)-1]) >= 0
}

// Draft is an event before it is sealed: every envelope field the caller
// gives. Body is canonicalized as Seal's body is.
type Draft struct {
	Type    string
	V       int
	EventID string
	Tenant  string
	Time    string
	Body    any
}

// SealAll builds and signs the envelopes of drafts, in order, with one
// signature for each run of up to MaxBatch of them: a run of one is sealed
// as Seal seals it (no proof), a longer run is a batch whose events each
// carry their inclusion proof. Every result is Valid and verifies on its own
// against a Keyring holding the signer's public key.
func (s Signer) SealAll(drafts []Draft) ([]Envelope, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	out := make([]Envelope, len(drafts))
	msgs := make([][]byte, len(drafts))
	for i, d := range drafts {
		b, err := kernel.Canonical(d.Body)
		if err != nil {
			return nil, fmt.Errorf("events: Seal: body: %w", err)
		}
		out[i] = Envelope{Type: d.Type, V: d.V, EventID: d.EventID, Tenant: d.Tenant, Time: d.Time, Body: b, KeyID: s.KeyID}
		if msgs[i], err = signingBytes(out[i], false); err != nil { // b is canonical: just made
			return nil, err
		}
	}
	for from := 0; from < len(out); from += MaxBatch {
		to := min(from+MaxBatch, len(out))
		if to-from == 1 {
			out[from].Sig = base64.RawURLEncoding.EncodeToString(SignBytes(s.Key, msgs[from]))
			continue
		}
		leaves := make([]tlog.Hash, to-from)
		for i := range leaves {
			leaves[i] = tlog.RecordHash(msgs[from+i])
		}
		paths := make([][]tlog.Hash, len(leaves))
		root := tree(leaves, paths)
		sig := base64.RawURLEncoding.EncodeToString(SignBytes(s.Key, batchMessage(len(leaves), root)))
		for i := range leaves {
			e := &out[from+i]
			e.Sig = sig
			e.Proof = formatProof(proof{index: i, size: len(leaves), path: paths[i]})
		}
	}
	return out, nil
}

// check refuses a signer without a usable key.
func (s Signer) check() error {
	if len(s.Key) != ed25519.PrivateKeySize {
		return errors.New("events: Seal: signer has no Ed25519 private key")
	}
	if want := KeyIDFor(s.Key.Public().(ed25519.PublicKey)); s.KeyID != want {
		return fmt.Errorf("events: Seal: signer key id %q, key has %q", s.KeyID, want)
	}
	return nil
}

// VerifySignature reports whether sig (Envelope.Sig) signs msg, an event's
// signing bytes (SigningBytes), under pub: directly when proof
// (Envelope.Proof) is empty, else as a batch signature through the proof.
func VerifySignature(pub ed25519.PublicKey, msg []byte, sig, proofText string) bool {
	raw, err := base64.RawURLEncoding.Strict().DecodeString(sig)
	if err != nil {
		return false
	}
	if proofText == "" {
		return VerifyBytes(pub, msg, raw)
	}
	p, err := parseProof(proofText)
	if err != nil {
		return false
	}
	root, ok := rootFromPath(tlog.RecordHash(msg), p.index, p.size, p.path)
	if !ok {
		return false
	}
	m := batchMessage(p.size, root)
	if v := lastBatch.Load(); v != nil && v.pub == string(pub) && v.msg == string(m) && v.sig == sig {
		return true
	}
	if !VerifyBytes(pub, m, raw) {
		return false
	}
	lastBatch.Store(&verifiedBatch{pub: string(pub), msg: string(m), sig: sig})
	return true
}

// lastBatch is the batch signature verified last. A batch's events are
// stored next to each other, so a reader verifying them one by one checks
// the signature once and each further event's proof against it; one entry
// is all the memory it takes.
var lastBatch atomic.Pointer[verifiedBatch]

type verifiedBatch struct{ pub, msg, sig string }
