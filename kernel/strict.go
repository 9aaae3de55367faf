package kernel

import (
	"bytes"
	"errors"
	"fmt"
)

// DecodeCanonical is the strict decoder of the project's canonical formats
// (snapshots, and any document stored as its JCS bytes): it decodes exactly
// one JSON value into v (KnownJSON: unknown fields and trailing data are
// refused), re-encodes v with Canonical and refuses b unless it is those
// very bytes. A member named twice, a case variant of a member name, a
// number or string spelled another way, or any whitespace all make the
// re-encoding differ, so a document has exactly one accepted encoding.
func DecodeCanonical(b []byte, v any) error {
	if err := KnownJSON(b, v); err != nil {
		return err
	}
	var again []byte
	var err error
	if e, ok := v.(CanonicalEncoder); ok {
		again, err = e.EncodeCanonical()
	} else {
		again, err = Canonical(v)
	}
	if err != nil {
		return fmt.Errorf("re-encode: %w", err)
	}
	if !bytes.Equal(again, b) {
		return errors.New("not in its canonical (JCS) encoding")
	}
	return nil
}

// CanonicalEncoder is a format that writes its own canonical encoding
// without Canonical's parse of the whole value (a snapshot, put together
// around a state that is canonical already). EncodeCanonical must return
// exactly Canonical's bytes, and fail exactly when Canonical fails; each
// implementation has a fuzz target that holds it to that.
type CanonicalEncoder interface {
	EncodeCanonical() ([]byte, error)
}

// DecodeOptionalRequest is DecodeRequest for a request whose body may be
// empty: an empty or blank body leaves v as it is (the request {}).
func DecodeOptionalRequest(b []byte, v any) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	return DecodeRequest(b, v)
}
