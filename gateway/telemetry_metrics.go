package gateway

import (
	"context"
	"errors"
	"runtime/debug"
	"slices"
	"sort"
	"time"

	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/projections"
	"github.com/contextos/ledger/wire"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the runtime's Prometheus series. No label takes a value an
// agent chooses: tenants, capabilities and guarantees come from the
// configuration, statuses, codes, stages and failure kinds from fixed
// catalogs; resource ids appear only in the bounded top-N series
// (runtime.metrics_resource_series), shortened by the views' rule (a
// longer id is its prefix and an ellipsis, its digest in the
// resource_digest label), so that /metrics stays bounded in bytes too.
type metrics struct {
	reg            *prometheus.Registry
	decisions      *prometheus.CounterVec
	stages         *prometheus.HistogramVec
	proposals      prometheus.Histogram
	providerCalls  *prometheus.CounterVec
	providerErrors *prometheus.CounterVec
	opActions      *prometheus.CounterVec
	reconcileRuns  prometheus.Counter
	reconciled     *prometheus.CounterVec
	appendErrors   *prometheus.CounterVec
	breakerTrips   *prometheus.CounterVec
	unsent         *prometheus.CounterVec
	authFailures   *prometheus.CounterVec
}

// latencyBuckets span a fast in-memory decision (tens of microseconds) to a
// provider timeout (seconds).
var latencyBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.decisions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "contextos_decisions_total",
		Help: "Proposal decisions by tenant, capability, status and refusal code."}, []string{"tenant", "capability", "status", "code"})
	m.stages = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "contextos_stage_duration_seconds",
		Help: "Latency of each stage of the request path: decode, decide, append, provider, settle.", Buckets: latencyBuckets}, []string{"stage"})
	m.proposals = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "contextos_proposal_duration_seconds",
		Help: "Latency of a proposal, from its arrival to its reply.", Buckets: latencyBuckets})
	m.providerCalls = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "contextos_provider_calls_total",
		Help: "Provider calls by capability, call (dispatch or query) and observed outcome."}, []string{"capability", "call", "outcome"})
	m.providerErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "contextos_provider_errors_total",
		Help: "Provider calls that got no answer under the recovery contract, by capability and kind."}, []string{"capability", "kind"})
	m.opActions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "contextos_operator_actions_total",
		Help: "Operator verbs served, by tenant, verb and result."}, []string{"tenant", "verb", "result"})
	m.reconcileRuns = prometheus.NewCounter(prometheus.CounterOpts{Name: "contextos_reconciler_runs_total",
		Help: "Passes of the background reconciler."})
	m.reconciled = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "contextos_reconciled_attempts_total",
		Help: "Attempts reconciled (background or operator), by result: settled, waiting, refused, provider_failed."}, []string{"result"})
	m.appendErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "contextos_store_append_errors_total",
		Help: "Store appends that failed, by kind: conflict (decided again), invalid, unavailable."}, []string{"kind"})
	m.breakerTrips = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "contextos_breaker_trips_total",
		Help: "Circuit breaker trips by tenant and capability."}, []string{"tenant", "capability"})
	m.unsent = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "contextos_replies_unsent_total",
		Help: "Replies not sent, by tenant, verb (propose or the operator verb) and reason: too_large (over the server's max_payload; a small reply_too_large reply went instead) or publish_error."},
		[]string{"tenant", "verb", "reason"})
	m.authFailures = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "contextos_auth_failures_total",
		Help: "Refused authentications by door: nats (the embedded server's advisories: wrong password, unknown user), mcp (an unknown bearer token), console (a refused login)."},
		[]string{"door"})
	for _, d := range doors {
		m.authFailures.WithLabelValues(d)
	}
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewBuildInfoCollector(), buildInfo(), m.decisions, m.stages, m.proposals, m.providerCalls, m.providerErrors,
		m.opActions, m.reconcileRuns, m.reconciled, m.appendErrors, m.breakerTrips, m.unsent, m.authFailures)
	return m
}

// The doors whose refused authentications AuthFailed counts: the label
// values of contextos_auth_failures_total, a fixed set.
const (
	DoorNATS    = "nats"
	DoorMCP     = "mcp"
	DoorConsole = "console"
)

var doors = []string{DoorNATS, DoorMCP, DoorConsole}

// AuthFailed counts an authentication a door refused. door is one of
// DoorNATS, DoorMCP and DoorConsole; what the client sent (a user name, a
// token) is never a label, so guessing cannot grow the series. A no-op
// before Instrument.
func (g *Gateway) AuthFailed(door string) {
	if g.tel == nil || !slices.Contains(doors, door) {
		return
	}
	g.tel.m.authFailures.WithLabelValues(door).Inc()
}

// buildInfo is contextos_build_info, 1 with the module version, VCS
// revision and Go version as labels.
func buildInfo() prometheus.Collector {
	version, revision, goVersion := "(devel)", "unknown", "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		version, goVersion = bi.Main.Version, bi.GoVersion
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				revision = s.Value
			}
		}
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "contextos_build_info", Help: "The running build: version, VCS revision and Go version.",
		ConstLabels: prometheus.Labels{"version": version, "revision": revision, "goversion": goVersion}})
	g.Set(1)
	return g
}

// meteredStore times the engine's appends (the append stage) and counts
// their failures.
type meteredStore struct {
	events.Store
	t *telemetry
}

func (s meteredStore) Append(ctx context.Context, subject string, expectedLastSeq uint64, envs ...codec.Envelope) (uint64, error) {
	start := time.Now()
	seq, err := s.Store.Append(ctx, subject, expectedLastSeq, envs...)
	s.observe(start, err)
	return seq, err
}

func (s meteredStore) AppendBatch(ctx context.Context, items []events.AppendItem) ([]uint64, error) {
	start := time.Now()
	seqs, err := s.Store.AppendBatch(ctx, items)
	s.observe(start, err)
	return seqs, err
}

func (s meteredStore) observe(start time.Time, err error) {
	s.t.m.stages.WithLabelValues(string(stageAppend)).Observe(time.Since(start).Seconds())
	switch {
	case err == nil:
	case errors.Is(err, events.ErrConflict):
		s.t.m.appendErrors.WithLabelValues("conflict").Inc()
	case errors.Is(err, events.ErrInvalidAppend):
		s.t.m.appendErrors.WithLabelValues("invalid").Inc()
	default:
		s.t.m.appendErrors.WithLabelValues("unavailable").Inc()
	}
}

// HoldSample is one open attempt as the read model sees it: its tenant, its
// receipt state (reserved, started, held) and when it was reserved.
type HoldSample struct {
	Tenant   string
	State    string
	Reserved time.Time
}

// holdAges are the upper bounds of the open holds' age buckets, with their
// label values; older holds are "gt_1d".
var holdAges = []struct {
	max   time.Duration
	label string
}{{time.Minute, "lt_1m"}, {10 * time.Minute, "1m_10m"}, {time.Hour, "10m_1h"}, {6 * time.Hour, "1h_6h"}, {24 * time.Hour, "6h_1d"}}

const holdAgeOldest = "gt_1d"

func holdAge(d time.Duration) string {
	for _, b := range holdAges {
		if d < b.max {
			return b.label
		}
	}
	return holdAgeOldest
}

// openHolds lists the open attempts of every tenant from the gateway's
// operator index, caught up first.
func (g *Gateway) openHolds(ctx context.Context) ([]HoldSample, error) {
	if err := g.index.catchUp(ctx, g.store); err != nil {
		return nil, err
	}
	var out []HoldSample
	for _, oe := range g.index.unresolved() {
		a, _ := oe.op.Current()
		if len(a.Holds) == 0 || a.Closed {
			continue
		}
		state := "reserved"
		switch {
		case a.Started && a.Outcome != "":
			state = "held"
		case a.Started:
			state = "started"
		}
		out = append(out, HoldSample{Tenant: oe.tenant, State: state, Reserved: oe.reservedAt[a.AttemptID]})
	}
	return out, nil
}

// stateSource is what the state metrics and /readyz read at scrape time.
type stateSource struct {
	tenants        []string
	view           *projections.ExposureView
	audit          map[string]*projections.AuditProjector
	streamSeq      func(context.Context) (uint64, error)
	holds          func(context.Context) ([]HoldSample, error)
	killed         func(tenant string) bool
	breakers       func() []breakerState
	proposing      func() int64
	storeFree      func() (uint64, bool, error)
	minFree        int64
	resourceSeries int
	now            func() time.Time
}

var (
	descStoreUp      = prometheus.NewDesc("contextos_store_up", "1 when the event stream answered the last scrape.", nil, nil)
	descStoreFree    = prometheus.NewDesc("contextos_store_free_bytes", "Bytes the store may still grow by, as last measured: the least of the data_dir volume's free space (embedded server) and what the streams' and the account's limits leave.", nil, nil)
	descStoreMinFree = prometheus.NewDesc("contextos_store_min_free_bytes", "runtime.min_free_bytes: below it new proposals are refused overloaded and /readyz fails.", nil, nil)
	descProposing    = prometheus.NewDesc("contextos_proposals_in_progress", "Proposals received and not answered yet, queued or being handled (their dispatch goes on after a requester stops waiting).", nil, nil)
	descStreamSeq    = prometheus.NewDesc("contextos_stream_last_seq", "Last sequence of the event stream.", nil, nil)
	descViewSeq      = prometheus.NewDesc("contextos_exposure_view_seq", "Last event stream sequence the exposure view folded.", nil, nil)
	descViewLag      = prometheus.NewDesc("contextos_read_model_lag_seq", "Event stream sequences the exposure view is behind.", nil, nil)
	descViewSkipped  = prometheus.NewDesc("contextos_exposure_view_skipped", "Stored messages the read model refused to fold (not applied, listed as incidents).", nil, nil)
	descAuditLag     = prometheus.NewDesc("contextos_audit_lag_seq", "Stream sequences between the tenant's last event and the last one its audit chain records.", []string{"tenant"}, nil)
	descAuditRecords = prometheus.NewDesc("contextos_audit_records", "Records in the tenant's audit chain.", []string{"tenant"}, nil)
	descIncidents    = prometheus.NewDesc("contextos_exposure_incidents", "Incident events of the tenant.", []string{"tenant"}, nil)
	descRefused      = prometheus.NewDesc("contextos_readmodel_refused_events", "Stored messages on the tenant's subjects the read model refused to fold (not applied, listed as incidents of kind stored_event_refused).", []string{"tenant"}, nil)
	descKill         = prometheus.NewDesc("contextos_kill_switch_engaged", "1 while the tenant's kill switch is engaged.", []string{"tenant"}, nil)
	descBreaker      = prometheus.NewDesc("contextos_breaker_open", "1 while the capability's circuit breaker is open (tripped, not reset).", []string{"tenant", "capability"}, nil)
	descHolds        = prometheus.NewDesc("contextos_open_holds", "Open attempts holding exposure, by receipt state and age since reservation.", []string{"tenant", "state", "age"}, nil)
	descHoldsUp      = prometheus.NewDesc("contextos_open_holds_up", "1 when the open holds could be read at this scrape.", nil, nil)
	descGHeld        = prometheus.NewDesc("contextos_guarantee_held", "Exposure held by open attempts, summed over the guarantee's resources.", []string{"tenant", "guarantee"}, nil)
	descGCommitted   = prometheus.NewDesc("contextos_guarantee_committed", "Exposure committed by applied effects, summed over the guarantee's resources.", []string{"tenant", "guarantee"}, nil)
	descGOverLimit   = prometheus.NewDesc("contextos_guarantee_over_limit", "Reservations a guarantee in observe mode made over its limit: what enforcement would have refused.", []string{"tenant", "guarantee"}, nil)
	descGResources   = prometheus.NewDesc("contextos_guarantee_resources", "Resource ledgers of the guarantee.", []string{"tenant", "guarantee"}, nil)
	descRHeld        = prometheus.NewDesc("contextos_exposure_held", "Exposure held on a resource (the runtime.metrics_resource_series resources holding most; an id over 256 bytes shortened, its SHA-256 in resource_digest).", resourceLabels, nil)
	descRCommitted   = prometheus.NewDesc("contextos_exposure_committed", "Exposure committed on a resource (same resources as contextos_exposure_held).", resourceLabels, nil)
	descRAvailable   = prometheus.NewDesc("contextos_exposure_available", "Limit minus committed minus held on a resource (same resources).", resourceLabels, nil)
	resourceLabels   = []string{"tenant", "guarantee", "resource", "resource_digest"}
	// The outcome report's figures per guarantee (ctx report gives them per
	// window): never per resource, so bounded by the configuration.
	descOApplied       = prometheus.NewDesc("contextos_outcome_applied", "Attempts applied (committed), every window of the guarantee.", []string{"tenant", "guarantee"}, nil)
	descOAppliedAmount = prometheus.NewDesc("contextos_outcome_applied_amount", "Amount applied by attempts, every window of the guarantee.", []string{"tenant", "guarantee"}, nil)
	descOPending       = prometheus.NewDesc("contextos_outcome_pending", "Open attempts whose last observation is pending or partial.", []string{"tenant", "guarantee"}, nil)
	descOUnknown       = prometheus.NewDesc("contextos_outcome_unknown", "Open attempts whose last observation is unknown.", []string{"tenant", "guarantee"}, nil)
	descODenials       = prometheus.NewDesc("contextos_outcome_denials", "Proposals refused, by code, of capabilities the guarantee covers.", []string{"tenant", "guarantee", "code"}, nil)
	descOStranded      = prometheus.NewDesc("contextos_outcome_stranded_amount", "Exposure open attempts hold, by age since reserved (lt_1m, 1m_1h, 1h_1d, ge_1d).", []string{"tenant", "guarantee", "age"}, nil)
	descOImported      = prometheus.NewDesc("contextos_outcome_imported_amount", "Exposure committed before adoption, imported by operators.", []string{"tenant", "guarantee"}, nil)
	holdStates         = []string{"reserved", "started", "held"}
	scrapeReadTimeout  = 5 * time.Second
)

// Describe sends nothing: the collector is unchecked, its series depend on
// the configuration and the ledger.
func (s *stateSource) Describe(chan<- *prometheus.Desc) {}

// Collect reads the read model, the store and the switches.
func (s *stateSource) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeReadTimeout)
	defer cancel()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	// The holds first: reading them catches the operator index up, which
	// the kill switch gauges read.
	holds, herr := s.holds(ctx)
	gauge(descHoldsUp, b2f(herr == nil))
	counts := map[[3]string]int{}
	now := s.now()
	for _, h := range holds {
		counts[[3]string{h.Tenant, h.State, holdAge(now.Sub(h.Reserved))}]++
	}
	for _, t := range s.tenants {
		if herr != nil {
			break // no zeros that would read as "no holds"
		}
		for _, st := range holdStates {
			for _, b := range holdAges {
				gauge(descHolds, float64(counts[[3]string{t, st, b.label}]), t, st, b.label)
			}
			gauge(descHolds, float64(counts[[3]string{t, st, holdAgeOldest}]), t, st, holdAgeOldest)
		}
	}
	gauge(descProposing, float64(s.proposing()))
	last, err := s.streamSeq(ctx)
	gauge(descStoreUp, b2f(err == nil))
	if free, known, _ := s.storeFree(); known {
		gauge(descStoreFree, float64(free))
	}
	gauge(descStoreMinFree, float64(s.minFree))
	viewSeq := s.view.Seq()
	gauge(descViewSeq, float64(viewSeq))
	gauge(descViewSkipped, float64(s.view.RefusedEvents("")))
	if err == nil {
		gauge(descStreamSeq, float64(last))
		gauge(descViewLag, float64(lag(last, viewSeq)))
	}
	type res struct {
		tenant, guarantee, resource string
		held, committed, available  int64
	}
	var top []res
	for _, t := range s.tenants {
		vw := s.view.View(t)
		gauge(descIncidents, float64(len(vw.Incidents)), t)
		ch <- prometheus.MustNewConstMetric(descRefused, prometheus.CounterValue, float64(s.view.RefusedEvents(t)), t)
		if p := s.audit[t]; p != nil {
			st := p.Status()
			gauge(descAuditLag, float64(lag(vw.Seq, st.LastEventSeq)), t)
			gauge(descAuditRecords, float64(st.Records), t)
		}
		gauge(descKill, b2f(s.killed(t)), t)
		type sum struct{ held, committed, over, n int64 }
		sums := map[string]*sum{}
		for _, r := range vw.Resources {
			if r.GuaranteeID == "" {
				continue
			}
			sm := sums[r.GuaranteeID]
			if sm == nil {
				sm = &sum{}
				sums[r.GuaranteeID] = sm
			}
			sm.held, sm.committed, sm.over, sm.n = sm.held+r.Held, sm.committed+r.Committed, sm.over+r.OverLimit, sm.n+1
			if s.resourceSeries > 0 {
				top = append(top, res{t, r.GuaranteeID, r.Resource, r.Held, r.Committed, r.Available})
			}
		}
		for _, o := range s.view.OutcomeTotals(t, now) {
			gauge(descOApplied, float64(o.Applied), t, o.GuaranteeID)
			gauge(descOAppliedAmount, float64(o.AppliedAmount), t, o.GuaranteeID)
			gauge(descOPending, float64(o.Pending), t, o.GuaranteeID)
			gauge(descOUnknown, float64(o.Unknown), t, o.GuaranteeID)
			gauge(descOImported, float64(o.Imported), t, o.GuaranteeID)
			for _, d := range o.Denials {
				gauge(descODenials, float64(d.Count), t, o.GuaranteeID, string(d.Code))
			}
			for _, st := range o.Stranded {
				gauge(descOStranded, float64(st.Amount), t, o.GuaranteeID, st.Age)
			}
		}
		for gid, sm := range sums {
			gauge(descGHeld, float64(sm.held), t, gid)
			gauge(descGCommitted, float64(sm.committed), t, gid)
			gauge(descGResources, float64(sm.n), t, gid)
			gauge(descGOverLimit, float64(sm.over), t, gid)
		}
	}
	if s.resourceSeries > 0 {
		sort.Slice(top, func(i, j int) bool {
			a, b := top[i], top[j]
			if a.held != b.held {
				return a.held > b.held
			}
			if a.committed != b.committed {
				return a.committed > b.committed
			}
			if a.tenant != b.tenant {
				return a.tenant < b.tenant
			}
			if a.guarantee != b.guarantee {
				return a.guarantee < b.guarantee
			}
			return a.resource < b.resource
		})
		for _, r := range top[:min(len(top), s.resourceSeries)] {
			// An empty resource_digest is no label at all to Prometheus:
			// the series of a short id are what they were.
			res, digest := wire.Shorten(r.resource)
			gauge(descRHeld, float64(r.held), r.tenant, r.guarantee, res, digest)
			gauge(descRCommitted, float64(r.committed), r.tenant, r.guarantee, res, digest)
			gauge(descRAvailable, float64(r.available), r.tenant, r.guarantee, res, digest)
		}
	}
	if s.breakers != nil {
		for _, b := range s.breakers() {
			gauge(descBreaker, b2f(b.open), b.tenant, b.capability)
		}
	}
}

func lag(head, at uint64) uint64 {
	if head > at {
		return head - at
	}
	return 0
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
