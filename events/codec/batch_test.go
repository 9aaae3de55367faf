package codec

import (
	"crypto/ed25519"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

// memHashes is a tlog.HashReader over hashes held in memory.
type memHashes []tlog.Hash

func (m memHashes) ReadHashes(idx []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(idx))
	for i, x := range idx {
		out[i] = m[x]
	}
	return out, nil
}

// TestTreeMatchesTlog holds the batch tree, its inclusion paths and the
// verifier's fold to x/mod's RFC 6962 implementation for every size up to
// 70 and every leaf.
func TestTreeMatchesTlog(t *testing.T) {
	var stored memHashes
	var leaves []tlog.Hash
	for n := 1; n <= 70; n++ {
		leaf := tlog.RecordHash(fmt.Appendf(nil, "event %d", n-1))
		hs, err := tlog.StoredHashesForRecordHash(int64(n-1), leaf, stored)
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, hs...)
		leaves = append(leaves, leaf)

		want, err := tlog.TreeHash(int64(n), stored)
		if err != nil {
			t.Fatal(err)
		}
		paths := make([][]tlog.Hash, n)
		if got := tree(leaves, paths); got != want {
			t.Fatalf("size %d: root %x, tlog %x", n, got, want)
		}
		for i := 0; i < n; i++ {
			p, err := tlog.ProveRecord(int64(n), int64(i), stored)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(paths[i]) != fmt.Sprint([]tlog.Hash(p)) {
				t.Fatalf("size %d leaf %d: path %x, tlog %x", n, i, paths[i], p)
			}
			if len(p) != pathLen(i, n) {
				t.Fatalf("size %d leaf %d: pathLen %d, tlog %d", n, i, pathLen(i, n), len(p))
			}
			if root, ok := rootFromPath(leaves[i], i, n, paths[i]); !ok || root != want {
				t.Fatalf("size %d leaf %d: fold gives %x %v", n, i, root, ok)
			}
			// The path, read at any other place or size, does not give the
			// message signed: a fold can give the same root under another
			// size (leaf 0 of 3 and of 4), which is why the size is signed.
			signed := string(batchMessage(n, want))
			for _, at := range [][2]int{{i + 1, n}, {i - 1, n}, {i, n + 1}, {i, n - 1}} {
				if at[0] < 0 || at[0] >= at[1] || at[1] < 2 {
					continue
				}
				if root, ok := rootFromPath(leaves[i], at[0], at[1], paths[i]); ok && string(batchMessage(at[1], root)) == signed {
					t.Fatalf("size %d leaf %d: path also proves leaf %d of %d", n, i, at[0], at[1])
				}
			}
		}
	}
}

// FuzzParseProof: parseProof never panics, and what it accepts is exactly
// what formatProof writes back: a proof has one spelling.
func FuzzParseProof(f *testing.F) {
	h := "47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU"
	for _, s := range []string{
		"0.2." + h, "1.2." + h, "2.3." + h, "0.3." + h + "." + h, "5.6." + h + "." + h,
		"00.2." + h, "0.2", "0.1." + h, "2.2." + h, "0.2." + h + "=", "0.2.." + h, "-0.2." + h,
		"1023.1024." + strings.Repeat(h+".", 9) + h, "0.1025." + h, strings.Repeat(".", 1000),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := parseProof(s)
		if err != nil {
			return
		}
		if len(s) > maxProofLen {
			t.Fatalf("parseProof accepted %d bytes, more than maxProofLen", len(s))
		}
		if back := formatProof(p); back != s {
			t.Fatalf("parseProof(%q) accepted, formats back as %q", s, back)
		}
		if len(p.path) != pathLen(p.index, p.size) || p.size < 2 || p.size > MaxBatch || p.index >= p.size {
			t.Fatalf("parseProof(%q) = %+v", s, p)
		}
	})
}

// FuzzValidProof: the allocation-free check gives parseProof's verdict.
func FuzzValidProof(f *testing.F) {
	h := "47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU"
	for _, s := range []string{
		"0.2." + h, "1.3." + h, "0.3." + h + "." + h, "0.2." + h[:42] + "V", "0.2." + h[:42] + "A",
		"0.2." + h[:20] + "+" + h[21:], "0.2." + h[:20] + "\n" + h[21:], "01.2." + h, "2.2." + h,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, err := parseProof(s)
		if got := validProof(s); (got == nil) != (err == nil) {
			t.Fatalf("validProof(%q) = %v, parseProof says %v", s, got, err)
		}
	})
}

// TestSealAllRuns: a list longer than MaxBatch is signed in runs, each
// event verifying on its own, and a run of one has no proof.
func TestSealAllRuns(t *testing.T) {
	Register("test.batch", 1)
	s := NewSigner(ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)))
	kr := Keyring{}
	kr.Add(s.Key.Public().(ed25519.PublicKey))
	drafts := make([]Draft, MaxBatch+1)
	for i := range drafts {
		drafts[i] = Draft{Type: "test.batch", V: 1, EventID: "01JDQ8Z5X3N4R7T9V2W6Y8A0BC", Tenant: "acme", Time: "2026-01-01T00:00:00.000000000Z", Body: map[string]int{"n": i}}
	}
	envs, err := s.SealAll(drafts)
	if err != nil {
		t.Fatal(err)
	}
	if envs[0].Proof == "" || !strings.HasPrefix(envs[MaxBatch-1].Proof, fmt.Sprintf("%d.%d.", MaxBatch-1, MaxBatch)) {
		t.Fatalf("first run's proofs: %q ... %q", envs[0].Proof, envs[MaxBatch-1].Proof)
	}
	if envs[MaxBatch].Proof != "" || envs[MaxBatch].Sig == envs[0].Sig {
		t.Fatalf("the run of one: proof %q, sig shared with the first run: %v", envs[MaxBatch].Proof, envs[MaxBatch].Sig == envs[0].Sig)
	}
	for i, e := range envs {
		if err := kr.Verify(e); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
}
