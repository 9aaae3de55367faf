package gateway

import (
	"context"
	"slices"
	"time"

	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/projections"
	"github.com/contextos/ledger/wire"
)

var modelVerbs = []string{wire.VerbApprovals, wire.VerbIncidents, wire.VerbDecisions}

// readOp serves the verbs that only read the model. ok is false for any
// other verb.
func (g *Gateway) readOp(ctx context.Context, tenant, verb string, body []byte) (wire.OpReply, bool) {
	if verb == wire.VerbDecisions {
		return g.opDecisions(ctx, tenant, body), true
	}
	if verb != wire.VerbApprovals && verb != wire.VerbIncidents {
		return wire.OpReply{}, false
	}
	req, r := decodeList(body, verb)
	if r != nil {
		return *r, true
	}
	list := byte(listIncidents)
	if verb == wire.VerbApprovals {
		list = listApprovals
	}
	p, r := g.pager(list, req.Limit, req.Cursor)
	if r != nil {
		return *r, true
	}
	if err := g.model.Sync(ctx); err != nil {
		return wire.Refused(wire.CodeProjectionUnavailable, "the read model could not catch up: %v", err), true
	}
	reply := wire.OpReply{OK: true}
	if verb == wire.VerbApprovals {
		reply.Approvals, reply.NextCursor = page(p, g.model.Approvals(tenant), approvalKey, showApproval)
		return reply, true
	}
	reply.Incidents, reply.NextCursor = page(p, g.model.Incidents(tenant), incidentKey, showIncident)
	return reply, true
}

// opDecisions serves decisions: the tenant's decision records the model
// keeps that match every filter of the request, a page at a time.
func (g *Gateway) opDecisions(ctx context.Context, tenant string, body []byte) wire.OpReply {
	var req wire.DecisionsRequest
	if err := kernel.DecodeOptionalRequest(body, &req); err != nil {
		return wire.Refused(wire.CodeRequestMalformed, "request: %v (decisions takes {limit?, cursor?, run_id?, operation_id?, principal?, evidence_ref?, resolution_ref?, since?, until?})", err)
	}
	var since, until time.Time
	for _, b := range []struct {
		name, text string
		t          *time.Time
	}{{"since", req.Since, &since}, {"until", req.Until, &until}} {
		if b.text == "" {
			continue
		}
		t, r := kernel.ParseTimeFilter(b.name, b.text)
		if r != nil {
			return wire.OpReply{Code: r.Code, Reason: r.Reason}
		}
		*b.t = t
	}
	p, r := g.pager(listDecisions, req.Limit, req.Cursor)
	if r != nil {
		return *r
	}
	if err := g.model.Sync(ctx); err != nil {
		return wire.Refused(wire.CodeProjectionUnavailable, "the read model could not catch up: %v", err)
	}
	rows := g.model.Decisions(tenant, func(d wire.DecisionRow) bool { return decisionMatches(req, since, until, d) })
	reply := wire.OpReply{OK: true}
	reply.Decisions, reply.NextCursor = page(p, rows, decisionKey, showDecision)
	return reply
}

// decisionMatches reports whether a decision row passes every filter req
// sets.
func decisionMatches(req wire.DecisionsRequest, since, until time.Time, d wire.DecisionRow) bool {
	switch {
	case req.RunID != "" && d.RunID != req.RunID,
		req.OperationID != "" && d.OperationID != req.OperationID,
		req.Principal != "" && d.Principal != req.Principal,
		req.EvidenceRef != "" && !slices.Contains(d.EvidenceRefs, req.EvidenceRef),
		req.ResolutionRef != "" && !slices.Contains(d.ResolutionRefs, req.ResolutionRef):
		return false
	}
	if !since.IsZero() || !until.IsZero() {
		at, err := time.Parse(time.RFC3339Nano, d.At)
		if err != nil || !since.IsZero() && at.Before(since) || !until.IsZero() && !at.Before(until) {
			return false
		}
	}
	return true
}

// readModel is what the operator verbs and the reconciler read of the
// model: copies, never the model's own state.
type readModel struct{ m *projections.Model }

// opEntry is a copy of one operation of the model.
type opEntry struct {
	tenant     string
	subject    string
	op         kernel.Operation
	startedAt  map[string]time.Time
	reservedAt map[string]time.Time
}

func entryOf(v projections.OperationView) opEntry {
	return opEntry{tenant: v.Tenant, subject: v.Subject, op: v.Op, startedAt: v.StartedAt, reservedAt: v.ReservedAt}
}

func (x readModel) catchUp(ctx context.Context, _ events.Store) error { return x.m.Sync(ctx) }

func (x readModel) exposure(tenant, guaranteeID, resource string) []wire.ExposureRow {
	return x.m.Exposure(tenant, guaranteeID, resource)
}

func (x readModel) openAttempts(tenant string) []wire.AttemptRow { return x.m.OpenAttempts(tenant) }

// operationOf returns the operation that made an attempt, of any tenant
// (attempt ids are ULIDs); callers check the tenant.
func (x readModel) operationOf(attemptID string) (opEntry, bool) {
	for _, t := range x.m.Tenants() {
		if v, ok := x.m.OperationOf(t, attemptID); ok {
			return entryOf(v), true
		}
	}
	return opEntry{}, false
}

func (x readModel) unresolved() []opEntry {
	vs := x.m.Unresolved()
	out := make([]opEntry, len(vs))
	for i, v := range vs {
		out[i] = entryOf(v)
	}
	return out
}

func (x readModel) killEngaged(tenant string) bool { return x.m.KillEngaged(tenant) }
