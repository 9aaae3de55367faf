package projections

import (
	"context"
	"errors"
	"fmt"

	"github.com/contextos/ledger/audit"
	"github.com/contextos/ledger/events/codec"
	"golang.org/x/mod/sumdb/tlog"
)

// A proof is made by reading the log again rather than from a tree kept in
// memory: each of its hashes is the tree hash of a fixed range of records
// (audit.InclusionRanges, audit.ConsistencyRanges), which one pass over the
// records computes with a compact range per range. Memory stays O(log n)
// whatever the log's length; the price is reading the log up to the
// checkpoint's size, O(n) time per proof.

// pass is what one read of a tenant's records gives: the tree hashes of
// the ranges asked for, the bytes of the record asked for, and the chain as
// folded at the end.
type pass struct {
	hashes []tlog.Hash
	raw    []byte
	end    chain
}

// logPass folds the tenant's records after start (a chain as folded up to
// some record, a fresh one to read the whole log) up to size records, with
// the rules of audit.Chain, checking each checkpoint of cps when the fold
// reaches its size, and computes the tree hashes of ranges (those ending
// before start's size must be subtrees of its compact range). want is the
// index of a record whose bytes to keep, -1 for none.
func logPass(ctx context.Context, log *AuditLog, start chain, size int64, ranges []audit.Range, cps []audit.Checkpoint, want int64) (pass, error) {
	c := chain{Chain: start.Clone(), lastSubjSeq: start.lastSubjSeq, rotation: start.rotation}
	front := c.Frontier()
	rh, err := audit.NewRangeHasher(ranges, &front)
	if err != nil {
		return pass{}, err
	}
	check := func() error {
		for _, cp := range cps {
			if cp.Size == c.Size() {
				if err := c.checkCheckpoint(cp); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := check(); err != nil {
		return pass{}, err
	}
	var out pass
	if c.Size() < size {
		err = log.Records(ctx, c.Tenant, c.lastSubjSeq+1, 0, func(r StoredRecord) error {
			if err := c.apply(r); err != nil {
				return err
			}
			if err := rh.Add(audit.RecordHash(r.Raw)); err != nil {
				return err
			}
			if r.Record.Index == want {
				out.raw = r.Raw
			}
			if err := check(); err != nil {
				return err
			}
			if c.Size() == size {
				return errStop
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStop) {
			return pass{}, err
		}
	}
	if c.Size() != size {
		return pass{}, fmt.Errorf("projections: audit log of %q holds %d records, %d expected", c.Tenant, c.Size(), size)
	}
	if want >= 0 && out.raw == nil {
		return pass{}, fmt.Errorf("projections: audit log of %q: record %d not read", c.Tenant, want)
	}
	if out.hashes, err = rh.Hashes(); err != nil {
		return pass{}, err
	}
	out.end = c
	return out, nil
}

// findEvent returns the index of the first record of tenant holding event
// id, reading the log from its start; found is false when none does.
func findEvent(ctx context.Context, log *AuditLog, tenant, eventID string) (index int64, found bool, err error) {
	err = log.Records(ctx, tenant, 1, 0, func(r StoredRecord) error {
		env, err := codec.Decode(r.Record.Event)
		if err != nil {
			return fmt.Errorf("audit record %d: %w", r.Record.Index, err)
		}
		if env.EventID == eventID {
			index, found = r.Record.Index, true
			return errStop
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return 0, false, err
	}
	return index, found, nil
}
