package verifier

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
	"golang.org/x/mod/sumdb/tlog"
)

// EntriesVersion is the version of the entries.json format.
const EntriesVersion = 1

// Entries is an export of one tenant's audit log: every record from index 0,
// in order, and the signed checkpoints covering them. Its file form,
// entries.json, is written by MarshalEntries with one canonical record per
// line:
//
//	{"v":1,"tenant":"acme","records":[
//	<record 0>,
//	<record 1>
//	],"checkpoints":[
//	"<signed checkpoint note, as a JSON string>"
//	]}
//
// and nothing else is accepted (ParseEntries).
type Entries struct {
	Tenant      string
	Records     [][]byte // canonical records, index order
	Checkpoints [][]byte // signed checkpoint notes, increasing size
}

// MarshalEntries returns the entries.json form of e. It writes records and
// checkpoints as given; it does not verify them.
func MarshalEntries(e Entries) ([]byte, error) {
	tenant, err := kernel.Canonical(e.Tenant)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"v":%d,"tenant":%s,"records":[`, EntriesVersion, tenant)
	for i, r := range e.Records {
		b.WriteByte('\n')
		b.Write(r)
		if i < len(e.Records)-1 {
			b.WriteByte(',')
		}
	}
	b.WriteString("\n],\"checkpoints\":[")
	for i, c := range e.Checkpoints {
		s, err := kernel.Canonical(string(c))
		if err != nil {
			return nil, err
		}
		b.WriteByte('\n')
		b.Write(s)
		if i < len(e.Checkpoints)-1 {
			b.WriteByte(',')
		}
	}
	b.WriteString("\n]}\n")
	return b.Bytes(), nil
}

type entriesFile struct {
	V           *int              `json:"v"`
	Tenant      *string           `json:"tenant"`
	Records     []json.RawMessage `json:"records"`
	Checkpoints []string          `json:"checkpoints"`
}

// maxEntriesSize bounds what ParseEntries reads (1 GiB).
const maxEntriesSize = 1 << 30

// ParseEntries parses entries.json strictly: the exact layout MarshalEntries
// writes (so the bytes outside records are fixed), version 1 and a valid
// tenant. Records and checkpoints are returned as found, unverified: see
// VerifyEntries.
func ParseEntries(b []byte) (Entries, error) {
	if len(b) > maxEntriesSize {
		return Entries{}, errors.New("verifier: entries: file too large")
	}
	var f entriesFile
	if err := kernel.StrictJSON(b, &f); err != nil {
		return Entries{}, fmt.Errorf("verifier: entries: %w", err)
	}
	if f.V == nil || *f.V != EntriesVersion {
		return Entries{}, fmt.Errorf("verifier: entries: want \"v\": %d", EntriesVersion)
	}
	if f.Tenant == nil || f.Records == nil || f.Checkpoints == nil {
		return Entries{}, errors.New("verifier: entries: tenant, records and checkpoints are required")
	}
	if err := codec.ValidToken(*f.Tenant); err != nil {
		return Entries{}, fmt.Errorf("verifier: entries: tenant: %w", err)
	}
	e := Entries{Tenant: *f.Tenant, Records: make([][]byte, len(f.Records)), Checkpoints: make([][]byte, len(f.Checkpoints))}
	for i, r := range f.Records {
		e.Records[i] = r
	}
	for i, c := range f.Checkpoints {
		e.Checkpoints[i] = []byte(c)
	}
	again, err := MarshalEntries(e)
	if err != nil {
		return Entries{}, fmt.Errorf("verifier: entries: %w", err)
	}
	if !bytes.Equal(again, b) {
		return Entries{}, errors.New("verifier: entries: not in the layout of an export (whitespace, field order or escaping differ)")
	}
	return e, nil
}

// Result is the outcome of VerifyEntries.
type Result struct {
	Tenant      string
	Records     int64     // records in the export
	Checkpoints int       // checkpoints in the export
	Root        tlog.Hash // Merkle tree hash of all records (valid only when OK)
	Failure     *Failure  // the first problem; nil when the export verifies
}

// OK reports whether the export verified.
func (r Result) OK() bool { return r.Failure == nil }

// VerifyEntries verifies an entries.json export against trusted keys. It
// returns an error when b is not an export at all (ParseEntries, or keys that
// do not load); otherwise the Result names the first bad record (in index
// order) and the reason, or the first bad checkpoint. It checks, for record i:
// canonical form, key known, record signature, position (index i: a larger
// index is a gap unless index i appears later, which is a reorder; a repeated
// or smaller index is a reorder), increasing event sequence, prev_hash equal
// to the RecordHash of record i-1, tenant, event_hash, the event's strict
// decoding, key and signature. Then each checkpoint: signature by a trusted
// checkpoint key, origin of this tenant, size within the export (else gap) and
// root equal to the Merkle tree hash of that many records (else hash-break).
func VerifyEntries(b []byte, keys Keys) (Result, error) {
	e, err := ParseEntries(b)
	if err != nil {
		return Result{}, err
	}
	verifiers, err := keys.Verifiers()
	if err != nil {
		return Result{}, err
	}
	res := Result{Tenant: e.Tenant, Records: int64(len(e.Records)), Checkpoints: len(e.Checkpoints)}
	at := func(i int64, reason Reason, format string, args ...any) (Result, error) {
		res.Failure = &Failure{Index: i, Checkpoint: -1, Reason: reason, Detail: fmt.Sprintf(format, args...)}
		return res, nil
	}
	// appearsLater reports whether a record after position i carries index
	// want: a missing index found later is a reorder, not a gap. Only run on
	// the first misplaced record.
	appearsLater := func(i int, want int64) bool {
		for _, raw := range e.Records[i+1:] {
			var probe struct {
				Index *int64 `json:"index"`
			}
			if json.Unmarshal(raw, &probe) == nil && probe.Index != nil && *probe.Index == want {
				return true
			}
		}
		return false
	}
	var tree Tree
	var prev []byte
	var prevSeq uint64
	for i, raw := range e.Records {
		pos := int64(i)
		r, err := ParseRecord(raw)
		if err != nil {
			f := failureOf(err)
			return at(pos, f.Reason, "%s", f.Detail)
		}
		if r.Index != pos {
			if r.Index < pos || appearsLater(i, pos) {
				return at(pos, ReasonReorder, "record %d found at position %d", r.Index, i)
			}
			return at(pos, ReasonGap, "record %d missing (found record %d)", pos, r.Index)
		}
		if err := verifyParsed(r, keys.Keyring); err != nil {
			f := failureOf(err)
			return at(pos, f.Reason, "%s", f.Detail)
		}
		if r.Tenant != e.Tenant {
			return at(pos, ReasonHashBreak, "record of tenant %q in the log of %q", r.Tenant, e.Tenant)
		}
		if i > 0 && r.EventSeq <= prevSeq {
			return at(pos, ReasonReorder, "event_seq %d does not follow %d", r.EventSeq, prevSeq)
		}
		want := GenesisPrevHash
		if i > 0 {
			want = HexHash(RecordHash(prev))
		}
		if r.PrevHash != want {
			return at(pos, ReasonHashBreak, "prev_hash %s, previous record hashes to %s", r.PrevHash, want)
		}
		if err := tree.Append(RecordHash(raw)); err != nil {
			return Result{}, err
		}
		prev, prevSeq = raw, r.EventSeq
	}
	for k, msg := range e.Checkpoints {
		ck := func(reason Reason, format string, args ...any) (Result, error) {
			res.Failure = &Failure{Index: -1, Checkpoint: k, Reason: reason, Detail: fmt.Sprintf(format, args...)}
			return res, nil
		}
		c, err := OpenCheckpoint(msg, verifiers)
		if err != nil {
			f := failureOf(err)
			return ck(f.Reason, "%s", f.Detail)
		}
		if c.Origin != Origin(e.Tenant) {
			return ck(ReasonHashBreak, "checkpoint of %q in the log of %q", c.Origin, Origin(e.Tenant))
		}
		if c.Size > tree.Size() {
			res.Failure = &Failure{Index: tree.Size(), Checkpoint: k, Reason: ReasonGap,
				Detail: fmt.Sprintf("checkpoint covers %d records, the export holds %d", c.Size, tree.Size())}
			return res, nil
		}
		root, err := tree.Root(c.Size)
		if err != nil {
			return Result{}, err
		}
		if root != c.Root {
			return ck(ReasonHashBreak, "checkpoint root for size %d is %s, the records hash to %s", c.Size, c.Root, root)
		}
	}
	root, err := tree.Root(tree.Size())
	if err != nil {
		return Result{}, err
	}
	res.Root = root
	return res, nil
}
