package kernel

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"unicode/utf8"

	"github.com/contextos/ledger/wire"
)

// MaxArgumentDepth bounds the nesting of tool arguments; deeper documents are
// refused before any rule looks at them.
const MaxArgumentDepth = 32

// DecodeArguments decodes tool arguments strictly: one JSON object, no
// trailing data, valid UTF-8, nesting at most MaxArgumentDepth, numbers kept
// exact (json.Number) and each representable as an IEEE 754 double so that
// RFC 8785 canonicalization cannot merge two different argument values.
// Failures carry CodeRequestMalformed, except a number at one of amounts
// (the amount pointers of the guarantees that cover the call) that is not
// exactly representable, such as 1e400: it is an invalid amount
// (CodeAmountInvalid), as any other amount outside 1..2^53-1 is.
func DecodeArguments(raw []byte, amounts ...Pointer) (map[string]any, *Refusal) {
	if !utf8.Valid(raw) {
		return nil, refuse(wire.CodeRequestMalformed, "arguments are not valid UTF-8")
	}
	if loneSurrogate(raw) {
		// encoding/json would decode it as U+FFFD: \ud800, \udc00 and
		// U+FFFD itself would then be one value (one ledger, one digest)
		// while the provider could receive either.
		return nil, refuse(wire.CodeRequestMalformed, "arguments escape a lone UTF-16 surrogate (\\ud800-\\udfff without its pair)")
	}
	if d := jsonDepth(raw); d > MaxArgumentDepth {
		return nil, refuse(wire.CodeRequestMalformed, "arguments nest deeper than %d", MaxArgumentDepth)
	}
	if name, dup, err := DuplicateKey(raw); err != nil || dup {
		if err != nil {
			return nil, refuse(wire.CodeRequestMalformed, "arguments are not valid JSON: %v", err)
		}
		return nil, refuse(wire.CodeRequestMalformed, "arguments name %q twice", clip(name))
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, refuse(wire.CodeRequestMalformed, "arguments are not valid JSON: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, refuse(wire.CodeRequestMalformed, "arguments have trailing data")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, refuse(wire.CodeRequestMalformed, "arguments must be a JSON object")
	}
	for _, p := range amounts {
		if v, ok := p.Eval(obj); ok {
			if n, isNum := v.(json.Number); isNum && !exactFloat(string(n)) {
				return nil, refuse(wire.CodeAmountInvalid, "value at %s: amount %s is not an exact positive integer <= 2^53-1", p, clip(string(n)))
			}
		}
	}
	if lit, bad := inexactNumber(obj); bad {
		return nil, refuse(wire.CodeRequestMalformed, "number %s is not exactly representable; send it as a string", clip(lit))
	}
	return obj, nil
}

func inexactNumber(v any) (string, bool) {
	switch n := v.(type) {
	case json.Number:
		if !exactFloat(string(n)) {
			return string(n), true
		}
	case map[string]any:
		for _, e := range n {
			if lit, bad := inexactNumber(e); bad {
				return lit, true
			}
		}
	case []any:
		for _, e := range n {
			if lit, bad := inexactNumber(e); bad {
				return lit, true
			}
		}
	}
	return "", false
}

// jsonDepth returns the maximum nesting of brackets in raw, ignoring strings.
// It runs before decoding so a hostile document cannot make the decoder
// recurse deeply.
func jsonDepth(raw []byte) int {
	depth, max, inStr, esc := 0, 0, false, false
	for _, c := range raw {
		switch {
		case inStr && esc:
			esc = false
		case inStr && c == '\\':
			esc = true
		case inStr && c == '"':
			inStr = false
		case inStr:
		case c == '"':
			inStr = true
		case c == '{' || c == '[':
			depth++
			if depth > max {
				max = depth
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return max
}

// loneSurrogate reports whether raw holds a \u escape of a UTF-16
// surrogate that is not a high surrogate followed by the escape of a low
// one. Backslashes occur in valid JSON only inside strings, so every one is
// an escape; an escaped backslash is skipped with its escape.
func loneSurrogate(raw []byte) bool {
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		if i+1 >= len(raw) || raw[i+1] != 'u' {
			i++ // a two-byte escape such as \\ or \"
			continue
		}
		u, ok := hex4(raw, i+2)
		if !ok {
			return false // not valid JSON: the decoder refuses it
		}
		switch {
		case u >= 0xDC00 && u <= 0xDFFF:
			return true
		case u >= 0xD800 && u <= 0xDBFF:
			if i+7 >= len(raw) || raw[i+6] != '\\' || raw[i+7] != 'u' {
				return true
			}
			lo, ok := hex4(raw, i+8)
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return true
			}
			i += 11
		default:
			i += 5
		}
	}
	return false
}

// hex4 decodes the four hex digits of a \u escape at raw[i:].
func hex4(raw []byte, i int) (rune, bool) {
	if i+4 > len(raw) {
		return 0, false
	}
	var r rune
	for _, c := range raw[i : i+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}
