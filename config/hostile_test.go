package config

import (
	"crypto/ed25519"
	"strings"
	"testing"

	"github.com/contextos/ledger/audit"
	"golang.org/x/crypto/bcrypt"
)

// hostileBase is a valid configuration with a provider of each adapter and a
// witness; each row of TestHostileValues replaces one of its values.
const hostileBase = `[nats]
data_dir = "d"

[[runtime.witnesses]]
url = "WITNESS_URL"
key = "WITNESS_KEY"

[[tenants]]
id = "t"
  [[tenants.agents]]
  id = "a"
  password = "AGENT_PASSWORD"
  [[tenants.operators]]
  id = "o"
  password = "OPERATOR_PASSWORD"

[[capabilities]]
id = "pay.refund"
adapter = "http"
  [capabilities.http]
  url = "HTTP_URL"
  timeout = "HTTP_TIMEOUT"

[[capabilities]]
id = "pay.tool"
adapter = "mcp"
  [capabilities.mcp]
  url = "MCP_URL"
  tool = "pay"
  timeout = "MCP_TIMEOUT"
`

// TestHostileValues: one row per value the validator refuses (and the
// nearest value it accepts), each in the key it is refused in, with the
// error naming that key.
func TestHostileValues(t *testing.T) {
	c, err := audit.NewCosigner("witness.test/w1", ed25519.NewKeyFromSeed(make([]byte, 32)), func() uint64 { return 0 })
	if err != nil {
		t.Fatal(err)
	}
	hash, err := bcrypt.GenerateFromPassword([]byte("correct horse battery"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	good := map[string]string{
		"WITNESS_URL":       "https://witness.example.com/",
		"WITNESS_KEY":       c.VerifierKey(),
		"AGENT_PASSWORD":    "0123456789abcdef",
		"OPERATOR_PASSWORD": "0123456789abcdef",
		"HTTP_URL":          "https://pay.example.com/refunds",
		"HTTP_TIMEOUT":      "5s",
		"MCP_URL":           "https://tools.example.com/mcp",
		"MCP_TIMEOUT":       "5s",
	}
	cases := []struct {
		name, key, value string
		want             string // "" accepts
	}{
		{"agent password 15 bytes", "AGENT_PASSWORD", "0123456789abcde", "tenant t principal a password must be at least 16 bytes or a bcrypt hash"},
		{"agent password 1 byte", "AGENT_PASSWORD", "x", "tenant t principal a password must be at least 16 bytes"},
		{"agent password 16 bytes", "AGENT_PASSWORD", "0123456789abcdef", ""},
		{"agent password bcrypt", "AGENT_PASSWORD", string(hash), ""},
		{"agent password bcrypt 2y", "AGENT_PASSWORD", "$2y$" + string(hash[4:]), ""},
		{"agent password bcrypt truncated", "AGENT_PASSWORD", string(hash[:40]), "tenant t principal a password: not a valid bcrypt hash"},
		{"operator password short", "OPERATOR_PASSWORD", "secret", "tenant t principal o password must be at least 16 bytes"},
		{"operator password bcrypt", "OPERATOR_PASSWORD", string(hash), ""},
		{"http url remote plain http", "HTTP_URL", "http://pay.example.com/refunds", "http.url: \"http://pay.example.com/refunds\": plain http only to a loopback host"},
		{"http url loopback plain http", "HTTP_URL", "http://127.0.0.1:9/refunds", ""},
		{"http url localhost plain http", "HTTP_URL", "http://localhost:9/refunds", ""},
		{"http url ipv6 loopback", "HTTP_URL", "http://[::1]:9/refunds", ""},
		{"http url credentials", "HTTP_URL", "https://u:pw@pay.example.com/refunds", "http.url: \"https://u:pw@pay.example.com/refunds\": credentials in the URL are refused"},
		{"http url user only", "HTTP_URL", "https://token@pay.example.com/refunds", "credentials in the URL are refused"},
		{"http timeout 1ns", "HTTP_TIMEOUT", "1ns", "http.timeout must be 100ms..5m0s, not 1ns"},
		{"http timeout 99ms", "HTTP_TIMEOUT", "99ms", "http.timeout must be 100ms..5m0s, not 99ms"},
		{"http timeout 100ms", "HTTP_TIMEOUT", "100ms", ""},
		{"http timeout 5m", "HTTP_TIMEOUT", "5m", ""},
		{"http timeout 100000h", "HTTP_TIMEOUT", "100000h", "http.timeout must be 100ms..5m0s, not 100000h0m0s"},
		{"mcp url remote plain http", "MCP_URL", "http://tools.example.com/mcp", "mcp.url (a streamable HTTP MCP endpoint): \"http://tools.example.com/mcp\": plain http only to a loopback host"},
		{"mcp url loopback plain http", "MCP_URL", "http://127.0.0.1:9/mcp", ""},
		{"mcp url credentials", "MCP_URL", "https://u:pw@tools.example.com/mcp", "mcp.url (a streamable HTTP MCP endpoint): \"https://u:pw@tools.example.com/mcp\": credentials in the URL are refused"},
		{"mcp url ftp", "MCP_URL", "ftp://tools.example.com/mcp", "the scheme must be http or https"},
		{"mcp timeout 1ns", "MCP_TIMEOUT", "1ns", "mcp.timeout must be 100ms..5m0s, not 1ns"},
		{"mcp timeout 100000h", "MCP_TIMEOUT", "100000h", "mcp.timeout must be 100ms..5m0s, not 100000h0m0s"},
		{"mcp timeout 5m1s", "MCP_TIMEOUT", "5m1s", "mcp.timeout must be 100ms..5m0s, not 5m1s"},
		{"mcp timeout 100ms", "MCP_TIMEOUT", "100ms", ""},
		{"witness url remote plain http", "WITNESS_URL", "http://witness.example.com/", "runtime.witnesses[0].url: \"http://witness.example.com/\": plain http only to a loopback host"},
		{"witness url loopback plain http", "WITNESS_URL", "http://127.0.0.1:7380", ""},
		{"witness url credentials", "WITNESS_URL", "https://u:pw@witness.example.com/", "runtime.witnesses[0].url: \"https://u:pw@witness.example.com/\": credentials in the URL are refused"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := hostileBase
			for k, v := range good {
				if k == tc.key {
					v = tc.value
				}
				src = strings.ReplaceAll(src, k, v)
			}
			_, err := Parse([]byte(src))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err = %v, want one naming %q", err, tc.want)
			}
		})
	}
}

// TestExternalPasswords: the runtime's own passwords on an external
// deployment are sent to the server, so they are plaintext of at least 16
// bytes (a hash is no use to a client).
func TestExternalPasswords(t *testing.T) {
	base := "[nats]\nurl = \"nats://127.0.0.1:4222\"\nuser = \"rt\"\n%s\n[runtime]\nkey_file = \"k\"\n[[tenants]]\nid = \"t\"\n"
	for _, tc := range []struct {
		lines, want string
	}{
		{"password = \"short\"", "nats.password must be at least 16 bytes, not 5"},
		{"password = \"0123456789abcdef\"", ""},
		{"password = \"0123456789abcdef\"\nreply_user = \"r\"\nreply_password = \"short\"", "nats.reply_password must be at least 16 bytes, not 5"},
		{"password = \"0123456789abcdef\"\nreply_user = \"r\"\nreply_password = \"0123456789abcdef\"", ""},
	} {
		_, err := Parse([]byte(strings.Replace(base, "%s", tc.lines, 1)))
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%q: err = %v, want %q", tc.lines, err, tc.want)
		}
	}
}
