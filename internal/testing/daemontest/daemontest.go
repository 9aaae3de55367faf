package daemontest

import (
	_ "embed"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
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
	// Console adds to RefundConfig what the console and tower tests
	// exercise (see ConsoleEdit), before Edit runs.
	Console bool
	// Edit, when set, rewrites the configuration after the placeholders
	// are replaced and before it is parsed.
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
}

// Daemon is a running runtime and the provider its refund capability
// calls.
type Daemon struct {
	RT       *daemon.Runtime
	Provider *provider.Server
	// ConfigPath is the configuration's file with Options.File, else "".
	ConfigPath string
}

// Boot starts the synthetic provider and a runtime over RefundConfig (as
// o changes it) in a fresh data directory, and stops both when the test
// ends. A configuration that does not parse or boot fails the test.
func Boot(t testing.TB, o Options) *Daemon {
	t.Helper()
	prov := provider.New()
	h := prov.Handler()
	if o.Provider != nil {
		h = o.Provider(h)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	d := &Daemon{Provider: prov}
	text := RefundConfig
	if o.Console {
		text = ConsoleEdit(text)
	}
	text = strings.NewReplacer("{{DATA}}", t.TempDir(), "{{PROVIDER}}", hs.URL).Replace(text)
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
	rt, err := daemon.Boot(cfg, o.Boot)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	d.RT = rt
	return d
}

// ConsoleEdit adds to RefundConfig's text the console tests' parts: a
// relaxed fsync (the browser tests make many appends), acme's
// agent_phone (the refund only) and operator ops_tower (towerd's
// configured operator), globex's operator ops_bob, and
// adp_payments.issue_refund_high, a high-risk effectful refund over the
// same provider that agent_email may propose and refunds-per-order
// governs with the refund. It panics if RefundConfig no longer has the
// lines it edits, so a change there cannot silently drop them.
func ConsoleEdit(text string) string {
	for _, r := range [][2]string{
		{`data_dir = "{{DATA}}"
`, `data_dir = "{{DATA}}"
sync = "relaxed"
`},
		{`  capabilities = ["adp_payments.issue_refund", "crm.lookup", "bank.wire"]
`, `  capabilities = ["adp_payments.issue_refund", "crm.lookup", "bank.wire", "adp_payments.issue_refund_high"]
`},
		{`  [[tenants.operators]]
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
`},
		{`  password = "globex-secret-passphrase"
  capabilities = ["adp_payments.issue_refund"]
`, `  password = "globex-secret-passphrase"
  capabilities = ["adp_payments.issue_refund"]

  [[tenants.operators]]
  id = "ops_bob"
  password = "bob-secret-passphrase"
`},
		{`capability_ids = ["adp_payments.issue_refund"]
`, `capability_ids = ["adp_payments.issue_refund", "adp_payments.issue_refund_high"]
`},
	} {
		if strings.Count(text, r[0]) != 1 {
			panic(fmt.Sprintf("daemontest: the configuration has not exactly one %q", r[0]))
		}
		text = strings.Replace(text, r[0], r[1], 1)
	}
	// The high-risk refund is the refund's own block under another id and
	// risk, so the two cannot drift apart.
	const head = "[[capabilities]]\nid = \"adp_payments.issue_refund\"\n"
	start := strings.Index(text, head)
	if start < 0 {
		panic("daemontest: the configuration has no refund capability")
	}
	block := text[start:]
	if end := strings.Index(block[len(head):], "\n[["); end >= 0 {
		block = block[:len(head)+end+1]
	}
	high := strings.NewReplacer(`id = "adp_payments.issue_refund"`, `id = "adp_payments.issue_refund_high"`,
		`risk = "medium"`, `risk = "high"`).Replace(block)
	return text + "\n" + high
}
