package codec_test

import (
	"crypto/ed25519"
	"encoding/hex"
	"math/rand/v2"
	"testing"

	"github.com/contextos/ledger/events/codec"
)

// TestSignBytesMatchesStdlib: Ed25519 signatures are deterministic, so the
// runtime's signer must write exactly the standard library's bytes, and each
// must verify under both implementations.
func TestSignBytesMatchesStdlib(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 300; i++ {
		seed := make([]byte, ed25519.SeedSize)
		for j := range seed {
			seed[j] = byte(r.IntN(256))
		}
		key := ed25519.NewKeyFromSeed(seed)
		msg := make([]byte, r.IntN(1200))
		for j := range msg {
			msg[j] = byte(r.IntN(256))
		}
		got, want := codec.SignBytes(key, msg), ed25519.Sign(key, msg)
		if string(got) != string(want) {
			t.Fatalf("key %d, %d-byte message: signature %x, crypto/ed25519 %x", i, len(msg), got, want)
		}
		pub := key.Public().(ed25519.PublicKey)
		if !codec.VerifyBytes(pub, msg, got) {
			t.Fatalf("key %d: a signature crypto/ed25519 made does not verify", i)
		}
		if len(msg) > 0 {
			msg[r.IntN(len(msg))] ^= 1 << r.IntN(8)
			if codec.VerifyBytes(pub, msg, got) {
				t.Fatalf("key %d: a signature verifies over a changed message", i)
			}
		}
	}
}

// Encodings where Ed25519 implementations are known to disagree: small-order
// points, the identity, non-canonical y coordinates, and a scalar S >= L.
var edgeHex = []string{
	"0100000000000000000000000000000000000000000000000000000000000000",
	"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
	"0000000000000000000000000000000000000000000000000000000000000000",
	"0000000000000000000000000000000000000000000000000000000000000080",
	"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
	"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
	"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa",
	"eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
	"edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
	"edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
	"edd3f55c1a631258d69cf7a2def9de1400000000000000000000000000000010", // L
}

func edge(t testing.TB, i int) []byte {
	b, err := hex.DecodeString(edgeHex[i%len(edgeHex)])
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzVerifyBytesMatchesStdlib holds the runtime's verification to
// crypto/ed25519.Verify on any key, message and signature: a difference
// would let a stored event verify in one place and not in another.
func FuzzVerifyBytesMatchesStdlib(f *testing.F) {
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	pub := key.Public().(ed25519.PublicKey)
	msg := []byte(`{"body":{},"type":"x"}`)
	sig := ed25519.Sign(key, msg)
	f.Add([]byte(pub), msg, sig)
	f.Add([]byte(pub), msg, sig[:63])
	f.Add([]byte(pub[:31]), msg, sig)
	for i := range edgeHex {
		for j := range edgeHex {
			a, r, s := edge(f, i), edge(f, j), edge(f, i+j)
			f.Add(a, msg, append(append([]byte(nil), r...), s...))
			f.Add([]byte(pub), msg, append(append([]byte(nil), sig[:32]...), s...))
			f.Add(a, msg, append(append([]byte(nil), r...), sig[32:]...))
		}
	}
	f.Fuzz(func(t *testing.T, pk, msg, sig []byte) {
		want := len(pk) == ed25519.PublicKeySize && ed25519.Verify(ed25519.PublicKey(pk), msg, sig)
		if got := codec.VerifyBytes(ed25519.PublicKey(pk), msg, sig); got != want {
			t.Fatalf("VerifyBytes(%x, %x, %x) = %v, crypto/ed25519 says %v", pk, msg, sig, got, want)
		}
	})
}

// TestVerifyBytesSmallOrder: the standard library accepts the identity as a
// key with the identity as R and S = 0 (cofactorless, small order allowed),
// and refuses S = L; so must the runtime.
func TestVerifyBytesSmallOrder(t *testing.T) {
	id, zero, l := edge(t, 0), edge(t, 2), edge(t, 10)
	zeroS := make([]byte, 32)
	msg := []byte("m")
	for _, c := range []struct {
		a, r, s []byte
	}{{id, id, zeroS}, {id, id, l}, {zero, id, zeroS}} {
		sig := append(append([]byte(nil), c.r...), c.s...)
		want := ed25519.Verify(c.a, msg, sig)
		if got := codec.VerifyBytes(c.a, msg, sig); got != want {
			t.Errorf("A=%x sig=%x: %v, crypto/ed25519 %v", c.a, sig, got, want)
		}
	}
	if !codec.VerifyBytes(id, msg, append(append([]byte(nil), id...), zeroS...)) {
		t.Error("the identity key's trivial signature is refused; crypto/ed25519 accepts it")
	}
}

// FuzzSignBytesMatchesStdlib signs any message with any seed.
func FuzzSignBytesMatchesStdlib(f *testing.F) {
	f.Add(make([]byte, ed25519.SeedSize), []byte("m"))
	f.Fuzz(func(t *testing.T, seed, msg []byte) {
		if len(seed) != ed25519.SeedSize {
			return
		}
		key := ed25519.NewKeyFromSeed(seed)
		if got, want := codec.SignBytes(key, msg), ed25519.Sign(key, msg); string(got) != string(want) {
			t.Fatalf("seed %x: signature %x, crypto/ed25519 %x", seed, got, want)
		}
	})
}
