package daemon_test

// The helpers the tests of package daemon share. Every runtime they boot
// comes from daemontest (the one daemon fixture, over the one refund
// configuration of refundcfg); env wraps one with the clients and verbs the
// tests use.

import (
	"encoding/json"
	"testing"

	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/daemon"
	"github.com/contextos/ledger/internal/testing/daemontest"
	"github.com/contextos/ledger/internal/testing/gatewaytest"
	"github.com/contextos/ledger/internal/testing/provider"
	"github.com/contextos/ledger/internal/testing/refundcfg"
	"github.com/contextos/ledger/wire"
	"github.com/nats-io/nats.go"
)

var passwords = map[string]string{"acme.agent_email": "email-secret-passphrase", "acme.agent_chat": "chat-secret-passphrase", "acme.agent_third": "third-secret-passphrase",
	"acme.agent_readonly": "ro-secret-passphrase", "acme.ops_alice": "alice-secret-passphrase", "globex.agent_email": "globex-secret-passphrase"}

// env is a runtime booted through daemontest, with the helpers the tests
// of this package share.
type env struct {
	t    *testing.T
	d    *daemontest.Daemon
	rt   *daemon.Runtime
	prov *provider.Server
}

// refusalWindow edits the refund configuration's text (package refundcfg)
// into the gateway tests': refusals are aggregated over 200ms, since the
// tests wait for sampled refusals' aggregates.
func refusalWindow(text string) string {
	return refundcfg.Replace(text, "executor = \"test-1\"\n", `executor = "test-1"

  [runtime.limits]
  refusal_window = "200ms"
`)
}

// gatewayText is the gateway tests' configuration for a data dir and
// provider: the refund configuration with their refusal window.
func gatewayText(dir, providerURL string) string {
	return refusalWindow(refundcfg.Text(dir, providerURL))
}

// parseConfig parses a configuration's text, failing the test if it does
// not parse.
func parseConfig(t testing.TB, text string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// testConfig is gatewayText parsed.
func testConfig(t testing.TB, dir, providerURL string) *config.Config {
	t.Helper()
	return parseConfig(t, gatewayText(dir, providerURL))
}

// gatewayOptions is o over the gateway tests' configuration: the refusal
// window is edited in before o's own edit.
func gatewayOptions(o daemontest.Options) daemontest.Options {
	edit := o.Edit
	o.Edit = func(text string) string {
		text = refusalWindow(text)
		if edit != nil {
			text = edit(text)
		}
		return text
	}
	return o
}

// startEnv boots the gateway tests' configuration.
func startEnv(t *testing.T) *env {
	t.Helper()
	return startEnvWith(t, daemontest.Options{})
}

// startEnvWith boots the gateway tests' configuration as o changes it.
func startEnvWith(t *testing.T, o daemontest.Options) *env {
	t.Helper()
	return envOf(t, daemontest.Boot(t, gatewayOptions(o)))
}

// envOf is the env of a booted Daemon.
func envOf(t *testing.T, d *daemontest.Daemon) *env {
	return &env{t: t, d: d, rt: d.RT, prov: d.Provider}
}

// client connects as a principal with its own inbox prefix.
func (e *env) client(tenant, principal string) *nats.Conn {
	e.t.Helper()
	return gatewaytest.Connect(e.t, e.rt.URL, passwords[wire.UserName(tenant, principal)], tenant, principal)
}

func (e *env) propose(nc *nats.Conn, tenant, principal string, body any) wire.Reply {
	e.t.Helper()
	return gatewaytest.Propose(e.t, nc, tenant, principal, body)
}

func (e *env) op(verb string, req wire.OpRequest) wire.OpReply {
	e.t.Helper()
	return e.opAny(verb, req)
}

func refund(run, key, order string, amount int64) map[string]any {
	return map[string]any{"run_id": run, "operation_key": key, "capability_id": "adp_payments.issue_refund",
		"arguments": map[string]any{"order_id": order, "amount_minor": amount, "currency": "INR"}}
}

func wantBalance(t *testing.T, r wire.Reply, committed, held, available int64) {
	t.Helper()
	if r.Committed == nil || *r.Committed != committed || *r.Held != held || *r.Available != available {
		got, _ := json.Marshal(r)
		t.Fatalf("balances: got %s, want committed=%d held=%d available=%d", got, committed, held, available)
	}
}

// restart boots the gateway tests' configuration again, as o changes it,
// over the data directory and provider of e's runtime, which the test has
// closed.
func (e *env) restart(o daemontest.Options) {
	e.t.Helper()
	o.Of = e.d
	e.d = daemontest.Boot(e.t, gatewayOptions(o))
	e.rt = e.d.RT
}

// replicaOf is a Daemon with d's provider and a fresh data directory: the
// Of of another replica of d's deployment.
func replicaOf(t *testing.T, d *daemontest.Daemon) *daemontest.Daemon {
	return &daemontest.Daemon{Provider: d.Provider, ProviderURL: d.ProviderURL, Dir: t.TempDir()}
}

// reboot boots again over the data and provider of e's runtime, which the
// test has closed, with cfg: the configuration that runtime ran, as the
// test has changed it since.
func (e *env) reboot(cfg *config.Config, o daemontest.Options) {
	e.t.Helper()
	o.Of = e.d
	o.Config = func(c *config.Config) { *c = *cfg }
	e.d = daemontest.Boot(e.t, o)
	e.rt = e.d.RT
}

// bootConfig boots cfg through daemontest, as it is: for the tests of boot
// itself (keys, the data dir's lock, TLS, external servers, replicas), which
// build a configuration from the gateway tests' one (testConfig) and change
// it between boots. It returns daemon.Boot's error.
func bootConfig(t testing.TB, cfg *config.Config, o daemontest.Options) (*daemon.Runtime, error) {
	t.Helper()
	o.Of = &daemontest.Daemon{Dir: t.TempDir(), ProviderURL: "http://127.0.0.1:1"}
	o.Config = func(c *config.Config) { *c = *cfg }
	d, err := daemontest.Start(t, o)
	return d.RT, err
}
