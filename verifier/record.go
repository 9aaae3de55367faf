package verifier

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
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
const RecordVersion = 1

// GenesisPrevHash is the prev_hash of record 0 of every log.
const GenesisPrevHash = "0000000000000000000000000000000000000000000000000000000000000000"

// MaxIndex is the largest record index and event sequence a record may carry:
// 2^53-1, the largest integer that JSON (and so the canonical form) keeps
// exactly.
const MaxIndex = 1<<53 - 1

// Record is one entry of a tenant's audit log: one event of the tenant's
// stream, in stream order, chained to the record before it and signed by the
// runtime key. Its stored and exported form is the canonical (JCS) encoding
// produced by SealRecord; see docs/audit.md.
type Record struct {
	V         int             `json:"v"`          // RecordVersion
	Index     int64           `json:"index"`      // 0-based position in the tenant's log; also its Merkle leaf index
	Tenant    string          `json:"tenant"`     // the log's tenant
	EventSeq  uint64          `json:"event_seq"`  // stream sequence of the event in the event stream; strictly increasing along the log
	Subject   string          `json:"subject"`    // the subject the event was stored on ("ctx.ev.<tenant>....")
	Event     json.RawMessage `json:"event"`      // the signed event envelope, canonical (codec.Encode)
	EventHash string          `json:"event_hash"` // lowercase hex SHA-256 of Event's bytes
	PrevHash  string          `json:"prev_hash"`  // lowercase hex RecordHash of record Index-1; GenesisPrevHash for index 0
	KeyID     string          `json:"key_id"`     // key of Sig (codec.KeyIDFor)
	Sig       string          `json:"sig"`        // unpadded base64url Ed25519 signature over RecordSigningBytes
}

// unsignedRecord is Record without Sig: the value whose canonical encoding is
// signed.
type unsignedRecord struct {
	V         int             `json:"v"`
	Index     int64           `json:"index"`
	Tenant    string          `json:"tenant"`
	EventSeq  uint64          `json:"event_seq"`
	Subject   string          `json:"subject"`
	Event     json.RawMessage `json:"event"`
	EventHash string          `json:"event_hash"`
	PrevHash  string          `json:"prev_hash"`
	KeyID     string          `json:"key_id"`
}

// RecordSigningBytes returns the bytes a record's signature covers: the
// canonical encoding of the record without its sig field.
func RecordSigningBytes(r Record) ([]byte, error) {
	return kernel.Canonical(unsignedRecord{r.V, r.Index, r.Tenant, r.EventSeq, r.Subject, r.Event, r.EventHash, r.PrevHash, r.KeyID})
}

// signingBytes is RecordSigningBytes for a record whose event bytes are known
// to be canonical (a record that passed ParseRecord, or an event that passed
// codec.Decode): put together around the event, which is not canonicalized
// again. TestSigningBytesFastPath and FuzzRecord check it equals
// RecordSigningBytes.
func signingBytes(r Record) ([]byte, error) {
	if b, ok := recordObject(r, false); ok {
		return b, nil
	}
	return RecordSigningBytes(r)
}

// canonicalRecord is kernel.Canonical(r) for a record whose event bytes are
// canonical, put together the same way. TestCanonicalRecordFastPath checks
// it.
func canonicalRecord(r Record) ([]byte, error) {
	if b, ok := recordObject(r, true); ok {
		return b, nil
	}
	return kernel.Canonical(r)
}

// recordObject puts r's canonical encoding (with its sig when withSig)
// together with kernel.CanonicalObject; ok is false when a field is not one
// JCS writes as is, and the callers ask kernel.Canonical.
func recordObject(r Record, withSig bool) ([]byte, bool) {
	if r.EventSeq > MaxIndex {
		return nil, false
	}
	members := []kernel.Member{{Name: "event", Value: r.Event}}
	for _, f := range []struct {
		name string
		v    int64
	}{{"v", int64(r.V)}, {"index", r.Index}, {"event_seq", int64(r.EventSeq)}} {
		b, ok := kernel.CanonicalInt(f.v)
		if !ok {
			return nil, false
		}
		members = append(members, kernel.Member{Name: f.name, Value: b})
	}
	strs := [][2]string{{"tenant", r.Tenant}, {"subject", r.Subject}, {"event_hash", r.EventHash}, {"prev_hash", r.PrevHash}, {"key_id", r.KeyID}}
	if withSig {
		strs = append(strs, [2]string{"sig", r.Sig})
	}
	for _, f := range strs {
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
// hash SHA-256(0x00 || raw) of the record's canonical bytes, signature
// included.
func RecordHash(raw []byte) tlog.Hash { return tlog.RecordHash(raw) }

// HexHash is the lowercase hex spelling of h used in records.
func HexHash(h tlog.Hash) string { return hex.EncodeToString(h[:]) }

// EventHash returns the lowercase hex SHA-256 of an event's canonical bytes.
func EventHash(raw []byte) string {
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}

// SealRecord builds and signs record index of tenant's log for the event
// stored at eventSeq on subject (raw is its canonical envelope, as the store
// holds it), chained to the record whose RecordHash is prevHash. It returns
// the record's canonical bytes, which are what the log stores and exports.
func SealRecord(s codec.Signer, tenant string, index int64, prevHash string, eventSeq uint64, subject string, raw []byte) ([]byte, error) {
	_, b, err := SealRecordValue(s, tenant, index, prevHash, eventSeq, subject, raw)
	return b, err
}

// SealRecordValue is SealRecord that also returns the record it built, which
// ParseRecord of its bytes would return (a writer that keeps the record
// need not parse what it just encoded).
func SealRecordValue(s codec.Signer, tenant string, index int64, prevHash string, eventSeq uint64, subject string, raw []byte) (Record, []byte, error) {
	env, err := codec.Decode(raw) // also: raw is canonical, so the splices below hold
	if err != nil {
		return Record{}, nil, fmt.Errorf("verifier: SealRecord: event: %w", err)
	}
	return SealDecodedRecord(s, tenant, index, prevHash, eventSeq, subject, raw, env)
}

// SealDecodedRecord is SealRecordValue for an event already decoded from raw
// (env is codec.Decode(raw), as a store's read returns both): the event is
// not decoded a second time.
func SealDecodedRecord(s codec.Signer, tenant string, index int64, prevHash string, eventSeq uint64, subject string, raw []byte, env codec.Envelope) (Record, []byte, error) {
	if len(s.Key) != ed25519.PrivateKeySize {
		return Record{}, nil, errors.New("verifier: SealRecord: signer has no Ed25519 private key")
	}
	if want := codec.KeyIDFor(s.Key.Public().(ed25519.PublicKey)); s.KeyID != want {
		return Record{}, nil, fmt.Errorf("verifier: SealRecord: signer key id %q, key has %q", s.KeyID, want)
	}
	r := Record{
		V: RecordVersion, Index: index, Tenant: tenant, EventSeq: eventSeq, Subject: subject,
		Event: raw, EventHash: EventHash(raw), PrevHash: prevHash, KeyID: s.KeyID,
	}
	if err := r.validate(); err != nil {
		return Record{}, nil, err
	}
	if err := r.matchesEvent(env); err != nil {
		return Record{}, nil, err
	}
	msg, err := signingBytes(r)
	if err != nil {
		return Record{}, nil, err
	}
	r.Sig = base64.RawURLEncoding.EncodeToString(ed25519.Sign(s.Key, msg))
	b, err := canonicalRecord(r)
	if err != nil {
		return Record{}, nil, err
	}
	return r, b, nil
}

// recordFields mirrors Record with pointers, to tell a missing field from a
// zero one.
type recordFields struct {
	V         *int            `json:"v"`
	Index     *int64          `json:"index"`
	Tenant    *string         `json:"tenant"`
	EventSeq  *uint64         `json:"event_seq"`
	Subject   *string         `json:"subject"`
	Event     json.RawMessage `json:"event"`
	EventHash *string         `json:"event_hash"`
	PrevHash  *string         `json:"prev_hash"`
	KeyID     *string         `json:"key_id"`
	Sig       *string         `json:"sig"`
}

// ParseRecord decodes a record strictly: one JSON object with exactly the
// Record fields, valid values, and raw equal byte for byte to its canonical
// encoding. It checks form only, not signatures or the chain (see
// VerifyRecord). Errors are *Failure with ReasonNonCanonical.
func ParseRecord(raw []byte) (Record, error) {
	fail := func(format string, args ...any) (Record, error) {
		return Record{}, &Failure{Index: -1, Checkpoint: -1, Reason: ReasonNonCanonical, Detail: fmt.Sprintf(format, args...)}
	}
	if len(raw) > maxRecordSize {
		return fail("record of %d bytes exceeds %d", len(raw), maxRecordSize)
	}
	var f recordFields
	if err := kernel.StrictJSON(raw, &f); err != nil {
		return fail("record: %v", err)
	}
	if f.V == nil || f.Index == nil || f.Tenant == nil || f.EventSeq == nil || f.Subject == nil || f.Event == nil ||
		f.EventHash == nil || f.PrevHash == nil || f.KeyID == nil || f.Sig == nil {
		return fail("record: a field is missing")
	}
	r := Record{
		V: *f.V, Index: *f.Index, Tenant: *f.Tenant, EventSeq: *f.EventSeq, Subject: *f.Subject, Event: f.Event,
		EventHash: *f.EventHash, PrevHash: *f.PrevHash, KeyID: *f.KeyID, Sig: *f.Sig,
	}
	if err := r.validate(); err != nil {
		return fail("%v", err)
	}
	if _, err := base64.RawURLEncoding.Strict().DecodeString(r.Sig); err != nil || base64.RawURLEncoding.DecodedLen(len(r.Sig)) != ed25519.SignatureSize {
		return fail("record: sig is not unpadded base64url of 64 bytes")
	}
	c, err := kernel.Canonical(json.RawMessage(raw))
	if err != nil {
		return fail("record: %v", err)
	}
	if !bytes.Equal(c, raw) {
		return fail("record bytes are not canonical (JCS)")
	}
	return r, nil
}

// maxRecordSize bounds a record: an envelope of codec.MaxEnvelopeSize plus
// the record's own fields, well below NATS' 1 MiB max_payload.
const maxRecordSize = codec.MaxEnvelopeSize + 4096

// validate checks the form of every field but the signature.
func (r Record) validate() error {
	switch {
	case r.V != RecordVersion:
		return fmt.Errorf("record: unsupported version %d", r.V)
	case r.Index < 0 || r.Index > MaxIndex:
		return fmt.Errorf("record: index %d out of range", r.Index)
	case r.EventSeq < 1 || r.EventSeq > MaxIndex:
		return fmt.Errorf("record: event_seq %d out of range", r.EventSeq)
	case !isHex64(r.EventHash):
		return errors.New("record: event_hash is not 64 lowercase hex digits")
	case !isHex64(r.PrevHash):
		return errors.New("record: prev_hash is not 64 lowercase hex digits")
	case r.Index == 0 && r.PrevHash != GenesisPrevHash:
		return errors.New("record: index 0 must carry the genesis prev_hash")
	case r.KeyID == "":
		return errors.New("record: key_id is empty")
	case len(r.Event) == 0 || r.Event[0] != '{':
		return errors.New("record: event is not a JSON object")
	}
	if err := codec.ValidToken(r.Tenant); err != nil {
		return fmt.Errorf("record: tenant: %w", err)
	}
	if err := codec.ValidSubject(r.Subject); err != nil {
		return fmt.Errorf("record: %w", err)
	}
	if !strings.HasPrefix(r.Subject, codec.SubjectPrefix+r.Tenant+".") {
		return fmt.Errorf("record: subject %q is not in tenant %q's stream", r.Subject, r.Tenant)
	}
	return nil
}

// matchesEvent checks that the record describes env: same tenant and the
// event hash of its bytes.
func (r Record) matchesEvent(env codec.Envelope) error {
	if env.Tenant != r.Tenant {
		return fmt.Errorf("record of tenant %q holds an event of tenant %q", r.Tenant, env.Tenant)
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

// VerifyRecord checks one record on its own: its form (ParseRecord), its
// signature under keyring, the event it holds (strict decoding, its own
// signature under keyring) and that event_hash and tenant match the event. It
// does not check the record's place in a chain. Errors are *Failure with
// Index set to the record's index when it could be read.
func VerifyRecord(raw []byte, keyring codec.Keyring) (Record, error) {
	r, err := ParseRecord(raw)
	if err != nil {
		return Record{}, err
	}
	return r, verifyParsed(r, keyring)
}

// verifyParsed is VerifyRecord after ParseRecord.
func verifyParsed(r Record, keyring codec.Keyring) error {
	fail := func(reason Reason, format string, args ...any) error {
		return &Failure{Index: r.Index, Checkpoint: -1, Reason: reason, Detail: fmt.Sprintf(format, args...)}
	}
	pub, ok := keyring[r.KeyID]
	if !ok || len(pub) != ed25519.PublicKeySize {
		return fail(ReasonUnknownKey, "record signed by unknown key %q", r.KeyID)
	}
	msg, err := signingBytes(r)
	if err != nil {
		return fail(ReasonNonCanonical, "record: %v", err)
	}
	sig, err := base64.RawURLEncoding.Strict().DecodeString(r.Sig)
	if err != nil || !ed25519.Verify(pub, msg, sig) {
		return fail(ReasonBadSignature, "record signature does not verify under %q", r.KeyID)
	}
	if EventHash(r.Event) != r.EventHash {
		return fail(ReasonHashBreak, "event_hash does not match the event's bytes")
	}
	env, err := codec.Decode(r.Event)
	if err != nil {
		return fail(ReasonNonCanonical, "event: %v", err)
	}
	if err := r.matchesEvent(env); err != nil {
		return fail(ReasonHashBreak, "%v", err)
	}
	if err := keyring.Verify(env); err != nil {
		if errors.Is(err, codec.ErrUnknownKey) {
			return fail(ReasonUnknownKey, "event %s: %v", env.EventID, err)
		}
		if errors.Is(err, codec.ErrBadSignature) {
			return fail(ReasonBadSignature, "event %s: %v", env.EventID, err)
		}
		return fail(ReasonNonCanonical, "event %s: %v", env.EventID, err)
	}
	return nil
}
