package audit

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
)

// TypeKeyRotated is the event that hands the runtime's signing identity
// from one Ed25519 key to the next. It is stored on every tenant's
// KeyRotationSubject, so each tenant's audit log records it.
const TypeKeyRotated = "runtime.key_rotated"

// KeyRotationVersion is the version of TypeKeyRotated.
const KeyRotationVersion = 1

func init() { codec.Register(TypeKeyRotated, KeyRotationVersion) }

// KeyRotationSubject is where tenant's key rotations are stored.
func KeyRotationSubject(tenant string) string { return codec.TenantPrefix(tenant) + "keys.rotation" }

// KeyRotation is the body of a TypeKeyRotated event. It is signed by the
// old key when that key is still available; when it was lost, by the new
// key with an operator's assertion (AssertedBy and ArtifactRef set), which
// an auditor sees as such. Retired lists every earlier key, this one's From
// included, so the latest rotation alone says which keys an auditor must
// trust for the whole log.
type KeyRotation struct {
	From        string   `json:"from"`                   // standard base64 of the retired public key
	To          string   `json:"to"`                     // standard base64 of the new public key
	Retired     []string `json:"retired"`                // every retired public key, From included
	AssertedBy  string   `json:"asserted_by,omitempty"`  // the operator who asserts the old key is lost
	ArtifactRef string   `json:"artifact_ref,omitempty"` // the ticket or record of that assertion
}

// PublicKeys decodes the rotation's keys.
func (k KeyRotation) PublicKeys() (from, to ed25519.PublicKey, retired []ed25519.PublicKey, err error) {
	dec := func(s string) (ed25519.PublicKey, error) {
		b, err := base64.StdEncoding.Strict().DecodeString(s)
		if err != nil || len(b) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("audit: key rotation: %q is not base64 of an Ed25519 public key", s)
		}
		return b, nil
	}
	if from, err = dec(k.From); err != nil {
		return nil, nil, nil, err
	}
	if to, err = dec(k.To); err != nil {
		return nil, nil, nil, err
	}
	for _, s := range k.Retired {
		p, err := dec(s)
		if err != nil {
			return nil, nil, nil, err
		}
		retired = append(retired, p)
	}
	return from, to, retired, nil
}

// ParseKeyRotation decodes and checks the body of a TypeKeyRotated event:
// well-formed keys, From among Retired, To not retired, and the event
// signed by From, or by To with an operator's assertion.
func ParseKeyRotation(env codec.Envelope) (KeyRotation, error) {
	if env.Type != TypeKeyRotated || env.V != KeyRotationVersion {
		return KeyRotation{}, fmt.Errorf("audit: not a key rotation: %s v%d", env.Type, env.V)
	}
	var k KeyRotation
	if err := kernel.StrictJSON(env.Body, &k); err != nil {
		return KeyRotation{}, fmt.Errorf("audit: key rotation: %w", err)
	}
	from, to, retired, err := k.PublicKeys()
	if err != nil {
		return KeyRotation{}, err
	}
	fromID, toID := codec.KeyIDFor(from), codec.KeyIDFor(to)
	found := false
	for _, r := range retired {
		found = found || codec.KeyIDFor(r) == fromID
		if codec.KeyIDFor(r) == toID {
			return KeyRotation{}, errors.New("audit: key rotation: the new key is among the retired ones")
		}
	}
	switch {
	case !found:
		return KeyRotation{}, errors.New("audit: key rotation: the old key is not among the retired ones")
	case env.KeyID == fromID && k.AssertedBy == "":
	case env.KeyID == toID && k.AssertedBy != "" && k.ArtifactRef != "":
	default:
		return KeyRotation{}, fmt.Errorf("audit: key rotation signed by %s: want the old key %s, or the new key %s with an operator's assertion", env.KeyID, fromID, toID)
	}
	return k, nil
}
