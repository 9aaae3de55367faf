package verifier

import (
	"encoding/hex"
	"encoding/json"
	"slices"

	"errors"
	"fmt"

	"github.com/contextos/ledger/audit"
	"golang.org/x/mod/sumdb/tlog"
)

// Policy is what an auditor requires of an export beyond its signatures
// and chain. The zero Policy asks for a complete export and no witness.
type Policy struct {
	// AllowPartial accepts records past the newest checkpoint (nothing
	// signed commits to them) instead of refusing them as uncovered.
	AllowPartial bool
	// MinSize is a size the auditor trusts the log to have reached (an
	// earlier export's, a witness's): an export holding fewer records is
	// refused as truncated, whatever it holds.
	MinSize int64
	// Witnesses are the witness keys the auditor trusts, and Quorum how
	// many of them must have cosigned the export's newest checkpoint.
	Witnesses []*audit.Cosigner
	Quorum    int
	// Kept are checkpoint notes the auditor trusts (kept from an earlier
	// export, or a witness's latest): each must verify (log signature,
	// cosignatures) and the export must extend it: hold at least its size
	// (else truncated) with the same root at that size (else hash-break).
	Kept [][]byte
}

// Result is the outcome of VerifyEntries.
type Result struct {
	Tenant      string
	Records     int64     // records in the export
	Checkpoints int       // checkpoints in the export
	Covered     int64     // records covered by the newest checkpoint (its size)
	Cosigned    []string  // witnesses of the policy that cosigned the newest checkpoint
	Root        tlog.Hash // Merkle tree hash of all records (valid only when OK)
	Failure     *audit.Failure
}

// OK reports whether the export verified.
func (r Result) OK() bool { return r.Failure == nil }

// VerifyEntries verifies an entries.json export against trusted keys under
// the zero Policy (complete, no witness). See VerifyEntriesPolicy.
func VerifyEntries(b []byte, keys audit.Keys) (Result, error) {
	return VerifyEntriesPolicy(b, keys, Policy{})
}

// VerifyEntriesPolicy verifies an entries.json export against trusted keys
// and an auditor's policy. It returns an error when b is not an export at
// all (ParseEntries, or keys that do not load); otherwise the Result names
// the first bad record (in index order) and the reason, or the first bad
// checkpoint, or the policy that does not hold. For record i it checks its
// form and event (audit.Parse), its position (a larger index is a gap
// unless index i appears later, which is a reorder), the event's signature,
// and the chain (audit.Chain.Append: prev_hash, event_seq order, tenant).
// Then each checkpoint: the log's signature and every cosignature
// (audit.OpenCheckpoint, with the witnesses of keys and of p), origin, size
// within the export (else truncated) and root. Then the policy: every record
// covered by the newest checkpoint unless p.AllowPartial (else uncovered), at
// least p.MinSize records (else truncated), p.Quorum of p.Witnesses
// cosigning the newest checkpoint (else witness-policy), and every kept
// checkpoint a prefix of the export (else truncated or hash-break).
func VerifyEntriesPolicy(b []byte, keys audit.Keys, p Policy) (Result, error) {
	e, err := audit.ParseEntries(b)
	var lf *audit.Failure
	if errors.As(err, &lf) {
		return Result{Failure: lf}, nil
	}
	if err != nil {
		return Result{}, err
	}
	verifiers, err := keys.Verifiers()
	if err != nil {
		return Result{}, err
	}
	witnesses, err := keys.Cosigners()
	if err != nil {
		return Result{}, err
	}
	witnesses = append(witnesses, p.Witnesses...)
	res := Result{Tenant: e.Tenant, Records: int64(len(e.Records)), Checkpoints: len(e.Checkpoints)}
	fail := func(f *audit.Failure) (Result, error) {
		res.Failure = f
		return res, nil
	}
	// appearsLater reports whether a record after position i carries index
	// want: a missing index found later is a reorder, not a gap. Only run on
	// the first misplaced record.
	appearsLater := func(i int, want int64) bool {
		for _, raw := range e.Records[i+1:] {
			if x, ok := audit.Index(raw); ok && x == want {
				return true
			}
		}
		return false
	}
	chain := audit.NewTreeChain(e.Tenant)
	for i, raw := range e.Records {
		pos := int64(i)
		r, env, err := audit.Parse(raw)
		if err != nil {
			// The record is named by its position, whatever its bytes say:
			// a change that breaks its JSON still names this index.
			f := audit.FailureOf(err)
			f.Index = pos
			return fail(f)
		}
		if r.Index > pos && !appearsLater(i, pos) {
			return fail(&audit.Failure{Index: pos, Checkpoint: -1, Reason: audit.ReasonGap, Detail: fmt.Sprintf("record %d missing (found record %d)", pos, r.Index)})
		}
		if r.Index != pos {
			return fail(&audit.Failure{Index: pos, Checkpoint: -1, Reason: audit.ReasonReorder, Detail: fmt.Sprintf("record %d found at position %d", r.Index, i)})
		}
		if err := audit.VerifyEvent(r, env, keys.Keyring); err != nil {
			return fail(audit.FailureOf(err))
		}
		if err := chain.Append(r, raw); err != nil {
			if i > 0 && changedBefore(e, i, r) {
				return fail(&audit.Failure{Index: pos - 1, Checkpoint: -1, Reason: audit.ReasonHashBreak,
					Detail: fmt.Sprintf("record %d is not the record that record %d chains to: its bytes changed", i-1, i)})
			}
			return fail(audit.FailureOf(err))
		}
	}
	newest := -1
	for k, msg := range e.Checkpoints {
		ck := func(f *audit.Failure) (Result, error) {
			f.Checkpoint = k
			return fail(f)
		}
		o, err := audit.OpenCheckpoint(msg, verifiers, witnesses)
		if err != nil {
			return ck(audit.FailureOf(err))
		}
		c := o.Checkpoint
		if c.Size > chain.Size() {
			return ck(&audit.Failure{Index: chain.Size(), Reason: audit.ReasonTruncated,
				Detail: fmt.Sprintf("checkpoint covers %d records, the export holds %d", c.Size, chain.Size())})
		}
		if err := chain.CheckCheckpoint(c); err != nil {
			f := audit.FailureOf(err)
			if c.Size == chain.Size() && c.Size > 0 && f.Reason == audit.ReasonHashBreak {
				// Every record but the last is vouched for by the next
				// one's prev_hash, which held: the last one changed.
				f.Index = c.Size - 1
			}
			return ck(f)
		}
		if c.Size < res.Covered {
			return ck(audit.Fail(audit.ReasonReorder, "checkpoint of %d records after one of %d", c.Size, res.Covered))
		}
		res.Covered, newest = c.Size, k
		res.Cosigned = res.Cosigned[:0]
		for _, s := range o.Cosigned {
			for _, w := range p.Witnesses {
				if w.Name() == s.Name && !slices.Contains(res.Cosigned, s.Name) {
					res.Cosigned = append(res.Cosigned, s.Name)
				}
			}
		}
	}
	switch {
	case res.Covered < chain.Size() && !p.AllowPartial:
		return fail(&audit.Failure{Index: res.Covered, Checkpoint: -1, Reason: audit.ReasonUncovered,
			Detail: fmt.Sprintf("records %d to %d are not covered by a checkpoint (use --allow-partial to accept them)", res.Covered, chain.Size()-1)})
	case chain.Size() < p.MinSize:
		return fail(&audit.Failure{Index: chain.Size(), Checkpoint: -1, Reason: audit.ReasonTruncated,
			Detail: fmt.Sprintf("the export holds %d records, the log is known to hold at least %d", chain.Size(), p.MinSize)})
	case p.Quorum > 0 && len(res.Cosigned) < p.Quorum:
		f := &audit.Failure{Index: -1, Checkpoint: newest, Reason: audit.ReasonWitness,
			Detail: fmt.Sprintf("the newest checkpoint is cosigned by %d of the %d witnesses required (%v)", len(res.Cosigned), p.Quorum, res.Cosigned)}
		if newest < 0 {
			f.Detail = "the export holds no checkpoint for a witness to have cosigned"
		}
		return fail(f)
	}
	for i, msg := range p.Kept {
		o, err := audit.OpenCheckpoint(msg, verifiers, witnesses)
		if err != nil {
			f := audit.FailureOf(err)
			f.Detail = fmt.Sprintf("kept checkpoint %d: %s", i, f.Detail)
			return fail(f)
		}
		c := o.Checkpoint
		if c.Origin != audit.Origin(e.Tenant) {
			return fail(audit.Fail(audit.ReasonHashBreak, "kept checkpoint %d is of %q, the export of %q", i, c.Origin, audit.Origin(e.Tenant)))
		}
		if c.Size > chain.Size() {
			return fail(&audit.Failure{Index: chain.Size(), Checkpoint: -1, Reason: audit.ReasonTruncated,
				Detail: fmt.Sprintf("the export holds %d records, the kept checkpoint %d covers %d", chain.Size(), i, c.Size)})
		}
		if err := chain.CheckCheckpoint(c); err != nil {
			f := audit.FailureOf(err)
			f.Detail = fmt.Sprintf("the log is not the one kept checkpoint %d committed to: %s", i, f.Detail)
			return fail(f)
		}
	}
	res.Root = chain.Root()
	return res, nil
}

// changedBefore reports whether the chain broke at record i because record
// i-1's bytes changed rather than record i's: record i does not chain to
// record i-1, but record i itself is vouched for, by record i+1's prev_hash
// or, for the last record, by a checkpoint whose root is that of the log
// with record i-1's leaf as record i remembers it. A one-byte change to a
// record's subject or event_seq, which no event signature covers, is so
// named by its own index rather than its successor's.
func changedBefore(e audit.Entries, i int, r audit.Record) bool {
	if r.PrevHash == audit.HexHash(audit.RecordHash(e.Records[i-1])) {
		return false
	}
	if i+1 < len(e.Records) {
		var next struct {
			PrevHash string `json:"prev_hash"`
		}
		return json.Unmarshal(e.Records[i+1], &next) == nil && next.PrevHash == audit.HexHash(audit.RecordHash(e.Records[i]))
	}
	want, err := hex.DecodeString(r.PrevHash)
	if err != nil || len(want) != tlog.HashSize {
		return false
	}
	var t audit.Tree
	for j, raw := range e.Records {
		leaf := audit.RecordHash(raw)
		if j == i-1 {
			copy(leaf[:], want)
		}
		if t.Append(leaf) != nil {
			return false
		}
	}
	root, err := t.Root(t.Size())
	if err != nil {
		return false
	}
	for _, msg := range e.Checkpoints {
		if c, err := audit.ReadCheckpoint(msg); err == nil && c.Size == t.Size() && c.Root == root {
			return true
		}
	}
	return false
}
