package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextos/ledger/internal/testing/refundcfg"
	"github.com/contextos/ledger/internal/testing/testenv"
)

// domainConfig is a replica's configuration: NATS (an external URL, or the
// embedded server in dataDir), agent_email, the refund capability and,
// when guarded, the order's refund ceiling.
func domainConfig(t *testing.T, natsURL, dataDir, keyFile, executor string, guarded bool) string {
	t.Helper()
	nats := "url = \"" + natsURL + "\"\n"
	if natsURL == "" {
		nats = "listen = \"127.0.0.1:0\"\n"
	}
	s := "[nats]\ndata_dir = \"" + dataDir + "\"\n" + nats + `sync = "relaxed"

[runtime]
executor = "` + executor + `"
key_file = "` + keyFile + `"

[[tenants]]
id = "acme"
  [[tenants.agents]]
  id = "agent_email"
  password = "email-secret-passphrase"
  capabilities = ["adp_payments.issue_refund"]

`
	// The refund capability and, when guarded, the order's ceiling, as the
	// one refund configuration writes them; its provider is never called.
	refund := refundcfg.Text("", "http://127.0.0.1:9")
	s += "\n" + refundcfg.Block(refund, "capabilities", refundcfg.Capability)
	if guarded {
		s += "\n" + refundcfg.Block(refund, "guarantees", refundcfg.Guarantee)
	}
	p := filepath.Join(t.TempDir(), executor+".toml")
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCheckConfigReadsTheStream: replica A, configured with the order's
// refund ceiling, runs on an external NATS and has pinned it. Replica B's
// configuration leaves it out: --check-config exits 1 naming the tenant,
// the guarantee and the capability, and so does B's boot, while A's
// configuration checks ok. An unreachable NATS exits 3 (the file is valid,
// the stream was not read), unless --offline asks for the file alone. On
// the embedded server, the stream in data_dir is read once no daemon holds
// it.
func TestCheckConfigReadsTheStream(t *testing.T) {
	srv := testenv.Server(t, testenv.Options{})
	keyFile := filepath.Join(t.TempDir(), "runtime.key")
	cfgA := domainConfig(t, srv.ClientURL(), t.TempDir(), keyFile, "replica-a", true)
	cfgB := domainConfig(t, srv.ClientURL(), t.TempDir(), keyFile, "replica-b", false)
	if code, stderr, _ := runOnce(t, "--check-config", cfgB); code != 0 || !strings.Contains(stderr, "nothing is pinned") {
		t.Fatalf("B on an empty deployment: exit %d:\n%s", code, stderr)
	}
	start(t, cfgA)

	for _, args := range [][]string{{"--check-config", cfgB}, {"--config", cfgB}} {
		code, stderr, _ := runOnce(t, args...)
		for _, want := range []string{"tenant acme", "enforcement_domain_mismatch", "refunds-per-order", "adp_payments.issue_refund"} {
			if code != 1 || !strings.Contains(stderr, want) {
				t.Fatalf("%s B: exit %d, want 1 and %q:\n%s", args[0], code, want, stderr)
			}
		}
	}
	if code, stderr, _ := runOnce(t, "--check-config", cfgA); code != 0 || !strings.Contains(stderr, "checked against the stream at") {
		t.Fatalf("A: exit %d:\n%s", code, stderr)
	}

	gone := domainConfig(t, "nats://"+freeAddr(t), t.TempDir(), keyFile, "replica-c", false)
	if code, stderr, _ := runOnce(t, "--check-config", gone); code != 3 || !strings.Contains(stderr, "not checked against the guarantees pinned") {
		t.Fatalf("unreachable NATS: exit %d:\n%s", code, stderr)
	}
	if code, stderr, _ := runOnce(t, "--check-config", gone, "--offline"); code != 0 {
		t.Fatalf("--offline: exit %d:\n%s", code, stderr)
	}

	// The embedded server: a guarded daemon pins, then a configuration
	// without the guarantee is checked on its data_dir.
	data := t.TempDir()
	embKey := filepath.Join(t.TempDir(), "runtime.key")
	guarded := domainConfig(t, "", data, embKey, "embedded-a", true)
	bare := domainConfig(t, "", data, embKey, "embedded-b", false)
	cmd := start(t, guarded)
	if code, stderr, _ := runOnce(t, "--check-config", bare); code != 0 || !strings.Contains(stderr, "not checked against the event stream") {
		t.Fatalf("while the daemon holds data_dir: exit %d:\n%s", code, stderr)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if code, stderr, _ := runOnce(t, "--check-config", bare); code != 1 || !strings.Contains(stderr, "refunds-per-order") {
		t.Fatalf("on the stopped daemon's data_dir: exit %d:\n%s", code, stderr)
	}
	if code, stderr, _ := runOnce(t, "--check-config", guarded); code != 0 {
		t.Fatalf("the guarded configuration on its data_dir: exit %d:\n%s", code, stderr)
	}
}
