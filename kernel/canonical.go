package kernel

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

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
	// Most values (every event body, marshaled from the kernel's structs)
	// differ from their canonical form only in the order of object
	// members: sorted in one pass over the bytes, without the general
	// transform's tree and number formatting. FuzzCanonicalSorted holds
	// the result to jcs.Transform.
	if n, out, ok := canonicalSorted(raw, 0, 0, make([]byte, 0, len(raw))); ok && n == len(raw) {
		return out, nil
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

// CanonicalPrefix returns the length of the JSON value at the start of b
// when that value is certainly its own canonical (JCS) encoding, without
// building it again: no whitespace, object members in strictly increasing
// order of their names (so none repeated), strings with no escape and no
// control byte and only valid UTF-8, numbers that are integers of at most
// 15 digits (which JCS writes as they are), literals. ok false means only
// "not certain": a canonical value outside that subset (an escaped string,
// a fraction, a name outside printable ASCII, deep nesting) is not
// recognized, and the caller asks Canonical. Decoders of canonical input
// check that way in one pass over the bytes; TestCanonicalPrefix and
// FuzzCanonicalPrefix hold it to Canonical.
func CanonicalPrefix(b []byte) (n int, ok bool) { return canonicalValue(b, 0, 0) }

// maxCanonicalDepth bounds the nesting CanonicalPrefix follows (deeper
// values are left to Canonical).
const maxCanonicalDepth = 32

// canonicalValue scans the value at b[i:] and returns where it ends.
func canonicalValue(b []byte, i, depth int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch c := b[i]; {
	case c == '{':
		if depth >= maxCanonicalDepth {
			return 0, false
		}
		i++
		if i < len(b) && b[i] == '}' {
			return i + 1, true
		}
		var prev []byte
		for first := true; ; first = false {
			if i >= len(b) || b[i] != '"' {
				return 0, false
			}
			end, ok := canonicalString(b, i, true)
			if !ok {
				return 0, false
			}
			// Plain names are ASCII, whose UTF-16 order is their byte
			// order: strictly increasing is sorted without a repeat.
			name := b[i+1 : end-1]
			if !first && bytes.Compare(prev, name) >= 0 {
				return 0, false
			}
			prev = name
			if end >= len(b) || b[end] != ':' {
				return 0, false
			}
			if i, ok = canonicalValue(b, end+1, depth+1); !ok || i >= len(b) {
				return 0, false
			}
			switch b[i] {
			case ',':
				i++
			case '}':
				return i + 1, true
			default:
				return 0, false
			}
		}
	case c == '[':
		if depth >= maxCanonicalDepth {
			return 0, false
		}
		i++
		if i < len(b) && b[i] == ']' {
			return i + 1, true
		}
		for {
			var ok bool
			if i, ok = canonicalValue(b, i, depth+1); !ok || i >= len(b) {
				return 0, false
			}
			switch b[i] {
			case ',':
				i++
			case ']':
				return i + 1, true
			default:
				return 0, false
			}
		}
	case c == '"':
		return canonicalString(b, i, false)
	case c == '-' || c >= '0' && c <= '9':
		return canonicalInteger(b, i)
	}
	for _, lit := range [...]string{"true", "false", "null"} {
		if len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit {
			return i + len(lit), true
		}
	}
	return 0, false
}

// canonicalSorted appends to out the canonical form of the value at b[i:]
// and returns where the value ends, when the value lies in CanonicalPrefix's
// subset but for the order of object members (and has none named twice,
// which Canonical refuses); ok false leaves it to jcs.Transform.
func canonicalSorted(b []byte, i, depth int, out []byte) (int, []byte, bool) {
	if i >= len(b) {
		return 0, nil, false
	}
	switch b[i] {
	case '{':
		if depth >= maxCanonicalDepth {
			return 0, nil, false
		}
		i++
		if i < len(b) && b[i] == '}' {
			return i + 1, append(out, '{', '}'), true
		}
		type member struct{ name, value []byte }
		var ms []member
		for {
			if i >= len(b) || b[i] != '"' {
				return 0, nil, false
			}
			end, ok := canonicalString(b, i, true)
			if !ok || end >= len(b) || b[end] != ':' {
				return 0, nil, false
			}
			m := member{name: b[i+1 : end-1]}
			if i, m.value, ok = canonicalSorted(b, end+1, depth+1, nil); !ok || i >= len(b) {
				return 0, nil, false
			}
			ms = append(ms, m)
			if b[i] == '}' {
				i++
				break
			}
			if b[i] != ',' {
				return 0, nil, false
			}
			i++
		}
		// Plain names are ASCII, whose UTF-16 order is their byte order.
		slices.SortFunc(ms, func(x, y member) int { return bytes.Compare(x.name, y.name) })
		out = append(out, '{')
		for k, m := range ms {
			if k > 0 {
				if bytes.Equal(ms[k-1].name, m.name) {
					return 0, nil, false
				}
				out = append(out, ',')
			}
			out = append(out, '"')
			out = append(out, m.name...)
			out = append(out, '"', ':')
			out = append(out, m.value...)
		}
		return i, append(out, '}'), true
	case '[':
		if depth >= maxCanonicalDepth {
			return 0, nil, false
		}
		i++
		out = append(out, '[')
		if i < len(b) && b[i] == ']' {
			return i + 1, append(out, ']'), true
		}
		for {
			var ok bool
			if i, out, ok = canonicalSorted(b, i, depth+1, out); !ok || i >= len(b) {
				return 0, nil, false
			}
			switch b[i] {
			case ',':
				out = append(out, ',')
				i++
			case ']':
				return i + 1, append(out, ']'), true
			default:
				return 0, nil, false
			}
		}
	}
	end, ok := canonicalValue(b, i, depth) // a string, an integer or a literal
	if !ok {
		return 0, nil, false
	}
	return end, append(out, b[i:end]...), true
}

// canonicalString scans the string whose opening quote is b[i] and returns
// the index after its closing quote. JCS writes a string with no byte that
// needs an escape as is, valid UTF-8 included; a name must be plain
// (printable ASCII).
func canonicalString(b []byte, i int, name bool) (int, bool) {
	for i++; i < len(b); {
		c := b[i]
		switch {
		case c == '"':
			return i + 1, true
		case c == '\\' || c < 0x20:
			return 0, false
		case c < utf8.RuneSelf:
			i++
		case name:
			return 0, false
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size <= 1 {
				return 0, false
			}
			i += size
		}
	}
	return 0, false
}

// canonicalInteger scans an integer of at most 15 digits without a leading
// zero (not -0): a double holds it exactly, and JCS writes it as is.
func canonicalInteger(b []byte, i int) (int, bool) {
	start := i
	if b[i] == '-' {
		i++
	}
	digits := i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	switch n := i - digits; {
	case n == 0 || n > 15:
		return 0, false
	case b[digits] == '0' && (n > 1 || digits > start):
		return 0, false
	}
	if i < len(b) {
		if c := b[i]; c == '.' || c == 'e' || c == 'E' {
			return 0, false
		}
	}
	return i, true
}
