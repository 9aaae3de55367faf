package kernel

import (
	"errors"
	"strconv"
	"strings"
)

// Pointer is a parsed RFC 6901 JSON pointer: the unescaped reference tokens.
// The empty Pointer refers to the whole document.
type Pointer []string

// missing is the value Eval reports for a pointer that selects nothing, so
// that callers can tell "absent" from JSON null.
type missing struct{}

// ParsePointer parses an RFC 6901 pointer. It must be empty or start with
// "/"; "~" may only appear as "~0" (for "~") or "~1" (for "/").
func ParsePointer(s string) (Pointer, error) {
	if s == "" {
		return Pointer{}, nil
	}
	if s[0] != '/' {
		return nil, errors.New("json pointer must be empty or start with '/'")
	}
	parts := strings.Split(s[1:], "/")
	p := make(Pointer, len(parts))
	for i, part := range parts {
		tok, err := unescapeToken(part)
		if err != nil {
			return nil, err
		}
		p[i] = tok
	}
	return p, nil
}

func unescapeToken(s string) (string, error) {
	if !strings.Contains(s, "~") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '~' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 >= len(s) {
			return "", errors.New("json pointer has a dangling '~'")
		}
		switch s[i+1] {
		case '0':
			b.WriteByte('~')
		case '1':
			b.WriteByte('/')
		default:
			return "", errors.New("json pointer has an invalid escape '~" + string(s[i+1]) + "'")
		}
		i++
	}
	return b.String(), nil
}

// String returns the pointer in its escaped RFC 6901 form.
func (p Pointer) String() string {
	var b strings.Builder
	for _, tok := range p {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(tok))
	}
	return b.String()
}

// Eval returns the value p selects in doc, a tree decoded with UseNumber
// (map[string]any, []any, json.Number, string, bool, nil). ok is false when
// the pointer selects nothing.
func (p Pointer) Eval(doc any) (v any, ok bool) {
	cur := doc
	for _, tok := range p {
		switch node := cur.(type) {
		case map[string]any:
			next, found := node[tok]
			if !found {
				return missing{}, false
			}
			cur = next
		case []any:
			i, err := arrayIndex(tok)
			if err != nil || i >= len(node) {
				return missing{}, false
			}
			cur = node[i]
		default:
			return missing{}, false
		}
	}
	return cur, true
}

// arrayIndex accepts RFC 6901 array indexes: "0" or a digit string without a
// leading zero. "-" (past the end) never selects a value.
func arrayIndex(tok string) (int, error) {
	if tok == "" || (len(tok) > 1 && tok[0] == '0') || len(tok) > 9 {
		return 0, errors.New("bad array index")
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] < '0' || tok[i] > '9' {
			return 0, errors.New("bad array index")
		}
	}
	return strconv.Atoi(tok)
}
