// Package codec is the offline half of package events: the event envelope
// (one canonical RFC 8785 encoding, strict decoding), Ed25519 signing and
// keyrings, and subject naming with injective resource tokens. It imports no
// NATS package, so the offline verifier can use it (package events re-exports
// every name for the runtime).
//
// The usage loop:
//
//	env, err := signer.Seal(typ, v, eventID, tenant, codec.FormatTime(t), body)
//	b, err := codec.Encode(env)        // the stored bytes
//	env, err = codec.Decode(b)         // strict: canonical bytes only
//	err = keyring.Verify(env)          // unknown key or bad signature
package codec
