package audit

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/contextos/ledger/kernel"
	"golang.org/x/mod/sumdb/tlog"
)

// ConsistencyVersion is the version of the consistency.json format.
const ConsistencyVersion = 1

// Consistency shows that a tenant's log, as committed to by an older signed
// checkpoint, is a prefix of the log a newer signed checkpoint commits to:
// nothing the older one covered was changed, removed or reordered since.
// An auditor who kept an earlier checkpoint checks it against a later one
// without the records. Its file form, consistency.json, is one canonical
// (JCS) object and a newline:
//
//	{"new":"<signed note>","old":"<signed note>","proof":["<base64 hash>",...],"tenant":"acme","v":1}
type Consistency struct {
	Tenant string
	Old    []byte         // the older signed checkpoint note
	New    []byte         // the newer one; its size is at least the older's
	Hashes tlog.TreeProof // tlog.ProveTree(new size, old size)
}

type consistencyFile struct {
	V      int      `json:"v"`
	Tenant string   `json:"tenant"`
	Old    string   `json:"old"`
	New    string   `json:"new"`
	Proof  []string `json:"proof"`
}

type consistencyFields struct {
	V      *int     `json:"v"`
	Tenant *string  `json:"tenant"`
	Old    *string  `json:"old"`
	New    *string  `json:"new"`
	Proof  []string `json:"proof"`
}

// MarshalConsistency returns the consistency.json form of c.
func MarshalConsistency(c Consistency) ([]byte, error) {
	return CanonicalLine(consistencyFile{V: ConsistencyVersion, Tenant: c.Tenant, Old: string(c.Old), New: string(c.New), Proof: FormatHashes(c.Hashes)})
}

// ParseConsistency parses consistency.json strictly: every field present,
// nothing unknown, valid hashes, and b equal to MarshalConsistency of the
// result. It does not verify the proof (VerifyConsistency does).
func ParseConsistency(b []byte) (Consistency, error) {
	if len(b) > 64*1024 {
		return Consistency{}, errors.New("audit: consistency: file too large")
	}
	var f consistencyFields
	if err := kernel.StrictJSON(b, &f); err != nil {
		return Consistency{}, fmt.Errorf("audit: consistency: %w", err)
	}
	if f.V == nil || *f.V != ConsistencyVersion {
		return Consistency{}, fmt.Errorf("audit: consistency: want \"v\": %d", ConsistencyVersion)
	}
	if f.Tenant == nil || f.Old == nil || f.New == nil || f.Proof == nil {
		return Consistency{}, errors.New("audit: consistency: a field is missing")
	}
	if len(f.Proof) > 128 {
		return Consistency{}, errors.New("audit: consistency: more than 128 hashes")
	}
	c := Consistency{Tenant: *f.Tenant, Old: []byte(*f.Old), New: []byte(*f.New)}
	hashes, err := ParseHashes(f.Proof)
	if err != nil {
		return Consistency{}, fmt.Errorf("audit: consistency: %w", err)
	}
	c.Hashes = hashes
	again, err := MarshalConsistency(c)
	if err != nil {
		return Consistency{}, fmt.Errorf("audit: consistency: %w", err)
	}
	if !bytes.Equal(again, b) {
		return Consistency{}, errors.New("audit: consistency: not canonical")
	}
	return c, nil
}
