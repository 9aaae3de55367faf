package kernel

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

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

// Member is one member of an object that CanonicalObject puts together: its
// name and its value's canonical encoding.
type Member struct {
	Name  string
	Value []byte
}

// CanonicalObject returns the canonical encoding of the object made of
// members (distinct names) whose values are canonical already, without
// parsing them again: the members sorted as RFC 8785 sorts names, each name
// written as JCS writes it. ok is false when a name is not plain (see
// CanonicalString), and the caller asks Canonical. Envelopes and audit
// records are put together this way around their canonical event or body;
// TestCanonicalObject and FuzzCanonicalObject hold it to Canonical.
func CanonicalObject(members []Member) ([]byte, bool) {
	n := 2
	for _, m := range members {
		if !plain(m.Name) || len(m.Value) == 0 {
			return nil, false
		}
		n += len(m.Name) + len(m.Value) + 4
	}
	// Plain names are ASCII, whose UTF-16 order is their byte order.
	sorted := slices.Clone(members)
	slices.SortFunc(sorted, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	b := make([]byte, 0, n)
	b = append(b, '{')
	for i, m := range sorted {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, m.Name...)
		b = append(b, '"', ':')
		b = append(b, m.Value...)
	}
	return append(b, '}'), true
}

// CanonicalString returns the canonical encoding of s when JCS writes s as
// is between its quotes (printable ASCII without '"' or '\\'); ok is false
// otherwise.
func CanonicalString(s string) ([]byte, bool) {
	if !plain(s) {
		return nil, false
	}
	return append(append(append(make([]byte, 0, len(s)+2), '"'), s...), '"'), true
}

// CanonicalInt returns the canonical encoding of v when JCS writes it in
// plain decimal and exactly (|v| < 10^15, well inside a double's 2^53).
func CanonicalInt(v int64) ([]byte, bool) {
	if v <= -1e15 || v >= 1e15 {
		return nil, false
	}
	return strconv.AppendInt(nil, v, 10), true
}

func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
