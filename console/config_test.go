package console

import (
	"net/url"
	"strings"
	"testing"

	"github.com/contextos/ledger/config"
)

const baseConfig = `
[nats]
data_dir = "/tmp/x"
[[tenants]]
id = "acme"
  [[tenants.operators]]
  id = "ops_alice"
  password = "p-secret-passphrase"
`

// TestConsoleConfig: the [console] section is off by default, loopback
// only unless said otherwise, and bounded.
func TestConsoleConfig(t *testing.T) {
	for _, tc := range []struct{ name, section, want string }{
		{"off", ``, ""},
		{"loopback", "[console]\nlisten = \"127.0.0.1:8480\"", ""},
		{"localhost", "[console]\nlisten = \"localhost:0\"", ""},
		{"remote refused", "[console]\nlisten = \"0.0.0.0:8480\"", "loopback only"},
		{"remote allowed", "[console]\nlisten = \"0.0.0.0:8480\"\nallow_non_loopback = true", ""},
		{"no port", "[console]\nlisten = \"127.0.0.1\"", "console.listen"},
		{"too many sessions", "[console]\nlisten = \"127.0.0.1:0\"\nmax_sessions = 100000", "max_sessions"},
		{"unknown key", "[console]\nlisten = \"127.0.0.1:0\"\nport = 1", "unknown keys"},
		{"client certificate with the embedded server", "[console]\nlisten = \"127.0.0.1:0\"\nnats_tls_cert_file = \"c.pem\"\nnats_tls_key_file = \"k.pem\"", "external deployment"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse([]byte(baseConfig + tc.section))
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if cfg.Console.Listen != "" && (cfg.Console.MaxSessions != 64 || cfg.Console.SessionIdle.Duration == 0) {
					t.Fatalf("defaults not filled: %+v", cfg.Console)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// FuzzActionForm: whatever a form carries, every action's form reading
// never panics, keeps each field within its bound and accepts only the
// listed choices.
func FuzzActionForm(f *testing.F) {
	f.Add("attempt_id=01ABC")
	f.Add("action_digest=ab&capability_id=adp_payments.issue_refund&expires_in=1h")
	f.Add("reason=%00%ff&artifact_ref=x&principal=a&expires_in=2h")
	f.Fuzz(func(t *testing.T, query string) {
		v, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		for _, a := range actions {
			checkForm(t, a, v)
		}
	})
}

func checkForm(t *testing.T, a *action, v url.Values) {
	t.Helper()
	fields, problem := a.form(v)
	for _, fl := range fields {
		if len(fl.Value) > maxFieldBytes {
			t.Fatalf("%s: field %s kept %d bytes", a.Name, fl.Name, len(fl.Value))
		}
		if problem == "" && len(fl.Options) > 0 && fl.Value != "" && !contains(fl.Options, fl.Value) {
			t.Fatalf("%s: field %s accepted %q", a.Name, fl.Name, fl.Value)
		}
		if problem == "" && fl.Required && fl.Value == "" {
			t.Fatalf("%s: required field %s accepted empty", a.Name, fl.Name)
		}
	}
}
