package kernel

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// eventFactories maps every persisted event type of the kernel to a decoder.
// It is the one registry of event types: the store, the projections and the
// offline verifier decode bodies through DecodeEvent.
var eventFactories = map[string]func(b []byte, decode func([]byte, any) error) (Event, error){}

func register[T Event](typ string) {
	eventFactories[typ] = func(b []byte, decode func([]byte, any) error) (Event, error) {
		var v T
		if err := decode(b, &v); err != nil {
			return nil, err
		}
		return v, nil
	}
}

// EventTypes returns every registered event type name.
func EventTypes() []string {
	out := make([]string, 0, len(eventFactories))
	for t := range eventFactories {
		out = append(out, t)
	}
	return out
}

// ErrUnknownEvent is returned by DecodeEvent for a type or version this
// kernel does not know; it is never guessed.
var ErrUnknownEvent = errors.New("unknown event type or version")

// DecodeEvent decodes an event body strictly (StrictJSON: unknown fields, a
// member named twice and trailing data are refused).
func DecodeEvent(typ string, v int, body []byte) (Event, error) {
	return decodeEvent(typ, v, body, StrictJSON)
}

// DecodeCanonicalEvent is DecodeEvent for a body known to be in RFC 8785
// canonical form, as every body of an envelope that passed the envelope
// codec's check is: canonicalization refuses a member named twice, so the
// walk for one (the costliest part of decoding) is left out (KnownJSON).
// Folding a ledger's tail on a cold load decodes through it.
func DecodeCanonicalEvent(typ string, v int, body []byte) (Event, error) {
	return decodeEvent(typ, v, body, KnownJSON)
}

func decodeEvent(typ string, v int, body []byte, decode func([]byte, any) error) (Event, error) {
	f, ok := eventFactories[typ]
	if !ok || v != EventVersion {
		return nil, fmt.Errorf("%w: %s v%d", ErrUnknownEvent, typ, v)
	}
	ev, err := f(body, decode)
	if err != nil {
		return nil, fmt.Errorf("event %s: %w", typ, err)
	}
	return ev, nil
}

// StrictJSON decodes exactly one JSON value into v: unknown fields, a
// member named twice and trailing data are refused. It is the one strict
// decoder of the project's own formats (events, snapshots, keys, exports).
func StrictJSON(b []byte, v any) error {
	if name, dup, err := DuplicateKey(b); err != nil {
		return err
	} else if dup {
		return fmt.Errorf("member %q appears twice", clip(name))
	}
	return KnownJSON(b, v)
}

// KnownJSON is StrictJSON without the walk for duplicate members: unknown
// fields and trailing data are refused. It is for documents whose bytes
// are authenticated before they are decoded and that only this program
// reads (a signed snapshot: the runtime's own json.Marshal wrote it, and
// what Go decodes is what the signature is checked against), where the
// duplicate walk, the costliest part of a cold load, guards against nothing.
func KnownJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return ErrTrailingData
	}
	return nil
}

// ErrTrailingData is KnownJSON's error for input after the first value.
var ErrTrailingData = errors.New("trailing data")
