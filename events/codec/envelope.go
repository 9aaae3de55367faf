package codec

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/contextos/ledger/kernel"
	"github.com/oklog/ulid/v2"
)

// Envelope is one immutable, versioned, signed domain event. Its canonical
// encoding (Encode) is the wire and stored form; the signature covers every
// field except Sig and Proof (SigningBytes): alone, or with other events'
// through Proof (see SealAll).
type Envelope struct {
	Type    string          `json:"type"`            // e.g. "exposure.reserved"; see ValidType
	V       int             `json:"v"`               // schema version, >= 1
	EventID string          `json:"event_id"`        // ULID, 26 chars, uppercase Crockford base32
	Tenant  string          `json:"tenant"`          // a ValidToken
	Time    string          `json:"time"`            // TimeLayout (RFC 3339 UTC, 9 fraction digits); an input, never read from a clock here
	Body    json.RawMessage `json:"body"`            // canonical (JCS) JSON object
	KeyID   string          `json:"key_id"`          // the signing key, see KeyIDFor
	Sig     string          `json:"sig"`             // base64url (no padding) Ed25519 over SigningBytes, or over a batch's root when Proof is set
	Proof   string          `json:"proof,omitempty"` // the event's inclusion proof in a batch signature (see SealAll); empty when signed alone
}

// unsigned is Envelope without Sig: the value whose canonical encoding is signed.
type unsigned struct {
	Type    string          `json:"type"`
	V       int             `json:"v"`
	EventID string          `json:"event_id"`
	Tenant  string          `json:"tenant"`
	Time    string          `json:"time"`
	Body    json.RawMessage `json:"body"`
	KeyID   string          `json:"key_id"`
}

// TimeLayout is the one accepted form of Envelope.Time: RFC 3339 in UTC with
// exactly nine fraction digits, so that every instant has one spelling and the
// strings sort like the instants.
const TimeLayout = "2006-01-02T15:04:05.000000000Z"

// MaxEnvelopeSize bounds the encoded size of an envelope in bytes. It stays
// below NATS' default max_payload (1 MiB) so that a valid envelope is always
// publishable.
const MaxEnvelopeSize = 512 * 1024

// FormatTime returns t in TimeLayout (converted to UTC). The caller owns the
// clock; this package never reads one.
func FormatTime(t time.Time) string { return t.UTC().Format(TimeLayout) }

// ErrInvalidEnvelope is matched (errors.Is) by every *EnvelopeError.
var ErrInvalidEnvelope = errors.New("events: invalid envelope")

// Reason is a stable, machine-readable cause of an *EnvelopeError.
type Reason string

// The reasons an envelope is refused. They are persisted in logs and tests;
// never change the meaning of one.
const (
	// ReasonTooLarge is an input longer than MaxEnvelopeSize.
	ReasonTooLarge Reason = "too_large"
	// ReasonMalformed is an input that is not a JSON object of the envelope shape.
	ReasonMalformed Reason = "malformed_json"
	// ReasonUnknownField is a field that Envelope does not have.
	ReasonUnknownField Reason = "unknown_field"
	// ReasonTrailingData is anything after the first JSON value.
	ReasonTrailingData Reason = "trailing_data"
	// ReasonMissingField is a required field that is absent or empty.
	ReasonMissingField Reason = "missing_field"
	// ReasonInvalidField is a field that is present but not valid.
	ReasonInvalidField Reason = "invalid_field"
	// ReasonBodyNotObject is a body that is not a JSON object.
	ReasonBodyNotObject Reason = "body_not_object"
	// ReasonUnregistered is a (type, v) pair that was never Registered.
	ReasonUnregistered Reason = "unregistered"
	// ReasonNonCanonical is an input that is not its own canonical encoding.
	ReasonNonCanonical Reason = "non_canonical"
)

// EnvelopeError reports why an envelope (or its bytes) was refused.
type EnvelopeError struct {
	Reason Reason // stable cause
	Field  string // JSON field name when one is at fault, else ""
	Detail string // human-readable detail; not stable
}

// Error returns the reason, field and detail.
func (e *EnvelopeError) Error() string {
	s := "events: invalid envelope: " + string(e.Reason)
	if e.Field != "" {
		s += " (" + e.Field + ")"
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Is reports whether target is ErrInvalidEnvelope.
func (e *EnvelopeError) Is(target error) bool { return target == ErrInvalidEnvelope }

func envErr(r Reason, field, format string, args ...any) error {
	return &EnvelopeError{Reason: r, Field: field, Detail: fmt.Sprintf(format, args...)}
}

// registry holds the (type, version) pairs Decode accepts.
var registry struct {
	sync.RWMutex
	m map[typeVersion]struct{}
}

type typeVersion struct {
	typ string
	v   int
}

// init registers every event type of the kernel at kernel.EventVersion, so
// that stored kernel events decode without further setup.
func init() {
	for _, t := range kernel.EventTypes() {
		Register(t, kernel.EventVersion)
	}
}

// Register makes (typ, v) acceptable to Decode, Encode and Seal. It is meant to
// be called from init functions or test setup with constant arguments and
// panics if typ is not a ValidType or v < 1 (a programming error, like
// regexp.MustCompile). Registering a pair twice is a no-op.
func Register(typ string, v int) {
	if err := ValidType(typ); err != nil {
		panic(err)
	}
	if v < 1 {
		panic(fmt.Sprintf("events: Register(%q, %d): version must be >= 1", typ, v))
	}
	registry.Lock()
	defer registry.Unlock()
	if registry.m == nil {
		registry.m = make(map[typeVersion]struct{})
	}
	registry.m[typeVersion{typ, v}] = struct{}{}
}

// Registered reports whether (typ, v) was registered.
func Registered(typ string, v int) bool {
	registry.RLock()
	defer registry.RUnlock()
	_, ok := registry.m[typeVersion{typ, v}]
	return ok
}

// ValidType checks an event type name: 1 to 64 bytes, dot-separated segments
// of [a-z0-9_], no empty segment (e.g. "exposure.reserved").
func ValidType(typ string) error {
	if typ == "" || len(typ) > 64 {
		return envErr(ReasonInvalidField, "type", "length must be 1..64")
	}
	prevDot := true
	for i := 0; i < len(typ); i++ {
		c := typ[i]
		switch {
		case c == '.':
			if prevDot {
				return envErr(ReasonInvalidField, "type", "empty segment")
			}
			prevDot = true
			continue
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_':
		default:
			return envErr(ReasonInvalidField, "type", "byte %q not in [a-z0-9_.]", c)
		}
		prevDot = false
	}
	if prevDot {
		return envErr(ReasonInvalidField, "type", "empty segment")
	}
	return nil
}

// ValidEventID checks that id is a ULID in its canonical spelling (26
// uppercase Crockford base32 characters, first one <= '7').
func ValidEventID(id string) error {
	u, err := ulid.ParseStrict(id)
	if err != nil || u.String() != id {
		return envErr(ReasonInvalidField, "event_id", "not a canonical ULID")
	}
	return nil
}

// ValidTime checks that s is an instant written in TimeLayout.
func ValidTime(s string) error {
	if !validTime(s) {
		return envErr(ReasonInvalidField, "time", "not RFC 3339 UTC with 9 fraction digits")
	}
	return nil
}

// validTime reports whether s has TimeLayout's shape and names a real date
// and time of day: exactly the strings time.Parse accepts in TimeLayout and
// Format writes back unchanged (FuzzValidTime holds the two together). Every
// event's time is checked when it is sealed and again when it is decoded;
// parsing and formatting it was a tenth of sealing's CPU.
func validTime(s string) bool {
	if len(s) != len(TimeLayout) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c, l := s[i], TimeLayout[i]; l >= '0' && l <= '9' {
			if c < '0' || c > '9' {
				return false
			}
		} else if c != l {
			return false
		}
	}
	num := func(from, to int) int {
		n := 0
		for i := from; i < to; i++ {
			n = n*10 + int(s[i]-'0')
		}
		return n
	}
	year, month, day := num(0, 4), num(5, 7), num(8, 10)
	days := [13]int{0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}
	if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
		days[2] = 29
	}
	return month >= 1 && month <= 12 && day >= 1 && day <= days[month] &&
		num(11, 13) < 24 && num(14, 16) < 60 && num(17, 19) < 60
}

// validKeyID checks the shape of a key id: 1..128 bytes of [A-Za-z0-9:_.-].
func validKeyID(s string) error {
	if s == "" || len(s) > 128 {
		return envErr(ReasonInvalidField, "key_id", "length must be 1..128")
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == ':' || c == '_' || c == '.' || c == '-') {
			return envErr(ReasonInvalidField, "key_id", "byte %q not allowed", c)
		}
	}
	return nil
}

// validSig checks that s is unpadded base64url of exactly 64 bytes (86
// characters: the decoder alone would skip line breaks).
func validSig(s string) error {
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(b) != 64 || len(s) != 86 {
		return envErr(ReasonInvalidField, "sig", "not unpadded base64url of 64 bytes")
	}
	return nil
}

// validBody checks that b is a JSON object, and canonical unless the caller
// compares the canonical encoding of the whole envelope anyway (which holds
// the canonical body).
func validBody(b json.RawMessage, canonical bool) error {
	if len(b) == 0 {
		return envErr(ReasonMissingField, "body", "")
	}
	if b[0] != '{' {
		return envErr(ReasonBodyNotObject, "body", "")
	}
	if !canonical {
		return nil
	}
	if n, ok := kernel.CanonicalPrefix(b); ok && n == len(b) {
		// Certainly its own canonical form (FuzzCanonicalPrefix holds
		// this to the JCS transform), checked in one pass: every append
		// encodes a body Seal has just canonicalized, and the JCS parse
		// of it again was most of Encode's cost.
		return nil
	}
	c, err := kernel.Canonical(b)
	if err != nil {
		return envErr(ReasonInvalidField, "body", "%v", err)
	}
	if !bytes.Equal(c, b) {
		return envErr(ReasonNonCanonical, "body", "body is not in canonical (JCS) form")
	}
	return nil
}

// validateUnsigned checks every field but Sig; bodyCanonical says whether to
// check that the body is canonical on its own.
func validateUnsigned(e Envelope, bodyCanonical bool) error {
	if e.Type == "" {
		return envErr(ReasonMissingField, "type", "")
	}
	if err := ValidType(e.Type); err != nil {
		return err
	}
	if e.V < 1 {
		return envErr(ReasonInvalidField, "v", "must be >= 1")
	}
	if e.EventID == "" {
		return envErr(ReasonMissingField, "event_id", "")
	}
	if err := ValidEventID(e.EventID); err != nil {
		return err
	}
	if e.Tenant == "" {
		return envErr(ReasonMissingField, "tenant", "")
	}
	if err := ValidToken(e.Tenant); err != nil {
		return envErr(ReasonInvalidField, "tenant", "%v", err)
	}
	if e.Time == "" {
		return envErr(ReasonMissingField, "time", "")
	}
	if err := ValidTime(e.Time); err != nil {
		return err
	}
	if err := validBody(e.Body, bodyCanonical); err != nil {
		return err
	}
	if e.KeyID == "" {
		return envErr(ReasonMissingField, "key_id", "")
	}
	if err := validKeyID(e.KeyID); err != nil {
		return err
	}
	if !Registered(e.Type, e.V) {
		return envErr(ReasonUnregistered, "type", "%s v%d", e.Type, e.V)
	}
	return nil
}

// Validate checks every field of e, the shape of its signature and that
// (Type, V) is registered. It does not verify the signature: see
// Keyring.Verify.
func Validate(e Envelope) error { return validate(e, true) }

func validate(e Envelope, bodyCanonical bool) error {
	if err := validateUnsigned(e, bodyCanonical); err != nil {
		return err
	}
	if e.Sig == "" {
		return envErr(ReasonMissingField, "sig", "")
	}
	if err := validSig(e.Sig); err != nil {
		return err
	}
	if e.Proof != "" {
		return validProof(e.Proof)
	}
	return nil
}

// SigningBytes returns the bytes an Ed25519 signature of e covers: the
// canonical (JCS) encoding of e without its sig and proof fields (for an
// event sealed in a batch, its leaf in the batch's tree). It refuses an envelope
// whose other fields are not valid.
func SigningBytes(e Envelope) ([]byte, error) { return signingBytes(e, true) }

// signingBytes is SigningBytes; checkBody false skips the check that the body
// is canonical, for a body the caller has just canonicalized.
func signingBytes(e Envelope, checkBody bool) ([]byte, error) {
	if err := validateUnsigned(e, checkBody); err != nil {
		return nil, err
	}
	if b, ok := assemble(e, false); ok {
		return b, nil
	}
	return kernel.Canonical(unsigned{e.Type, e.V, e.EventID, e.Tenant, e.Time, e.Body, e.KeyID})
}

// assemble returns the canonical encoding of an envelope whose body is
// canonical, without parsing the body again (kernel.CanonicalObject); ok is
// false when a field is not one JCS writes as is, and the caller asks
// kernel.Canonical. The validators admit only such fields, so every valid
// envelope goes this way; TestAssembleIsCanonical and
// FuzzAssembleIsCanonical hold it to kernel.Canonical. Canonicalizing each
// event once (its body) instead of five times was the largest share of the
// engine's CPU under load (docs/performance.md).
func assemble(e Envelope, withSig bool) ([]byte, bool) {
	v, ok := kernel.CanonicalInt(int64(e.V))
	if !ok || e.V < 0 || len(e.Body) == 0 {
		return nil, false
	}
	members := []kernel.Member{{Name: "body", Value: e.Body}, {Name: "v", Value: v}}
	strs := []kernel.Member{{Name: "event_id"}, {Name: "key_id"}, {Name: "tenant"}, {Name: "time"}, {Name: "type"}}
	vals := []string{e.EventID, e.KeyID, e.Tenant, e.Time, e.Type}
	if withSig {
		if e.Proof != "" {
			strs, vals = append(strs, kernel.Member{Name: "proof"}), append(vals, e.Proof)
		}
		strs, vals = append(strs, kernel.Member{Name: "sig"}), append(vals, e.Sig)
	}
	for i, m := range strs {
		if m.Value, ok = kernel.CanonicalString(vals[i]); !ok {
			return nil, false
		}
		members = append(members, m)
	}
	return kernel.CanonicalObject(members)
}

// Encode returns the canonical (JCS) encoding of the whole envelope: the wire
// and stored form. It refuses an envelope that is not Valid, so everything
// Encode returns is accepted by Decode, which returns the same envelope.
func Encode(e Envelope) ([]byte, error) { return encode(e, true) }

func encode(e Envelope, bodyCanonical bool) ([]byte, error) {
	if err := validate(e, bodyCanonical); err != nil {
		return nil, err
	}
	b, ok := assemble(e, true)
	if !ok || !bodyCanonical {
		// Without the body's own check, only the full encoder tells what
		// the canonical form is.
		var err error
		if b, err = kernel.Canonical(e); err != nil {
			// Only the body can fail to canonicalize (for example a duplicate key).
			return nil, envErr(ReasonInvalidField, "body", "%v", err)
		}
	}
	if len(b) > MaxEnvelopeSize {
		return nil, envErr(ReasonTooLarge, "", "%d bytes > %d", len(b), MaxEnvelopeSize)
	}
	return b, nil
}

// Decode parses the canonical encoding of an envelope. It is strict: one JSON
// object with exactly the Envelope fields (unknown ones refused), nothing
// after it, every field valid, (type, v) registered, and b equal byte for byte
// to Encode of the result. Errors are *EnvelopeError. Decode never panics.
// Bytes in the canonical layout are read once by it (decodeLayout), which is
// that comparison in one pass; any other input is decoded, encoded again and
// compared (decodeStrict).
func Decode(b []byte) (Envelope, error) {
	if len(b) > MaxEnvelopeSize {
		return Envelope{}, envErr(ReasonTooLarge, "", "%d bytes > %d", len(b), MaxEnvelopeSize)
	}
	if e, ok := decodeLayout(b); ok && validate(e, false) == nil {
		return e, nil
	}
	return decodeStrict(b)
}

// decodeStrict is Decode by decoding b, encoding the result and comparing:
// the path of every input decodeLayout does not read, and the reference
// FuzzDecodeLayout holds decodeLayout to.
func decodeStrict(b []byte) (Envelope, error) {
	var raw struct {
		Type    *string         `json:"type"`
		V       *int            `json:"v"`
		EventID *string         `json:"event_id"`
		Tenant  *string         `json:"tenant"`
		Time    *string         `json:"time"`
		Body    json.RawMessage `json:"body"`
		KeyID   *string         `json:"key_id"`
		Sig     *string         `json:"sig"`
		Proof   *string         `json:"proof"`
	}
	if len(bytes.TrimSpace(b)) == 0 || bytes.TrimSpace(b)[0] != '{' {
		return Envelope{}, envErr(ReasonMalformed, "", "not a JSON object")
	}
	if err := kernel.KnownJSON(b, &raw); err != nil {
		switch msg := err.Error(); {
		case strings.HasPrefix(msg, "json: unknown field "):
			return Envelope{}, envErr(ReasonUnknownField, "", "%s", strings.TrimPrefix(msg, "json: unknown field "))
		case errors.Is(err, kernel.ErrTrailingData):
			return Envelope{}, envErr(ReasonTrailingData, "", "")
		}
		return Envelope{}, envErr(ReasonMalformed, "", "%v", err)
	}
	for _, f := range []struct {
		name string
		ok   bool
	}{
		{"type", raw.Type != nil}, {"v", raw.V != nil}, {"event_id", raw.EventID != nil},
		{"tenant", raw.Tenant != nil}, {"time", raw.Time != nil}, {"body", raw.Body != nil},
		{"key_id", raw.KeyID != nil}, {"sig", raw.Sig != nil},
	} {
		if !f.ok {
			return Envelope{}, envErr(ReasonMissingField, f.name, "")
		}
	}
	e := Envelope{
		Type: *raw.Type, V: *raw.V, EventID: *raw.EventID, Tenant: *raw.Tenant,
		Time: *raw.Time, Body: raw.Body, KeyID: *raw.KeyID, Sig: *raw.Sig,
	}
	if raw.Proof != nil {
		if *raw.Proof == "" {
			return Envelope{}, envErr(ReasonInvalidField, "proof", "empty: an event signed alone has no proof member")
		}
		e.Proof = *raw.Proof
	}
	if bytes.Equal(e.Body, []byte("null")) || e.Body[0] != '{' {
		return Envelope{}, envErr(ReasonBodyNotObject, "body", "")
	}
	// The body is checked on its own (one parse of the body), then the
	// envelope around it is assembled: the whole input must equal that.
	c, err := encode(e, true)
	if err != nil {
		return Envelope{}, err
	}
	if !bytes.Equal(c, b) {
		return Envelope{}, envErr(ReasonNonCanonical, "", "input differs from its canonical encoding")
	}
	return e, nil
}

// decodeLayout reads b by the layout of a canonical envelope, the one form
// Decode accepts: the body first (canonical, kernel.CanonicalPrefix), then
// the string members in their sorted order, each plain (written as is
// between its quotes), then v, and nothing after. When it succeeds, b is
// what assemble writes for the result, so with the fields valid (validate)
// Decode's decode, re-encode and compare would accept b and return the same
// envelope: reading the bytes once is that check. ok false leaves the
// verdict, and the error, to that slower path.
func decodeLayout(in []byte) (Envelope, bool) {
	const head = `{"body":`
	if len(in) <= len(head) || string(in[:len(head)]) != head || in[len(head)] != '{' {
		return Envelope{}, false
	}
	n, ok := kernel.CanonicalPrefix(in[len(head):])
	if !ok {
		return Envelope{}, false
	}
	body, b := in[len(head):len(head)+n], in[len(head)+n:]
	// One copy that every string field shares, of the members after the
	// body only: a field kept does not keep the body alive.
	s := string(b)
	i := 0
	var vals [7]string
	for k, name := range [...]string{"event_id", "key_id", "proof", "sig", "tenant", "time", "type"} {
		if len(b)-i < len(name)+5 || b[i] != ',' || b[i+1] != '"' || s[i+2:i+2+len(name)] != name || s[i+2+len(name):i+5+len(name)] != `":"` {
			if name == "proof" {
				continue // optional: an event signed alone has none
			}
			return Envelope{}, false
		}
		i += len(name) + 5
		start := i
		for ; i < len(b) && b[i] != '"'; i++ {
			if c := b[i]; c < 0x20 || c > 0x7e || c == '\\' {
				return Envelope{}, false
			}
		}
		if i == len(b) {
			return Envelope{}, false
		}
		if i == start && name == "proof" {
			return Envelope{}, false // present but empty: not a form Encode writes
		}
		vals[k] = s[start:i]
		i++
	}
	const vKey = `,"v":`
	if len(b)-i < len(vKey)+2 || s[i:i+len(vKey)] != vKey || b[len(b)-1] != '}' {
		return Envelope{}, false
	}
	digits := s[i+len(vKey) : len(b)-1]
	if len(digits) == 0 || len(digits) > 9 || digits[0] < '1' || digits[0] > '9' {
		return Envelope{}, false
	}
	v := 0
	for j := 0; j < len(digits); j++ {
		c := digits[j]
		if c < '0' || c > '9' {
			return Envelope{}, false
		}
		v = 10*v + int(c-'0')
	}
	return Envelope{
		Type: vals[6], V: v, EventID: vals[0], Tenant: vals[4], Time: vals[5],
		Body: bytes.Clone(body), KeyID: vals[1], Sig: vals[3], Proof: vals[2],
	}, true
}

// DecodeBody decodes e.Body into into, strictly: unknown fields and trailing
// data are refused.
func DecodeBody(e Envelope, into any) error {
	if err := kernel.KnownJSON(e.Body, into); err != nil {
		return fmt.Errorf("events: body of %s v%d: %w", e.Type, e.V, err)
	}
	return nil
}
