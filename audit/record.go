package audit

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
	"golang.org/x/mod/sumdb/tlog"
)

// RecordVersion is the version of the audit record format (field "v").
// Version 1 records carried their own Ed25519 signature and event hash;
// version 2 relies on the event's signature and the signed checkpoints
// (docs/audit.md says why).
const RecordVersion = 2

// GenesisPrevHash is the prev_hash of record 0 of every log.
const GenesisPrevHash = "0000000000000000000000000000000000000000000000000000000000000000"

// MaxIndex is the largest record index and event sequence a record may carry:
// 2^53-1, the largest integer that JSON (and so the canonical form) keeps
// exactly.
const MaxIndex = 1<<53 - 1

// Record is one entry of a tenant's audit log: one event of the tenant's
// stream, in stream order, chained to the record before it. It carries no
// signature of its own: the event inside is signed by the runtime, and the
// signed checkpoints commit to every record's bytes through the Merkle
// tree. Its stored and exported form is its canonical (JCS) encoding
// (Encode).
type Record struct {
	V        int             `json:"v"`         // RecordVersion
	Index    int64           `json:"index"`     // 0-based position in the tenant's log; also its Merkle leaf index
	Tenant   string          `json:"tenant"`    // the log's tenant
	EventSeq uint64          `json:"event_seq"` // stream sequence of the event in the event stream; strictly increasing along the log
	Subject  string          `json:"subject"`   // the subject the event was stored on ("ctx.ev.<tenant>....")
	Event    json.RawMessage `json:"event"`     // the signed event envelope, canonical (codec.Encode)
	PrevHash string          `json:"prev_hash"` // lowercase hex RecordHash of record Index-1; GenesisPrevHash for index 0
}

// Encode returns the canonical encoding of r, the bytes the log stores, the
// export carries and the Merkle tree hashes. r.Event must be canonical (as
// codec.Encode writes it): the record is then put together around it
// without parsing it again; TestEncodeIsCanonical and FuzzRecord hold that
// to kernel.Canonical.
func Encode(r Record) ([]byte, error) {
	if err := r.validate(); err != nil {
		return nil, err
	}
	if b, ok := assemble(r); ok {
		return b, nil
	}
	return kernel.Canonical(r)
}

// assemble is r's canonical encoding by kernel.CanonicalObject; ok is false
// when a field is not one JCS writes as is.
func assemble(r Record) ([]byte, bool) {
	members := make([]kernel.Member, 0, 7)
	members = append(members, kernel.Member{Name: "event", Value: r.Event})
	for _, f := range [...]struct {
		name string
		v    int64
	}{{"v", int64(r.V)}, {"index", r.Index}, {"event_seq", int64(r.EventSeq)}} {
		b, ok := kernel.CanonicalInt(f.v)
		if !ok {
			return nil, false
		}
		members = append(members, kernel.Member{Name: f.name, Value: b})
	}
	for _, f := range [...][2]string{{"tenant", r.Tenant}, {"subject", r.Subject}, {"prev_hash", r.PrevHash}} {
		b, ok := kernel.CanonicalString(f[1])
		if !ok {
			return nil, false
		}
		members = append(members, kernel.Member{Name: f[0], Value: b})
	}
	return kernel.CanonicalObject(members)
}

// RecordHash returns the hash that links a record into the chain (the next
// record's prev_hash) and into the Merkle tree (its leaf): the RFC 6962 leaf
// hash SHA-256(0x00 || raw) of the record's canonical bytes.
func RecordHash(raw []byte) tlog.Hash { return tlog.RecordHash(raw) }

// HexHash is the lowercase hex spelling of h used in records.
func HexHash(h tlog.Hash) string { return hex.EncodeToString(h[:]) }

// Seal builds record index of tenant's log for the event stored at eventSeq
// on subject (raw is its canonical envelope as the store holds it, env is
// codec.Decode(raw)), chained to the record whose RecordHash is prevHash. It
// returns the record and its canonical bytes. Sealing signs nothing: it is
// a few hundred bytes of concatenation per event.
func Seal(tenant string, index int64, prevHash string, eventSeq uint64, subject string, raw []byte, env codec.Envelope) (Record, []byte, error) {
	r := Record{V: RecordVersion, Index: index, Tenant: tenant, EventSeq: eventSeq, Subject: subject, Event: raw, PrevHash: prevHash}
	if env.Tenant != tenant {
		return Record{}, nil, fmt.Errorf("audit: record of tenant %q for an event of tenant %q", tenant, env.Tenant)
	}
	b, err := Encode(r)
	if err != nil {
		return Record{}, nil, fmt.Errorf("audit: seal record %d: %w", index, err)
	}
	return r, b, nil
}

// recordFields mirrors Record with pointers, to tell a missing field from a
// zero one.
type recordFields struct {
	V        *int            `json:"v"`
	Index    *int64          `json:"index"`
	Tenant   *string         `json:"tenant"`
	EventSeq *uint64         `json:"event_seq"`
	Subject  *string         `json:"subject"`
	Event    json.RawMessage `json:"event"`
	PrevHash *string         `json:"prev_hash"`
}

// maxRecordSize bounds a record: an envelope of codec.MaxEnvelopeSize plus
// the record's own fields, well below NATS' 1 MiB max_payload.
const maxRecordSize = codec.MaxEnvelopeSize + 4096

// MaxRecordSize is the largest record Parse accepts.
const MaxRecordSize = maxRecordSize

// Parse decodes a record strictly and the event it holds: one JSON object
// with exactly the Record fields and valid values, an event that decodes
// strictly (codec.Decode) and belongs to the record's tenant, and raw equal
// byte for byte to Encode of the result (decode, re-encode, compare: which
// also refuses a repeated member or a key spelled in another case). It
// checks neither the event's signature (VerifyEvent) nor the record's place
// in a chain (Chain.Append). A record in the layout the projector writes is
// read once by that layout (parseLayout), which is the same check in one
// pass; any other goes the decode, re-encode and compare way (parseStrict). Errors are *Failure with ReasonNonCanonical,
// or ReasonHashBreak for an event of another tenant; their Index is the
// record's when it could be read, else -1.
func Parse(raw []byte) (Record, codec.Envelope, error) {
	index := int64(-1)
	fail := func(reason Reason, format string, args ...any) (Record, codec.Envelope, error) {
		return Record{}, codec.Envelope{}, &Failure{Index: index, Checkpoint: -1, Reason: reason, Detail: fmt.Sprintf(format, args...)}
	}
	if len(raw) > maxRecordSize {
		return fail(ReasonNonCanonical, "record of %d bytes exceeds %d", len(raw), maxRecordSize)
	}
	if r, env, ok := parseLayout(raw); ok {
		return r, env, nil
	}
	return parseStrict(raw)
}

// parseStrict is Parse by decoding raw, encoding the result and comparing:
// the path of every record parseLayout does not read, and the reference
// FuzzParse holds parseLayout to.
func parseStrict(raw []byte) (Record, codec.Envelope, error) {
	index := int64(-1)
	fail := func(reason Reason, format string, args ...any) (Record, codec.Envelope, error) {
		return Record{}, codec.Envelope{}, &Failure{Index: index, Checkpoint: -1, Reason: reason, Detail: fmt.Sprintf(format, args...)}
	}
	var f recordFields
	// KnownJSON, not StrictJSON: the comparison with the re-encoding below
	// refuses repeated members, at no extra walk over the event.
	if err := kernel.KnownJSON(raw, &f); err != nil {
		return fail(ReasonNonCanonical, "record: %v", err)
	}
	if f.Index != nil {
		index = *f.Index
	}
	if f.V == nil || f.Index == nil || f.Tenant == nil || f.EventSeq == nil || f.Subject == nil || f.Event == nil || f.PrevHash == nil {
		return fail(ReasonNonCanonical, "record: a field is missing")
	}
	r := Record{V: *f.V, Index: *f.Index, Tenant: *f.Tenant, EventSeq: *f.EventSeq, Subject: *f.Subject, Event: f.Event, PrevHash: *f.PrevHash}
	if err := r.validate(); err != nil {
		return fail(ReasonNonCanonical, "%v", err)
	}
	env, err := codec.Decode(r.Event)
	if err != nil {
		return fail(ReasonNonCanonical, "event: %v", err)
	}
	if env.Tenant != r.Tenant {
		return fail(ReasonHashBreak, "record of tenant %q holds an event of tenant %q", r.Tenant, env.Tenant)
	}
	again, err := Encode(r)
	if err != nil {
		return fail(ReasonNonCanonical, "record: %v", err)
	}
	if !bytes.Equal(again, raw) {
		return fail(ReasonNonCanonical, "record bytes are not canonical (JCS)")
	}
	return r, env, nil
}

// parseLayout reads raw by the layout of a canonical record, the one form
// Parse accepts: the event first, then the other members in their sorted
// order, each string plain and each integer in plain decimal, and nothing
// after. The event is the one member that may hold arbitrary text, so it is
// cut at the last `,"event_seq":` (every later member is a plain value) and
// decoded strictly on its own (codec.Decode). When it succeeds and the
// fields are valid, raw is what assemble writes for the result, so Parse's
// decode, re-encode and compare would accept raw and return the same
// record: reading the bytes once is that check. ok false leaves the
// verdict, and the error, to that slower path.
func parseLayout(raw []byte) (Record, codec.Envelope, bool) {
	const head, seqKey = `{"event":`, `,"event_seq":`
	if len(raw) < len(head) || string(raw[:len(head)]) != head {
		return Record{}, codec.Envelope{}, false
	}
	k := bytes.LastIndex(raw, []byte(seqKey))
	if k <= len(head) {
		return Record{}, codec.Envelope{}, false
	}
	tail := raw[k+len(seqKey):]
	seq, tail, ok := layoutInt(tail, `,"index":`)
	if !ok {
		return Record{}, codec.Envelope{}, false
	}
	index, tail, ok := layoutInt(tail, `,"prev_hash":"`)
	if !ok {
		return Record{}, codec.Envelope{}, false
	}
	prev, tail, ok := layoutString(tail, `,"subject":"`)
	if !ok {
		return Record{}, codec.Envelope{}, false
	}
	subject, tail, ok := layoutString(tail, `,"tenant":"`)
	if !ok {
		return Record{}, codec.Envelope{}, false
	}
	tenant, tail, ok := layoutString(tail, `,"v":`)
	if !ok {
		return Record{}, codec.Envelope{}, false
	}
	v, tail, ok := layoutInt(tail, `}`)
	if !ok || len(tail) != 0 {
		return Record{}, codec.Envelope{}, false
	}
	r := Record{V: int(v), Index: int64(index), Tenant: tenant, EventSeq: uint64(seq), Subject: subject,
		Event: bytes.Clone(raw[len(head):k]), PrevHash: prev}
	if r.validate() != nil {
		return Record{}, codec.Envelope{}, false
	}
	env, err := codec.Decode(r.Event)
	if err != nil || env.Tenant != r.Tenant {
		return Record{}, codec.Envelope{}, false
	}
	return r, env, true
}

// layoutInt reads a non-negative integer of at most 15 digits in plain
// decimal (no leading zero; JCS writes such an integer as is) followed by
// next, and returns it and what follows.
func layoutInt(b []byte, next string) (uint64, []byte, bool) {
	i, v := 0, uint64(0)
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		v = 10*v + uint64(b[i]-'0')
	}
	if i == 0 || i > 15 || b[0] == '0' && i > 1 || len(b)-i < len(next) || string(b[i:i+len(next)]) != next {
		return 0, nil, false
	}
	return v, b[i+len(next):], true
}

// layoutString reads a string's contents up to its closing quote, each byte
// printable ASCII other than '"' and '\\' (JCS writes such a string as is),
// followed after the quote by next, and returns it and what follows.
func layoutString(b []byte, next string) (string, []byte, bool) {
	i := 0
	for ; i < len(b) && b[i] != '"'; i++ {
		if c := b[i]; c < 0x20 || c > 0x7e || c == '\\' {
			return "", nil, false
		}
	}
	if i == len(b) || len(b)-i-1 < len(next) || string(b[i+1:i+1+len(next)]) != next {
		return "", nil, false
	}
	return string(b[:i]), b[i+1+len(next):], true
}

// Index reads the index of a record without checking anything else, for
// naming a record that does not parse; ok is false when there is none.
func Index(raw []byte) (int64, bool) {
	var probe struct {
		Index *int64 `json:"index"`
	}
	if json.Unmarshal(raw, &probe) != nil || probe.Index == nil {
		return 0, false
	}
	return *probe.Index, true
}

// validate checks the form of every field (not the event's contents).
func (r Record) validate() error {
	switch {
	case r.V != RecordVersion:
		return fmt.Errorf("record: unsupported version %d", r.V)
	case r.Index < 0 || r.Index > MaxIndex:
		return fmt.Errorf("record: index %d out of range", r.Index)
	case r.EventSeq < 1 || r.EventSeq > MaxIndex:
		return fmt.Errorf("record: event_seq %d out of range", r.EventSeq)
	case !isHex64(r.PrevHash):
		return errors.New("record: prev_hash is not 64 lowercase hex digits")
	case r.Index == 0 && r.PrevHash != GenesisPrevHash:
		return errors.New("record: index 0 must carry the genesis prev_hash")
	case len(r.Event) == 0 || r.Event[0] != '{':
		return errors.New("record: event is not a JSON object")
	}
	if err := codec.ValidToken(r.Tenant); err != nil {
		return fmt.Errorf("record: tenant: %w", err)
	}
	if err := codec.ValidSubject(r.Subject); err != nil {
		return fmt.Errorf("record: %w", err)
	}
	if !strings.HasPrefix(r.Subject, codec.TenantPrefix(r.Tenant)) {
		return fmt.Errorf("record: subject %q is not in tenant %q's stream", r.Subject, r.Tenant)
	}
	return nil
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// VerifyEvent checks the signature of the event a parsed record holds
// (env, from Parse) under keyring. Errors are *Failure with the record's
// index: ReasonUnknownKey or ReasonBadSignature.
//
// Parse has decoded the event strictly (codec.Decode: every field valid,
// the bytes canonical), so the signed bytes are the event's own bytes
// without its sig member (eventSigningBytes), and the envelope is not
// validated again: that second pass, a canonicalization of the body, was a
// tenth of an export's verification.
func VerifyEvent(r Record, env codec.Envelope, keyring codec.Keyring) error {
	fail := func(reason Reason, format string, args ...any) error {
		return &Failure{Index: r.Index, Checkpoint: -1, Reason: reason, Detail: fmt.Sprintf(format, args...)}
	}
	pub, ok := keyring[env.KeyID]
	if !ok || len(pub) != ed25519.PublicKeySize {
		return fail(ReasonUnknownKey, "event %s: signed by unknown key %q", env.EventID, env.KeyID)
	}
	msg, ok := eventSigningBytes(r.Event, env)
	if !ok {
		// Not the layout the fast path knows: ask the codec.
		if err := keyring.Verify(env); err != nil {
			return fail(ReasonBadSignature, "event %s: %v", env.EventID, err)
		}
		return nil
	}
	if !codec.VerifySignature(pub, msg, env.Sig, env.Proof) {
		return fail(ReasonBadSignature, "event %s: signature does not verify under %q", env.EventID, env.KeyID)
	}
	return nil
}

// eventSigningBytes returns codec.SigningBytes(env) from raw, the event's
// canonical encoding: raw without its `,"sig":"..."` member, and its
// `,"proof":"..."` member (which JCS writes just before sig) when it has one.
// Removing members from a canonical object leaves the canonical object
// without them.
// The body is the first member (JCS sorts "body" first) and the only one
// that may hold arbitrary text, so the sig member is searched after it;
// every later member is a validated token. ok is false when raw does not
// start with the body; TestEventSigningBytes and FuzzParse hold the result
// to codec.SigningBytes.
func eventSigningBytes(raw []byte, env codec.Envelope) ([]byte, bool) {
	const head = `{"body":`
	start := len(head) + len(env.Body)
	if len(raw) < start || string(raw[:len(head)]) != head || !bytes.Equal(raw[len(head):start], env.Body) {
		return nil, false
	}
	member := `,"sig":"` + env.Sig + `"`
	if env.Proof != "" {
		member = `,"proof":"` + env.Proof + `"` + member
	}
	i := bytes.Index(raw[start:], []byte(member))
	if i < 0 {
		return nil, false
	}
	i += start
	out := make([]byte, 0, len(raw)-len(member))
	return append(append(out, raw[:i]...), raw[i+len(member):]...), true
}

// VerifyRecord checks one record on its own: its form and event (Parse) and
// the event's signature (VerifyEvent). It does not check the record's place
// in a chain.
func VerifyRecord(raw []byte, keyring codec.Keyring) (Record, codec.Envelope, error) {
	r, env, err := Parse(raw)
	if err != nil {
		return Record{}, codec.Envelope{}, err
	}
	return r, env, VerifyEvent(r, env, keyring)
}
