package projections

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/contextos/ledger/exposure"
	"github.com/contextos/ledger/wire"
)

// MetricsHandler serves the read model in the Prometheus text format
// (version 0.0.4): per tenant, guarantee and resource the gauges
// contextos_exposure_limit, _committed, _held, _available and
// _open_attempts (a resource id longer than ShortenAbove shortened, its
// digest in the label resource_digest: every resource is a series, but
// none costs more than a few hundred bytes); per tenant
// contextos_exposure_incidents (incidents kept)
// and contextos_readmodel_refused_events (stored messages refused); and
// contextos_exposure_view_seq; and per tenant and guarantee the outcome
// gauges of the report (contextos_outcome_*, outcomes.go).
func (v *Model) MetricsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write(v.metrics())
	})
}

func (v *Model) metrics() []byte {
	type gauge struct {
		name, help string
		value      func(exposure.ResourceView) int64
	}
	gauges := []gauge{
		{"contextos_exposure_limit", "Ceiling of the resource ledger.", func(r exposure.ResourceView) int64 { return r.Limit }},
		{"contextos_exposure_committed", "Exposure committed by applied effects.", func(r exposure.ResourceView) int64 { return r.Committed }},
		{"contextos_exposure_held", "Exposure held by open attempts.", func(r exposure.ResourceView) int64 { return r.Held }},
		{"contextos_exposure_available", "Limit minus committed minus held.", func(r exposure.ResourceView) int64 { return r.Available }},
		{"contextos_exposure_open_attempts", "Attempts still holding exposure.", func(r exposure.ResourceView) int64 { return int64(len(r.OpenAttempts)) }},
	}
	views := make([]exposure.View, 0)
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
				res, digest := wire.Shorten(r.Resource)
				fmt.Fprintf(&b, "%s{tenant=%s,guarantee=%s,resource=%s", g.name, promLabel(vw.Tenant), promLabel(r.GuaranteeID), promLabel(res))
				if digest != "" {
					fmt.Fprintf(&b, ",resource_digest=%s", promLabel(digest))
				}
				fmt.Fprintf(&b, "} %d\n", g.value(r))
			}
		}
	}
	b.WriteString("# HELP contextos_exposure_incidents Incidents kept by the read model (the newest, bounded).\n# TYPE contextos_exposure_incidents gauge\n")
	for _, vw := range views {
		fmt.Fprintf(&b, "contextos_exposure_incidents{tenant=%s} %d\n", promLabel(vw.Tenant), len(v.Incidents(vw.Tenant)))
	}
	b.WriteString("# HELP contextos_readmodel_refused_events Stored messages the kernel refused to fold (not applied, reported as incidents).\n# TYPE contextos_readmodel_refused_events counter\n")
	for _, vw := range views {
		fmt.Fprintf(&b, "contextos_readmodel_refused_events{tenant=%s} %d\n", promLabel(vw.Tenant), v.RefusedEvents(vw.Tenant))
	}
	v.outcomeMetrics(&b, time.Now())
	fmt.Fprintf(&b, "# HELP contextos_exposure_view_seq Last event stream sequence folded.\n# TYPE contextos_exposure_view_seq gauge\ncontextos_exposure_view_seq %d\n", v.Seq())
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
