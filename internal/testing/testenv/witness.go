package testenv

import (
	"crypto/ed25519"
	"crypto/rand"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/contextos/ledger/audit"
	"github.com/contextos/ledger/audit/witness"
	"github.com/contextos/ledger/events/codec"
)

// TestWitness is a witness serving on loopback for a test.
type TestWitness struct {
	URL      string          // its submission prefix ([[runtime.witnesses]] url)
	Key      string          // its cosignature verifier key ([[runtime.witnesses]] key)
	Cosigner *audit.Cosigner // its identity, for a verification policy
	Witness  *audit.Witness  // its state: the checkpoints it cosigned
}

// Witness starts a witness, named witness.test/w1, on a loopback HTTP
// server that knows the audit log of tenant signed by pub. It stops at the
// end of the test.
func Witness(t testing.TB, tenant string, pub ed25519.PublicKey) TestWitness {
	t.Helper()
	wkey, err := codec.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	cos, err := audit.NewCosigner("witness.test/w1", wkey, func() uint64 { return uint64(time.Now().Unix()) })
	if err != nil {
		t.Fatal(err)
	}
	logKey, err := audit.NoteVerifierKey(audit.Origin(tenant), pub)
	if err != nil {
		t.Fatal(err)
	}
	w, err := witness.Open(cos, []string{logKey}, filepath.Join(t.TempDir(), "witness.json"))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(witness.Handler(w))
	t.Cleanup(hs.Close)
	return TestWitness{URL: hs.URL, Key: cos.VerifierKey(), Cosigner: cos, Witness: w}
}
