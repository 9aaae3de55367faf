package kernel

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"unicode/utf8"
)

// jsonFrame is one open object or array while DuplicateKey walks a document.
type jsonFrame struct {
	object  bool
	names   map[string]struct{}
	wantKey bool
}

// DuplicateKey returns the first object member name that appears twice in
// the same object of a JSON document, and whether there is one (the name
// may be ""). Go's decoder keeps the
// last of two equal names, other parsers keep the first: a document with
// duplicates would mean one thing to the ledger and another to a provider,
// so proposals and tool arguments that have one are refused. Call it on a
// document whose nesting was already bounded.
func DuplicateKey(raw []byte) (string, bool, error) {
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
			return "", false, nil
		}
		if err != nil {
			return "", false, err
		}
		if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].wantKey {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:n-1]
				valueDone()
				if len(stack) == 0 {
					return "", false, nil
				}
				continue
			}
			name, _ := tok.(string)
			if _, dup := stack[n-1].names[name]; dup {
				return name, true, nil
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
			return "", false, nil // the first value is complete; what follows is the caller's concern
		}
	}
}

// DecodeRequest decodes one JSON object from an untrusted party (an agent's
// proposal, an operator's request) into v, strictly: valid UTF-8, no member
// named twice in any object, every member of an object that binds a Go
// struct spelled exactly as the field's JSON name (encoding/json would also
// bind "Run_ID" or "ſ"-variants to run_id), no unknown members, nothing after
// the object. Inside a json.RawMessage, an interface or a map the keys are
// the sender's own (tool arguments) and only the duplicate rule applies.
func DecodeRequest(b []byte, v any) error {
	if !utf8.Valid(b) {
		return errors.New("not valid UTF-8")
	}
	if t := bytes.TrimSpace(b); len(t) == 0 || t[0] != '{' {
		return errors.New("not a JSON object")
	}
	if name, dup, err := DuplicateKey(b); err != nil {
		return err
	} else if dup {
		return fmt.Errorf("member %q appears twice", clip(name))
	}
	if err := KnownJSON(b, v); err != nil {
		return err
	}
	return exactKeys(b, reflect.TypeOf(v))
}

var rawMessageType = reflect.TypeFor[json.RawMessage]()

// exactKeys checks that the members of raw that bind struct fields of t
// (recursively) spell the fields' JSON names exactly. raw has decoded into
// t already, so its shape fits t.
func exactKeys(raw []byte, t reflect.Type) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessageType {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil || obj == nil {
			return nil // null, or not an object: the decoder has judged it
		}
		fields := map[string]reflect.Type{}
		jsonFields(t, fields)
		for k, v := range obj {
			ft, ok := fields[k]
			if !ok {
				return fmt.Errorf("unknown member %q (member names are case-sensitive)", clip(k))
			}
			if err := exactKeys(v, ft); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return nil
		}
		var arr []json.RawMessage
		if json.Unmarshal(raw, &arr) != nil {
			return nil
		}
		for _, v := range arr {
			if err := exactKeys(v, t.Elem()); err != nil {
				return err
			}
		}
	case reflect.Map:
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil {
			return nil
		}
		for _, v := range m {
			if err := exactKeys(v, t.Elem()); err != nil {
				return err
			}
		}
	}
	return nil
}

// jsonFields adds the JSON member names of struct type t to out, with their
// types, as encoding/json binds them (embedded structs without a name
// promote their fields).
func jsonFields(t reflect.Type, out map[string]reflect.Type) {
	var embedded []reflect.Type
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				embedded = append(embedded, ft)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	// A field of t hides a promoted one of the same name.
	for _, ft := range embedded {
		inner := map[string]reflect.Type{}
		jsonFields(ft, inner)
		for name, typ := range inner {
			if _, ok := out[name]; !ok {
				out[name] = typ
			}
		}
	}
}
