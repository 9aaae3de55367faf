package daemon_test

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/contextos/ledger/client"
	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/internal/testing/daemontest"
	"github.com/contextos/ledger/internal/testing/provider"
	"github.com/contextos/ledger/wire"
	"github.com/nats-io/nats-server/v2/server"
)

// docsAuthorization is the nats-server authorization block of
// docs/operations.md: its only ```conf block.
func docsAuthorization(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "```conf\n")
	if i < 0 || strings.Count(s, "```conf\n") != 1 {
		t.Fatal("docs/operations.md must hold exactly one ```conf block")
	}
	s = s[i+len("```conf\n"):]
	return s[:strings.Index(s, "```")]
}

// startDocsServer runs a nats-server from a configuration file made of a
// JetStream block and the given authorization block, with the passwords
// the block reads from the environment.
func startDocsServer(t *testing.T, authorization string) string {
	t.Helper()
	return startDocsServerWith(t, "", authorization)
}

// startDocsServerWith is startDocsServer with more server options (conf
// lines) before the authorization block.
func startDocsServerWith(t *testing.T, options, authorization string) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("CONTEXTOSD_PASSWORD", "rt-secret-passphrase")
	t.Setenv("CONTEXTOSD_REPLIES_PASSWORD", "replies-secret-passphrase")
	t.Setenv("AGENT_EMAIL_PASSWORD", passwords["acme.agent_email"])
	t.Setenv("OPS_ALICE_PASSWORD", passwords["acme.ops_alice"])
	conf := filepath.Join(dir, "nats.conf")
	body := "listen: 127.0.0.1:-1\njetstream { store_dir: \"" + filepath.Join(dir, "js") + "\", sync_interval: always }\n" + options + authorization
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatalf("the docs' block does not load: %v", err)
	}
	opts.NoLog, opts.NoSigs = true, true
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	return srv.ClientURL()
}

func externalConfig(t *testing.T, natsURL, providerURL string) *config.Config {
	t.Helper()
	dir := t.TempDir()
	cfg := testConfig(t, dir, providerURL)
	cfg.NATS.URL, cfg.NATS.Listen = natsURL, ""
	cfg.NATS.User, cfg.NATS.Password = "contextosd", "rt-secret-passphrase"
	cfg.NATS.ReplyUser, cfg.NATS.ReplyPassword = "contextosd-replies", "replies-secret-passphrase"
	cfg.Runtime.KeyFile = filepath.Join(dir, "runtime.key")
	return cfg
}

// TestExternalNATSFromDocs: a nats-server configured with exactly the
// permission block of docs/operations.md serves a runtime end to end: an
// agent's proposal is applied and its decision reaches the signed audit,
// which the operator exports. With publish ctx.audit.> or subscribe
// _INBOX.> taken out of the block, the runtime refuses to start and says
// what is missing, instead of serving with an empty audit.
func TestExternalNATSFromDocs(t *testing.T) {
	block := docsAuthorization(t)
	prov := provider.New()
	hs := httptest.NewServer(prov.Handler())
	t.Cleanup(hs.Close)

	url := startDocsServer(t, block)
	rt, err := bootConfig(t, externalConfig(t, url, hs.URL), daemontest.Options{})
	if err != nil {
		t.Fatalf("Boot on the docs' permissions: %v", err)
	}
	t.Cleanup(rt.Close)
	e := &env{t: t, rt: rt, prov: prov}
	r := e.propose(e.client("acme", "agent_email"), "acme", "agent_email", refund("run_docs", "docs-1", "ord_docs", 1000))
	if r.Status != wire.StatusApplied {
		t.Fatalf("proposal: %+v", r)
	}
	ops := &client.AuditClient{NC: e.client("acme", "ops_alice"), Tenant: "acme", Operator: "ops_alice", Timeout: 5 * time.Second}
	deadline := time.Now().Add(20 * time.Second)
	for {
		entries, err := ops.ExportAudit(context.Background())
		if err == nil && len(entries.Records) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the audit stayed empty: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	for _, c := range []struct{ old, repl, want string }{
		{`"ctx.audit.>", `, ``, "lacks publish ctx.audit.>"},
		{`subscribe: { allow: ["ctx.v1.>", "ctx.ev.>", "_INBOX.>",`, `subscribe: { allow: ["ctx.v1.>", "ctx.ev.>",`, "subscribe _INBOX.>"},
	} {
		if !strings.Contains(block, c.old) {
			t.Fatalf("the docs' block has no %q", c.old)
		}
		url := startDocsServer(t, strings.Replace(block, c.old, c.repl, 1))
		rt, err := bootConfig(t, externalConfig(t, url, hs.URL), daemontest.Options{})
		if err == nil {
			rt.Close()
			t.Fatalf("without %q: Boot started", c.old)
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Fatalf("without %q: %v, want %q", c.old, err, c.want)
		}
	}
}
