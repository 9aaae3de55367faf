package projections

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/verifier"
	"github.com/nats-io/nats.go"
)

// ExposureView is the in-memory exposure view of every tenant: per resource
// ledger the balances and open attempts, and the incidents. It is built by
// folding the event stream through the kernel (verifier.Fold, which calls
// kernel.Ledger.Apply) and never computes a balance itself, so the offline
// replay of the same events reaches the same view. It keeps no state of its
// own: at start it rebuilds from the stream, then follows it. Safe for
// concurrent use.
type ExposureView struct {
	store events.Store

	mu    sync.RWMutex
	seq   uint64 // last stream sequence folded (any tenant)
	folds map[string]*verifier.Fold
	err   error // the error that stopped the fold, if any
	// skipped holds the sequences of stored messages that are not valid
	// events (see Sync).
	skipped []uint64
}

// NewExposureView returns an empty view of the store's events; Sync or Run
// fills it.
func NewExposureView(store events.Store) *ExposureView {
	return &ExposureView{store: store, folds: map[string]*verifier.Fold{}}
}

// Seq returns the last stream sequence folded.
func (v *ExposureView) Seq() uint64 {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.seq
}

// Err returns the error that stopped the view, if any: an event the kernel
// refuses means a corrupt or foreign stream, and the view stops there rather
// than show balances it cannot justify.
func (v *ExposureView) Err() error {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.err
}

// Apply folds one stored event. Events at or below the view's sequence are
// ignored (a repeated or stale delivery); events must otherwise come in
// stream order (Sync reads them so).
func (v *ExposureView) Apply(st events.Stored) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.err != nil {
		return v.err
	}
	if st.Seq <= v.seq {
		return nil
	}
	tenant := st.Envelope.Tenant
	f := v.folds[tenant]
	if f == nil {
		f = verifier.NewFold(tenant)
	}
	if err := f.Apply(st.Seq, st.Subject, st.Envelope); err != nil {
		v.err = fmt.Errorf("projections: exposure view stopped: %w", err)
		return v.err
	}
	v.folds[tenant] = f
	v.seq = st.Seq
	return nil
}

// Sync folds every event stored after the view's sequence, up to the end of
// the stream. A stored message that is not a valid event is skipped and
// counted (Skipped, and the metric contextos_exposure_view_skipped), as the
// gateway's operator index does: the balances it shows are then those of the
// valid events, which the engine (it refuses to load a subject holding such
// a message) and the offline verifier (it reports it) agree on.
func (v *ExposureView) Sync(ctx context.Context) error {
	return events.ReplayValid(ctx, v.store, v.Seq, v.Apply, func(c *events.CorruptError) {
		v.mu.Lock()
		defer v.mu.Unlock()
		if c.Seq > v.seq {
			v.skipped = append(v.skipped, c.Seq)
			v.seq = c.Seq
		}
	})
}

// Skipped returns the sequences of stored messages Sync skipped because
// they are not valid events.
func (v *ExposureView) Skipped() []uint64 {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return append([]uint64(nil), v.skipped...)
}

// Run syncs until ctx is done: at start, on each event published under
// "ctx.ev.>" when nc is set, and at least every interval (default
// DefaultPollInterval). Errors go to logf and are retried. It returns ctx's
// error.
func (v *ExposureView) Run(ctx context.Context, nc *nats.Conn, interval time.Duration, logf func(string, ...any)) error {
	if interval <= 0 {
		interval = DefaultPollInterval
	}
	return runLoop(ctx, nc, events.SubjectPrefix+">", interval, logf, v.Sync)
}

// View returns tenant's view (an empty one for a tenant without events).
func (v *ExposureView) View(tenant string) verifier.View {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if f := v.folds[tenant]; f != nil {
		return f.View()
	}
	return verifier.NewFold(tenant).View()
}

// Tenants returns the tenants with events, sorted.
func (v *ExposureView) Tenants() []string {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := make([]string, 0, len(v.folds))
	for t := range v.folds {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// MetricsHandler serves the view in the Prometheus text format (version
// 0.0.4): per tenant, guarantee and resource the gauges
// contextos_exposure_limit, _committed, _held, _available and
// _open_attempts, plus contextos_exposure_incidents per tenant and
// contextos_exposure_view_seq.
func (v *ExposureView) MetricsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write(v.metrics())
	})
}

func (v *ExposureView) metrics() []byte {
	type gauge struct {
		name, help string
		value      func(verifier.ResourceView) int64
	}
	gauges := []gauge{
		{"contextos_exposure_limit", "Ceiling of the resource ledger.", func(r verifier.ResourceView) int64 { return r.Limit }},
		{"contextos_exposure_committed", "Exposure committed by applied effects.", func(r verifier.ResourceView) int64 { return r.Committed }},
		{"contextos_exposure_held", "Exposure held by open attempts.", func(r verifier.ResourceView) int64 { return r.Held }},
		{"contextos_exposure_available", "Limit minus committed minus held.", func(r verifier.ResourceView) int64 { return r.Available }},
		{"contextos_exposure_open_attempts", "Attempts still holding exposure.", func(r verifier.ResourceView) int64 { return int64(len(r.OpenAttempts)) }},
	}
	views := make([]verifier.View, 0)
	for _, t := range v.Tenants() {
		views = append(views, v.View(t))
	}
	var b strings.Builder
	for _, g := range gauges {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n", g.name, g.help, g.name)
		for _, vw := range views {
			for _, r := range vw.Resources {
				if r.GuaranteeID == "" {
					continue // tombstones only: no resource yet
				}
				fmt.Fprintf(&b, "%s{tenant=%s,guarantee=%s,resource=%s} %d\n", g.name,
					promLabel(vw.Tenant), promLabel(r.GuaranteeID), promLabel(r.Resource), g.value(r))
			}
		}
	}
	b.WriteString("# HELP contextos_exposure_incidents Incident and refusal events seen.\n# TYPE contextos_exposure_incidents gauge\n")
	for _, vw := range views {
		fmt.Fprintf(&b, "contextos_exposure_incidents{tenant=%s} %d\n", promLabel(vw.Tenant), len(vw.Incidents))
	}
	fmt.Fprintf(&b, "# HELP contextos_exposure_view_seq Last event stream sequence folded.\n# TYPE contextos_exposure_view_seq gauge\ncontextos_exposure_view_seq %d\n", v.Seq())
	fmt.Fprintf(&b, "# HELP contextos_exposure_view_skipped Stored messages skipped because they are not valid events.\n# TYPE contextos_exposure_view_skipped gauge\ncontextos_exposure_view_skipped %d\n", len(v.Skipped()))
	return []byte(b.String())
}

// promLabel quotes a label value for the Prometheus text format: backslash,
// double quote and newline are escaped (the format's only escapes);
// everything else is kept as UTF-8 (invalid bytes become U+FFFD).
func promLabel(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '\\':
			b.WriteString(`\\`)
		case '"':
			b.WriteString(`\"`)
		case '\n':
			b.WriteString(`\n`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
