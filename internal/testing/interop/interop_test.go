package interop

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"os"
	"strings"
	"testing"

	"github.com/contextos/ledger/audit"
	"github.com/contextos/ledger/verifier"
	tdlog "github.com/transparency-dev/formats/log"
	tdnote "github.com/transparency-dev/formats/note"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
	sigsumcp "sigsum.org/sigsum-go/pkg/checkpoint"
	sigsumcrypto "sigsum.org/sigsum-go/pkg/crypto"
	"sigsum.org/sigsum-go/pkg/types"
)

// golden reads the verifier's vectors: files our own code wrote.
func golden(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("../../../testdata/verifier/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func goldenLog(t *testing.T) (audit.Entries, audit.Keys) {
	t.Helper()
	e, err := audit.ParseEntries(golden(t, "ok.entries.json"))
	if err != nil {
		t.Fatal(err)
	}
	k, err := audit.ParseKeys(golden(t, "keys.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Checkpoints) == 0 || len(k.CheckpointKeys) != 1 || len(k.WitnessKeys) != 1 {
		t.Fatalf("the vectors changed: %d checkpoints, keys %+v", len(e.Checkpoints), k)
	}
	return e, k
}

// keyOf returns the Ed25519 public key of a note verifier key
// (<name>+<hash>+base64(alg || key)).
func keyOf(t *testing.T, vkey string) ed25519.PublicKey {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(strings.SplitN(vkey, "+", 3)[2])
	if err != nil || len(b) != 33 {
		t.Fatalf("key %q: %v", vkey, err)
	}
	return b[1:]
}

// TestCheckpointsReadByTransparencyDevFormats: every checkpoint of the
// golden export parses with transparency-dev/formats (log.ParseCheckpoint,
// its own body parser) under the log's key, and its witness cosignature
// verifies with formats' cosignature/v1 verifier, made from the witness key
// as this project publishes it; size and root agree with ours.
func TestCheckpointsReadByTransparencyDevFormats(t *testing.T) {
	e, k := goldenLog(t)
	logV, err := note.NewVerifier(k.CheckpointKeys[0])
	if err != nil {
		t.Fatal(err)
	}
	witV, err := tdnote.NewVerifierForCosignatureV1(k.WitnessKeys[0])
	if err != nil {
		t.Fatal(err)
	}
	for i, msg := range e.Checkpoints {
		ours, err := audit.ReadCheckpoint(msg)
		if err != nil {
			t.Fatal(err)
		}
		cp, _, n, err := tdlog.ParseCheckpoint(msg, audit.Origin(e.Tenant), logV, witV)
		if err != nil {
			t.Fatalf("checkpoint %d: %v", i, err)
		}
		if cp.Size != uint64(ours.Size) || !bytes.Equal(cp.Hash, ours.Root[:]) {
			t.Fatalf("checkpoint %d: formats reads size %d root %x, we wrote %d %x", i, cp.Size, cp.Hash, ours.Size, ours.Root)
		}
		cosigned := false
		for _, s := range n.Sigs {
			if s.Name == witV.Name() && s.Hash == witV.KeyHash() {
				ts, err := tdnote.CoSigV1Timestamp(s)
				cosigned = err == nil && ts.Unix() > 0
			}
		}
		if !cosigned {
			t.Fatalf("checkpoint %d: formats verified no cosignature of %s", i, witV.Name())
		}
	}
	// A cosignature with one bit changed does not verify.
	msg := e.Checkpoints[len(e.Checkpoints)-1]
	i := bytes.LastIndex(msg, []byte(" ")) + 20
	bad := bytes.Clone(msg)
	bad[i] ^= 0x02
	if _, _, n, err := tdlog.ParseCheckpoint(bad, audit.Origin(e.Tenant), logV, witV); err == nil {
		for _, s := range n.Sigs {
			if s.Name == witV.Name() {
				t.Fatal("formats verified a mangled cosignature")
			}
		}
	}
}

// TestCheckpointsAndCosignaturesReadBySigsum: sigsum-go parses every
// checkpoint (origin, size, root, the log's signature line), and checks
// with its own code the log's note key ID and Ed25519 signature over the
// checkpoint text and the witness's cosignature/v1 line (key ID, timestamp
// and signature over "cosignature/v1\ntime T\n" and the text).
func TestCheckpointsAndCosignaturesReadBySigsum(t *testing.T) {
	e, k := goldenLog(t)
	var logPub, witPub sigsumcrypto.PublicKey
	copy(logPub[:], keyOf(t, k.CheckpointKeys[0]))
	copy(witPub[:], keyOf(t, k.WitnessKeys[0]))
	for i, msg := range e.Checkpoints {
		var cp sigsumcp.Checkpoint
		if err := cp.FromASCII(bytes.NewReader(msg)); err != nil {
			t.Fatalf("checkpoint %d: %v", i, err)
		}
		ours, _ := audit.ReadCheckpoint(msg)
		if cp.Origin != ours.Origin || cp.Size != uint64(ours.Size) || cp.RootHash != sigsumcrypto.Hash(ours.Root) {
			t.Fatalf("checkpoint %d: sigsum reads %s %d %x", i, cp.Origin, cp.Size, cp.RootHash)
		}
		if cp.KeyId != sigsumcp.NewLogKeyId(cp.Origin, &logPub) {
			t.Fatalf("checkpoint %d: the log's key ID is not sigsum's", i)
		}
		if !sigsumcrypto.Verify(&logPub, []byte(cp.FormatCheckpoint(cp.Origin)), &cp.Signature) {
			t.Fatalf("checkpoint %d: sigsum does not verify the log's signature", i)
		}
		_, sigs, _ := bytes.Cut(msg, []byte("\n\n"))
		lines, err := sigsumcp.CosignatureLinesFromASCII(bytes.NewReader(sigs))
		if err != nil {
			t.Fatalf("checkpoint %d: %v", i, err)
		}
		cs, err := cp.VerifyCosignatureByKey(lines, &witPub)
		if err != nil || cs.Timestamp == 0 {
			t.Fatalf("checkpoint %d: sigsum does not verify the witness's cosignature: %v", i, err)
		}
		other := cp
		other.TreeHead = types.TreeHead{Size: cp.Size + 1, RootHash: cp.RootHash}
		if _, err := other.VerifyCosignatureByKey(lines, &witPub); err == nil {
			t.Fatalf("checkpoint %d: the cosignature verified for another size", i)
		}
	}
}

// TestProofsCheckedByTransparencyDevMerkle: transparency-dev/merkle's RFC
// 6962 hasher gives our records' leaf hashes, its compact range our
// checkpoints' roots, and its verifiers accept our inclusion proof
// (proof.json), every proof of an attempt's bundle and our consistency
// proof (consistency.json), and refuse the broken vectors.
func TestProofsCheckedByTransparencyDevMerkle(t *testing.T) {
	e, k := goldenLog(t)
	h := rfc6962.DefaultHasher
	rf := compact.RangeFactory{Hash: h.HashChildren}
	r := rf.NewEmptyRange(0)
	roots := map[uint64][]byte{}
	for i, raw := range e.Records {
		leaf := h.HashLeaf(raw)
		if ours := audit.RecordHash(raw); !bytes.Equal(leaf, ours[:]) {
			t.Fatalf("record %d: leaf hash differs", i)
		}
		if err := r.Append(leaf, nil); err != nil {
			t.Fatal(err)
		}
		root, err := r.GetRootHash(nil)
		if err != nil {
			t.Fatal(err)
		}
		roots[r.End()] = root
	}
	for i, msg := range e.Checkpoints {
		cp, _ := audit.ReadCheckpoint(msg)
		if !bytes.Equal(roots[uint64(cp.Size)], cp.Root[:]) {
			t.Fatalf("checkpoint %d: merkle's root of %d records differs", i, cp.Size)
		}
	}
	hashes := func(hs [][32]byte) [][]byte {
		out := make([][]byte, len(hs))
		for i := range hs {
			out[i] = hs[i][:]
		}
		return out
	}
	inclusion := func(name string) error {
		p, err := audit.ParseProof(golden(t, name))
		if err != nil {
			t.Fatal(err)
		}
		cp, _ := audit.ReadCheckpoint(p.Checkpoint)
		hs := make([][32]byte, len(p.Hashes))
		for i := range p.Hashes {
			hs[i] = p.Hashes[i]
		}
		return proof.VerifyInclusion(h, uint64(p.Index), uint64(cp.Size), h.HashLeaf(p.Record), hashes(hs), cp.Root[:])
	}
	if err := inclusion("proof.json"); err != nil {
		t.Fatalf("proof.json: %v", err)
	}
	if err := inclusion("proof-hash-break.json"); err == nil {
		t.Fatal("merkle accepted proof-hash-break.json")
	}
	consistency := func(name string) error {
		c, err := audit.ParseConsistency(golden(t, name))
		if err != nil {
			return err
		}
		old, _ := audit.ReadCheckpoint(c.Old)
		cur, _ := audit.ReadCheckpoint(c.New)
		hs := make([][32]byte, len(c.Hashes))
		for i := range c.Hashes {
			hs[i] = c.Hashes[i]
		}
		return proof.VerifyConsistency(h, uint64(old.Size), uint64(cur.Size), hashes(hs), old.Root[:], cur.Root[:])
	}
	if err := consistency("consistency.json"); err != nil {
		t.Fatalf("consistency.json: %v", err)
	}
	for _, bad := range []string{"consistency-fork.json", "consistency-hash-break.json"} {
		if err := consistency(bad); err == nil {
			t.Fatalf("merkle accepted %s", bad)
		}
	}
	keys, err := audit.MarshalKeys(k)
	if err != nil {
		t.Fatal(err)
	}
	var attempt string
	for _, raw := range e.Records {
		if i := bytes.Index(raw, []byte(`"attempt_id":"`)); i >= 0 && attempt == "" {
			rest := raw[i+len(`"attempt_id":"`):]
			attempt = string(rest[:bytes.IndexByte(rest, '"')])
		}
	}
	b, err := verifier.NewBundle(e, keys, attempt)
	if err != nil {
		t.Fatalf("bundle of %q: %v", attempt, err)
	}
	cp, _ := audit.ReadCheckpoint(b.Checkpoint)
	for _, rec := range b.Records {
		hs := make([][32]byte, len(rec.Proof))
		for i := range rec.Proof {
			hs[i] = rec.Proof[i]
		}
		if err := proof.VerifyInclusion(h, uint64(rec.Index), uint64(cp.Size), h.HashLeaf(rec.Record), hashes(hs), cp.Root[:]); err != nil {
			t.Fatalf("bundle record %d: %v", rec.Index, err)
		}
	}
}
