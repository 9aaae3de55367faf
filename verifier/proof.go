package verifier

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/contextos/ledger/audit"

	"github.com/contextos/ledger/kernel"
	"golang.org/x/mod/sumdb/tlog"
)

// ProofVersion is the version of the proof.json format.
const ProofVersion = 1

// Proof shows that one record is in a tenant's log as committed to by a
// signed checkpoint, without the rest of the log. Its file form, proof.json,
// is one canonical (JCS) object and a newline:
//
//	{"checkpoint":"<signed note>","index":5,"proof":["<base64 hash>",...],"record":{...},"tenant":"acme","v":1}
type Proof struct {
	Tenant     string
	Index      int64
	Record     []byte           // the canonical record
	Checkpoint []byte           // the signed checkpoint note; its size is greater than Index
	Hashes     tlog.RecordProof // tlog.ProveRecord(size, Index)
}

type proofFile struct {
	V          int             `json:"v"`
	Tenant     string          `json:"tenant"`
	Index      int64           `json:"index"`
	Record     json.RawMessage `json:"record"`
	Checkpoint string          `json:"checkpoint"`
	Proof      []string        `json:"proof"`
}

type proofFields struct {
	V          *int            `json:"v"`
	Tenant     *string         `json:"tenant"`
	Index      *int64          `json:"index"`
	Record     json.RawMessage `json:"record"`
	Checkpoint *string         `json:"checkpoint"`
	Proof      []string        `json:"proof"`
}

// MarshalProof returns the proof.json form of p.
func MarshalProof(p Proof) ([]byte, error) {
	return canonicalLine(proofFile{V: ProofVersion, Tenant: p.Tenant, Index: p.Index, Record: p.Record, Checkpoint: string(p.Checkpoint),
		Proof: formatHashes(p.Hashes)})
}

// canonicalLine is the file form of v: its canonical (JCS) encoding and a
// newline.
func canonicalLine(v any) ([]byte, error) {
	b, err := kernel.Canonical(v)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// ParseProof parses proof.json strictly: every field present, nothing
// unknown, valid hashes, and b equal to MarshalProof of the result. It does
// not verify the proof (VerifyProof does).
func ParseProof(b []byte) (Proof, error) {
	if len(b) > audit.MaxRecordSize+64*1024 {
		return Proof{}, errors.New("verifier: proof: file too large")
	}
	var f proofFields
	if err := kernel.StrictJSON(b, &f); err != nil {
		return Proof{}, fmt.Errorf("verifier: proof: %w", err)
	}
	if f.V == nil || *f.V != ProofVersion {
		return Proof{}, fmt.Errorf("verifier: proof: want \"v\": %d", ProofVersion)
	}
	if f.Tenant == nil || f.Index == nil || f.Record == nil || f.Checkpoint == nil || f.Proof == nil {
		return Proof{}, errors.New("verifier: proof: a field is missing")
	}
	if len(f.Proof) > 64 {
		return Proof{}, errors.New("verifier: proof: more than 64 hashes")
	}
	p := Proof{Tenant: *f.Tenant, Index: *f.Index, Record: f.Record, Checkpoint: []byte(*f.Checkpoint)}
	hashes, err := parseHashes(f.Proof)
	if err != nil {
		return Proof{}, fmt.Errorf("verifier: proof: %w", err)
	}
	p.Hashes = hashes
	again, err := MarshalProof(p)
	if err != nil {
		return Proof{}, fmt.Errorf("verifier: proof: %w", err)
	}
	if !bytes.Equal(again, b) {
		return Proof{}, errors.New("verifier: proof: not canonical")
	}
	return p, nil
}

// NewProof proves record index (whose canonical bytes are record) of tenant's
// log in the signed checkpoint, using the stored hashes of t, which must hold
// at least the checkpoint's size.
func NewProof(t *audit.Tree, tenant string, index int64, record, signedCheckpoint []byte) (Proof, error) {
	c, err := audit.ReadCheckpoint(signedCheckpoint)
	if err != nil {
		return Proof{}, err
	}
	hashes, err := t.Prove(index, c.Size)
	if err != nil {
		return Proof{}, err
	}
	return Proof{Tenant: tenant, Index: index, Record: record, Checkpoint: signedCheckpoint, Hashes: hashes}, nil
}

// ErrNotFound is returned by ProveEntries when no record holds the event.
var ErrNotFound = errors.New("verifier: no record holds the event")

// ErrNotCheckpointed is returned when a record is not yet covered by any
// checkpoint: retry after the next checkpoint.
var ErrNotCheckpointed = errors.New("verifier: the record is not covered by a checkpoint yet")

// ProveEntries proves the record holding event eventID in an export, against
// the export's largest checkpoint. The export is not verified here.
func ProveEntries(e Entries, eventID string) (Proof, error) {
	var t audit.Tree
	index := int64(-1)
	for i, raw := range e.Records {
		if err := t.Append(audit.RecordHash(raw)); err != nil {
			return Proof{}, err
		}
		if index >= 0 {
			continue
		}
		_, env, err := audit.Parse(raw)
		if err != nil {
			return Proof{}, fmt.Errorf("verifier: record %d: %w", i, err)
		}
		if env.EventID == eventID {
			index = int64(i)
		}
	}
	if index < 0 {
		return Proof{}, ErrNotFound
	}
	var best []byte
	var bestSize int64
	for _, msg := range e.Checkpoints {
		c, err := audit.ReadCheckpoint(msg)
		if err != nil {
			return Proof{}, err
		}
		if c.Size > index && c.Size <= t.Size() && c.Size > bestSize {
			best, bestSize = msg, c.Size
		}
	}
	if best == nil {
		return Proof{}, ErrNotCheckpointed
	}
	return NewProof(&t, e.Tenant, index, e.Records[index], best)
}

// VerifyProof verifies a proof.json against trusted keys, offline and without
// the rest of the log: the checkpoint's signature and origin, the record on
// its own (audit.VerifyRecord: its form and its event's signature), that
// the record is the proof's index of the proof's tenant, and its inclusion in
// the checkpoint's tree (tlog.CheckRecord). Errors are *audit.Failure, or a parse
// error.
func VerifyProof(b []byte, keys Keys) (Proof, audit.Record, error) {
	p, err := ParseProof(b)
	if err != nil {
		return Proof{}, audit.Record{}, err
	}
	verifiers, err := keys.Verifiers()
	if err != nil {
		return Proof{}, audit.Record{}, err
	}
	witnesses, err := keys.Cosigners()
	if err != nil {
		return Proof{}, audit.Record{}, err
	}
	fail := func(reason audit.Reason, format string, args ...any) (Proof, audit.Record, error) {
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

// formatHashes is the file form of a proof's hashes (parseHashes reads
// it): standard base64 of each.
func formatHashes(hs []tlog.Hash) []string {
	out := make([]string, 0, len(hs))
	for _, h := range hs {
		out = append(out, h.String())
	}
	return out
}

// parseHashes decodes the hashes of a proof file: standard base64 of 32
// bytes each.
func parseHashes(ss []string) ([]tlog.Hash, error) {
	var out []tlog.Hash
	for _, s := range ss {
		h, err := base64.StdEncoding.Strict().DecodeString(s)
		if err != nil || len(h) != tlog.HashSize {
			return nil, errors.New("a hash is not base64 of 32 bytes")
		}
		var x tlog.Hash
		copy(x[:], h)
		out = append(out, x)
	}
	return out, nil
}
