package codec_test

import (
	"bytes"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextos/ledger/events/codec"
)

func TestGenerateKeyIsDeterministicInItsInput(t *testing.T) {
	a, err := codec.GenerateKey(bytes.NewReader(goldenSeed()))
	if err != nil {
		t.Fatal(err)
	}
	b, err := codec.GenerateKey(bytes.NewReader(goldenSeed()))
	if err != nil || !a.Equal(b) {
		t.Fatal("same seed, different keys")
	}
	if !bytes.Equal(a.Seed(), goldenSeed()) {
		t.Fatal("key is not made from the bytes read")
	}
	if _, err := codec.GenerateKey(bytes.NewReader(make([]byte, 31))); err == nil {
		t.Fatal("short random source accepted")
	}
	if _, err := codec.GenerateKey(nil); err == nil {
		t.Fatal("nil random source accepted")
	}
	id := codec.KeyIDFor(a.Public().(ed25519.PublicKey))
	if !strings.HasPrefix(id, "ed25519:") || len(id) != len("ed25519:")+16 || id != goldenSigner(t).KeyID {
		t.Fatalf("key id %q", id)
	}
}

func TestKeyringFile(t *testing.T) {
	dir := t.TempDir()
	k1, _ := codec.GenerateKey(bytes.NewReader(bytes.Repeat([]byte{1}, 32)))
	k2, _ := codec.GenerateKey(bytes.NewReader(bytes.Repeat([]byte{2}, 32)))
	kr := codec.Keyring{}
	kr.Add(k1.Public().(ed25519.PublicKey))
	kr.Add(k2.Public().(ed25519.PublicKey))
	path := filepath.Join(dir, "keys.json")
	if err := codec.SaveKeyring(path, kr); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if !bytes.Contains(b, []byte(`"keys"`)) || !bytes.Contains(b, []byte(`"public_key"`)) {
		t.Fatalf("keyring file: %s", b)
	}
	got, err := codec.LoadKeyring(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("loaded %d keys", len(got))
	}
	for id, pub := range kr {
		if !got[id].Equal(pub) {
			t.Fatalf("key %s differs", id)
		}
	}
	e := goldenEnvelope(t)
	if err := got.Verify(e); err == nil {
		t.Fatal("verified under a keyring without the signer")
	}
	for name, text := range map[string]string{
		"unknown field": `{"keys":[],"x":1}`,
		"trailing":      `{"keys":[]} []`,
		"short key":     `{"keys":[{"key_id":"ed25519:00","public_key":"AAAA"}]}`,
		"wrong id":      strings.Replace(string(b), `"ed25519:`, `"ed25519:f`, 1),
		"duplicate":     strings.Replace(string(b), `"keys": [`, `"keys": [`+firstEntry(t, b)+",", 1),
	} {
		if _, err := codec.ParseKeyring([]byte(text)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func firstEntry(t *testing.T, b []byte) string {
	s := string(b)
	i, j := strings.Index(s, "{\n      \"key_id\""), strings.Index(s, "}")
	if i < 0 || j < i {
		t.Fatalf("no entry in %s", b)
	}
	return s[i : j+1]
}

func TestPrivateKeyFile(t *testing.T) {
	dir := t.TempDir()
	key, _ := codec.GenerateKey(bytes.NewReader(goldenSeed()))
	path := filepath.Join(dir, "runtime.key")
	if err := codec.SavePrivateKey(path, key); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v", fi.Mode().Perm(), err)
	}
	got, err := codec.LoadPrivateKey(path)
	if err != nil || !got.Equal(key) {
		t.Fatalf("LoadPrivateKey: %v", err)
	}
	if err := codec.SavePrivateKey(path, key); err == nil {
		t.Fatal("SavePrivateKey overwrote an existing key")
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := codec.LoadPrivateKey(path); err == nil {
		t.Fatal("LoadPrivateKey accepted a world-readable key")
	}
	bad := filepath.Join(dir, "bad.key")
	if err := os.WriteFile(bad, []byte(`{"key_id":"ed25519:0000000000000000","seed":"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := codec.LoadPrivateKey(bad); err == nil {
		t.Fatal("LoadPrivateKey accepted a mismatched key id")
	}
}
