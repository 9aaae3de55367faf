package audit

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

// proofSizes are the tree sizes the streamed proofs are compared at: every
// size up to 70, and powers of two with their neighbours beyond.
func proofSizes() []int64 {
	var out []int64
	for n := int64(1); n <= 70; n++ {
		out = append(out, n)
	}
	for _, p := range []int64{128, 256, 512, 1024} {
		out = append(out, p-1, p, p+1)
	}
	return out
}

func leafOf(i int64) tlog.Hash { return RecordHash(fmt.Appendf(nil, "record %d", i)) }

// fullTree is the reference: every stored hash of the first n leaves.
func fullTree(t *testing.T, n int64) *Tree {
	t.Helper()
	var tr Tree
	for i := int64(0); i < n; i++ {
		if err := tr.Append(leafOf(i)); err != nil {
			t.Fatal(err)
		}
	}
	return &tr
}

// streamed computes the ranges' hashes in one pass over leaves [from.Size(), n).
func streamed(t *testing.T, ranges []Range, from Frontier, n int64) []tlog.Hash {
	t.Helper()
	rh, err := NewRangeHasher(ranges, &from)
	if err != nil {
		t.Fatal(err)
	}
	for i := from.Size(); i < n; i++ {
		if err := rh.Add(leafOf(i)); err != nil {
			t.Fatal(err)
		}
	}
	hs, err := rh.Hashes()
	if err != nil {
		t.Fatal(err)
	}
	return hs
}

// indexesOf are the record indexes proved in a tree of n: all of them in a
// small tree, else the ends, the middle and the power-of-two boundaries.
func indexesOf(n int64) []int64 {
	if n <= 70 {
		out := make([]int64, n)
		for i := range out {
			out[i] = int64(i)
		}
		return out
	}
	out := []int64{0, 1, n / 2, n - 2, n - 1}
	for p := int64(1); p < n; p *= 2 {
		out = append(out, p-1, p)
	}
	return out
}

// TestFrontierRoot: the compact range's root is the full tree's at every
// size, and it holds one hash per bit set in the size.
func TestFrontierRoot(t *testing.T) {
	var f Frontier
	tr := fullTree(t, 1025)
	for n := int64(0); n <= 1025; n++ {
		want, err := tr.Root(n)
		if err != nil {
			t.Fatal(err)
		}
		if f.Root() != want {
			t.Fatalf("size %d: frontier root %v, tree root %v", n, f.Root(), want)
		}
		if ones := popcount(n); f.Len() != ones {
			t.Fatalf("size %d: frontier holds %d hashes, want %d", n, f.Len(), ones)
		}
		if err := f.Append(leafOf(n)); err != nil {
			t.Fatal(err)
		}
	}
}

func popcount(n int64) int {
	c := 0
	for ; n > 0; n &= n - 1 {
		c++
	}
	return c
}

// TestStreamedInclusionProofs: an inclusion proof streamed from compact
// ranges is, hash for hash, tlog's proof over the full tree, for many sizes
// (1, powers of two and their neighbours) and indexes, and it verifies.
func TestStreamedInclusionProofs(t *testing.T) {
	big := fullTree(t, 1025)
	for _, n := range proofSizes() {
		root, err := big.Root(n)
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range indexesOf(n) {
			want, err := big.Prove(i, n)
			if err != nil {
				t.Fatal(err)
			}
			ranges, err := InclusionRanges(i, n)
			if err != nil {
				t.Fatal(err)
			}
			got := streamed(t, ranges, Frontier{}, n)
			if !slices.Equal(got, want) {
				t.Fatalf("record %d of %d: streamed proof %v, tree proof %v", i, n, got, []tlog.Hash(want))
			}
			if err := tlog.CheckRecord(got, n, root, i, leafOf(i)); err != nil {
				t.Fatalf("record %d of %d: %v", i, n, err)
			}
		}
	}
	for _, c := range [][2]int64{{-1, 3}, {3, 3}, {0, 0}} {
		if _, err := InclusionRanges(c[0], c[1]); err == nil {
			t.Errorf("InclusionRanges(%d, %d) accepted", c[0], c[1])
		}
	}
}

// TestStreamedConsistencyProofs: a consistency proof streamed from compact
// ranges, from the first leaf or from the older tree's compact range, is
// tlog's proof over the full tree for every pair of sizes compared.
func TestStreamedConsistencyProofs(t *testing.T) {
	big := fullTree(t, 1025)
	sizes := proofSizes()
	for _, n := range sizes {
		root, _ := big.Root(n)
		for _, m := range sizes {
			if m > n {
				continue
			}
			want, err := big.ProveTree(n, m)
			if err != nil {
				t.Fatal(err)
			}
			ranges, err := ConsistencyRanges(m, n)
			if err != nil {
				t.Fatal(err)
			}
			got := streamed(t, ranges, Frontier{}, n)
			if !slices.Equal(got, want) {
				t.Fatalf("%d in %d: streamed proof %v, tree proof %v", m, n, got, []tlog.Hash(want))
			}
			var old Frontier
			for i := int64(0); i < m; i++ {
				_ = old.Append(leafOf(i))
			}
			if fromOld := streamed(t, ranges, old, n); !slices.Equal(fromOld, want) {
				t.Fatalf("%d in %d from the old compact range: %v, tree proof %v", m, n, fromOld, []tlog.Hash(want))
			}
			oldRoot, _ := big.Root(m)
			if err := tlog.CheckTree(got, n, root, m, oldRoot); err != nil {
				t.Fatalf("%d in %d: %v", m, n, err)
			}
		}
	}
	for _, c := range [][2]int64{{0, 3}, {4, 3}} {
		if _, err := ConsistencyRanges(c[0], c[1]); err == nil {
			t.Errorf("ConsistencyRanges(%d, %d) accepted", c[0], c[1])
		}
	}
}

// TestRangeHasherRefuses: a range that starts before the first leaf fed
// and is not a subtree of the starting compact range, or one never
// completed, is an error, not a wrong hash.
func TestRangeHasherRefuses(t *testing.T) {
	var f Frontier
	for i := int64(0); i < 6; i++ {
		_ = f.Append(leafOf(i))
	}
	for _, r := range []Range{{2, 4}, {4, 8}, {3, 3}} {
		if _, err := NewRangeHasher([]Range{r}, &f); err == nil {
			t.Errorf("range %v from a compact range of 6 accepted", r)
		}
	}
	rh, err := NewRangeHasher([]Range{{0, 4}, {4, 6}, {6, 8}}, &f)
	if err != nil {
		t.Fatal(err)
	}
	_ = rh.Add(leafOf(6))
	if _, err := rh.Hashes(); err == nil {
		t.Error("range [6, 8) given one leaf reported complete")
	}
}

// TestChainChecksCheckpoints: a compact-range chain checks a checkpoint of
// its size, accepts a larger one, and says it cannot check a smaller one;
// a tree chain checks any size.
func TestChainChecksCheckpoints(t *testing.T) {
	recs := vectorRecords(t)
	c, tc := NewChain("acme"), NewTreeChain("acme")
	var cps []Checkpoint
	for _, raw := range recs {
		r, _, err := Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range []*Chain{c, tc} {
			if err := ch.Append(r, raw); err != nil {
				t.Fatal(err)
			}
		}
		cp, _ := c.Checkpoint(Origin("acme"))
		cps = append(cps, cp)
	}
	last := cps[len(cps)-1]
	if err := c.CheckCheckpoint(last); err != nil {
		t.Fatal(err)
	}
	bad := last
	bad.Root[0] ^= 1
	if FailureOf(c.CheckCheckpoint(bad)).Reason != ReasonHashBreak {
		t.Fatal("a changed root at the chain's size was accepted")
	}
	if err := c.CheckCheckpoint(cps[0]); !errors.Is(err, ErrOlderCheckpoint) {
		t.Fatalf("an older checkpoint on a compact-range chain: %v", err)
	}
	for _, cp := range cps {
		if err := tc.CheckCheckpoint(cp); err != nil {
			t.Fatalf("tree chain, checkpoint of %d: %v", cp.Size, err)
		}
	}
	if c.FrontierLen() != popcount(c.Size()) || c.Root() != tc.Root() {
		t.Fatalf("frontier of %d holds %d hashes", c.Size(), c.FrontierLen())
	}
}
