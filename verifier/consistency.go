package verifier

import (
	"fmt"

	"github.com/contextos/ledger/audit"
	"golang.org/x/mod/sumdb/tlog"
)

// ProveConsistency proves, from an export, that the export's checkpoint of
// size oldSize is a prefix of its largest checkpoint. The export is not
// verified here (VerifyEntries does); the proof is checked by whoever
// holds the older checkpoint (VerifyConsistency).
func ProveConsistency(e audit.Entries, oldSize int64) (audit.Consistency, error) {
	var t audit.Tree
	for _, raw := range e.Records {
		if err := t.Append(audit.RecordHash(raw)); err != nil {
			return audit.Consistency{}, err
		}
	}
	var oldNote, newNote []byte
	var newSize int64 = -1
	for _, msg := range e.Checkpoints {
		c, err := audit.ReadCheckpoint(msg)
		if err != nil {
			return audit.Consistency{}, err
		}
		if c.Size == oldSize {
			oldNote = msg
		}
		if c.Size > newSize && c.Size <= t.Size() {
			newNote, newSize = msg, c.Size
		}
	}
	if oldNote == nil {
		return audit.Consistency{}, fmt.Errorf("verifier: the export has no checkpoint of size %d", oldSize)
	}
	return NewConsistency(&t, e.Tenant, oldNote, newNote)
}

// NewConsistency proves, over the record hashes in t, that the checkpoint
// note old is a prefix of the checkpoint note cur (both read, unverified, from
// their notes; cur no larger than t and at least as large as old), from an
// export (ProveConsistency). The live log's verb streams the same hashes
// from compact ranges instead (audit.ConsistencyRanges) and keeps no tree.
func NewConsistency(t *audit.Tree, tenant string, old, cur []byte) (audit.Consistency, error) {
	o, err := audit.ReadCheckpoint(old)
	if err != nil {
		return audit.Consistency{}, err
	}
	n, err := audit.ReadCheckpoint(cur)
	if err != nil {
		return audit.Consistency{}, err
	}
	if o.Size > n.Size || n.Size > t.Size() {
		return audit.Consistency{}, fmt.Errorf("verifier: consistency of a checkpoint of %d records with one of %d over %d records", o.Size, n.Size, t.Size())
	}
	hashes, err := tlog.ProveTree(n.Size, o.Size, t)
	if err != nil {
		return audit.Consistency{}, fmt.Errorf("verifier: consistency proof: %w", err)
	}
	return audit.Consistency{Tenant: tenant, Old: old, New: cur, Hashes: hashes}, nil
}

// VerifyConsistency verifies a consistency.json against trusted keys,
// offline: both checkpoints' signatures and origin (the proof's tenant),
// the older no larger than the newer, and that the older tree is a prefix
// of the newer (tlog.CheckTree; equal sizes need equal roots). It returns
// the two checkpoints. Errors are *audit.Failure, or a parse error.
func VerifyConsistency(b []byte, keys audit.Keys) (audit.Consistency, audit.Checkpoint, audit.Checkpoint, error) {
	c, err := audit.ParseConsistency(b)
	if err != nil {
		return audit.Consistency{}, audit.Checkpoint{}, audit.Checkpoint{}, err
	}
	verifiers, err := keys.Verifiers()
	if err != nil {
		return audit.Consistency{}, audit.Checkpoint{}, audit.Checkpoint{}, err
	}
	witnesses, err := keys.Cosigners()
	if err != nil {
		return audit.Consistency{}, audit.Checkpoint{}, audit.Checkpoint{}, err
	}
	fail := func(reason audit.Reason, format string, args ...any) (audit.Consistency, audit.Checkpoint, audit.Checkpoint, error) {
		return c, audit.Checkpoint{}, audit.Checkpoint{}, &audit.Failure{Index: -1, Checkpoint: -1, Reason: reason, Detail: fmt.Sprintf(format, args...)}
	}
	var cps [2]audit.Checkpoint
	for i, note := range [][]byte{c.Old, c.New} {
		o, err := audit.OpenCheckpoint(note, verifiers, witnesses)
		cp := o.Checkpoint
		if err != nil {
			f := audit.FailureOf(err)
			return fail(f.Reason, "%s checkpoint: %s", []string{"old", "new"}[i], f.Detail)
		}
		if cp.Origin != audit.Origin(c.Tenant) {
			return fail(audit.ReasonHashBreak, "checkpoint of %q, proof of tenant %q", cp.Origin, c.Tenant)
		}
		cps[i] = cp
	}
	old, cur := cps[0], cps[1]
	if old.Size > cur.Size {
		return fail(audit.ReasonHashBreak, "old checkpoint of size %d is larger than the new one of %d", old.Size, cur.Size)
	}
	if err := tlog.CheckTree(c.Hashes, cur.Size, cur.Root, old.Size, old.Root); err != nil {
		return fail(audit.ReasonHashBreak, "the log of %d records is not a prefix of the log of %d: %v", old.Size, cur.Size, err)
	}
	return c, old, cur, nil
}
