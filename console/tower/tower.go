package tower

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/contextos/ledger/audit"
	"github.com/contextos/ledger/client"
	"github.com/contextos/ledger/console"
	"github.com/contextos/ledger/exposure"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/verifier"
	"github.com/contextos/ledger/wire"
	"github.com/nats-io/nats.go"
)

// Tower reads and verifies the configured logs and engages the fleet kill
// switch. Safe for concurrent use.
type Tower struct {
	cfg *Config
	// Timeout bounds each request to a runtime (default 30s).
	Timeout time.Duration
	// Now is the clock of the views and of the web page's sessions
	// (default time.Now).
	Now func() time.Time

	readings map[string]*reading // by runtime/tenant; one per configured log
}

// reading is the last verified reading of one log. Its lock is held while
// the log is read, so that pages asking at once share one read.
type reading struct {
	mu   sync.Mutex
	view LogView
	at   time.Time
	have bool
	// kept is the newest checkpoint note verified under the runtime's
	// witness policy (nil: none yet), loaded from the state dir on the
	// first read.
	kept       []byte
	keptLoaded bool
}

// New returns a tower over a validated configuration.
func New(cfg *Config) *Tower {
	t := &Tower{cfg: cfg, Timeout: 30 * time.Second, Now: time.Now, readings: map[string]*reading{}}
	for _, s := range t.sources() {
		t.readings[s.key()] = &reading{}
	}
	return t
}

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
	Source  string // the entries.json path, or "live (read as X)"
	At      string // when it was read
	// Verified is true when the chain and every checkpoint verified against
	// the trusted keys, the runtime's witness policy held and the log
	// extends the checkpoint kept from earlier reads; only then are the
	// figures below filled in.
	Verified bool
	// Forked is true when the log verifies on its own but does not extend
	// the kept checkpoint: it was rewritten, rolled back or forked since.
	Forked  bool
	Failure string // the verifier's first bad record or checkpoint, and why
	Error   string // the log or keys could not be read

	Cosigned []string // the policy's witnesses that cosigned the newest checkpoint
	Kept     int64    // records covered by the kept checkpoint this read extended

	Records        int64
	Checkpoints    int
	CheckpointSize int64 // records covered by the latest checkpoint

	Resources     []exposure.ResourceView // at most MaxRowsPerTenant
	MoreResources int
	OpenAttempts  int
	Incidents     []exposure.Incident // the latest, at most MaxRowsPerTenant
	MoreIncidents int

	ApprovalsGranted  int
	ApprovalsRedeemed int
	// Pending are the proposals waiting for an approval, read live through
	// the approvals verb: its first page, of at most MaxRowsPerTenant (and
	// at most wire.MaxPageLimit); PendingNote says why there are none
	// to show when they could not be read, or that there are more.
	Pending     []console.Approval
	MorePending bool // the runtime has more than the first page
	PendingNote string

	Kill *console.KillChange // the last kill switch change the chain records

	// The review queue's two-person requests still waiting for a second
	// operator (oldest first), and the operators' decisions (approvals,
	// denials, confirmations, refused operator verbs, kill switch,
	// guardrail and waiver changes; latest first), at most
	// MaxRowsPerTenant each, the rest counted; the guardrails the log holds
	// and the waivers in force when it was read (review.go).
	Requests     []Request
	MoreRequests int
	History      []Decided
	MoreHistory  int
	Guardrails   []GuardrailView
	Waivers      []WaiverView
}

type source struct {
	rt RuntimeConfig
	t  TenantSource
}

func (s source) key() string { return s.rt.Name + "/" + s.t.ID }

// sources lists the configured logs, of every tenant or of the tenants
// named.
func (t *Tower) sources(tenants ...string) []source {
	var out []source
	for _, r := range t.cfg.Runtimes {
		for _, s := range r.Tenants {
			if len(tenants) == 0 || slices.Contains(tenants, s.ID) {
				out = append(out, source{rt: r, t: s})
			}
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

// access is an operator's connection to a runtime, through which a live
// log is read and the kill switch sent.
type access struct {
	nc       *nats.Conn
	tenant   string
	operator string
	done     func() // called when the reading or action is over
}

// reach gives the access to a source's runtime, or why there is none.
type reach func(ctx context.Context, s source) (access, error)

// Refresh reads and verifies every configured log, the live ones as the
// configured operators (operator, password_env): the command-line modes.
func (t *Tower) Refresh(ctx context.Context) *Fleet {
	return t.fleet(ctx, t.sources(), t.configured, 0, true)
}

// fleet returns the readings of srcs: a cached reading younger than maxAge
// (0: any) unless force, otherwise the log is read again through reach.
func (t *Tower) fleet(ctx context.Context, srcs []source, rc reach, maxAge time.Duration, force bool) *Fleet {
	f := &Fleet{At: t.Now().UTC().Format(time.RFC3339), Logs: make([]LogView, len(srcs))}
	parallel(srcs, func(i int, s source) {
		r := t.readings[s.key()]
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.have && !force && (maxAge <= 0 || t.Now().Sub(r.at) < maxAge) {
			f.Logs[i] = r.view
			return
		}
		v, ok := t.read(ctx, s, rc, r)
		if !ok && r.have {
			// This session cannot reach the runtime: it sees the last
			// reading another operator of the tenant made, with its time.
			f.Logs[i] = r.view
			return
		}
		f.Logs[i] = v
		if ok {
			r.view, r.at, r.have = v, t.Now(), true
		}
	})
	return f
}

// configured reaches a source's runtime as its configured operator.
func (t *Tower) configured(ctx context.Context, s source) (access, error) {
	if s.t.Operator == "" {
		return access{}, errors.New("no operator configured (operator and password_env)")
	}
	d := console.Dialer{URL: s.rt.NATSURL, TLS: s.rt.tls, Name: "towerd"}
	nc, err := d.Dial(ctx, s.t.ID, s.t.Operator, os.Getenv(s.t.PasswordEnv))
	if err != nil {
		return access{}, fmt.Errorf("connect %s as %s: %w", s.rt.NATSURL, s.t.Operator, err)
	}
	return access{nc: nc, tenant: s.t.ID, operator: s.t.Operator, done: nc.Close}, nil
}

// read reads and verifies one log; ok is false when a live log could not
// be reached at all (nothing worth keeping as its reading).
func (t *Tower) read(ctx context.Context, s source, rc reach, r *reading) (v LogView, ok bool) {
	v = LogView{Runtime: s.rt.Name, Tenant: s.t.ID, Source: s.t.Entries, At: t.Now().UTC().Format(time.RFC3339)}
	kb, err := os.ReadFile(s.t.Keys)
	if err != nil {
		v.Error = "trusted keys: " + err.Error()
		return v, true
	}
	keys, err := audit.ParseKeys(kb)
	if err != nil {
		v.Error = "trusted keys " + s.t.Keys + ": " + err.Error()
		return v, true
	}
	var raw []byte
	var ac access
	if s.t.Live() {
		if ac, err = rc(ctx, s); err != nil {
			v.Error = err.Error()
			return v, false
		}
		defer ac.done()
		v.Source = "live (read as " + ac.operator + ")"
		oc := &client.AuditClient{NC: ac.nc, Tenant: ac.tenant, Operator: ac.operator, Timeout: t.Timeout}
		e, err := exportEntries(ctx, oc)
		if err == nil {
			raw, err = audit.MarshalEntries(e)
		}
		if err != nil {
			v.Error = "live export: " + err.Error()
			return v, true
		}
	} else if raw, err = os.ReadFile(s.t.Entries); err != nil {
		v.Error = err.Error()
		return v, true
	}
	// Records past the newest checkpoint are checked as a chain; the view
	// shows how many the newest checkpoint covers (CheckpointSize).
	kept, err := t.kept(s, r)
	if err != nil {
		v.Error = err.Error()
		return v, true
	}
	p := verifier.Policy{AllowPartial: true, Witnesses: s.rt.witnesses, Quorum: s.rt.Witnesses}
	if kept != nil {
		p.Kept = [][]byte{kept}
	}
	res, err := verifier.VerifyEntriesPolicy(raw, keys, p)
	if err != nil {
		v.Error = err.Error()
		return v, true
	}
	v.Records, v.Checkpoints, v.Cosigned = res.Records, res.Checkpoints, res.Cosigned
	if res.Tenant != s.t.ID {
		v.Failure = fmt.Sprintf("the log is tenant %q's, not %q's", res.Tenant, s.t.ID)
		return v, true
	}
	if !res.OK() {
		v.Failure = res.Failure.Error()
		if kept != nil {
			// A log that verifies without the kept checkpoint but not with
			// it is another history than the one tower saw: say so.
			p.Kept = nil
			if alone, err := verifier.VerifyEntriesPolicy(raw, keys, p); err == nil && alone.OK() {
				v.Forked = true
				v.Failure = "forked or rewritten since the kept checkpoint: " + v.Failure
			}
		}
		return v, true
	}
	if kept != nil {
		if c, err := audit.ReadCheckpoint(kept); err == nil {
			v.Kept = c.Size
		}
	}
	e, err := audit.ParseEntries(raw)
	if err != nil {
		v.Error = err.Error()
		return v, true
	}
	if n := len(e.Checkpoints); n > 0 {
		if cp, err := audit.ReadCheckpoint(e.Checkpoints[n-1]); err == nil {
			v.CheckpointSize = cp.Size
			if cp.Size > v.Kept {
				if err := t.keep(s, r, e.Checkpoints[n-1]); err != nil {
					v.Error = "keep the checkpoint: " + err.Error()
					return v, true
				}
			}
		}
	}
	view, err := verifier.ReplayEntries(e)
	if err != nil {
		v.Failure = err.Error()
		return v, true
	}
	v.Verified = true
	t.summarize(&v, e, view)
	if ac.nc != nil {
		t.pending(ctx, &v, ac)
	} else {
		v.PendingNote = "pending approvals are read live; this log is a file"
	}
	return v, true
}

// summarize fills the view's bounded rows from the verified log.
func (t *Tower) summarize(v *LogView, e audit.Entries, view exposure.View) {
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
	v.Incidents = make([]exposure.Incident, len(inc))
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
	t.review(v, e)
}

func (t *Tower) pending(ctx context.Context, v *LogView, ac access) {
	var reply wire.OpReply
	n := min(t.cfg.MaxRowsPerTenant, wire.MaxPageLimit)
	if err := t.request(ctx, ac, wire.VerbApprovals, wire.ListRequest{Limit: n}, &reply); err != nil {
		v.PendingNote = err.Error()
		return
	}
	if !reply.OK {
		v.PendingNote = fmt.Sprintf("approvals: %s: %s", reply.Code, reply.Reason)
		return
	}
	v.Pending = console.Approvals(reply.Approvals)
	if reply.NextCursor != "" {
		v.MorePending = true
		v.PendingNote = fmt.Sprintf("more pending approvals than the %d shown, oldest first: ctx approvals or the console lists them all", len(v.Pending))
	}
}

// request sends one operator verb as the access's operator.
func (t *Tower) request(ctx context.Context, ac access, verb string, req, out any) error {
	ctx, cancel := context.WithTimeout(ctx, t.Timeout)
	defer cancel()
	l := &console.Login{Tenant: ac.tenant, Operator: ac.operator, Conns: map[string]*nats.Conn{"": ac.nc}}
	return l.Call(ctx, "", verb, req, out)
}

// Ack is one runtime tenant's answer to the fleet kill switch.
type Ack struct {
	Runtime      string
	Tenant       string
	Operator     string // who sent it
	Acknowledged bool   // the runtime replied and its kill switch is now as asked
	Engaged      bool   // the kill switch state the runtime reported
	Error        string // why it did not acknowledge
	// Code is the runtime's stable refusal code when it refused (Error
	// then says why); "" when it acknowledged or was not reached.
	Code wire.Code
}

// KillSwitch engages (or releases) the kill switch of every configured
// tenant as its configured operator (the command-line modes) and reports
// who acknowledged. A tenant without an operator cannot be reached and
// says so.
func (t *Tower) KillSwitch(ctx context.Context, engage bool, reason string) []Ack {
	return t.killSwitch(ctx, t.sources(), t.configured, engage, reason)
}

func (t *Tower) killSwitch(ctx context.Context, srcs []source, rc reach, engage bool, reason string) []Ack {
	acks := make([]Ack, len(srcs))
	parallel(srcs, func(i int, s source) {
		a := Ack{Runtime: s.rt.Name, Tenant: s.t.ID}
		defer func() { acks[i] = a }()
		ac, err := rc(ctx, s)
		if err != nil {
			a.Error = err.Error()
			return
		}
		defer ac.done()
		a.Operator = ac.operator
		var reply wire.OpReply
		if err := t.request(ctx, ac, "kill-switch", wire.OpRequest{Engaged: &engage, Reason: reason}, &reply); err != nil {
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

// exportEntries fetches the tenant's audit log as the verifier reads it.
func exportEntries(ctx context.Context, c *client.AuditClient) (audit.Entries, error) {
	e, err := c.ExportAudit(ctx)
	return audit.Entries(e), err
}

// Guardrail publishes a guardrail (or its removal) to every configured
// tenant's runtimes as its configured operator (the command-line modes):
// each runtime records it as a signed control.guardrail event and its
// kernel enforces it. One Ack per runtime tenant; Acknowledged when the
// runtime recorded it.
func (t *Tower) Guardrail(ctx context.Context, req wire.GuardrailRequest) []Ack {
	return t.publish(ctx, t.sources(), t.configured, kernel.VerbGuardrail, req)
}

// Waiver grants a waiver on every configured tenant's runtimes as its
// configured operator.
func (t *Tower) Waiver(ctx context.Context, req wire.WaiverRequest) []Ack {
	return t.publish(ctx, t.sources(), t.configured, kernel.VerbWaiver, req)
}

func (t *Tower) publish(ctx context.Context, srcs []source, rc reach, verb string, req any) []Ack {
	acks := make([]Ack, len(srcs))
	parallel(srcs, func(i int, s source) {
		a := Ack{Runtime: s.rt.Name, Tenant: s.t.ID}
		defer func() { acks[i] = a }()
		ac, err := rc(ctx, s)
		if err != nil {
			a.Error = err.Error()
			return
		}
		defer ac.done()
		a.Operator = ac.operator
		var reply wire.OpReply
		if err := t.request(ctx, ac, verb, req, &reply); err != nil {
			a.Error = err.Error()
			return
		}
		if !reply.OK {
			a.Code, a.Error = reply.Code, fmt.Sprintf("%s: %s", reply.Code, reply.Reason)
			return
		}
		a.Acknowledged = true
	})
	return acks
}
