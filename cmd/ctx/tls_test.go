package main

import (
	"strings"
	"testing"

	"github.com/contextos/ledger/internal/testing/tlsenv"
)

// TestTLSFlags: ctx reaches a TLS-only server with a private CA and client
// certificates through --tlsca, --tlscert and --tlskey (or their CTX_*
// variables) with an nkey; without the CA it refuses to connect (exit 1)
// and sends nothing.
func TestTLSFlags(t *testing.T) {
	env, err := tlsenv.Start(tlsenv.Options{Config: "../../examples/shared-guarantees/contextos.toml", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Close)
	base := []string{"exposure", "--nats", env.Info.URL, "--tenant", "acme", "--user", "ops_alice", "--nkey", env.Info.NKeys["ops_alice"]}
	tlsArgs := []string{"--tlsca", env.Info.CAFile, "--tlscert", env.Info.CertFile, "--tlskey", env.Info.KeyFile}
	if code, out, errOut := ctxRun(append(base, tlsArgs...)...); code != 0 {
		t.Fatalf("with the TLS flags: exit %d %s%s", code, out, errOut)
	}
	code, _, errOut := ctxRun(base...)
	if code != 1 || !strings.Contains(errOut, "asks for TLS") {
		t.Fatalf("without TLS settings: exit %d %s", code, errOut)
	}
	t.Setenv("CTX_TLSCA", env.Info.CAFile)
	t.Setenv("CTX_TLSCERT", env.Info.CertFile)
	t.Setenv("CTX_TLSKEY", env.Info.KeyFile)
	if code, out, errOut := ctxRun(base...); code != 0 {
		t.Fatalf("with $CTX_TLSCA, $CTX_TLSCERT, $CTX_TLSKEY: exit %d %s%s", code, out, errOut)
	}
}
