package events

import "github.com/contextos/ledger/events/codec"

// The envelope, signing and subject names live in events/codec, which
// imports no NATS package so the offline verifier can share the one
// canonical codec; they are re-exported here for the runtime's callers.

// Envelope is codec.Envelope.
type Envelope = codec.Envelope

// Reason is codec.Reason.
type Reason = codec.Reason

// EnvelopeError is codec.EnvelopeError.
type EnvelopeError = codec.EnvelopeError

// Signer is codec.Signer.
type Signer = codec.Signer

// Keyring is codec.Keyring.
type Keyring = codec.Keyring

// UnknownKeyError is codec.UnknownKeyError.
type UnknownKeyError = codec.UnknownKeyError

// SignatureError is codec.SignatureError.
type SignatureError = codec.SignatureError

// Constants of codec.
const (
	TimeLayout          = codec.TimeLayout
	MaxEnvelopeSize     = codec.MaxEnvelopeSize
	SubjectPrefix       = codec.SubjectPrefix
	KindExposure        = codec.KindExposure
	MaxTokenLen         = codec.MaxTokenLen
	MaxKeyTokenLen      = codec.MaxKeyTokenLen
	ReasonTooLarge      = codec.ReasonTooLarge
	ReasonMalformed     = codec.ReasonMalformed
	ReasonUnknownField  = codec.ReasonUnknownField
	ReasonTrailingData  = codec.ReasonTrailingData
	ReasonMissingField  = codec.ReasonMissingField
	ReasonInvalidField  = codec.ReasonInvalidField
	ReasonBodyNotObject = codec.ReasonBodyNotObject
	ReasonUnregistered  = codec.ReasonUnregistered
	ReasonNonCanonical  = codec.ReasonNonCanonical
)

// Errors and functions of codec.
var (
	ErrInvalidEnvelope = codec.ErrInvalidEnvelope
	ErrInvalidToken    = codec.ErrInvalidToken
	ErrUnknownKey      = codec.ErrUnknownKey
	ErrBadSignature    = codec.ErrBadSignature

	Decode                = codec.Decode
	DecodeBody            = codec.DecodeBody
	Encode                = codec.Encode
	SigningBytes          = codec.SigningBytes
	Validate              = codec.Validate
	Register              = codec.Register
	Registered            = codec.Registered
	ValidType             = codec.ValidType
	ValidEventID          = codec.ValidEventID
	ValidTime             = codec.ValidTime
	FormatTime            = codec.FormatTime
	GenerateKey           = codec.GenerateKey
	KeyIDFor              = codec.KeyIDFor
	NewSigner             = codec.NewSigner
	MarshalKeyring        = codec.MarshalKeyring
	ParseKeyring          = codec.ParseKeyring
	LoadKeyring           = codec.LoadKeyring
	SaveKeyring           = codec.SaveKeyring
	SavePrivateKey        = codec.SavePrivateKey
	LoadPrivateKey        = codec.LoadPrivateKey
	ValidToken            = codec.ValidToken
	KeyToken              = codec.KeyToken
	ResourceToken         = codec.ResourceToken
	ExposureSubject       = codec.ExposureSubject
	ExposureWindowSubject = codec.ExposureWindowSubject
	Subject               = codec.Subject
	ValidSubject          = codec.ValidSubject
)
