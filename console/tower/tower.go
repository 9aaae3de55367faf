package tower

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/contextos/ledger/audit"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/contextos/ledger/console"
	"github.com/contextos/ledger/gateway"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/projections"
	"github.com/contextos/ledger/verifier"
	"github.com/nats-io/nats.go"
)

// Tower reads and verifies the configured logs and engages the fleet kill
// switch. Safe for concurrent use.
type Tower struct {
	cfg *Config
	// Timeout bounds each request to a runtime (default 30s).
	Timeout time.Duration
	// Now is the clock of the views (default time.Now).
	Now func() time.Time

	mu   sync.Mutex
	last *Fleet
}

// New returns a tower over a validated configuration.
func New(cfg *Config) *Tower { return &Tower{cfg: cfg, Timeout: 30 * time.Second, Now: time.Now} }

// Fleet is one reading of every configured log.
type Fleet struct {
	At   string
	Logs []LogView // by runtime, then tenant
}

// OK reports whether every log was read and verified.
func (f *Fleet) OK() bool {
	for _, l := range f.Logs {
		if !l.Verified {
			return false
		}
	}
	return true
}

// LogView is one tenant's log on one runtime, after verification.
type LogView struct {
	Runtime string
	Tenant  string
	Source  string // the entries.json path, or "live (operator X)"
	// Verified is true when the chain and every checkpoint verified against
	// the trusted keys; only then are the figures below filled in.
	Verified bool
	Failure  string // the verifier's first bad record or checkpoint, and why
	Error    string // the log or keys could not be read

	Records        int64
	Checkpoints    int
	CheckpointSize int64 // records covered by the latest checkpoint

	Resources     []verifier.ResourceView // at most MaxRowsPerTenant
	MoreResources int
	OpenAttempts  int
	Incidents     []verifier.Incident // the latest, at most MaxRowsPerTenant
	MoreIncidents int

	ApprovalsGranted  int
	ApprovalsRedeemed int
	// Pending are the proposals waiting for an approval, read live through
	// the approvals verb: its first page, of at most MaxRowsPerTenant (and
	// at most gateway.MaxPageLimit); PendingNote says why there are none
	// to show when they could not be read, or that there are more.
	Pending     []console.Approval
	MorePending bool // the runtime has more than the first page
	PendingNote string

	Kill *console.KillChange // the last kill switch change the chain records
}

// Last returns the last reading (nil before the first Refresh).
func (t *Tower) Last() *Fleet {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last
}

type source struct {
	rt RuntimeConfig
	t  TenantSource
}

func (t *Tower) sources() []source {
	var out []source
	for _, r := range t.cfg.Runtimes {
		for _, s := range r.Tenants {
			out = append(out, source{rt: r, t: s})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].rt.Name != out[j].rt.Name {
			return out[i].rt.Name < out[j].rt.Name
		}
		return out[i].t.ID < out[j].t.ID
	})
	return out
}

// parallel runs fn for every source, a few at a time.
func parallel(srcs []source, fn func(int, source)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, s := range srcs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			fn(i, s)
		}()
	}
	wg.Wait()
}

// Refresh reads and verifies every configured log.
func (t *Tower) Refresh(ctx context.Context) *Fleet {
	srcs := t.sources()
	f := &Fleet{At: t.Now().UTC().Format(time.RFC3339), Logs: make([]LogView, len(srcs))}
	parallel(srcs, func(i int, s source) { f.Logs[i] = t.read(ctx, s) })
	t.mu.Lock()
	t.last = f
	t.mu.Unlock()
	return f
}

// dial connects as the source's operator.
func (t *Tower) dial(s source) (*nats.Conn, error) {
	if !s.t.Live() {
		return nil, errors.New("no operator configured")
	}
	pw := os.Getenv(s.t.PasswordEnv)
	nc, err := nats.Connect(s.rt.NATSURL, nats.Name("towerd"), nats.UserInfo(gateway.UserName(s.t.ID, s.t.Operator), pw),
		nats.CustomInboxPrefix(gateway.InboxPrefix(s.t.ID, s.t.Operator)), nats.Timeout(5*time.Second))
	if err != nil {
		return nil, fmt.Errorf("connect %s as %s: %w", s.rt.NATSURL, s.t.Operator, err)
	}
	return nc, nil
}

func (t *Tower) read(ctx context.Context, s source) LogView {
	v := LogView{Runtime: s.rt.Name, Tenant: s.t.ID, Source: s.t.Entries}
	kb, err := os.ReadFile(s.t.Keys)
	if err != nil {
		v.Error = "trusted keys: " + err.Error()
		return v
	}
	keys, err := verifier.ParseKeys(kb)
	if err != nil {
		v.Error = "trusted keys " + s.t.Keys + ": " + err.Error()
		return v
	}
	var raw []byte
	var nc *nats.Conn
	if s.t.Entries != "" {
		if raw, err = os.ReadFile(s.t.Entries); err != nil {
			v.Error = err.Error()
			return v
		}
	} else {
		v.Source = "live (operator " + s.t.Operator + ")"
		if nc, err = t.dial(s); err != nil {
			v.Error = err.Error()
			return v
		}
		defer nc.Close()
		oc := &projections.OpsClient{NC: nc, Tenant: s.t.ID, Operator: s.t.Operator, Timeout: t.Timeout}
		e, err := oc.ExportAudit(ctx)
		if err == nil {
			raw, err = verifier.MarshalEntries(e)
		}
		if err != nil {
			v.Error = "live export: " + err.Error()
			return v
		}
	}
	// Records past the newest checkpoint are checked as a chain; the view
	// shows how many the newest checkpoint covers (CheckpointSize).
	res, err := verifier.VerifyEntriesPolicy(raw, keys, verifier.Policy{AllowPartial: true})
	if err != nil {
		v.Error = err.Error()
		return v
	}
	v.Records, v.Checkpoints = res.Records, res.Checkpoints
	if res.Tenant != s.t.ID {
		v.Failure = fmt.Sprintf("the log is tenant %q's, not %q's", res.Tenant, s.t.ID)
		return v
	}
	if !res.OK() {
		v.Failure = res.Failure.Error()
		return v
	}
	e, err := verifier.ParseEntries(raw)
	if err != nil {
		v.Error = err.Error()
		return v
	}
	if n := len(e.Checkpoints); n > 0 {
		if cp, err := audit.ReadCheckpoint(e.Checkpoints[n-1]); err == nil {
			v.CheckpointSize = cp.Size
		}
	}
	view, err := verifier.ReplayEntries(e)
	if err != nil {
		v.Failure = err.Error()
		return v
	}
	v.Verified = true
	t.summarize(&v, e, view)
	if nc != nil {
		t.pending(ctx, &v, nc, s)
	} else {
		v.PendingNote = "pending approvals are read live; this log is a file"
	}
	return v
}

// summarize fills the view's bounded rows from the verified log.
func (t *Tower) summarize(v *LogView, e verifier.Entries, view verifier.View) {
	limit := t.cfg.MaxRowsPerTenant
	for _, r := range view.Resources {
		v.OpenAttempts += len(r.OpenAttempts)
	}
	v.Resources = view.Resources
	if len(v.Resources) > limit {
		v.MoreResources, v.Resources = len(v.Resources)-limit, v.Resources[:limit]
	}
	inc := view.Incidents
	if len(inc) > limit {
		v.MoreIncidents, inc = len(inc)-limit, inc[len(inc)-limit:]
	}
	v.Incidents = make([]verifier.Incident, len(inc))
	for i := range inc { // latest first
		v.Incidents[i] = inc[len(inc)-1-i]
	}
	for _, raw := range e.Records {
		_, env, err := audit.Parse(raw)
		if err != nil {
			continue
		}
		switch env.Type {
		case kernel.TypeApprovalGranted:
			v.ApprovalsGranted++
		case kernel.TypeApprovalRedeemed:
			v.ApprovalsRedeemed++
		}
	}
	v.Kill = console.LastKillSwitch(e)
}

func (t *Tower) pending(ctx context.Context, v *LogView, nc *nats.Conn, s source) {
	var reply console.ApprovalsReply
	n := min(t.cfg.MaxRowsPerTenant, gateway.MaxPageLimit)
	if err := t.request(ctx, nc, s, "approvals", gateway.ListRequest{Limit: n}, &reply); err != nil {
		v.PendingNote = err.Error()
		return
	}
	if !reply.OK {
		v.PendingNote = fmt.Sprintf("approvals: %s: %s", reply.Code, reply.Reason)
		return
	}
	v.Pending = reply.Approvals
	if reply.NextCursor != "" {
		v.MorePending = true
		v.PendingNote = fmt.Sprintf("more pending approvals than the %d shown, oldest first: ctx approvals or the console lists them all", len(v.Pending))
	}
}

func (t *Tower) request(ctx context.Context, nc *nats.Conn, s source, verb string, req, out any) error {
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, t.Timeout)
	defer cancel()
	m, err := nc.RequestWithContext(ctx, gateway.OpSubject(s.t.ID, verb, s.t.Operator), b)
	if err != nil {
		return fmt.Errorf("%s: %w", verb, err)
	}
	return json.Unmarshal(m.Data, out)
}

// Ack is one runtime tenant's answer to the fleet kill switch.
type Ack struct {
	Runtime      string
	Tenant       string
	Acknowledged bool   // the runtime replied and its kill switch is now as asked
	Engaged      bool   // the kill switch state the runtime reported
	Error        string // why it did not acknowledge
}

// KillSwitch engages (or releases) the kill switch of every configured
// tenant through its operator's connection and reports who acknowledged. A
// tenant without an operator cannot be reached and says so.
func (t *Tower) KillSwitch(ctx context.Context, engage bool, reason string) []Ack {
	srcs := t.sources()
	acks := make([]Ack, len(srcs))
	parallel(srcs, func(i int, s source) {
		a := Ack{Runtime: s.rt.Name, Tenant: s.t.ID}
		defer func() { acks[i] = a }()
		nc, err := t.dial(s)
		if err != nil {
			a.Error = err.Error()
			return
		}
		defer nc.Close()
		var reply gateway.OpReply
		if err := t.request(ctx, nc, s, "kill-switch", gateway.OpRequest{Engaged: &engage, Reason: reason}, &reply); err != nil {
			a.Error = err.Error()
			return
		}
		if !reply.OK {
			a.Error = fmt.Sprintf("%s: %s", reply.Code, reply.Reason)
			return
		}
		a.Engaged = reply.KillSwitch != nil && *reply.KillSwitch
		a.Acknowledged = reply.KillSwitch != nil && a.Engaged == engage
		if !a.Acknowledged {
			a.Error = "the runtime did not report the switch as asked"
		}
	})
	return acks
}
