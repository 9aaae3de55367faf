package audit

import (
	"fmt"
	"math/bits"

	"golang.org/x/mod/sumdb/tlog"
)

// Frontier is the compact range of a log's first Size() leaves (RFC 6962,
// C2SP tlog): the hashes of the largest complete subtrees they split into,
// left to right, one per bit set in the size, so at most 63. It appends a
// leaf and answers the tree hash of exactly its size, in memory that does
// not grow with the log. The zero Frontier is the empty log.
type Frontier struct {
	n      int64
	hashes []tlog.Hash // subtree hashes, largest (leftmost) first
}

// Size returns the number of leaves appended.
func (f *Frontier) Size() int64 { return f.n }

// Len returns the number of subtree hashes held (the bits set in Size).
func (f *Frontier) Len() int { return len(f.hashes) }

// Append adds the next leaf hash.
func (f *Frontier) Append(leaf tlog.Hash) error {
	if f.n >= MaxIndex {
		return fmt.Errorf("audit: log full at %d records", f.n)
	}
	h := leaf
	// Each trailing one bit of the size is a subtree the new leaf
	// completes: merge them from the right.
	for n := f.n; n&1 == 1; n >>= 1 {
		h = tlog.NodeHash(f.hashes[len(f.hashes)-1], h)
		f.hashes = f.hashes[:len(f.hashes)-1]
	}
	f.hashes = append(f.hashes, h)
	f.n++
	return nil
}

// Root returns the tree hash of the Size() leaves.
func (f *Frontier) Root() tlog.Hash {
	if len(f.hashes) == 0 {
		h, _ := tlog.TreeHash(0, nil)
		return h
	}
	h := f.hashes[len(f.hashes)-1]
	for i := len(f.hashes) - 2; i >= 0; i-- {
		h = tlog.NodeHash(f.hashes[i], h)
	}
	return h
}

// Clone returns a copy that appends independently.
func (f *Frontier) Clone() Frontier {
	return Frontier{n: f.n, hashes: append([]tlog.Hash(nil), f.hashes...)}
}

// node returns the hash of the frontier's subtree covering exactly [lo, hi).
func (f *Frontier) node(lo, hi int64) (tlog.Hash, bool) {
	var start int64
	i := 0
	for b := 62; b >= 0; b-- {
		if f.n&(1<<b) == 0 {
			continue
		}
		end := start + 1<<b
		if start == lo && end == hi {
			return f.hashes[i], true
		}
		start = end
		i++
	}
	return tlog.Hash{}, false
}

// Range is the leaves [Lo, Hi) of a log, whose tree hash is one hash of a
// proof.
type Range struct{ Lo, Hi int64 }

// maxpow2 is the largest power of two smaller than n (n >= 2), the split
// of RFC 6962's tree.
func maxpow2(n int64) int64 { return 1 << (bits.Len64(uint64(n-1)) - 1) }

// InclusionRanges returns the leaf ranges whose tree hashes are, in order,
// the inclusion proof of leaf index in the tree of size leaves
// (tlog.ProveRecord's hashes).
func InclusionRanges(index, size int64) ([]Range, error) {
	if index < 0 || index >= size {
		return nil, fmt.Errorf("audit: no proof of record %d in a tree of size %d", index, size)
	}
	var rs []Range
	lo, hi := int64(0), size
	for hi-lo > 1 {
		k := maxpow2(hi - lo)
		if index < lo+k {
			rs = append(rs, Range{lo + k, hi})
			hi = lo + k
		} else {
			rs = append(rs, Range{lo, lo + k})
			lo += k
		}
	}
	// The recursion appends on the way up: deepest sibling first.
	for i, j := 0, len(rs)-1; i < j; i, j = i+1, j-1 {
		rs[i], rs[j] = rs[j], rs[i]
	}
	return rs, nil
}

// ConsistencyRanges returns the leaf ranges whose tree hashes are, in
// order, the consistency proof of the tree of oldSize leaves in the tree of
// size leaves (tlog.ProveTree's hashes). Every range ends at or before
// oldSize, where it is a subtree of the older tree's compact range, or
// starts at or after it.
func ConsistencyRanges(oldSize, size int64) ([]Range, error) {
	if oldSize < 1 || oldSize > size {
		return nil, fmt.Errorf("audit: no consistency proof of %d in %d records", oldSize, size)
	}
	var rs []Range
	lo, hi := int64(0), size
	for oldSize != hi {
		k := maxpow2(hi - lo)
		if oldSize <= lo+k {
			rs = append(rs, Range{lo + k, hi})
			hi = lo + k
		} else {
			rs = append(rs, Range{lo, lo + k})
			lo += k
		}
	}
	if lo != 0 {
		rs = append(rs, Range{lo, hi})
	}
	for i, j := 0, len(rs)-1; i < j; i, j = i+1, j-1 {
		rs[i], rs[j] = rs[j], rs[i]
	}
	return rs, nil
}

// RangeHasher computes the tree hashes of a few leaf ranges from the leaves
// streamed past it in index order, each with its own compact range, so its
// memory is that of the ranges, never of the log. Ranges that end at or
// before the first leaf fed are taken from the Frontier it starts from,
// of which they must be subtrees.
type RangeHasher struct {
	ranges []Range
	parts  []Frontier
	done   []bool
	hashes []tlog.Hash
	next   int64
}

// NewRangeHasher returns the hasher of ranges whose leaves will be fed from
// index from.Size() on; from holds the leaves before (the zero Frontier to
// stream from the first leaf).
func NewRangeHasher(ranges []Range, from *Frontier) (*RangeHasher, error) {
	h := &RangeHasher{ranges: ranges, parts: make([]Frontier, len(ranges)), done: make([]bool, len(ranges)),
		hashes: make([]tlog.Hash, len(ranges)), next: from.Size()}
	for i, r := range ranges {
		switch {
		case r.Lo < 0 || r.Hi <= r.Lo:
			return nil, fmt.Errorf("audit: empty range [%d, %d)", r.Lo, r.Hi)
		case r.Hi <= h.next:
			x, ok := from.node(r.Lo, r.Hi)
			if !ok {
				return nil, fmt.Errorf("audit: range [%d, %d) is not a subtree of the compact range of %d leaves", r.Lo, r.Hi, h.next)
			}
			h.hashes[i], h.done[i] = x, true
		case r.Lo < h.next:
			return nil, fmt.Errorf("audit: range [%d, %d) starts before leaf %d", r.Lo, r.Hi, h.next)
		}
	}
	return h, nil
}

// Next returns the index of the next leaf to feed.
func (h *RangeHasher) Next() int64 { return h.next }

// Add feeds the next leaf.
func (h *RangeHasher) Add(leaf tlog.Hash) error {
	i := h.next
	for k, r := range h.ranges {
		if !h.done[k] && r.Lo <= i && i < r.Hi {
			if err := h.parts[k].Append(leaf); err != nil {
				return err
			}
			if i == r.Hi-1 {
				h.hashes[k], h.done[k], h.parts[k] = h.parts[k].Root(), true, Frontier{}
			}
		}
	}
	h.next++
	return nil
}

// Hashes returns the ranges' tree hashes, once every leaf they cover has
// been fed.
func (h *RangeHasher) Hashes() ([]tlog.Hash, error) {
	for k, ok := range h.done {
		if !ok {
			return nil, fmt.Errorf("audit: range [%d, %d) incomplete at leaf %d", h.ranges[k].Lo, h.ranges[k].Hi, h.next)
		}
	}
	return h.hashes, nil
}
