package config

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/contextos/ledger/internal/testing/refundcfg"
	"github.com/contextos/ledger/kernel"
)

// FuzzParseConfig: never panics; an accepted configuration passes Validate
// again (what Boot runs first), has a tenant,
// positive bounds, and only valid guarantee definitions (limit within
// 1..2^53-1) over declared capabilities; every principal's grants are
// declared capabilities.
func FuzzParseConfig(f *testing.F) {
	refund := refundcfg.Text("d", "http://127.0.0.1:9")
	f.Add([]byte(refund))
	// The refund with the tables the tests' configuration leaves out: a
	// run amount, a policy, a breaker and a high-risk copy.
	f.Add([]byte(refundcfg.Derive(refundcfg.AppendToBlock(refundcfg.EditBlock(refund, "capabilities", refundcfg.Capability,
		"adapter = \"http\"\n", "adapter = \"http\"\namount_pointer = \"/amount_minor\"\n"),
		"capabilities", refundcfg.Capability, `  [capabilities.policy]
  max_amount = 90000
    [[capabilities.policy.allowed]]
    pointer = "/currency"
    values = ["INR"]
  [capabilities.breaker]
  threshold = 3
  window = "1m"`), "capabilities", refundcfg.Capability, "refund_high", `risk = "medium"`, `risk = "high"`)))
	if b, err := os.ReadFile("../examples/shared-guarantees/contextos.toml"); err == nil {
		f.Add(b)
	}
	f.Add([]byte("[nats]\ndata_dir = \"d\"\n[[tenants]]\nid = \"t\"\n"))
	f.Add([]byte("[nats]\nurl = \"nats://127.0.0.1:4222\"\n[runtime]\nkey_file = \"k\"\n[[tenants]]\nid = \"t\"\n[[guarantees]]\nid = \"g\"\nlimit = 9007199254740992\n"))
	f.Add([]byte("[nats]\ndata_dir = \"d\"\nbogus = 1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg, err := Parse(b)
		if err != nil {
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("accepted by Parse, refused by Validate (what Boot runs): %v", err)
		}
		if len(cfg.Tenants) == 0 || cfg.Runtime.MaxProposalBytes <= 0 || cfg.Runtime.Workers <= 0 || cfg.NATS.Replicas <= 0 {
			t.Fatalf("accepted bounds: %+v %+v", cfg.Runtime, cfg.NATS)
		}
		if cfg.NATS.URL == "" && cfg.NATS.DataDir == "" {
			t.Fatal("accepted an embedded server without a data dir")
		}
		for _, g := range cfg.Guarantees {
			if r := g.Validate(); r != nil || g.Limit <= 0 || g.Limit > kernel.MaxAmount {
				t.Fatalf("accepted guarantee %+v: %v", g, r)
			}
			for _, c := range g.CapabilityIDs {
				if _, ok := cfg.Capability(c); !ok {
					t.Fatalf("guarantee %s covers undeclared %s", g.ID, c)
				}
			}
		}
		for _, tc := range cfg.Tenants {
			for _, a := range tc.Agents {
				for _, c := range a.Capabilities {
					if _, ok := cfg.Capability(c); !ok {
						t.Fatalf("agent %s granted undeclared %s", a.ID, c)
					}
				}
			}
		}
	})
}

// TestUnadmittedRunsDefault: a tenant that does not say what runs no
// operator admitted may do refuses them (fail closed); "unlimited" must be
// said, and anything else is a configuration error.
func TestUnadmittedRunsDefault(t *testing.T) {
	base := "[nats]\ndata_dir = \"d\"\n[[tenants]]\nid = \"t\"\n"
	cases := []struct {
		line  string
		allow bool
		bad   bool
	}{
		{"", false, false},
		{"unadmitted_runs = \"refuse\"\n", false, false},
		{"unadmitted_runs = \"unlimited\"\n", true, false},
		{"unadmitted_runs = \"Unlimited\"\n", false, true},
		{"unadmitted_runs = \"\"\n", false, false},
	}
	for _, c := range cases {
		cfg, err := Parse([]byte(base + c.line))
		if (err != nil) != c.bad {
			t.Fatalf("%q: %v", c.line, err)
		}
		if err == nil && cfg.Tenants[0].AllowsUnadmitted() != c.allow {
			t.Fatalf("%q: allows unadmitted runs %v, want %v", c.line, !c.allow, c.allow)
		}
	}
}

// TestReplyCredentials: the reply connection's credentials belong to an
// external deployment (the embedded server makes its own), a user comes
// with its password, and a user excludes a credentials file.
func TestReplyCredentials(t *testing.T) {
	tenant := "[runtime]\nkey_file = \"k\"\n[[tenants]]\nid = \"t\"\n"
	cases := []struct {
		nats string
		ok   bool
	}{
		{"data_dir = \"d\"\n", true},
		{"url = \"nats://127.0.0.1:4222\"\n", true},
		{"url = \"nats://127.0.0.1:4222\"\nreply_user = \"r\"\nreply_password = \"p-secret-passphrase\"\n", true},
		{"url = \"nats://127.0.0.1:4222\"\nreply_creds = \"r.creds\"\n", true},
		{"url = \"nats://127.0.0.1:4222\"\nreply_user = \"r\"\n", false},
		{"url = \"nats://127.0.0.1:4222\"\nreply_password = \"p-secret-passphrase\"\n", false},
		{"url = \"nats://127.0.0.1:4222\"\nreply_creds = \"r.creds\"\nreply_user = \"r\"\nreply_password = \"p-secret-passphrase\"\n", false},
		{"data_dir = \"d\"\nreply_user = \"r\"\nreply_password = \"p-secret-passphrase\"\n", false},
		{"data_dir = \"d\"\nreply_creds = \"r.creds\"\n", false},
	}
	creds := filepath.Join(t.TempDir(), "r.creds")
	if err := os.WriteFile(creds, []byte("creds"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		_, err := Parse([]byte("[nats]\n" + strings.ReplaceAll(c.nats, `"r.creds"`, strconv.Quote(creds)) + tenant))
		if (err == nil) != c.ok {
			t.Errorf("%q: err %v, want ok=%v", c.nats, err, c.ok)
		}
	}
}
