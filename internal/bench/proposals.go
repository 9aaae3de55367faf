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
	"slices"
	"strings"
	"time"

	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/daemon"
	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/internal/testing/provider"
	"github.com/contextos/ledger/internal/testing/refundcfg"
	"github.com/contextos/ledger/wire"
	"github.com/nats-io/nats.go"
)

// Gateway is a booted runtime (embedded NATS), a loopback provider that
// answers at once, and one NATS connection per agent.
type Gateway struct {
	RT     *daemon.Runtime
	Prov   *provider.Server
	http   *httptest.Server
	dir    string
	agents []*nats.Conn
	// tenantOf is agent a's tenant; nil when every agent is Tenant's.
	tenantOf func(a int) string
}

// gatewayConfig is the configuration of a runtime on its embedded server
// with the sync setting (see runtimeConfig).
func gatewayConfig(dir, providerURL string, durable bool, agents int) string {
	sync := "always"
	if !durable {
		sync = "relaxed"
	}
	return runtimeConfig(fmt.Sprintf("[nats]\ndata_dir = %q\nlisten = \"127.0.0.1:0\"\nsync = %q\n\n[runtime]\nexecutor = \"bench-1\"\n", dir, sync), providerURL, agents)
}

// runtimeConfig is the configuration of a runtime with the given [nats] and
// [runtime] sections, agents agent_00.. of tenant Tenant allowed the refund
// capability on the provider, and the refunds guarantee.
func runtimeConfig(sections, providerURL string, agents int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n[runtime.limits]\nproposals_per_second = 1000000 # the benchmark measures throughput, not the rate limit\nproposal_burst = 1000000\n\n[[tenants]]\nid = %q\nunadmitted_runs = \"unlimited\"\n", sections, Tenant)
	for a := 0; a < agents; a++ {
		b.WriteString(agentTOML(a))
	}
	// The refund and its per-order ceiling are the tests' (package
	// refundcfg), with a timeout no loaded run reaches and a ceiling no
	// run exhausts.
	b.WriteString("\n" + refundcfg.Replace(refundcfg.Refund(providerURL),
		`timeout = "500ms"`, `timeout = "5s"`,
		"limit = 100000\n", "limit = 100000000\n"))
	return b.String()
}

// agentTOML is agent_<a>'s entry in a tenant's configuration, allowed the
// refund capability.
func agentTOML(a int) string {
	return fmt.Sprintf("\n  [[tenants.agents]]\n  id = \"agent_%02d\"\n  password = \"secret-passphrase-%02d\"\n  capabilities = [\"adp_payments.issue_refund\"]\n", a, a)
}

// StartGateway boots a runtime with agents agent connections.
func StartGateway(parent string, durable bool, agents int) (*Gateway, error) {
	dir, err := os.MkdirTemp(parent, "gw-")
	if err != nil {
		return nil, err
	}
	g := &Gateway{Prov: provider.New(), dir: dir}
	g.http = httptest.NewServer(g.Prov.Handler())
	cfg, err := config.Parse([]byte(gatewayConfig(dir, g.http.URL, durable, agents)))
	if err != nil {
		g.Close()
		return nil, err
	}
	g.RT, err = daemon.Boot(cfg, daemon.BootOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		g.Close()
		return nil, err
	}
	for a := 0; a < agents; a++ {
		p := fmt.Sprintf("agent_%02d", a)
		nc, err := nats.Connect(g.RT.URL, nats.UserInfo(wire.UserName(Tenant, p), fmt.Sprintf("secret-passphrase-%02d", a)),
			nats.CustomInboxPrefix(wire.InboxPrefix(Tenant, p)))
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
	return proposals(g.agents, func(a int) string {
		t := Tenant
		if g.tenantOf != nil {
			t = g.tenantOf(a)
		}
		return wire.ProposeSubject(t, fmt.Sprintf("agent_%02d", a))
	}, pick)
}

// ProposalShape sends one proposal as agent_00 on a resource of its own
// and reads back what it appended: its appends (the reservation with its
// dispatch-start, then the settlement, which starts at the first
// observation), each as its subjects' event counts in stream order.
// RawBatches of that shape is what a proposal's appends cost alone.
func (g *Gateway) ProposalShape(ctx context.Context) ([][]int, error) {
	from, err := g.RT.Store.LastStreamSeq(ctx)
	if err != nil {
		return nil, err
	}
	if err := g.Proposals(func(w, i int) string { return fmt.Sprint("ord-shape-", rand.Uint64()) })(ctx, 0, 0); err != nil {
		return nil, err
	}
	var shape [][]int
	var subjects []string
	err = g.RT.Store.Replay(ctx, from+1, func(st events.Stored) error {
		settle := strings.HasSuffix(st.Envelope.Type, ".observed")
		if len(shape) == 0 || settle && len(shape) == 1 {
			shape, subjects = append(shape, nil), nil
		}
		b := len(shape) - 1
		if k := slices.Index(subjects, st.Subject); k >= 0 {
			shape[b][k]++
		} else {
			subjects = append(subjects, st.Subject)
			shape[b] = append(shape[b], 1)
		}
		return nil
	})
	if err == nil && len(shape) != 2 {
		err = fmt.Errorf("a proposal appended %d groups of events, not a reservation and a settlement", len(shape))
	}
	return shape, err
}

// proposals is the agents' client loop, shared by the runtime and its
// PostgreSQL peer: worker w sends from agent w's connection, on the
// subject of that agent, a refund of 1 on the resource pick chooses under
// a new operation key of the worker's run, and waits for the applied reply.
// Each refund carries a reference of its own: two proposals with the same
// arguments on one resource are the same action, which the same-action
// fence refuses while the first is unresolved (docs/decisions.md), so
// without it the agents of a hot resource would refuse one another.
func proposals(agents []*nats.Conn, subject func(a int) string, pick func(w, i int) string) Op {
	run := rand.Uint64()
	return func(ctx context.Context, w, i int) error {
		a := w % len(agents)
		body, _ := json.Marshal(map[string]any{"run_id": fmt.Sprintf("run-%x-%d", run, w), "operation_key": fmt.Sprint("k", i),
			"capability_id": "adp_payments.issue_refund",
			"arguments": map[string]any{"order_id": pick(w, i), "amount_minor": 1, "currency": "INR",
				"reference": fmt.Sprintf("%x-%d-%d", run, w, i)}})
		msg, err := agents[a].Request(subject(a), body, 30*time.Second)
		if err != nil {
			return err
		}
		var r wire.Reply
		if err := json.Unmarshal(msg.Data, &r); err != nil {
			return err
		}
		if r.Status != wire.StatusApplied {
			return fmt.Errorf("proposal %s: %s %s", r.Status, r.Code, r.Reason)
		}
		return nil
	}
}

// Lag is one reading of how far the runtime's followers are behind the
// event stream.
type Lag struct {
	At    time.Duration // since the sampling started
	Last  uint64        // the stream's last sequence
	Audit uint64        // sequences the tenant's audit projector is behind
	View  uint64        // sequences the exposure view (the read model) is behind
}

// Lag reads the followers' lag now.
func (g *Gateway) Lag(ctx context.Context) (Lag, error) {
	last, err := g.RT.Store.LastStreamSeq(ctx)
	if err != nil {
		return Lag{}, err
	}
	p := g.RT.Service.Projectors[Tenant]
	if p == nil {
		return Lag{}, fmt.Errorf("no audit projector for %s", Tenant)
	}
	l := Lag{Last: last}
	if done := p.Status().LastEventSeq; done < last {
		l.Audit = last - done
	}
	if done := g.RT.Service.View.Seq(); done < last {
		l.View = last - done
	}
	return l, nil
}

// SampleLag reads the followers' lag every interval until the returned stop
// is called, which returns the readings (a failed reading is left out).
func (g *Gateway) SampleLag(ctx context.Context, every time.Duration) (stop func() []Lag) {
	var out []Lag
	done := make(chan struct{})
	finished := make(chan struct{})
	t0 := time.Now()
	go func() {
		defer close(finished)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if l, err := g.Lag(ctx); err == nil {
					l.At = time.Since(t0)
					out = append(out, l)
				}
			}
		}
	}()
	return func() []Lag {
		close(done)
		<-finished
		return out
	}
}

// LagTrend is how a follower's lag moved through a measured window.
type LagTrend struct {
	End    uint64  // lag at the window's last reading
	Growth float64 // least-squares growth of the lag over the window, in events
}

// Trends is the audit's and the read model's trend over a window, with the
// events appended during it.
type Trends struct {
	Audit, View LagTrend
	Appended    uint64
	Readings    int
}

// SustainSlack is the growth a follower's lag may show over a window and
// still count as keeping up: 5% of the events appended in the window (the
// follower processed at least 95% of the append rate), and never less than
// 256 events (the readings' own noise: one audit batch, one replay step).
func SustainSlack(appended uint64) float64 { return max(256, 0.05*float64(appended)) }

// Sustained reports whether neither follower's lag grew through the window
// by more than SustainSlack.
func (t Trends) Sustained() bool {
	s := SustainSlack(t.Appended)
	return t.Audit.Growth <= s && t.View.Growth <= s
}

// TrendOf fits the readings taken in [from, to] (times since the sampling
// started); fewer than two readings give a zero trend.
func TrendOf(readings []Lag, from, to time.Duration) Trends {
	var w []Lag
	for _, l := range readings {
		if l.At >= from && l.At <= to {
			w = append(w, l)
		}
	}
	var t Trends
	t.Readings = len(w)
	if len(w) < 2 {
		if len(w) == 1 {
			t.Audit.End, t.View.End = w[0].Audit, w[0].View
		}
		return t
	}
	first, last := w[0], w[len(w)-1]
	t.Appended = last.Last - first.Last
	t.Audit = LagTrend{End: last.Audit, Growth: growth(w, func(l Lag) uint64 { return l.Audit })}
	t.View = LagTrend{End: last.View, Growth: growth(w, func(l Lag) uint64 { return l.View })}
	return t
}

// growth is the least-squares slope of v over the readings times their
// span: a noisy but bounded lag fits near zero, a lag that falls behind
// without bound fits its growth.
func growth(w []Lag, v func(Lag) uint64) float64 {
	var sx, sy, sxx, sxy float64
	n := float64(len(w))
	for _, l := range w {
		x, y := l.At.Seconds(), float64(v(l))
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d * (w[len(w)-1].At - w[0].At).Seconds()
}
