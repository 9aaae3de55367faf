package codec

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/contextos/ledger/kernel"
)

// GenerateKey returns a new Ed25519 private key made from ed25519.SeedSize
// bytes read from rand. Randomness is an input: pass crypto/rand.Reader in
// production and a fixed reader in tests.
func GenerateKey(rand io.Reader) (ed25519.PrivateKey, error) {
	if rand == nil {
		return nil, errors.New("events: GenerateKey: nil random source")
	}
	seed := make([]byte, ed25519.SeedSize)
	if _, err := io.ReadFull(rand, seed); err != nil {
		return nil, fmt.Errorf("events: GenerateKey: %w", err)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// KeyIDFor returns the key id of an Ed25519 public key: "ed25519:" followed by
// the first 16 lowercase hex digits of SHA-256(pub).
func KeyIDFor(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return "ed25519:" + hex.EncodeToString(sum[:8])
}

// Signer seals events with one private key. KeyID must be KeyIDFor the key's
// public half (NewSigner sets it).
type Signer struct {
	KeyID string
	Key   ed25519.PrivateKey
}

// NewSigner returns the Signer of key with its derived KeyID.
func NewSigner(key ed25519.PrivateKey) Signer {
	return Signer{KeyID: KeyIDFor(key.Public().(ed25519.PublicKey)), Key: key}
}

// Seal builds and signs an envelope. body is canonicalized with
// kernel.Canonical (a json.RawMessage is taken as JSON text) and must be a JSON
// object; eventID, tenant and time are inputs (this package reads no clock and
// makes no ids). The result is Valid and verifies against a Keyring holding
// the signer's public key.
func (s Signer) Seal(typ string, v int, eventID, tenant, time string, body any) (Envelope, error) {
	envs, err := s.SealAll([]Draft{{Type: typ, V: v, EventID: eventID, Tenant: tenant, Time: time, Body: body}})
	if err != nil {
		return Envelope{}, err
	}
	return envs[0], nil
}

// ErrUnknownKey is matched (errors.Is) by *UnknownKeyError.
var ErrUnknownKey = errors.New("events: unknown signing key")

// ErrBadSignature is matched (errors.Is) by *SignatureError.
var ErrBadSignature = errors.New("events: bad signature")

// UnknownKeyError reports an envelope signed by a key the keyring does not hold.
type UnknownKeyError struct{ KeyID, EventID string }

// Error names the event and the unknown key.
func (e *UnknownKeyError) Error() string {
	return fmt.Sprintf("events: event %s: unknown signing key %q", e.EventID, e.KeyID)
}

// Is reports whether target is ErrUnknownKey.
func (e *UnknownKeyError) Is(target error) bool { return target == ErrUnknownKey }

// SignatureError reports an envelope whose signature does not verify under the
// key it names.
type SignatureError struct{ KeyID, EventID string }

// Error names the event and the key.
func (e *SignatureError) Error() string {
	return fmt.Sprintf("events: event %s: signature does not verify under %q", e.EventID, e.KeyID)
}

// Is reports whether target is ErrBadSignature.
func (e *SignatureError) Is(target error) bool { return target == ErrBadSignature }

// Keyring maps key ids to the Ed25519 public keys trusted to sign events.
type Keyring map[string]ed25519.PublicKey

// Add trusts pub under its derived key id and returns that id.
func (k Keyring) Add(pub ed25519.PublicKey) string {
	id := KeyIDFor(pub)
	k[id] = append(ed25519.PublicKey(nil), pub...)
	return id
}

// Verify checks e: a valid envelope (see Validate) whose signature verifies
// under the key named by e.KeyID. It returns an *EnvelopeError, an
// *UnknownKeyError or a *SignatureError.
func (k Keyring) Verify(e Envelope) error {
	if err := Validate(e); err != nil {
		return err
	}
	pub, ok := k[e.KeyID]
	if !ok || len(pub) != ed25519.PublicKeySize {
		return &UnknownKeyError{KeyID: e.KeyID, EventID: e.EventID}
	}
	msg, err := signingBytes(e, false) // Validate checked the body is canonical
	if err != nil {
		return err
	}
	if !VerifySignature(pub, msg, e.Sig, e.Proof) {
		return &SignatureError{KeyID: e.KeyID, EventID: e.EventID}
	}
	return nil
}

// keyringFile is the JSON form of a Keyring.
type keyringFile struct {
	Keys []keyringEntry `json:"keys"`
}

type keyringEntry struct {
	KeyID     string `json:"key_id"`
	PublicKey string `json:"public_key"` // standard base64 (padded) of the 32-byte key
}

// MarshalKeyring returns the JSON keyring file form of k:
// {"keys":[{"key_id":...,"public_key":<standard base64>}]}, sorted by key id.
func MarshalKeyring(k Keyring) ([]byte, error) {
	f := keyringFile{Keys: []keyringEntry{}}
	for id, pub := range k {
		if len(pub) != ed25519.PublicKeySize || KeyIDFor(pub) != id {
			return nil, fmt.Errorf("events: keyring entry %q does not match its key", id)
		}
		f.Keys = append(f.Keys, keyringEntry{KeyID: id, PublicKey: base64.StdEncoding.EncodeToString(pub)})
	}
	sort.Slice(f.Keys, func(i, j int) bool { return f.Keys[i].KeyID < f.Keys[j].KeyID })
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// ParseKeyring parses a keyring file strictly: unknown fields, trailing data,
// keys that are not 32 bytes, key ids that do not match their key and
// duplicates are refused.
func ParseKeyring(b []byte) (Keyring, error) {
	var f keyringFile
	if err := kernel.StrictJSON(b, &f); err != nil {
		return nil, fmt.Errorf("events: keyring: %w", err)
	}
	k := Keyring{}
	for i, e := range f.Keys {
		pub, err := base64.StdEncoding.Strict().DecodeString(e.PublicKey)
		if err != nil || len(pub) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("events: keyring: key %d: public_key is not base64 of 32 bytes", i)
		}
		if id := KeyIDFor(pub); id != e.KeyID {
			return nil, fmt.Errorf("events: keyring: key %d: key_id %q, key has %q", i, e.KeyID, id)
		}
		if _, dup := k[e.KeyID]; dup {
			return nil, fmt.Errorf("events: keyring: duplicate key %q", e.KeyID)
		}
		k[e.KeyID] = pub
	}
	return k, nil
}

// LoadKeyring reads a keyring file (see ParseKeyring).
func LoadKeyring(path string) (Keyring, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseKeyring(b)
}

// SaveKeyring writes k to path (mode 0644: public keys only).
func SaveKeyring(path string, k Keyring) error {
	b, err := MarshalKeyring(k)
	if err != nil {
		return err
	}
	return writeFileSync(path, b, 0o644, false)
}

// privateKeyFile is the JSON form of a private key file.
type privateKeyFile struct {
	KeyID string `json:"key_id"`
	Seed  string `json:"seed"` // standard base64 (padded) of the 32-byte Ed25519 seed
}

// SavePrivateKey writes key to a new file at path with mode 0600 as
// {"key_id":...,"seed":<standard base64 of the 32-byte seed>}. It refuses to
// overwrite an existing file, so a key is never lost by accident.
func SavePrivateKey(path string, key ed25519.PrivateKey) error {
	if len(key) != ed25519.PrivateKeySize {
		return errors.New("events: SavePrivateKey: not an Ed25519 private key")
	}
	b, err := json.MarshalIndent(privateKeyFile{
		KeyID: KeyIDFor(key.Public().(ed25519.PublicKey)),
		Seed:  base64.StdEncoding.EncodeToString(key.Seed()),
	}, "", "  ")
	if err != nil {
		return err
	}
	return writeFileSync(path, append(b, '\n'), 0o600, true)
}

// LoadPrivateKey reads a private key file written by SavePrivateKey. It refuses
// a file readable or writable by group or others (like ssh), a malformed file
// and a key_id that does not match the key.
func LoadPrivateKey(path string) (ed25519.PrivateKey, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("events: private key %s: mode %v is accessible by group or others; want 0600", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f privateKeyFile
	if err := kernel.StrictJSON(b, &f); err != nil {
		return nil, fmt.Errorf("events: private key %s: %w", path, err)
	}
	seed, err := base64.StdEncoding.Strict().DecodeString(f.Seed)
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("events: private key %s: seed is not base64 of 32 bytes", path)
	}
	key := ed25519.NewKeyFromSeed(seed)
	if id := KeyIDFor(key.Public().(ed25519.PublicKey)); id != f.KeyID {
		return nil, fmt.Errorf("events: private key %s: key_id %q, key has %q", path, f.KeyID, id)
	}
	return key, nil
}

// writeFileSync writes b to path with perm and fsyncs it; exclusive refuses an
// existing file.
func writeFileSync(path string, b []byte, perm os.FileMode, exclusive bool) (err error) {
	flag := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if exclusive {
		flag = os.O_WRONLY | os.O_CREATE | os.O_EXCL
	}
	f, err := os.OpenFile(path, flag, perm)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	if err := f.Chmod(perm); err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		return err
	}
	return f.Sync()
}
