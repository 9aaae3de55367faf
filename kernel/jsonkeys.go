package kernel

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// jsonFrame is one open object or array while DuplicateKey walks a document.
type jsonFrame struct {
	object  bool
	names   map[string]struct{}
	wantKey bool
}

// DuplicateKey returns the first object member name that appears twice in
// the same object of a JSON document ("" if none). Go's decoder keeps the
// last of two equal names, other parsers keep the first: a document with
// duplicates would mean one thing to the ledger and another to a provider,
// so proposals and tool arguments that have one are refused. Call it on a
// document whose nesting was already bounded.
func DuplicateKey(raw []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var stack []*jsonFrame
	valueDone := func() {
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].wantKey = true
		}
	}
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return "", nil
		}
		if err != nil {
			return "", err
		}
		if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].wantKey {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:n-1]
				valueDone()
				if len(stack) == 0 {
					return "", nil
				}
				continue
			}
			name, _ := tok.(string)
			if _, dup := stack[n-1].names[name]; dup {
				return name, nil
			}
			stack[n-1].names[name] = struct{}{}
			stack[n-1].wantKey = false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &jsonFrame{object: true, names: map[string]struct{}{}, wantKey: true})
			continue
		case json.Delim('['):
			stack = append(stack, &jsonFrame{})
			continue
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		valueDone()
		if len(stack) == 0 {
			return "", nil // the first value is complete; what follows is the caller's concern
		}
	}
}
