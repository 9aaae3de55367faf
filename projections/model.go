package projections

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/exposure"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
	"github.com/nats-io/nats.go"
)

// Model is the read model of the event stream: per tenant the resource
// ledgers (exposure, open attempts), the operations that still matter (open
// ones and the most recently resolved), the kill switch, the incidents and
// the approvals pending. Operator verbs, the reconciler, the exposure export
// and the metrics all read this one model, so they cannot disagree.
//
// Every state is built by the kernel's own Apply (kernel.Ledger,
// kernel.Operation, kernel.Control); the model computes no balance. One
// policy holds for a stored message the kernel refuses (not a valid event,
// an unknown type, a transition the state does not allow): it is not
// applied, it is counted (RefusedEvents, per tenant and in total) and it is
// reported as an incident of kind KindStoredEventRefused; the fold goes on
// with the next event. The offline verifier, given the same stream, reports
// the same event as an error.
//
// Memory is bounded by the business state, not by what agents send: refused
// operations without an attempt are not kept, resolved operations are kept
// up to ModelLimits.ResolvedOperations per tenant (older ones are read back
// from the store when an event names them again), incidents and pending
// approvals are rings of ModelLimits.Incidents and ModelLimits.Approvals.
//
// With a SnapshotStore the model writes a signed snapshot of itself every
// SnapshotEvery events, spaced so that encoding them takes at most a
// snapshotSpacing-th of the time (the state, and so each snapshot's cost,
// grows with the business, the events between them need not), and its first
// Sync starts from the latest snapshot and folds only the events after it.
// Safe for concurrent use.
type Model struct {
	cfg      ModelConfig
	partSize int // bytes per snapshot part

	syncMu   sync.Mutex    // one fold at a time; guards loaded, since, snapAt and snapCost
	loaded   bool          // the snapshot was tried
	since    int           // events folded since the last snapshot
	snapAt   time.Time     // when the last snapshot was encoded
	snapCost time.Duration // how long its encoding took

	mu      sync.RWMutex
	st      *modelState
	lastErr error // of the last Sync
	// feeds are the audit projectors following this model, by tenant.
	feeds map[string]*feed

	snapMu      sync.Mutex
	snapRunning bool
	snapStats   SnapshotStats

	// digests caches the Digest of the resources longer than
	// ShortenAbove: one entry a ledger the model keeps, never dropped
	// (nor are the ledgers), so that a view hashes each long id once.
	digestMu sync.Mutex
	digests  map[string]string
}

// ModelConfig configures a Model.
type ModelConfig struct {
	Store events.Store
	// Snapshots, when set with Signer, keeps the model's snapshot under
	// ModelSnapshotKey (and its parts).
	Snapshots events.SnapshotStore
	Signer    codec.Signer
	// SnapshotEvery is the number of events folded between snapshots
	// (default DefaultModelSnapshotEvery).
	SnapshotEvery int
	Limits        ModelLimits
	Logf          func(format string, args ...any)
}

// ModelLimits bound the model's memory per tenant. Zero values take the
// defaults.
type ModelLimits struct {
	Incidents          int // incidents kept (newest), default DefaultMaxIncidents
	Approvals          int // pending approvals kept (newest), default DefaultMaxApprovals
	ResolvedOperations int // resolved operations kept (newest), default DefaultMaxResolvedOperations
	// Decisions and DecisionBytes bound the decision records kept
	// (newest): how many, and the bytes of the ids and refs they hold
	// (a record may cite 256 evidence refs of 1 KiB each).
	Decisions     int // default DefaultMaxDecisions
	DecisionBytes int // default DefaultMaxDecisionBytes
}

// Defaults of ModelConfig and ModelLimits.
const (
	DefaultModelSnapshotEvery    = 10000
	DefaultMaxIncidents          = 1000
	DefaultMaxApprovals          = 1000
	DefaultMaxResolvedOperations = 10000
	DefaultMaxDecisions          = 10000
	DefaultMaxDecisionBytes      = 16 << 20
)

// Incident kinds besides the refusal codes of exposure.IncidentCodes.
const (
	// KindStoredEventRefused is a stored message the kernel refused to
	// fold; its code is wire.CodeStoredEventRefused.
	KindStoredEventRefused = "stored_event_refused"
)

// OperationView is a copy of one operation the model keeps, with when each
// attempt was reserved and dispatch-started (the envelopes' times).
type OperationView struct {
	Tenant     string
	Subject    string
	Op         kernel.Operation
	ReservedAt map[string]time.Time
	StartedAt  map[string]time.Time
}

// ModelStats are the model's counters.
type ModelStats struct {
	Seq              uint64 // last stream sequence folded
	RefusedEvents    uint64 // stored messages refused, all tenants
	IncidentsDropped uint64 // incidents pushed out of the rings
	ApprovalsDropped uint64 // pending approvals pushed out of the rings
	OperationsKept   int    // operations held in memory, all tenants
	Snapshot         SnapshotStats
}

// SnapshotStats count the model's snapshots.
type SnapshotStats struct {
	Loaded   bool   // the model started from a snapshot
	LoadedAt uint64 // the sequence of that snapshot
	Written  uint64 // snapshots written
}

// modelVersion is the version of the model's snapshot state. A snapshot
// of another version is not loaded: the model folds the stream from its
// start instead.
const modelVersion = 3 // 3: tenants keep their decision records, pack catalogs and outcome counts

type modelState struct {
	V        int                     `json:"v"`
	Seq      uint64                  `json:"seq"`
	Anchor   modelAnchor             `json:"anchor"` // the last valid event folded
	Refused  uint64                  `json:"refused"`
	Tenants  map[string]*tenantState `json:"tenants"`
	Incident uint64                  `json:"incidents_dropped"`
	Approval uint64                  `json:"approvals_dropped"`
}

type modelAnchor struct {
	Seq     uint64 `json:"seq"`
	Subject string `json:"subject"`
	EventID string `json:"event_id"`
}

type tenantState struct {
	Seq       uint64                    `json:"seq"` // last event of the tenant folded (the view's seq)
	Ledgers   map[string]*kernel.Ledger `json:"ledgers"`
	Ops       map[string]*opState       `json:"operations"`
	Resolved  []string                  `json:"resolved"` // resolved operation subjects, oldest first
	Attempts  map[string]string         `json:"attempts"` // attempt id -> operation subject
	Reasons   map[string]string         `json:"reasons"`  // open attempt id -> its last observation's ref
	Control   kernel.Control            `json:"control"`
	Incidents []incidentEntry           `json:"incidents"` // oldest first
	Approvals []approvalEntry           `json:"approvals"` // oldest first
	Refused   uint64                    `json:"refused"`
	Reported  uint64                    `json:"reported"`            // incidents this replica reported (Report)
	Decisions []wire.DecisionRow        `json:"decisions,omitempty"` // oldest first
	DecBytes  int                       `json:"decision_bytes,omitempty"`
	Packs     kernel.PackCatalog        `json:"packs"`    // the context pack versions, folded by the kernel's rule
	Outcomes  outcomeState              `json:"outcomes"` // what the outcome report counts besides the ledgers
}

// approvalEntry is a pending approval with its key.
type approvalEntry struct {
	Approval wire.PendingApproval `json:"approval"`
	Seq      uint64               `json:"seq"`
}

type opState struct {
	Op         kernel.Operation     `json:"op"`
	ReservedAt map[string]time.Time `json:"reserved_at"`
	StartedAt  map[string]time.Time `json:"started_at"`
	Queued     bool                 `json:"queued"` // in Resolved
}

// incidentEntry is an incident; View is set when the event is one the
// exported view lists (exposure.IncidentOf), so view.json stays what the
// offline replay of the same events computes.
type incidentEntry struct {
	Incident wire.Incident      `json:"incident"`
	View     *exposure.Incident `json:"view,omitempty"`
	Key      wire.IncidentKey   `json:"key"`
}

func newModelState() *modelState {
	return &modelState{V: modelVersion, Tenants: map[string]*tenantState{}}
}

func newTenantState() *tenantState {
	return &tenantState{Ledgers: map[string]*kernel.Ledger{}, Ops: map[string]*opState{}, Attempts: map[string]string{}, Reasons: map[string]string{}}
}

// NewModel returns an empty model; Sync or Run fills it.
func NewModel(cfg ModelConfig) *Model {
	if cfg.SnapshotEvery <= 0 {
		cfg.SnapshotEvery = DefaultModelSnapshotEvery
	}
	if cfg.Limits.Incidents <= 0 {
		cfg.Limits.Incidents = DefaultMaxIncidents
	}
	if cfg.Limits.Approvals <= 0 {
		cfg.Limits.Approvals = DefaultMaxApprovals
	}
	if cfg.Limits.ResolvedOperations <= 0 {
		cfg.Limits.ResolvedOperations = DefaultMaxResolvedOperations
	}
	if cfg.Limits.Decisions <= 0 {
		cfg.Limits.Decisions = DefaultMaxDecisions
	}
	if cfg.Limits.DecisionBytes <= 0 {
		cfg.Limits.DecisionBytes = DefaultMaxDecisionBytes
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	return &Model{cfg: cfg, partSize: modelPartSize, st: newModelState()}
}

// Seq returns the last stream sequence folded.
func (m *Model) Seq() uint64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.st.Seq
}

// Sync folds every message stored after the model's sequence, up to the end
// of the stream. The first Sync starts from the latest usable snapshot.
func (m *Model) Sync(ctx context.Context) error {
	m.syncMu.Lock()
	defer m.syncMu.Unlock()
	if !m.loaded {
		m.loaded = true
		m.loadSnapshot(ctx)
	}
	before := m.Seq()
	m.mu.RLock()
	feeds := m.feeds
	m.mu.RUnlock()
	fed := map[*feed][]events.Stored{}
	overflow := map[*feed]bool{}
	var cut uint64 // the first message that is not a valid event: the feeds stop before it
	err := events.ReplayValid(ctx, m.cfg.Store, m.Seq, func(s events.Stored) error {
		m.mu.Lock()
		defer m.mu.Unlock()
		if s.Seq <= m.st.Seq {
			return nil
		}
		m.apply(ctx, s)
		if tenant, ok := codec.SubjectTenant(s.Subject); ok && cut == 0 {
			if f := feeds[tenant]; f != nil && f.owns(s.Subject) && !overflow[f] {
				fed[f] = append(fed[f], s)
				overflow[f] = len(fed[f]) > f.max
			}
		}
		return nil
	}, func(c *events.CorruptError) {
		m.mu.Lock()
		defer m.mu.Unlock()
		if c.Seq > m.st.Seq {
			m.refuse(c.Seq, c.Subject, "", c.Err)
			m.st.Seq = c.Seq
			if cut == 0 {
				cut = c.Seq
			}
		}
	})
	m.mu.Lock()
	m.lastErr = err
	to := m.st.Seq
	m.mu.Unlock()
	if cut != 0 {
		// What follows a refused message reaches the projectors from the
		// stream, where each meets the message as it did before.
		to = cut - 1
	}
	for _, f := range feeds {
		f.add(before+1, to, fed[f], overflow[f])
	}
	if after := m.Seq(); after > before {
		m.since += int(after - before)
		if m.since >= m.cfg.SnapshotEvery && m.snapshotting() && time.Since(m.snapAt) >= snapshotSpacing*m.snapCost {
			m.since = 0
			m.writeSnapshot()
		}
	}
	return err
}

// follow returns a feed of tenant's events for an audit projector: each
// Sync hands it the tenant's events it folded.
func (m *Model) follow(tenant string) *feed {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.feeds[tenant] == nil {
		// A new map, not a write into the one a Sync may be reading.
		feeds := make(map[string]*feed, len(m.feeds)+1)
		for t, f := range m.feeds {
			feeds[t] = f
		}
		feeds[tenant] = newFeed(tenant)
		m.feeds = feeds
	}
	return m.feeds[tenant]
}

// Err returns the error of the last Sync (the store could not be read), nil
// once one succeeds. The model never stops on a stored event: see the
// policy for refused events above.
func (m *Model) Err() error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.lastErr
}

// ExposureView is the read model's former name.
type ExposureView = Model

// Apply folds one stored message delivered from elsewhere (a consumer, a
// test harness controlling delivery). Messages at or below the model's
// sequence are ignored (a repeated or stale delivery); the others must come
// in stream order.
func (m *Model) Apply(ctx context.Context, s events.Stored) {
	m.syncMu.Lock()
	defer m.syncMu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	if s.Seq > m.st.Seq {
		m.apply(ctx, s)
	}
}

// Run syncs until ctx is done: at start, on each event published under
// "ctx.ev.>" when nc is set, and at least every interval (default
// DefaultPollInterval). Errors go to logf and are retried. It returns ctx's
// error.
func (m *Model) Run(ctx context.Context, nc *nats.Conn, interval time.Duration, logf func(string, ...any)) error {
	if interval <= 0 {
		interval = DefaultPollInterval
	}
	return runLoop(ctx, nc, nil, codec.SubjectPrefix+">", interval, 0, logf, m.Sync)
}

// apply folds one stored event; m.mu is held.
func (m *Model) apply(ctx context.Context, s events.Stored) {
	m.st.Seq = s.Seq
	tenant, ok := codec.SubjectTenant(s.Subject)
	if !ok || s.Envelope.Tenant != tenant {
		m.refuse(s.Seq, s.Subject, s.Envelope.Time, fmt.Errorf("event of tenant %q on subject %q", s.Envelope.Tenant, s.Subject))
		return
	}
	ev, err := kernel.DecodeCanonicalEvent(s.Envelope.Type, s.Envelope.V, s.Envelope.Body)
	if err == nil {
		err = m.applyEvent(ctx, m.tenant(tenant), tenant, s, ev)
	}
	if err != nil {
		m.refuse(s.Seq, s.Subject, s.Envelope.Time, err)
		return
	}
	ts := m.tenant(tenant)
	ts.Seq = s.Seq
	m.st.Anchor = modelAnchor{Seq: s.Seq, Subject: s.Subject, EventID: s.Envelope.EventID}
	in, isIncident := incidentOf(ts, s, ev)
	var view *exposure.Incident
	if v, ok := exposure.IncidentOf(s.Seq, s.Subject, s.Envelope); ok {
		view = &v
		if !isIncident {
			in, isIncident = wire.Incident{Kind: v.Kind, AttemptID: v.AttemptID, Code: wire.Code(v.Kind), At: v.Time}, true
		}
	}
	if isIncident {
		m.addIncident(ts, incidentEntry{Incident: in, View: view, Key: wire.IncidentKey{Seq: s.Seq}})
	}
}

func (m *Model) tenant(id string) *tenantState {
	ts := m.st.Tenants[id]
	if ts == nil {
		ts = newTenantState()
		m.st.Tenants[id] = ts
	}
	return ts
}

// refuse applies the policy for a stored message the kernel refuses: not
// applied, counted, reported.
func (m *Model) refuse(seq uint64, subject, at string, err error) {
	m.st.Refused++
	tenant, ok := codec.SubjectTenant(subject)
	if !ok {
		m.cfg.Logf("projections: read model: stored message %d on %q refused: %v", seq, subject, err)
		return
	}
	ts := m.tenant(tenant)
	ts.Refused++
	m.addIncident(ts, incidentEntry{Incident: wire.Incident{Kind: KindStoredEventRefused, Code: wire.CodeStoredEventRefused,
		Reason: fmt.Sprintf("stored message %d on %s: %v", seq, subject, err), At: at}, Key: wire.IncidentKey{Seq: seq}})
}

func (m *Model) addIncident(ts *tenantState, e incidentEntry) {
	ts.Incidents = append(ts.Incidents, e)
	if over := len(ts.Incidents) - m.cfg.Limits.Incidents; over > 0 {
		ts.Incidents = slices.Delete(ts.Incidents, 0, over)
		m.st.Incident += uint64(over)
	}
}

// applyEvent folds a decoded event into the state its subject's kind
// names. It leaves the state unchanged when it returns an error.
func (m *Model) applyEvent(ctx context.Context, ts *tenantState, tenant string, s events.Stored, ev kernel.Event) error {
	tok := strings.SplitN(s.Subject, ".", 5)
	if len(tok) < 4 {
		return nil
	}
	outcome := outcomeOf(ts, tok[3], s, ev)
	if err := m.applyKind(ctx, ts, tenant, tok[3], s, ev); err != nil {
		return err
	}
	if outcome != nil {
		outcome()
	}
	return nil
}

// applyKind folds an event into the state of its subject's kind.
func (m *Model) applyKind(ctx context.Context, ts *tenantState, tenant, kind string, s events.Stored, ev kernel.Event) error {
	switch kind {
	case codec.KindExposure:
		if err := exposure.CheckExposureSubject(tenant, s.Subject, ev); err != nil {
			return err
		}
		l := ts.Ledgers[s.Subject]
		if l == nil {
			l = &kernel.Ledger{}
		}
		if err := l.Apply(ev); err != nil {
			return err
		}
		ts.Ledgers[s.Subject] = l
		if o, ok := ev.(kernel.ExposureObserved); ok {
			// Kept while the attempt holds exposure only: bounded by
			// the open receipts.
			if r, _ := l.Receipt(o.AttemptID); r.State.Open() {
				ts.Reasons[o.AttemptID] = o.Ref
			} else {
				delete(ts.Reasons, o.AttemptID)
			}
		}
		if a := exposureAttempt(ev); a != "" {
			if r, _ := l.Receipt(a); !r.State.Open() {
				delete(ts.Reasons, a)
			}
		}
	case "operation":
		return m.applyOperation(ctx, ts, s, ev)
	case "control":
		return ts.Control.Apply(ev)
	case "pack":
		return ts.Packs.Apply(ev)
	case "approval":
		// An approval or a denial of the digest answers its requests.
		var digest string
		switch e := ev.(type) {
		case kernel.ApprovalGranted:
			digest = e.ActionDigest
		case kernel.ApprovalDenied:
			digest = e.ActionDigest
		}
		if digest != "" {
			ts.Approvals = slices.DeleteFunc(ts.Approvals, func(p approvalEntry) bool { return p.Approval.ActionDigest == digest })
		}
	}
	return nil
}

// exposureAttempt is the attempt an exposure event moves, if any.
func exposureAttempt(ev kernel.Event) string {
	switch e := ev.(type) {
	case kernel.ExposureClosed:
		return e.AttemptID
	case kernel.ExposureAbsenceAsserted:
		return e.AttemptID
	}
	return ""
}

func (m *Model) applyOperation(ctx context.Context, ts *tenantState, s events.Stored, ev kernel.Event) error {
	o := ts.Ops[s.Subject]
	if o == nil {
		o = &opState{ReservedAt: map[string]time.Time{}, StartedAt: map[string]time.Time{}}
		if _, opens := ev.(kernel.OperationOpened); !opens {
			// An operation the model let go of (resolved long ago): read
			// its earlier events back from the store.
			if err := m.reload(ctx, o, s); err != nil {
				return err
			}
		}
	}
	if err := o.Op.Apply(ev); err != nil {
		return err
	}
	for _, a := range o.Op.Attempts {
		ts.Attempts[a.AttemptID] = s.Subject
	}
	at, _ := time.Parse(codec.TimeLayout, s.Envelope.Time)
	switch e := ev.(type) {
	case kernel.DecisionRecorded:
		m.addDecision(ts, decisionRow(s, e))
	case kernel.OperationReserved:
		o.ReservedAt[e.AttemptID] = at
	case kernel.OperationDispatchStarted:
		o.StartedAt[e.AttemptID] = at
	case kernel.OperationRefused:
		if e.Code == wire.CodeApprovalRequired {
			m.addApproval(ts, s.Seq, wire.PendingApproval{OperationID: o.Op.OperationID, OperationKey: o.Op.OperationKey, RunID: o.Op.RunID,
				Principal: o.Op.Principal, CapabilityID: o.Op.CapabilityID, ActionDigest: o.Op.ActionDigest,
				Arguments: e.Arguments, RequestedAt: s.Envelope.Time})
		}
	}
	switch {
	case o.Op.Refusal != nil && len(o.Op.Attempts) == 0:
		// A refused proposal: final, nothing to reconcile, not kept.
		delete(ts.Ops, s.Subject)
		return nil
	case o.Op.Resolved() && !o.Queued:
		o.Queued = true
		ts.Resolved = append(ts.Resolved, s.Subject)
	}
	ts.Ops[s.Subject] = o
	for len(ts.Resolved) > m.cfg.Limits.ResolvedOperations {
		subject := ts.Resolved[0]
		ts.Resolved = ts.Resolved[1:]
		old := ts.Ops[subject]
		if old == nil {
			continue
		}
		old.Queued = false
		if !old.Op.Resolved() {
			continue // a new attempt reopened it; queued again once resolved
		}
		for _, a := range old.Op.Attempts {
			delete(ts.Attempts, a.AttemptID)
		}
		delete(ts.Ops, subject)
	}
	return nil
}

// decisionRow is the row decisions lists for a stored decision record.
func decisionRow(s events.Stored, e kernel.DecisionRecorded) wire.DecisionRow {
	return wire.DecisionRow{Seq: s.Seq, At: s.Envelope.Time, OperationID: e.OperationID, Principal: e.Principal, RunID: e.RunID,
		CapabilityID: e.CapabilityID, ActionDigest: e.ActionDigest, AttemptID: e.AttemptID, Status: e.Status, Code: e.Code, Reason: e.Reason,
		ContextDigest: e.ContextDigest, EvidenceRefs: e.EvidenceRefs, Obligations: e.Obligations, ResolutionRefs: e.ResolutionRefs,
		ArgumentsDigest: e.ArgumentsDigest, ArgumentsOmitted: e.ArgumentsOmitted, ManifestDigest: e.ManifestDigest, TraceID: e.TraceID}
}

// rowBytes is what a decision row holds in ids, refs and text.
func rowBytes(r wire.DecisionRow) int {
	n := 256 + len(r.OperationID) + len(r.Principal) + len(r.RunID) + len(r.CapabilityID) + len(r.Reason)
	for _, ref := range r.EvidenceRefs {
		n += len(ref)
	}
	for _, ref := range r.ResolutionRefs {
		n += len(ref)
	}
	for _, o := range r.Obligations {
		n += len(o.Requirement)
		for _, ref := range o.SatisfiedBy {
			n += len(ref)
		}
	}
	return n
}

// addDecision keeps a decision record's row, dropping the oldest past the
// limits.
func (m *Model) addDecision(ts *tenantState, r wire.DecisionRow) {
	ts.Decisions = append(ts.Decisions, r)
	ts.DecBytes += rowBytes(r)
	drop := 0
	for len(ts.Decisions)-drop > m.cfg.Limits.Decisions || (ts.DecBytes > m.cfg.Limits.DecisionBytes && len(ts.Decisions)-drop > 1) {
		ts.DecBytes -= rowBytes(ts.Decisions[drop])
		drop++
	}
	if drop > 0 {
		ts.Decisions = slices.Delete(ts.Decisions, 0, drop)
	}
}

// Decisions returns copies of tenant's decision rows that keep, oldest
// first (the newest ModelLimits.Decisions records).
func (m *Model) Decisions(tenant string, keep func(wire.DecisionRow) bool) []wire.DecisionRow {
	m.mu.RLock()
	defer m.mu.RUnlock()
	ts := m.st.Tenants[tenant]
	if ts == nil {
		return nil
	}
	var out []wire.DecisionRow
	for _, r := range ts.Decisions {
		if keep(r) {
			out = append(out, r)
		}
	}
	return out
}

// reload folds the events of s's operation subject stored before s.
func (m *Model) reload(ctx context.Context, o *opState, s events.Stored) error {
	earlier, err := m.cfg.Store.Read(ctx, s.Subject, 1)
	if err != nil {
		return fmt.Errorf("read back operation %s: %w", s.Subject, err)
	}
	for _, e := range earlier {
		if e.Seq >= s.Seq {
			break
		}
		ev, err := kernel.DecodeCanonicalEvent(e.Envelope.Type, e.Envelope.V, e.Envelope.Body)
		if err != nil {
			return fmt.Errorf("operation %s seq %d: %w", s.Subject, e.Seq, err)
		}
		if err := o.Op.Apply(ev); err != nil {
			return fmt.Errorf("operation %s seq %d: %w", s.Subject, e.Seq, err)
		}
		at, _ := time.Parse(codec.TimeLayout, e.Envelope.Time)
		switch x := ev.(type) {
		case kernel.OperationReserved:
			o.ReservedAt[x.AttemptID] = at
		case kernel.OperationDispatchStarted:
			o.StartedAt[x.AttemptID] = at
		}
	}
	if !o.Op.Opened() {
		return fmt.Errorf("%s before operation.opened", s.Envelope.Type)
	}
	return nil
}

func (m *Model) addApproval(ts *tenantState, seq uint64, p wire.PendingApproval) {
	// A newer request for the same action digest supersedes the older: one
	// approval of that digest answers either.
	ts.Approvals = slices.DeleteFunc(ts.Approvals, func(q approvalEntry) bool { return q.Approval.ActionDigest == p.ActionDigest })
	ts.Approvals = append(ts.Approvals, approvalEntry{Approval: p, Seq: seq})
	if over := len(ts.Approvals) - m.cfg.Limits.Approvals; over > 0 {
		ts.Approvals = slices.Delete(ts.Approvals, 0, over)
		m.st.Approval += uint64(over)
	}
}

// incidentOf returns the operator incident an applied event records.
func incidentOf(ts *tenantState, s events.Stored, ev kernel.Event) (wire.Incident, bool) {
	switch e := ev.(type) {
	case kernel.ExposureIncident:
		in := wire.Incident{Kind: string(e.Kind), AttemptID: e.AttemptID, Code: e.Kind, At: s.Envelope.Time,
			Reason: fmt.Sprintf("%s reported %s for an attempt sealed %s", e.Source, e.Observed, e.Sealed)}
		if l := ts.Ledgers[s.Subject]; l != nil {
			if r, ok := l.Receipt(e.AttemptID); ok {
				in.OperationID = r.OperationID
			}
		}
		return in, true
	case kernel.OperationRefused:
		if slices.Contains(exposure.IncidentCodes, e.Code) {
			in := wire.Incident{Kind: string(e.Code), Code: e.Code, Reason: e.Reason, At: s.Envelope.Time}
			if o := ts.Ops[s.Subject]; o != nil {
				in.OperationID = o.Op.OperationID
				if a, ok := o.Op.Current(); ok {
					in.AttemptID = a.AttemptID
				}
			}
			return in, true
		}
	case kernel.ProposalRefused:
		if slices.Contains(exposure.IncidentCodes, e.Code) {
			return wire.Incident{Kind: string(e.Code), Code: e.Code, Reason: e.Reason, At: s.Envelope.Time}, true
		}
	}
	return wire.Incident{}, false
}

// Report records an incident this process saw but the stream does not hold
// (an executor fenced before it could append anything). Such incidents live
// in this replica's model only, in the same bounded ring.
func (m *Model) Report(tenant string, in wire.Incident) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ts := m.tenant(tenant)
	ts.Reported++
	m.addIncident(ts, incidentEntry{Incident: in, Key: wire.IncidentKey{Seq: m.st.Seq, N: ts.Reported}})
}

// View returns tenant's exposure view (view.json).
func (m *Model) View(tenant string) exposure.View {
	m.mu.RLock()
	defer m.mu.RUnlock()
	v := exposure.View{V: exposure.ViewVersion, Tenant: tenant, Resources: []exposure.ResourceView{}, Incidents: []exposure.Incident{}}
	ts := m.st.Tenants[tenant]
	if ts == nil {
		return v
	}
	v.Seq = ts.Seq
	for subject, l := range ts.Ledgers {
		v.Resources = append(v.Resources, exposure.ResourceOf(subject, l))
	}
	exposure.SortResources(v.Resources)
	for _, e := range ts.Incidents {
		if e.View != nil {
			v.Incidents = append(v.Incidents, *e.View)
		}
	}
	return v
}

// Tenants returns the tenants with events, sorted.
func (m *Model) Tenants() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]string, 0, len(m.st.Tenants))
	for t := range m.st.Tenants {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// Exposure returns tenant's resource balances, optionally of one guarantee
// and resource, sorted by guarantee and resource. Ledgers holding only
// tombstones are left out. Resources are whole; ResourceDigest is set on
// those longer than ShortenAbove.
func (m *Model) Exposure(tenant, guaranteeID, resource string) []wire.ExposureRow {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var rows []wire.ExposureRow
	ts := m.st.Tenants[tenant]
	if ts == nil {
		return rows
	}
	for _, l := range ts.Ledgers {
		if l.Limit == 0 || (guaranteeID != "" && l.GuaranteeID != guaranteeID) || (resource != "" && l.Resource != resource) {
			continue
		}
		open := 0
		for _, r := range l.Receipts {
			if r.State.Open() {
				open++
			}
		}
		row := wire.ExposureRow{Tenant: tenant, GuaranteeID: l.GuaranteeID, Resource: l.Resource, ResourceDigest: m.longDigest(l.Resource),
			OpenAttempts: open, Balance: wire.Balance(l.Balance()),
			Window: l.Window, Archived: wire.ArchivedReceipts(l.Archived), OverLimit: l.OverLimit}
		if l.Rolling > 0 {
			now := time.Now() // a read, not a decision: what the window counts now
			row.Balance = wire.Balance(l.BalanceAt(now))
			row.ReturnsAt, row.Returns, _ = l.NextReturn(now)
		}
		rows = append(rows, row)
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].GuaranteeID != rows[j].GuaranteeID {
			return rows[i].GuaranteeID < rows[j].GuaranteeID
		}
		return rows[i].Resource < rows[j].Resource
	})
	return rows
}

// ResourceByDigest returns the resource of tenant's guarantee whose
// Digest is digest, among the resources the stream has a ledger of (also
// one holding only tombstones): how an operator names a resource shown
// shortened.
func (m *Model) ResourceByDigest(tenant, guaranteeID, digest string) (string, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	ts := m.st.Tenants[tenant]
	if ts == nil {
		return "", false
	}
	for _, l := range ts.Ledgers {
		if l.GuaranteeID != guaranteeID {
			continue
		}
		d := m.longDigest(l.Resource)
		if d == "" {
			d = wire.Digest(l.Resource)
		}
		if d == digest {
			return l.Resource, true
		}
	}
	return "", false
}

// longDigest returns the Digest of a resource longer than ShortenAbove,
// from the cache, and "" for a shorter one.
func (m *Model) longDigest(resource string) string {
	if len(resource) <= wire.ShortenAbove {
		return ""
	}
	m.digestMu.Lock()
	defer m.digestMu.Unlock()
	d, ok := m.digests[resource]
	if !ok {
		if m.digests == nil {
			m.digests = map[string]string{}
		}
		d = wire.Digest(resource)
		m.digests[resource] = d
	}
	return d
}

// OpenAttempts returns tenant's attempts that still hold exposure, sorted
// by attempt id. Resources are whole; ResourceDigest is set on those
// longer than ShortenAbove.
func (m *Model) OpenAttempts(tenant string) []wire.AttemptRow {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var rows []wire.AttemptRow
	ts := m.st.Tenants[tenant]
	if ts == nil {
		return rows
	}
	for _, l := range ts.Ledgers {
		for _, r := range l.Receipts {
			if !r.State.Open() {
				continue
			}
			row := wire.AttemptRow{AttemptID: r.AttemptID, OperationID: r.OperationID, GuaranteeID: l.GuaranteeID, Resource: l.Resource,
				Amount: r.Amount, State: r.State.String(), Last: wire.Outcome(r.Last), LastReason: ts.Reasons[r.AttemptID], NextStep: r.State.NextSafeStep()}
			row.ResourceDigest = m.longDigest(l.Resource)
			if o := ts.Ops[ts.Attempts[r.AttemptID]]; o != nil {
				row.Principal, row.RunID, row.ReservedAt = o.Op.Principal, o.Op.RunID, o.ReservedAt[r.AttemptID]
			}
			rows = append(rows, row)
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].AttemptID < rows[j].AttemptID })
	return rows
}

func (o *opState) view(tenant, subject string) OperationView {
	v := OperationView{Tenant: tenant, Subject: subject, Op: o.Op, ReservedAt: maps(o.ReservedAt), StartedAt: maps(o.StartedAt)}
	v.Op.Attempts = append([]kernel.OpAttempt(nil), o.Op.Attempts...)
	return v
}

func maps(m map[string]time.Time) map[string]time.Time {
	c := make(map[string]time.Time, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// OperationOf returns a copy of the operation of tenant that made an
// attempt.
func (m *Model) OperationOf(tenant, attemptID string) (OperationView, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	ts := m.st.Tenants[tenant]
	if ts == nil {
		return OperationView{}, false
	}
	subject := ts.Attempts[attemptID]
	o := ts.Ops[subject]
	if o == nil {
		return OperationView{}, false
	}
	return o.view(tenant, subject), true
}

// Unresolved returns every operation (all tenants) whose current attempt is
// neither sealed nor closed, sorted by subject.
func (m *Model) Unresolved() []OperationView {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []OperationView
	for tenant, ts := range m.st.Tenants {
		for subject, o := range ts.Ops {
			if _, ok := o.Op.Current(); ok && !o.Op.Resolved() {
				out = append(out, o.view(tenant, subject))
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Subject < out[j].Subject })
	return out
}

// Packs returns tenant's published context pack versions, oldest first,
// and the promoted one (nil when none is).
func (m *Model) Packs(tenant string) wire.Packs {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := wire.Packs{Versions: []wire.PackRef{}}
	if ts := m.st.Tenants[tenant]; ts != nil {
		for _, v := range ts.Packs.Versions {
			out.Versions = append(out.Versions, v.PackRef)
		}
		if v, ok := ts.Packs.Promoted(); ok {
			out.Promoted = &v.PackRef
		}
	}
	return out
}

// Pack returns the published version of tenant that spec names
// ("id@version" or digest), with its pack.
func (m *Model) Pack(tenant, spec string) (kernel.PackVersion, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if ts := m.st.Tenants[tenant]; ts != nil {
		return ts.Packs.Resolve(spec)
	}
	return kernel.PackVersion{}, false
}

// KillEngaged reports whether tenant's kill switch is engaged.
func (m *Model) KillEngaged(tenant string) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	ts := m.st.Tenants[tenant]
	return ts != nil && ts.Control.Engaged
}

// Approvals returns tenant's pending approvals, oldest first (by Seq).
func (m *Model) Approvals(tenant string) []wire.PendingApproval {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := []wire.PendingApproval{}
	if ts := m.st.Tenants[tenant]; ts != nil {
		for _, e := range ts.Approvals {
			p := e.Approval
			p.Seq = e.Seq
			out = append(out, p)
		}
	}
	return out
}

// Incidents returns tenant's incidents, oldest first (by Key).
func (m *Model) Incidents(tenant string) []wire.Incident {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := []wire.Incident{}
	if ts := m.st.Tenants[tenant]; ts != nil {
		for _, e := range ts.Incidents {
			in := e.Incident
			in.Key = e.Key
			out = append(out, in)
		}
	}
	return out
}

// RefusedEvents returns the number of stored messages of tenant the model
// refused ("" for all tenants).
func (m *Model) RefusedEvents(tenant string) uint64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if tenant == "" {
		return m.st.Refused
	}
	if ts := m.st.Tenants[tenant]; ts != nil {
		return ts.Refused
	}
	return 0
}

// Stats returns the model's counters.
func (m *Model) Stats() ModelStats {
	m.mu.RLock()
	s := ModelStats{Seq: m.st.Seq, RefusedEvents: m.st.Refused, IncidentsDropped: m.st.Incident, ApprovalsDropped: m.st.Approval}
	for _, ts := range m.st.Tenants {
		s.OperationsKept += len(ts.Ops)
	}
	m.mu.RUnlock()
	m.snapMu.Lock()
	s.Snapshot = m.snapStats
	m.snapMu.Unlock()
	return s
}
