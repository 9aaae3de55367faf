package gateway

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/projections"
	"github.com/prometheus/client_golang/prometheus"
)

// witnessWatch is what the gateway keeps of its witnesses' answers: the
// refusals counted by witness and reason, and the last answer of each, so
// that a lasting refusal is logged once, not at every retry.
type witnessWatch struct {
	refusals *prometheus.CounterVec
	mu       sync.Mutex
	last     map[[2]string]string // (tenant, witness) -> kind of the last answer ("" cosigned)
}

var descUnwitnessed = prometheus.NewDesc("contextos_audit_unwitnessed",
	"1 while the tenant's latest audit checkpoint lacks a configured witness's cosignature, or the witnesses have not answered the boot check.", []string{"tenant"}, nil)

// unwitnessedSource is contextos_audit_unwitnessed, read at scrape time.
type unwitnessedSource struct {
	tenants []string
	view    WitnessView
}

func (s unwitnessedSource) Describe(ch chan<- *prometheus.Desc) { ch <- descUnwitnessed }

func (s unwitnessedSource) Collect(ch chan<- prometheus.Metric) {
	for _, t := range s.tenants {
		v := 0.0
		if st, _ := s.view(t); st != kernel.WitnessCosigned {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(descUnwitnessed, prometheus.GaugeValue, v, t)
	}
}

// watchWitnessMetrics registers the witness series. Callers hold g.mu.
func (g *Gateway) watchWitnessMetrics(v WitnessView) {
	if g.tel == nil || g.wwatch != nil {
		return
	}
	g.wwatch = &witnessWatch{last: map[[2]string]string{},
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "contextos_audit_witness_refusals_total",
			Help: "Audit checkpoints a configured witness did not cosign, by tenant, witness and reason: shrank or forked (the log's history is not the one the witness saw), key (no key it trusts signed it), unknown (it does not know the log), rejected, unreachable."},
			[]string{"tenant", "witness", "reason"})}
	g.tel.m.reg.MustRegister(g.wwatch.refusals, unwitnessedSource{tenants: g.cfg.TenantIDs(), view: v})
}

// WitnessAnswered takes a witness's answer to a checkpoint of a tenant's
// audit log (projections.AuditConfig.OnWitness): a refusal is counted,
// logged at error level when it starts or changes, and, when the witness
// says the log shrank or forked, recorded as an integrity incident that
// stops dispatch (RecordIntegrityFailure).
func (g *Gateway) WitnessAnswered(r projections.WitnessReport) {
	g.mu.RLock()
	ww := g.wwatch
	g.mu.RUnlock()
	changed := true
	if ww != nil {
		if r.Kind != "" {
			ww.refusals.WithLabelValues(r.Tenant, r.Witness, r.Kind).Inc()
		}
		ww.mu.Lock()
		key := [2]string{r.Tenant, r.Witness}
		prev, seen := ww.last[key]
		changed = !seen || prev != r.Kind
		ww.last[key] = r.Kind
		ww.mu.Unlock()
	}
	switch {
	case r.Kind == "" && changed:
		g.log.Info("audit witness cosigned", "tenant", r.Tenant, "witness", r.Witness, "size", r.Size)
	case r.Kind != "" && changed:
		g.log.Error("audit witness did not cosign the checkpoint", "tenant", r.Tenant, "witness", r.Witness, "url", r.URL,
			"reason", r.Kind, "size", r.Size, "witness_size", r.WitnessSize, "err", r.Err)
	}
	if !r.Integrity() {
		return
	}
	reason := ""
	if r.Err != nil {
		reason = r.Err.Error()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	opened, err := g.RecordIntegrityFailure(ctx, r.Tenant, kernel.FailIntegrity{Witness: r.Witness, Kind: r.Kind, LogSize: r.Size,
		WitnessSize: r.WitnessSize, Reason: reason})
	var refusal *kernel.Refusal
	switch {
	case errors.As(err, &refusal):
		g.log.Error("audit log integrity incident not recorded", "tenant", r.Tenant, "refusal", refusal.Error())
	case err != nil:
		// The next refusal (the projector asks again) records it.
		g.log.Error("audit log integrity incident not recorded: the store did not answer", "tenant", r.Tenant, "err", err)
	case opened:
		g.log.Error("audit log integrity failed: dispatch stopped until an operator resolves the incident (ctx integrity resolve)",
			"tenant", r.Tenant, "witness", r.Witness, "kind", r.Kind, "log_size", r.Size, "witness_size", r.WitnessSize)
	}
}
