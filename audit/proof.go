package audit

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

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
	return CanonicalLine(proofFile{V: ProofVersion, Tenant: p.Tenant, Index: p.Index, Record: p.Record, Checkpoint: string(p.Checkpoint),
		Proof: FormatHashes(p.Hashes)})
}

// CanonicalLine is the file form of v: its canonical (JCS) encoding and a
// newline.
func CanonicalLine(v any) ([]byte, error) {
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
	if len(b) > MaxRecordSize+64*1024 {
		return Proof{}, errors.New("audit: proof: file too large")
	}
	var f proofFields
	if err := kernel.StrictJSON(b, &f); err != nil {
		return Proof{}, fmt.Errorf("audit: proof: %w", err)
	}
	if f.V == nil || *f.V != ProofVersion {
		return Proof{}, fmt.Errorf("audit: proof: want \"v\": %d", ProofVersion)
	}
	if f.Tenant == nil || f.Index == nil || f.Record == nil || f.Checkpoint == nil || f.Proof == nil {
		return Proof{}, errors.New("audit: proof: a field is missing")
	}
	if len(f.Proof) > 64 {
		return Proof{}, errors.New("audit: proof: more than 64 hashes")
	}
	p := Proof{Tenant: *f.Tenant, Index: *f.Index, Record: f.Record, Checkpoint: []byte(*f.Checkpoint)}
	hashes, err := ParseHashes(f.Proof)
	if err != nil {
		return Proof{}, fmt.Errorf("audit: proof: %w", err)
	}
	p.Hashes = hashes
	again, err := MarshalProof(p)
	if err != nil {
		return Proof{}, fmt.Errorf("audit: proof: %w", err)
	}
	if !bytes.Equal(again, b) {
		return Proof{}, errors.New("audit: proof: not canonical")
	}
	return p, nil
}

// FormatHashes is the file form of a proof's hashes (ParseHashes reads
// it): standard base64 of each.
func FormatHashes(hs []tlog.Hash) []string {
	out := make([]string, 0, len(hs))
	for _, h := range hs {
		out = append(out, h.String())
	}
	return out
}

// ParseHashes decodes the hashes of a proof file: standard base64 of 32
// bytes each.
func ParseHashes(ss []string) ([]tlog.Hash, error) {
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
