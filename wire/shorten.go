package wire

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"unicode/utf8"
)

// The shortening rule of every operator view and metric label: a string an
// agent controls (a resource id, a run id, an operation key, an argument
// value, a reason) is shown whole up to ShortenAbove bytes; a longer one is
// shown as its first ShortPrefix bytes (cut at a character boundary)
// followed by an ellipsis, with the SHA-256 of the whole string beside it
// (lowercase hex). A view then costs at most a few hundred bytes a field
// whatever agents send, and the digest still names the string: an operator
// filters and acts by it (resource_digest), and anyone holding the string
// can check that it is the one shown.
const (
	ShortenAbove = 256
	ShortPrefix  = 64
	// Ellipsis ends a shortened string.
	Ellipsis = "…"
	// MaxShownArguments bounds a pending approval's arguments once their
	// long strings are shortened; larger arguments are left out of the
	// row (arguments_bytes says how large they are).
	MaxShownArguments = 4096
)

// Digest returns the lowercase hex SHA-256 of s.
func Digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// Shorten applies the shortening rule to s: it returns s and "" when s is
// at most ShortenAbove bytes, else its shortened form and its digest.
func Shorten(s string) (shown, digest string) {
	if len(s) <= ShortenAbove {
		return s, ""
	}
	return Prefix(s), Digest(s)
}

// Prefix is s's shortened form: its first ShortPrefix bytes, cut back to a
// character boundary, and Ellipsis.
func Prefix(s string) string {
	n := min(len(s), ShortPrefix)
	for n > 0 && n < len(s) && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + Ellipsis
}

// ShortenJSON returns a JSON value with every string in it (member names
// and values) longer than ShortenAbove bytes replaced by its shortened form
// followed by " sha256:" and its digest, and whether anything changed. A
// value that is not valid JSON is returned unchanged.
func ShortenJSON(raw json.RawMessage) (json.RawMessage, bool) {
	if len(raw) <= ShortenAbove { // no string in it can be longer
		return raw, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return raw, false
	}
	changed := false
	var walk func(any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case string:
			if len(x) > ShortenAbove {
				changed = true
				return Prefix(x) + " sha256:" + Digest(x)
			}
		case []any:
			for i := range x {
				x[i] = walk(x[i])
			}
		case map[string]any:
			out := make(map[string]any, len(x))
			for k, e := range x {
				if len(k) > ShortenAbove {
					changed = true
					k = Prefix(k) + " sha256:" + Digest(k)
				}
				out[k] = walk(e)
			}
			return out
		}
		return v
	}
	v = walk(v)
	if !changed {
		return raw, false
	}
	b, err := json.Marshal(v)
	if err != nil {
		return raw, false
	}
	return b, true
}
