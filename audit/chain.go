package audit

import (
	"errors"
	"fmt"

	"golang.org/x/mod/sumdb/tlog"
)

// Chain is the fold of a tenant's audit log: the records appended so far as
// the compact range of their Merkle tree (a Frontier: at most 63 hashes,
// whatever the log's length), optionally the whole tree (NewTreeChain), and
// the chain's tail. The projector folds the log it
// writes with it and the verifier folds an export, so both apply the same
// rules: each record must be the next index, chain to the previous record's
// hash, carry a larger event sequence than the one before, and belong to
// the chain's tenant. The zero Chain of a tenant is an empty log.
type Chain struct {
	Tenant       string
	frontier     Frontier
	tree         *Tree     // nil unless kept (NewTreeChain)
	last         tlog.Hash // RecordHash of the last record
	lastEventSeq uint64
}

// NewChain returns the empty log of tenant, folded into a compact range: it
// checks checkpoints of its current size only.
func NewChain(tenant string) *Chain { return &Chain{Tenant: tenant} }

// NewTreeChain returns the empty log of tenant that also keeps the whole
// Merkle tree, so that it checks checkpoints of any size up to its own: for
// an export an auditor holds, which bounds it.
func NewTreeChain(tenant string) *Chain { return &Chain{Tenant: tenant, tree: &Tree{}} }

// Size returns the number of records folded.
func (c *Chain) Size() int64 { return c.frontier.Size() }

// LastEventSeq returns the event sequence of the last record (0 for none).
func (c *Chain) LastEventSeq() uint64 { return c.lastEventSeq }

// PrevHash returns the prev_hash the next record must carry.
func (c *Chain) PrevHash() string {
	if c.Size() == 0 {
		return GenesisPrevHash
	}
	return HexHash(c.last)
}

// Tree returns the Merkle tree of the records folded, nil unless the chain
// keeps it (NewTreeChain). The caller must not append to it.
func (c *Chain) Tree() *Tree { return c.tree }

// Frontier returns a copy of the compact range of the records folded.
func (c *Chain) Frontier() Frontier { return c.frontier.Clone() }

// FrontierLen returns the number of subtree hashes the chain holds.
func (c *Chain) FrontierLen() int { return c.frontier.Len() }

// Root returns the tree hash of every record folded.
func (c *Chain) Root() tlog.Hash { return c.frontier.Root() }

// Append folds the next record (r parsed from raw) after checking that it
// continues the chain. Errors are *Failure naming r's position: ReasonGap
// (an index skipped), ReasonReorder (an index repeated or smaller, an
// event sequence that does not increase), ReasonHashBreak (prev_hash, or a
// record of another tenant). Nothing is folded on error.
func (c *Chain) Append(r Record, raw []byte) error {
	pos := c.Size()
	fail := func(reason Reason, format string, args ...any) error {
		return &Failure{Index: pos, Checkpoint: -1, Reason: reason, Detail: fmt.Sprintf(format, args...)}
	}
	switch {
	case r.Index > pos:
		return fail(ReasonGap, "record %d missing (found record %d)", pos, r.Index)
	case r.Index < pos:
		return fail(ReasonReorder, "record %d found at position %d", r.Index, pos)
	case r.Tenant != c.Tenant:
		return fail(ReasonHashBreak, "record of tenant %q in the log of %q", r.Tenant, c.Tenant)
	case pos > 0 && r.EventSeq <= c.lastEventSeq:
		return fail(ReasonReorder, "event_seq %d does not follow %d", r.EventSeq, c.lastEventSeq)
	case r.PrevHash != c.PrevHash():
		return fail(ReasonHashBreak, "prev_hash %s, previous record hashes to %s", r.PrevHash, c.PrevHash())
	}
	h := RecordHash(raw)
	if c.tree != nil {
		if err := c.tree.Append(h); err != nil {
			return err
		}
	}
	if err := c.frontier.Append(h); err != nil {
		return err
	}
	c.last, c.lastEventSeq = h, r.EventSeq
	return nil
}

// Checkpoint returns the checkpoint of every record folded, of the log
// named origin.
func (c *Chain) Checkpoint(origin string) (Checkpoint, error) {
	return Checkpoint{Origin: origin, Size: c.Size(), Root: c.Root()}, nil
}

// CheckCheckpoint checks a checkpoint against the records folded: its
// origin is the tenant's, and its root is the tree hash of that many
// records when the chain holds them (a larger one cannot be checked yet
// and is accepted). A smaller one is checked only by a chain that keeps
// its tree; otherwise the error says so (ErrOlderCheckpoint) and is not a
// *Failure. Errors are *Failure with ReasonHashBreak.
func (c *Chain) CheckCheckpoint(cp Checkpoint) error {
	if cp.Origin != Origin(c.Tenant) {
		return Fail(ReasonHashBreak, "checkpoint of %q in the log of %q", cp.Origin, Origin(c.Tenant))
	}
	var root tlog.Hash
	switch {
	case cp.Size > c.Size():
		return nil
	case cp.Size == c.Size():
		root = c.Root()
	case c.tree == nil:
		return fmt.Errorf("%w: checkpoint of %d records, chain of %d", ErrOlderCheckpoint, cp.Size, c.Size())
	default:
		var err error
		if root, err = c.tree.Root(cp.Size); err != nil {
			return err
		}
	}
	if root != cp.Root {
		return Fail(ReasonHashBreak, "checkpoint root for size %d is %s, the records hash to %s", cp.Size, cp.Root, root)
	}
	return nil
}

// ErrOlderCheckpoint is CheckCheckpoint's error for a checkpoint smaller
// than a chain that keeps only its compact range: the caller reads the log
// again up to that size to check it.
var ErrOlderCheckpoint = errors.New("audit: the chain keeps only the compact range of its size")

// Clone returns a copy of the chain that folds on independently, from its
// compact range (a clone keeps no tree).
func (c *Chain) Clone() *Chain {
	d := *c
	d.frontier = c.frontier.Clone()
	d.tree = nil
	return &d
}
