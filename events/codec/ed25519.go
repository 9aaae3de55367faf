package codec

import (
	"crypto/ed25519"
	"sync"
	"sync/atomic"

	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
)

// Every Ed25519 signature the runtime makes or checks (events, snapshots,
// audit checkpoints and cosignatures) goes through SignBytes and
// VerifyBytes. They are crypto/ed25519's algorithm and acceptance rules
// (RFC 8032 signatures, which are deterministic, and the cofactorless
// verification equation with the standard library's treatment of small-order
// and non-canonical points) computed by curve25519-voi, whose field
// arithmetic makes a signature about 1.7x and a verification about 1.6x
// cheaper on amd64. The keys stay crypto/ed25519 types. TestSignBytesMatchesStdlib
// and FuzzVerifyBytesMatchesStdlib hold both to the standard library.

// stdlibRules is verification exactly as crypto/ed25519.Verify accepts.
var stdlibRules = &voi.Options{Verify: voi.VerifyOptionsStdLib}

// SignBytes is ed25519.Sign(key, msg): the same 64 bytes. It panics, as
// ed25519.Sign does, when key is not a 64-byte private key.
func SignBytes(key ed25519.PrivateKey, msg []byte) []byte {
	if len(key) != ed25519.PrivateKeySize {
		panic("codec: SignBytes: bad Ed25519 private key length")
	}
	return voi.Sign(voi.PrivateKey(key), msg)
}

// VerifyBytes is ed25519.Verify(pub, msg, sig), except that a public key of
// the wrong length is reported as a failed verification instead of a panic.
func VerifyBytes(pub ed25519.PublicKey, msg, sig []byte) bool {
	if len(pub) != ed25519.PublicKeySize || len(sig) != ed25519.SignatureSize {
		return false
	}
	if k := expandedKey(pub); k != nil {
		return voi.VerifyExpandedWithOptions(k, msg, sig, stdlibRules)
	}
	return voi.VerifyWithOptions(voi.PublicKey(pub), msg, sig, stdlibRules)
}

// A verification decodes the public key's point and builds its table of
// multiples (about 5 µs, a sixth of the check); the handful of keys a
// process trusts (the runtime's, retired ones, witnesses) are kept expanded.
// The cache stops growing at maxExpanded keys; further keys are expanded on
// every call, so no input can grow it.
const maxExpanded = 64

var (
	expanded  sync.Map // string(public key) -> *voi.ExpandedPublicKey
	expandedN atomic.Int32
)

func expandedKey(pub ed25519.PublicKey) *voi.ExpandedPublicKey {
	if v, ok := expanded.Load(string(pub)); ok {
		return v.(*voi.ExpandedPublicKey)
	}
	k, err := voi.NewExpandedPublicKey(voi.PublicKey(pub))
	if err != nil {
		return nil
	}
	if expandedN.Load() < maxExpanded {
		if _, loaded := expanded.LoadOrStore(string(pub), k); !loaded {
			expandedN.Add(1)
		}
	}
	return k
}
