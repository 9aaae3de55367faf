package config

import (
	"crypto/ed25519"
	"strings"
	"testing"

	"github.com/contextos/ledger/audit"
)

// TestWitnessConfigRefused: what --check-config and boot refuse in
// [[runtime.witnesses]].
func TestWitnessConfigRefused(t *testing.T) {
	c, err := audit.NewCosigner("witness.test/w1", ed25519.NewKeyFromSeed(make([]byte, 32)), func() uint64 { return 0 })
	if err != nil {
		t.Fatal(err)
	}
	good := WitnessConfig{URL: "http://127.0.0.1:7380", Key: c.VerifierKey()}
	for _, tc := range []struct {
		name string
		ws   []WitnessConfig
		want string
	}{
		{"ftp url", []WitnessConfig{{URL: "ftp://x", Key: good.Key}}, "url"},
		{"no host", []WitnessConfig{{URL: "http://", Key: good.Key}}, "url"},
		{"not a key", []WitnessConfig{{URL: good.URL, Key: "witness.test/w1+00000000+AAAA"}}, "key"},
		{"a note key, not a cosignature key", []WitnessConfig{{URL: good.URL, Key: mustNoteKey(t)}}, "key"},
		{"twice", []WitnessConfig{good, good}, "twice"},
	} {
		r := RuntimeConfig{Witnesses: tc.ws}
		if err := r.validateAudit(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error naming %q", tc.name, err, tc.want)
		}
	}
	if err := (&RuntimeConfig{Witnesses: []WitnessConfig{good}}).validateAudit(); err != nil {
		t.Fatal(err)
	}
}

func mustNoteKey(t *testing.T) string {
	t.Helper()
	k, err := audit.NoteVerifierKey("witness.test/w1", ed25519.NewKeyFromSeed(make([]byte, 32)).Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	return k
}
