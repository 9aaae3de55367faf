package audit

import (
	"errors"
	"fmt"
)

// Reason is the stable, machine-readable cause of a verification failure. The
// set is fixed; the CLI prints it and scripts match on it.
type Reason string

// The reasons a record, a checkpoint, an export or a proof is refused.
const (
	// ReasonBadSignature: a signature (an event's, a checkpoint's, a
	// cosignature's) does not verify under the key it names.
	ReasonBadSignature Reason = "bad-signature"
	// ReasonHashBreak: a hash does not match what it commits to: prev_hash
	// is not the previous record's hash, a checkpoint's root is not the root
	// of the records it covers, or a record or checkpoint does not belong to
	// the log (another tenant's record or event, another origin).
	ReasonHashBreak Reason = "hash-break"
	// ReasonGap: a record is missing: an index is skipped, or a checkpoint
	// covers more records than the export holds (truncation).
	ReasonGap Reason = "gap"
	// ReasonReorder: records are out of order: an index found at the wrong
	// position, a repeated index, or event sequences that do not increase.
	ReasonReorder Reason = "reorder"
	// ReasonNonCanonical: bytes are not the canonical encoding of a
	// well-formed record, event, checkpoint or proof (malformed, unknown or
	// missing fields, unsupported version, non-JCS bytes).
	ReasonNonCanonical Reason = "non-canonical"
	// ReasonUnknownKey: a signature names a key the trusted keys do not
	// hold (an event's, a checkpoint's, a cosignature's).
	ReasonUnknownKey Reason = "unknown-key"
	// ReasonUncovered: records past the newest checkpoint: nothing signed
	// commits to them yet (an export cut short of its checkpoints would
	// otherwise look complete).
	ReasonUncovered Reason = "uncovered"
	// ReasonTruncated: the export holds fewer records than a size it must
	// reach: a checkpoint it carries, or a trusted size the auditor gives.
	ReasonTruncated Reason = "truncated"
	// ReasonWitness: the newest checkpoint lacks the cosignatures the
	// witness policy asks for.
	ReasonWitness Reason = "witness-policy"
)

// Reasons lists every Reason.
var Reasons = []Reason{ReasonBadSignature, ReasonHashBreak, ReasonGap, ReasonReorder, ReasonNonCanonical, ReasonUnknownKey,
	ReasonUncovered, ReasonTruncated, ReasonWitness}

// Failure is the first problem a verification found. It is an error.
type Failure struct {
	Index      int64  // the record's index (its position in the export); -1 when the problem is not one record's
	Checkpoint int    // position of the checkpoint in the export; -1 when the problem is not a checkpoint's
	Reason     Reason // stable cause
	Detail     string // human-readable detail; not stable
}

// Error implements error.
func (f *Failure) Error() string {
	switch {
	case f.Checkpoint >= 0:
		return fmt.Sprintf("checkpoint %d: %s: %s", f.Checkpoint, f.Reason, f.Detail)
	case f.Index >= 0:
		return fmt.Sprintf("record %d: %s: %s", f.Index, f.Reason, f.Detail)
	}
	return fmt.Sprintf("%s: %s", f.Reason, f.Detail)
}

// Fail returns a *Failure of no particular record or checkpoint.
func Fail(r Reason, format string, args ...any) *Failure {
	return &Failure{Index: -1, Checkpoint: -1, Reason: r, Detail: fmt.Sprintf(format, args...)}
}

// FailureOf returns err as a *Failure; any other error is a non-canonical
// input.
func FailureOf(err error) *Failure {
	var f *Failure
	if errors.As(err, &f) {
		return f
	}
	return Fail(ReasonNonCanonical, "%v", err)
}
