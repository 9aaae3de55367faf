package gateway

import (
	"context"

	"github.com/contextos/ledger/aggregates"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
)

// The audit log's integrity: the runtime's live view of its witnesses and
// the tenant's integrity subject, which the proposal step reads
// (kernel.CheckLogIntegrity); the incident a witness's refusal opens; and
// the operator verbs that show and resolve it.

// WitnessView gives the state of the latest submission of a tenant's audit
// log to its witnesses (projections.Service.Witnessing).
type WitnessView func(tenant string) (kernel.Witnessing, string)

// WatchWitnesses gives the proposal step the witnesses' state. Until it is
// called, and for a runtime configured without witnesses, proposals read
// no witness policy.
func (g *Gateway) WatchWitnesses(v WitnessView) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.witnesses = v
	g.watchWitnessMetrics(v)
}

// witnessStatus is what a proposal of tenant reads of the witnesses.
func (g *Gateway) witnessStatus(tenant string) kernel.WitnessStatus {
	policy := g.cfg.WitnessPolicy()
	g.mu.RLock()
	v := g.witnesses
	g.mu.RUnlock()
	if policy == "" || v == nil {
		return kernel.WitnessStatus{}
	}
	st, reason := v(tenant)
	return kernel.WitnessStatus{Policy: policy, State: st, Reason: reason}
}

// RecordIntegrityFailure records a witness's answer that tenant's audit log
// shrank or forked (kernel.DecideIntegrityFailure): from then on every
// proposal of the tenant is refused log_integrity_failed until an operator
// resolves the incident. It reports whether an incident was opened (false:
// one is open already).
func (g *Gateway) RecordIntegrityFailure(ctx context.Context, tenant string, c kernel.FailIntegrity) (bool, error) {
	c.Executor = g.executor
	eff, err := g.engine.Run(ctx, tenant, kernel.VerbStep(kernel.KeyIntegrity, func(st *kernel.LogIntegrity) (kernel.Decision, any) {
		return kernel.DecideIntegrityFailure(st, c), nil
	}))
	if err != nil {
		return false, err
	}
	if eff.Refusal != nil {
		return false, eff.Refusal
	}
	return len(eff.Events(kernel.KeyIntegrity)) > 0, nil
}

var witnessingNames = map[kernel.Witnessing]string{kernel.WitnessPending: "pending", kernel.WitnessCosigned: "cosigned", kernel.WitnessMissing: "missing"}

// IntegrityVerbs are the operator verbs of the log's integrity: show it,
// and resolve an incident.
var IntegrityVerbs = []string{"integrity", "integrity-resolve"}

func (g *Gateway) mountIntegrity() {
	g.extraOps["integrity"] = func(ctx context.Context, tenant, _ string, body []byte) wire.OpReply {
		var req struct{}
		if err := kernel.DecodeOptionalRequest(body, &req); err != nil {
			return wire.Refused(wire.CodeRequestMalformed, "request: %v", err)
		}
		return g.integrityReply(ctx, tenant)
	}
	g.extraOps["integrity-resolve"] = func(ctx context.Context, tenant, operator string, body []byte) wire.OpReply {
		var req wire.IntegrityRequest
		if err := kernel.DecodeRequest(body, &req); err != nil {
			return wire.Refused(wire.CodeRequestMalformed, "request: %v", err)
		}
		if _, err := aggregates.RefOf(tenant, kernel.KeyIntegrity); err != nil {
			return wire.Refused(wire.CodeRequestMalformed, "%v", err)
		}
		cmd := kernel.ResolveIntegrity{Operator: operator, Resolution: req.Resolution, ArtifactRef: req.ArtifactRef, Statement: req.Statement}
		eff, err := g.engine.Run(ctx, tenant, kernel.VerbStep(kernel.KeyIntegrity, func(st *kernel.LogIntegrity) (kernel.Decision, any) {
			return kernel.DecideResolveIntegrity(st, cmd), nil
		}))
		if err != nil {
			return storeRefusal(err)
		}
		if eff.Refusal != nil {
			return wire.OpReply{Code: eff.Refusal.Code, Reason: eff.Refusal.Reason}
		}
		g.log.Warn("audit log integrity incident resolved", "tenant", tenant, "operator", operator, "resolution", req.Resolution, "artifact_ref", req.ArtifactRef)
		return g.integrityReply(ctx, tenant)
	}
}

// Integrity reads the tenant's integrity subject: an open incident stops
// dispatch.
func (g *Gateway) Integrity(ctx context.Context, tenant string) (*kernel.LogIntegrity, error) {
	if _, err := aggregates.RefOf(tenant, kernel.KeyIntegrity); err != nil {
		return nil, err
	}
	// The state is the engine's, which later events change: the step
	// answers a copy.
	eff, err := g.engine.Run(ctx, tenant, kernel.ReadStep(kernel.KeyIntegrity, func(st *kernel.LogIntegrity) any {
		out := *st
		if st.Open != nil {
			open := *st.Open
			out.Open = &open
		}
		return out
	}))
	if err != nil {
		return &kernel.LogIntegrity{}, err
	}
	out := eff.Reply.Data.(kernel.LogIntegrity)
	return &out, nil
}

// integrityReply reads the tenant's integrity subject and the witnesses'
// state.
func (g *Gateway) integrityReply(ctx context.Context, tenant string) wire.OpReply {
	st, err := g.Integrity(ctx, tenant)
	if err != nil {
		return storeRefusal(err)
	}
	w := g.witnessStatus(tenant)
	var open *wire.IntegrityFailure
	if st.Open != nil {
		f := wire.IntegrityFailure(*st.Open)
		open = &f
	}
	out := wire.IntegrityState{Open: open, Incidents: st.Incidents, Resolutions: st.Resolutions, Policy: string(w.Policy),
		Witnessing: witnessingNames[w.State], Reason: w.Reason}
	return wire.OpReply{OK: true, Data: map[string]any{"integrity": out}}
}
