package verifier

import (
	"errors"
	"fmt"

	"github.com/contextos/ledger/audit"
	"golang.org/x/mod/sumdb/tlog"
)

// NewProof proves record index (whose canonical bytes are record) of tenant's
// log in the signed checkpoint, using the stored hashes of t, which must hold
// at least the checkpoint's size.
func NewProof(t *audit.Tree, tenant string, index int64, record, signedCheckpoint []byte) (audit.Proof, error) {
	c, err := audit.ReadCheckpoint(signedCheckpoint)
	if err != nil {
		return audit.Proof{}, err
	}
	hashes, err := t.Prove(index, c.Size)
	if err != nil {
		return audit.Proof{}, err
	}
	return audit.Proof{Tenant: tenant, Index: index, Record: record, Checkpoint: signedCheckpoint, Hashes: hashes}, nil
}

// ErrNotFound is returned by ProveEntries when no record holds the event.
var ErrNotFound = errors.New("verifier: no record holds the event")

// ErrNotCheckpointed is returned when a record is not yet covered by any
// checkpoint: retry after the next checkpoint.
var ErrNotCheckpointed = errors.New("verifier: the record is not covered by a checkpoint yet")

// ProveEntries proves the record holding event eventID in an export, against
// the export's largest checkpoint. The export is not verified here.
func ProveEntries(e audit.Entries, eventID string) (audit.Proof, error) {
	var t audit.Tree
	index := int64(-1)
	for i, raw := range e.Records {
		if err := t.Append(audit.RecordHash(raw)); err != nil {
			return audit.Proof{}, err
		}
		if index >= 0 {
			continue
		}
		_, env, err := audit.Parse(raw)
		if err != nil {
			return audit.Proof{}, fmt.Errorf("verifier: record %d: %w", i, err)
		}
		if env.EventID == eventID {
			index = int64(i)
		}
	}
	if index < 0 {
		return audit.Proof{}, ErrNotFound
	}
	var best []byte
	var bestSize int64
	for _, msg := range e.Checkpoints {
		c, err := audit.ReadCheckpoint(msg)
		if err != nil {
			return audit.Proof{}, err
		}
		if c.Size > index && c.Size <= t.Size() && c.Size > bestSize {
			best, bestSize = msg, c.Size
		}
	}
	if best == nil {
		return audit.Proof{}, ErrNotCheckpointed
	}
	return NewProof(&t, e.Tenant, index, e.Records[index], best)
}

// VerifyProof verifies a proof.json against trusted keys, offline and without
// the rest of the log: the checkpoint's signature and origin, the record on
// its own (audit.VerifyRecord: its form and its event's signature), that
// the record is the proof's index of the proof's tenant, and its inclusion in
// the checkpoint's tree (tlog.CheckRecord). Errors are *audit.Failure, or a parse
// error.
func VerifyProof(b []byte, keys audit.Keys) (audit.Proof, audit.Record, error) {
	p, err := audit.ParseProof(b)
	if err != nil {
		return audit.Proof{}, audit.Record{}, err
	}
	verifiers, err := keys.Verifiers()
	if err != nil {
		return audit.Proof{}, audit.Record{}, err
	}
	witnesses, err := keys.Cosigners()
	if err != nil {
		return audit.Proof{}, audit.Record{}, err
	}
	fail := func(reason audit.Reason, format string, args ...any) (audit.Proof, audit.Record, error) {
		return p, audit.Record{}, &audit.Failure{Index: p.Index, Checkpoint: -1, Reason: reason, Detail: fmt.Sprintf(format, args...)}
	}
	o, err := audit.OpenCheckpoint(p.Checkpoint, verifiers, witnesses)
	c := o.Checkpoint
	if err != nil {
		f := audit.FailureOf(err)
		return fail(f.Reason, "checkpoint: %s", f.Detail)
	}
	if c.Origin != audit.Origin(p.Tenant) {
		return fail(audit.ReasonHashBreak, "checkpoint of %q, proof of tenant %q", c.Origin, p.Tenant)
	}
	r, _, err := audit.VerifyRecord(p.Record, keys.Keyring)
	if err != nil {
		f := audit.FailureOf(err)
		return fail(f.Reason, "%s", f.Detail)
	}
	if r.Tenant != p.Tenant || r.Index != p.Index {
		return fail(audit.ReasonHashBreak, "record %d of %q, proof of record %d of %q", r.Index, r.Tenant, p.Index, p.Tenant)
	}
	if p.Index >= c.Size {
		return fail(audit.ReasonGap, "checkpoint of size %d does not cover record %d", c.Size, p.Index)
	}
	if err := tlog.CheckRecord(p.Hashes, c.Size, c.Root, p.Index, audit.RecordHash(p.Record)); err != nil {
		return fail(audit.ReasonHashBreak, "inclusion proof: %v", err)
	}
	return p, r, nil
}
