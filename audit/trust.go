package audit

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
	"golang.org/x/mod/sumdb/note"
)

// KeysVersion is the version of the keys.json format.
const KeysVersion = 2

// Keys are the public keys an auditor trusts: the Ed25519 keys that sign
// events (the current runtime key and every retired one), the note verifier
// keys of the checkpoints, and the witnesses whose cosignatures the
// checkpoints may carry. Their file form, keys.json, is
//
//	{"v":2,"keyring":{"keys":[{"key_id":...,"public_key":...}]},
//	 "checkpoint_keys":["<origin>+<hash>+<key>"],"witness_keys":["<name>+<hash>+<key>"]}
//
// where keyring is the events keyring file (codec.MarshalKeyring) and a
// witness key is a C2SP cosignature/v1 verifier key (ParseCosignerKey).
type Keys struct {
	Keyring        codec.Keyring
	CheckpointKeys []string // note verifier keys, one per (origin, key)
	WitnessKeys    []string // cosignature verifier keys
}

type keysFile struct {
	V              *int            `json:"v"`
	Keyring        json.RawMessage `json:"keyring"`
	CheckpointKeys []string        `json:"checkpoint_keys"`
	WitnessKeys    []string        `json:"witness_keys"`
}

// KeysFor returns the keys of one tenant's log whose events and checkpoints
// are signed with the given runtime keys.
func KeysFor(tenant string, pubs ...ed25519.PublicKey) (Keys, error) {
	k := Keys{Keyring: codec.Keyring{}, WitnessKeys: []string{}}
	for _, pub := range pubs {
		if len(pub) != ed25519.PublicKeySize {
			return Keys{}, fmt.Errorf("audit: KeysFor: not an Ed25519 public key")
		}
		if _, dup := k.Keyring[codec.KeyIDFor(pub)]; dup {
			continue
		}
		k.Keyring.Add(pub)
		vkey, err := NoteVerifierKey(Origin(tenant), pub)
		if err != nil {
			return Keys{}, err
		}
		k.CheckpointKeys = append(k.CheckpointKeys, vkey)
	}
	sort.Strings(k.CheckpointKeys)
	return k, nil
}

// Verifiers returns the checkpoint verifiers.
func (k Keys) Verifiers() (note.Verifiers, error) {
	vs := make([]note.Verifier, 0, len(k.CheckpointKeys))
	for _, s := range k.CheckpointKeys {
		v, err := note.NewVerifier(s)
		if err != nil {
			return nil, fmt.Errorf("audit: checkpoint key %q: %w", s, err)
		}
		vs = append(vs, v)
	}
	return note.VerifierList(vs...), nil
}

// Cosigners returns the witnesses' cosignature verifiers.
func (k Keys) Cosigners() ([]*Cosigner, error) {
	out := make([]*Cosigner, 0, len(k.WitnessKeys))
	for _, s := range k.WitnessKeys {
		c, err := ParseCosignerKey(s)
		if err != nil {
			return nil, fmt.Errorf("audit: %w", err)
		}
		out = append(out, c)
	}
	return out, nil
}

// MarshalKeys returns the keys.json form of k (indented, checkpoint and
// witness keys sorted).
func MarshalKeys(k Keys) ([]byte, error) {
	kr := k.Keyring
	if kr == nil {
		kr = codec.Keyring{}
	}
	ring, err := codec.MarshalKeyring(kr)
	if err != nil {
		return nil, err
	}
	cks := append([]string{}, k.CheckpointKeys...)
	sort.Strings(cks)
	wks := append([]string{}, k.WitnessKeys...)
	sort.Strings(wks)
	v := KeysVersion
	b, err := json.MarshalIndent(keysFile{V: &v, Keyring: ring, CheckpointKeys: cks, WitnessKeys: wks}, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// ParseKeys parses keys.json strictly: unknown fields and trailing data are
// refused, every field is required, the keyring must parse
// (codec.ParseKeyring), every checkpoint key must be a valid note verifier
// key and every witness key a valid cosignature key, without duplicates.
func ParseKeys(b []byte) (Keys, error) {
	var f keysFile
	if err := kernel.StrictJSON(b, &f); err != nil {
		return Keys{}, fmt.Errorf("audit: keys: %w", err)
	}
	if f.V == nil || *f.V != KeysVersion {
		return Keys{}, fmt.Errorf("audit: keys: want \"v\": %d", KeysVersion)
	}
	if f.Keyring == nil || f.CheckpointKeys == nil || f.WitnessKeys == nil {
		return Keys{}, fmt.Errorf("audit: keys: keyring, checkpoint_keys and witness_keys are required")
	}
	ring, err := codec.ParseKeyring(f.Keyring)
	if err != nil {
		return Keys{}, fmt.Errorf("audit: keys: %w", err)
	}
	seen := map[string]bool{}
	for _, s := range append(append([]string{}, f.CheckpointKeys...), f.WitnessKeys...) {
		if seen[s] {
			return Keys{}, fmt.Errorf("audit: keys: duplicate key %q", s)
		}
		seen[s] = true
	}
	for _, s := range f.CheckpointKeys {
		if _, err := note.NewVerifier(s); err != nil {
			return Keys{}, fmt.Errorf("audit: keys: checkpoint key %q: %w", s, err)
		}
	}
	k := Keys{Keyring: ring, CheckpointKeys: f.CheckpointKeys, WitnessKeys: f.WitnessKeys}
	if _, err := k.Cosigners(); err != nil {
		return Keys{}, fmt.Errorf("audit: keys: %w", err)
	}
	return k, nil
}
