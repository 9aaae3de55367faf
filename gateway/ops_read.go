package gateway

import (
	"context"
	"time"

	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/projections"
	"github.com/contextos/ledger/wire"
)

var modelVerbs = []string{wire.VerbApprovals, wire.VerbIncidents}

// readOp serves the verbs that only read the model. ok is false for any
// other verb.
func (g *Gateway) readOp(ctx context.Context, tenant, verb string, body []byte) (wire.OpReply, bool) {
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
