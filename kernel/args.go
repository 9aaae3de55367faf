package kernel

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"unicode/utf8"
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
		return nil, refuse(CodeRequestMalformed, "arguments are not valid UTF-8")
	}
	if d := jsonDepth(raw); d > MaxArgumentDepth {
		return nil, refuse(CodeRequestMalformed, "arguments nest deeper than %d", MaxArgumentDepth)
	}
	if name, err := DuplicateKey(raw); err != nil || name != "" {
		if err != nil {
			return nil, refuse(CodeRequestMalformed, "arguments are not valid JSON: %v", err)
		}
		return nil, refuse(CodeRequestMalformed, "arguments name %q twice", clip(name))
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, refuse(CodeRequestMalformed, "arguments are not valid JSON: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, refuse(CodeRequestMalformed, "arguments have trailing data")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, refuse(CodeRequestMalformed, "arguments must be a JSON object")
	}
	for _, p := range amounts {
		if v, ok := p.Eval(obj); ok {
			if n, isNum := v.(json.Number); isNum && !exactFloat(string(n)) {
				return nil, refuse(CodeAmountInvalid, "value at %s: amount %s is not an exact positive integer <= 2^53-1", p, clip(string(n)))
			}
		}
	}
	if lit, bad := inexactNumber(obj); bad {
		return nil, refuse(CodeRequestMalformed, "number %s is not exactly representable; send it as a string", clip(lit))
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
