package daemontest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/daemon"
	"github.com/contextos/ledger/internal/testing/provider"
	"github.com/contextos/ledger/internal/testing/refundcfg"
)

// Passwords are the passwords the refund configuration gives tenant
// acme's principals.
var Passwords = refundcfg.Passwords

// Options change the runtime Boot starts; the zero value boots the refund
// configuration (package refundcfg) as it is.
type Options struct {
	// Console adds to the refund configuration what the console and tower tests
	// exercise (see ConsoleEdit), before Edit runs.
	Console bool
	// Edit, when set, rewrites the configuration's text (refundcfg's
	// edits help) before it is parsed.
	Edit func(string) string
	// Config, when set, changes the parsed configuration before the
	// runtime boots (daemon.Boot validates it again): for what only the
	// parsed form can say, such as the users of a NATS server the test
	// starts itself.
	Config func(*config.Config)
	// File, when set, writes the configuration to a file and loads it from
	// there, so its digest is the file's and relative paths in it are the
	// file's directory's; Daemon.ConfigPath names the file.
	File bool
	// Provider, when set, wraps the synthetic provider's handler.
	Provider func(http.Handler) http.Handler
	// Boot is passed to daemon.Boot as it is.
	Boot daemon.BootOptions
	// Log, when set and Boot.Logger is not, receives the runtime's log in
	// the format and at the level the configuration says.
	Log io.Writer
	// Of, when set, boots over that Daemon's data directory and provider
	// instead of fresh ones (Provider is then ignored): a restart over the
	// same data once the test has closed Of.RT, or another replica of a
	// deployment whose NATS server Config names.
	Of *Daemon
}

// Daemon is a running runtime and the provider its refund capability
// calls.
type Daemon struct {
	RT       *daemon.Runtime
	Provider *provider.Server
	// ConfigPath is the configuration's file with Options.File, else "".
	ConfigPath string
	// Dir is the data directory the configuration names, and ProviderURL
	// the provider's address in it.
	Dir, ProviderURL string
}

// Boot starts the synthetic provider and a runtime over the refund
// configuration (as o changes it) in a fresh data directory, and stops both when the test
// ends. A configuration that does not parse or boot fails the test.
func Boot(t testing.TB, o Options) *Daemon {
	t.Helper()
	d, err := Start(t, o)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Start is Boot for a test of a runtime that refuses to start: an error of
// daemon.Boot is returned (with the Daemon, whose RT is nil) instead of
// failing the test. A configuration that does not parse still fails it.
func Start(t testing.TB, o Options) (*Daemon, error) {
	t.Helper()
	d := &Daemon{}
	if o.Of != nil {
		d.Provider, d.Dir, d.ProviderURL = o.Of.Provider, o.Of.Dir, o.Of.ProviderURL
	} else {
		d.Provider = provider.New()
		h := d.Provider.Handler()
		if o.Provider != nil {
			h = o.Provider(h)
		}
		hs := httptest.NewServer(h)
		t.Cleanup(hs.Close)
		d.Dir, d.ProviderURL = t.TempDir(), hs.URL
	}
	text := refundcfg.Text(d.Dir, d.ProviderURL)
	if o.Console {
		text = ConsoleEdit(text)
	}
	if o.Edit != nil {
		text = o.Edit(text)
	}
	var cfg *config.Config
	var err error
	if o.File {
		d.ConfigPath = filepath.Join(t.TempDir(), "contextosd.toml")
		if err := os.WriteFile(d.ConfigPath, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err = config.Load(d.ConfigPath)
	} else {
		cfg, err = config.Parse([]byte(text))
	}
	if err != nil {
		t.Fatal(err)
	}
	if o.Config != nil {
		o.Config(cfg)
	}
	if o.Log != nil && o.Boot.Logger == nil {
		o.Boot.Logger = config.NewLogger(cfg, o.Log)
	}
	rt, err := daemon.Boot(cfg, o.Boot)
	if err != nil {
		return d, err
	}
	t.Cleanup(rt.Close)
	d.RT = rt
	return d, nil
}

// ConsoleEdit adds to the refund configuration's text the console tests'
// parts: a relaxed fsync (the browser tests make many appends), acme's
// agent_phone (the refund only) and operator ops_tower (towerd's
// configured operator), globex's operator ops_bob, and
// adp_payments.issue_refund_high, a high-risk effectful refund over the
// same provider that agent_email may propose and refunds-per-order
// governs with the refund. It panics if the text no longer has the lines
// it edits, so a change there cannot silently drop them.
func ConsoleEdit(text string) string {
	text = refundcfg.Replace(text,
		"[nats]\n", "[nats]\nsync = \"relaxed\"\n",
		`  capabilities = ["adp_payments.issue_refund", "crm.lookup", "bank.wire"]
`, `  capabilities = ["adp_payments.issue_refund", "crm.lookup", "bank.wire", "adp_payments.issue_refund_high"]
`,
		`  [[tenants.operators]]
  id = "ops_alice"
  password = "alice-secret-passphrase"
`, `  [[tenants.operators]]
  id = "ops_alice"
  password = "alice-secret-passphrase"

  [[tenants.agents]]
  id = "agent_phone"
  password = "phone-secret-passphrase"
  capabilities = ["adp_payments.issue_refund"]

  # towerd's configured operator (its command-line modes).
  [[tenants.operators]]
  id = "ops_tower"
  password = "tower-secret-passphrase"
`,
		`  password = "globex-secret-passphrase"
  capabilities = ["adp_payments.issue_refund"]
`, `  password = "globex-secret-passphrase"
  capabilities = ["adp_payments.issue_refund"]

  [[tenants.operators]]
  id = "ops_bob"
  password = "bob-secret-passphrase"
`)
	text = refundcfg.EditBlock(text, "guarantees", refundcfg.Guarantee,
		`capability_ids = ["adp_payments.issue_refund"]`, `capability_ids = ["adp_payments.issue_refund", "adp_payments.issue_refund_high"]`)
	// The high-risk refund is the refund's own table under another id and
	// risk, so the two cannot drift apart.
	return refundcfg.Derive(text, "capabilities", refundcfg.Capability, "adp_payments.issue_refund_high", `risk = "medium"`, `risk = "high"`)
}
