package config

import (
	"fmt"
	"testing"
)

func TestMCPConfigValidation(t *testing.T) {
	base := `[nats]
data_dir = "d"
[[tenants]]
id = "acme"
  [[tenants.agents]]
  id = "a1"
  password = "p-secret-passphrase"
  %s
  [[tenants.agents]]
  id = "a2"
  password = "p-secret-passphrase"
  %s
  [[tenants.operators]]
  id = "o1"
  password = "p-secret-passphrase"
  %s
[[capabilities]]
id = "%s"
adapter = "%s"
effectful = true
%s
%s
`
	mcpCap := `  [capabilities.mcp]
  url = "http://127.0.0.1:9/mcp"
  tool = "pay"
  [capabilities.recovery]
  completion = "/s"
  applied = ["ok"]
  not_applied = ["no"]`
	tok := `mcp_token = "0123456789abcdef01234567"`
	cases := []struct {
		name                   string
		a1, a2, op             string
		capID, adapter, schema string
		cap, mcp               string
		ok                     bool
	}{
		{"mcp adapter", tok, "", "", "pay", "mcp", "", mcpCap, "", true},
		{"mcp gateway on", tok, "", "", "pay", "mcp", "", mcpCap, "[mcp]\nlisten = \"127.0.0.1:0\"\nallowed_origins = [\"http://localhost:3000\"]", true},
		{"arguments schema", tok, "", "", "pay", "mcp", `arguments_schema = '{"type":"object"}'`, mcpCap, "", true},
		{"schema not an object", tok, "", "", "pay", "mcp", `arguments_schema = '{"type":"string"}'`, mcpCap, "", false},
		{"schema not JSON", tok, "", "", "pay", "mcp", `arguments_schema = '{'`, mcpCap, "", false},
		{"shared token", tok, tok, "", "pay", "mcp", "", mcpCap, "", false},
		{"short token", `mcp_token = "short"`, "", "", "pay", "mcp", "", mcpCap, "", false},
		{"operator token", "", "", tok, "pay", "mcp", "", mcpCap, "", false},
		{"listen not loopback", tok, "", "", "pay", "mcp", "", mcpCap, "[mcp]\nlisten = \"0.0.0.0:8080\"", false},
		{"origin with a path", tok, "", "", "pay", "mcp", "", mcpCap, "[mcp]\nlisten = \"127.0.0.1:0\"\nallowed_origins = [\"http://x/y\"]", false},
		{"origins without listen", tok, "", "", "pay", "mcp", "", mcpCap, "[mcp]\nallowed_origins = [\"http://x\"]", false},
		{"capability id not a tool name", tok, "", "", "pay/now", "mcp", "", mcpCap, "[mcp]\nlisten = \"127.0.0.1:0\"", false},
		{"no tool", tok, "", "", "pay", "mcp", "", "  [capabilities.mcp]\n  url = \"http://127.0.0.1:9/mcp\"\n  [capabilities.recovery]\n  completion = \"/s\"\n  applied = [\"ok\"]\n  not_applied = [\"no\"]", "", false},
		{"no completion", tok, "", "", "pay", "mcp", "", "  [capabilities.mcp]\n  url = \"http://127.0.0.1:9/mcp\"\n  tool = \"pay\"", "", false},
		{"query_url on mcp", tok, "", "", "pay", "mcp", "", mcpCap + "\n  query_url = \"http://x\"", "", false},
		{"mcp table on http", tok, "", "", "pay", "http", "", "  [capabilities.http]\n  url = \"http://x\"\n  [capabilities.mcp]\n  tool = \"pay\"", "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := fmt.Sprintf(base, c.a1, c.a2, c.op, c.capID, c.adapter, c.schema, c.cap) + c.mcp + "\n"
			_, err := Parse([]byte(src))
			if (err == nil) != c.ok {
				t.Fatalf("err = %v, want ok=%v\n%s", err, c.ok, src)
			}
		})
	}
}
