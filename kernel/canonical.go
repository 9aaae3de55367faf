package kernel

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/gowebpki/jcs"
)

// Canonical returns the RFC 8785 (JCS) canonical JSON encoding of v. It is the
// one encoder of the project: action digests, definition digests, event
// signatures, the audit chain and the verifier all call it, so a hash is never
// defined by two encoders that could drift apart.
func Canonical(v any) ([]byte, error) {
	raw, ok := v.(json.RawMessage)
	if !ok {
		var err error
		if raw, err = json.Marshal(v); err != nil {
			return nil, err
		}
	}
	return jcs.Transform(raw)
}

// Digest returns the lowercase hex SHA-256 of the canonical encoding of v.
func Digest(v any) (string, error) {
	b, err := Canonical(v)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}
