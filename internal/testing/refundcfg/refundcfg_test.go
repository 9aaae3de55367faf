package refundcfg_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/internal/testing/refundcfg"
)

// written are the files, relative to the repository's root, that may write
// a [[capabilities]] table of their own, each with why it is not the
// refund configuration.
var written = map[string]string{
	"config/hostile_test.go":                                     "parser edge cases: one row per hostile value of a minimal provider of each adapter",
	"config/mcp_test.go":                                         "parser edge cases: the validation of the MCP adapter's keys, on a capability the cases rewrite",
	"daemon/config_test.go":                                      "parser edge cases: each hostile value replaces one line of a minimal base, refused alike by Parse and Boot",
	"mcpgw/mcpgw_test.go":                                        "the MCP gateway's own capability, an MCP tool, appended to the refund configuration as an edit",
	"internal/testing/refundcfg/refund.toml":                     "the one refund configuration",
	"internal/testing/refundcfg/doc.go":                          "names the table in its documentation",
	"internal/testing/refundcfg/refundcfg.go":                    "names the table in its documentation",
	"internal/testing/refundcfg/refundcfg_test.go":               "this guard names the table it looks for",
	"config/testdata/fuzz/FuzzParseConfig/seed-508f0bbf5f27830b": "a fuzz corpus entry the fuzzer found: a one-line noop capability",
	"config/testdata/fuzz/FuzzParseConfig/seed-9f167520f5915487": "a fuzz corpus entry the fuzzer found: an http capability without recovery",
}

// refundTable is a [[capabilities]] table of the refund capability (or a
// copy of it under a suffixed id), as TOML text or a Go string of it.
var refundTable = regexp.MustCompile(`\[\[capabilities\]\](\\n|\s)+id = (\\"|")adp_payments\.issue_refund`)

// TestOneRefundConfiguration: no test, testdata file or test tool writes a
// [[capabilities]] table outside refund.toml unless it is on the
// allow-list above with its reason, and none writes the refund
// capability's table at all: variants are edits of refund.toml.
func TestOneRefundConfiguration(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("%s is not the repository's root: %v", root, err)
	}
	seen := map[string]bool{}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(p, root+string(filepath.Separator)))
		if d.IsDir() {
			// examples/ and deploy/ are samples for users, not tests.
			if rel == "examples" || rel == "deploy" || d.Name() == ".git" || d.Name() == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		tool := strings.HasPrefix(rel, "internal/testing/") || strings.HasPrefix(rel, "internal/bench/")
		test := strings.HasSuffix(rel, "_test.go") || strings.Contains("/"+rel, "/testdata/")
		if !tool && !test {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if !strings.Contains(string(b), "[[capabilities]]") {
			return nil
		}
		seen[rel] = true
		if _, ok := written[rel]; !ok {
			t.Errorf("%s writes a [[capabilities]] table: edit refundcfg's configuration instead (or add it to the allow-list with a reason)", rel)
			return nil
		}
		if rel != "internal/testing/refundcfg/refund.toml" && refundTable.Match(b) {
			t.Errorf("%s writes the refund capability's table: derive it from refundcfg's configuration", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for rel := range written {
		if !seen[rel] {
			t.Errorf("%s is allowed a [[capabilities]] table it no longer has: take it off the list", rel)
		}
	}
}

// TestTextParses: the configuration and its refund tables parse, with the
// names and figures the constants give.
func TestTextParses(t *testing.T) {
	cfg, err := config.Parse([]byte(refundcfg.Text(t.TempDir(), "http://127.0.0.1:9")))
	if err != nil {
		t.Fatal(err)
	}
	cp, ok := cfg.Capability(refundcfg.Capability)
	if !ok || cp.Risk != "medium" || !cp.Effectful {
		t.Fatalf("refund capability %+v", cp)
	}
	if len(cfg.Guarantees) != 1 || cfg.Guarantees[0].ID != refundcfg.Guarantee || cfg.Guarantees[0].Limit != refundcfg.Limit {
		t.Fatalf("guarantees %+v", cfg.Guarantees)
	}
	for _, tn := range cfg.Tenants {
		if tn.ID != "acme" {
			continue
		}
		for _, a := range tn.Agents {
			if refundcfg.Passwords[a.ID] == "" {
				t.Errorf("no password for agent %s", a.ID)
			}
		}
	}
	tools := "[nats]\ndata_dir = \"d\"\n\n[[tenants]]\nid = \"t\"\n\n  [[tenants.agents]]\n  id = \"a\"\n  password = \"a-secret-passphrase\"\n  capabilities = [\"" +
		refundcfg.Capability + "\"]\n\n" + refundcfg.Refund("http://127.0.0.1:9")
	if cfg, err := config.Parse([]byte(tools)); err != nil || len(cfg.Capabilities) != 1 || len(cfg.Guarantees) != 1 {
		t.Fatalf("a tool's configuration with Refund: %v\n%s", err, tools)
	}
}

// TestEdits: each edit changes its table only, a derived table is a copy
// under its own id, and an edit whose text is not there exactly once
// panics.
func TestEdits(t *testing.T) {
	text := refundcfg.Text("d", "http://127.0.0.1:9")
	high := refundcfg.Derive(text, "capabilities", refundcfg.Capability, "refund_high", `risk = "medium"`, `risk = "high"`)
	withBreaker := refundcfg.AppendToBlock(high, "capabilities", refundcfg.Capability, "  [capabilities.breaker]\n  threshold = 3\n  window = \"1m\"")
	edited := refundcfg.EditBlock(withBreaker, "guarantees", refundcfg.Guarantee, "limit = 100000", "limit = 7")
	cfg, err := config.Parse([]byte(edited))
	if err != nil {
		t.Fatalf("%v\n%s", err, edited)
	}
	refund, _ := cfg.Capability(refundcfg.Capability)
	derived, ok := cfg.Capability("refund_high")
	if !ok || derived.Risk != "high" || refund.Risk != "medium" || derived.HTTP.URL != refund.HTTP.URL {
		t.Fatalf("derived %+v from %+v", derived, refund)
	}
	if refund.Breaker.Threshold != 3 || derived.Breaker.Threshold != 0 || cfg.Guarantees[0].Limit != 7 {
		t.Fatalf("breaker %+v %+v, limit %d", refund.Breaker, derived.Breaker, cfg.Guarantees[0].Limit)
	}
	if _, err := config.Parse([]byte(refundcfg.Without(text, "capabilities", "bank.wire"))); err == nil {
		t.Fatal("a grant of a capability taken out parsed")
	}
	for name, f := range map[string]func(){
		"absent":   func() { refundcfg.Replace(text, "no such line", "") },
		"twice":    func() { refundcfg.Replace(text, "[[tenants]]", "") },
		"no table": func() { refundcfg.Block(text, "capabilities", "no.such") },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}
