package daemontest

import (
	_ "embed"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/daemon"
	"github.com/contextos/ledger/internal/testing/provider"
)

// RefundConfig is the configuration template Boot uses unless told
// otherwise; {{DATA}} stands for the data directory and {{PROVIDER}} for
// the synthetic provider's base URL.
//
//go:embed refund.toml
var RefundConfig string

// Passwords are the passwords RefundConfig gives tenant acme's principals.
var Passwords = map[string]string{
	"agent_email":    "email-secret-passphrase",
	"agent_chat":     "chat-secret-passphrase",
	"agent_third":    "third-secret-passphrase",
	"agent_readonly": "ro-secret-passphrase",
	"ops_alice":      "alice-secret-passphrase",
}

// Options change the runtime Boot starts; the zero value boots
// RefundConfig as it is.
type Options struct {
	// Edit, when set, rewrites the configuration after the placeholders
	// are replaced and before it is parsed.
	Edit func(string) string
	// Boot is passed to daemon.Boot as it is.
	Boot daemon.BootOptions
}

// Daemon is a running runtime and the provider its refund capability
// calls.
type Daemon struct {
	RT       *daemon.Runtime
	Provider *provider.Server
}

// Boot starts the synthetic provider and a runtime over RefundConfig (as
// o.Edit changes it) in a fresh data directory, and stops both when the
// test ends. A configuration that does not parse or boot fails the test.
func Boot(t testing.TB, o Options) *Daemon {
	t.Helper()
	prov := provider.New()
	hs := httptest.NewServer(prov.Handler())
	t.Cleanup(hs.Close)
	text := strings.NewReplacer("{{DATA}}", t.TempDir(), "{{PROVIDER}}", hs.URL).Replace(RefundConfig)
	if o.Edit != nil {
		text = o.Edit(text)
	}
	cfg, err := config.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	rt, err := daemon.Boot(cfg, o.Boot)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	return &Daemon{RT: rt, Provider: prov}
}
