package kernel

import (
	"encoding/json"
	"slices"
)

// ActionBinding is everything that makes a proposed tool call this exact
// action. Its digest is what approvals, decision records and the audit bind
// to: changing any field, or any nested argument, changes the digest.
type ActionBinding struct {
	Tenant            string          `json:"tenant"`
	Principal         string          `json:"principal"`
	RunID             string          `json:"run_id"`
	CapabilityID      string          `json:"capability_id"`
	CapabilityVersion string          `json:"capability_version"`
	Arguments         json.RawMessage `json:"arguments"`
	EvidenceRefs      []string        `json:"evidence_refs"`
	PolicyDigest      string          `json:"policy_digest"`
	ProfileDigest     string          `json:"profile_digest"`
}

// ActionDigest returns the hex SHA-256 of the binding's RFC 8785 form.
// Evidence refs are a set: they are sorted and de-duplicated first, so their
// order cannot change the digest. Arguments must be valid JSON (use
// DecodeArguments first; it also refuses numbers that canonicalization would
// merge).
func ActionDigest(b ActionBinding) (string, error) {
	refs := slices.Clone(b.EvidenceRefs)
	slices.Sort(refs)
	b.EvidenceRefs = slices.Compact(refs)
	if b.EvidenceRefs == nil {
		b.EvidenceRefs = []string{}
	}
	return Digest(b)
}
