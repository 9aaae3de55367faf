package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"strings"
	"time"

	"github.com/contextos/ledger/gateway"
	"github.com/contextos/ledger/internal/provider"
	"github.com/contextos/ledger/kernel"
	"github.com/nats-io/nats.go"
)

// Gateway is a booted runtime (embedded NATS), a loopback provider that
// answers at once, and one NATS connection per agent.
type Gateway struct {
	RT     *gateway.Runtime
	Prov   *provider.Server
	http   *httptest.Server
	dir    string
	agents []*nats.Conn
}

// gatewayConfig is gateway/testdata/gateway.toml's shape with agents
// agent_00.. and the sync setting.
func gatewayConfig(dir, providerURL string, durable bool, agents int) string {
	var b strings.Builder
	sync := "always"
	if !durable {
		sync = "relaxed"
	}
	fmt.Fprintf(&b, "[nats]\ndata_dir = %q\nlisten = \"127.0.0.1:0\"\nsync = %q\n\n[runtime]\nexecutor = \"bench-1\"\n\n  [runtime.limits]\n  proposals_per_second = 1000000 # the benchmark measures throughput, not the rate limit\n  proposal_burst = 1000000\n\n[[tenants]]\nid = %q\nunadmitted_runs = \"unlimited\"\n", dir, sync, Tenant)
	for a := 0; a < agents; a++ {
		fmt.Fprintf(&b, "\n  [[tenants.agents]]\n  id = \"agent_%02d\"\n  password = \"secret-%02d\"\n  capabilities = [\"adp_payments.issue_refund\"]\n", a, a)
	}
	fmt.Fprintf(&b, `
[[capabilities]]
id = "adp_payments.issue_refund"
version = "1"
risk = "medium"
effectful = true
adapter = "http"

  [capabilities.http]
  url = "%[1]s/refunds"
  timeout = "5s"

  [capabilities.recovery]
  completion = "/refund/status"
  applied = ["succeeded"]
  not_applied = ["failed"]
  pending = ["pending"]
  not_applied_statuses = [409]
  query_url = "%[1]s/refunds/{idempotency_key}"

[[guarantees]]
id = "refunds-per-order"
capability_ids = ["adp_payments.issue_refund"]
resource_pointer = "/order_id"
amount_pointer = "/amount_minor"
limit = 100000000
unit = "INR_minor"
`, providerURL)
	return b.String()
}

// StartGateway boots a runtime with agents agent connections.
func StartGateway(parent string, durable bool, agents int) (*Gateway, error) {
	dir, err := os.MkdirTemp(parent, "gw-")
	if err != nil {
		return nil, err
	}
	g := &Gateway{Prov: provider.New(), dir: dir}
	g.http = httptest.NewServer(g.Prov.Handler())
	cfg, err := gateway.ParseConfig([]byte(gatewayConfig(dir, g.http.URL, durable, agents)))
	if err != nil {
		g.Close()
		return nil, err
	}
	g.RT, err = gateway.Boot(cfg, gateway.BootOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		g.Close()
		return nil, err
	}
	for a := 0; a < agents; a++ {
		p := fmt.Sprintf("agent_%02d", a)
		nc, err := nats.Connect(g.RT.URL, nats.UserInfo(gateway.UserName(Tenant, p), fmt.Sprintf("secret-%02d", a)),
			nats.CustomInboxPrefix(gateway.InboxPrefix(Tenant, p)))
		if err != nil {
			g.Close()
			return nil, err
		}
		g.agents = append(g.agents, nc)
	}
	return g, nil
}

// Close stops everything and removes the data directory.
func (g *Gateway) Close() {
	for _, nc := range g.agents {
		nc.Close()
	}
	if g.RT != nil {
		g.RT.Close()
	}
	if g.http != nil {
		g.http.Close()
	}
	_ = os.RemoveAll(g.dir)
}

// Proposals sends governed refund proposals, each from worker w's agent
// with a new operation key, on the resources pick chooses; an operation is
// one proposal from send to the applied reply.
func (g *Gateway) Proposals(pick func(w, i int) string) Op {
	run := rand.Uint64()
	return func(ctx context.Context, w, i int) error {
		a := w % len(g.agents)
		p := fmt.Sprintf("agent_%02d", a)
		body, _ := json.Marshal(map[string]any{"run_id": fmt.Sprintf("run-%x-%d", run, w), "operation_key": fmt.Sprint("k", i),
			"capability_id": "adp_payments.issue_refund",
			"arguments":     map[string]any{"order_id": pick(w, i), "amount_minor": 1, "currency": "INR"}})
		msg, err := g.agents[a].Request(gateway.ProposeSubject(Tenant, p), body, 30*time.Second)
		if err != nil {
			return err
		}
		var r gateway.Reply
		if err := json.Unmarshal(msg.Data, &r); err != nil {
			return err
		}
		if r.Status != kernel.StatusApplied {
			return fmt.Errorf("proposal %s: %s %s", r.Status, r.Code, r.Reason)
		}
		return nil
	}
}

// AuditLag returns how many stream sequences the tenant's audit projector
// is behind the event stream right now: a runtime whose audit falls behind
// under load would report a rate it cannot sustain.
func (g *Gateway) AuditLag(ctx context.Context) (uint64, error) {
	last, err := g.RT.Store.LastStreamSeq(ctx)
	if err != nil {
		return 0, err
	}
	p := g.RT.Service.Projectors[Tenant]
	if p == nil {
		return 0, fmt.Errorf("no audit projector for %s", Tenant)
	}
	if done := p.Status().LastEventSeq; done < last {
		return last - done, nil
	}
	return 0, nil
}
