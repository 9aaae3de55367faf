package gateway

import (
	"context"

	"github.com/contextos/ledger/aggregates"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
)

// opImport records exposure committed before adoption, a row at a time:
// each row is one transaction of kernel.DecideImportRow on its resource
// ledger (appended with the ledger's expected sequence), reading the
// control subject (the guarantee's latest limit) and the ledgers
// of the guarantees it replaces. A refused row records nothing and does not
// stop the others; its result carries the code.
func (g *Gateway) opImport(ctx context.Context, tenant, operator string, req wire.ImportRequest) wire.OpReply {
	if r := kernel.CheckImportRequest(req); r != nil {
		return wire.OpReply{Code: r.Code, Reason: r.Reason}
	}
	csub, err := codec.Subject(tenant, "control")
	if err != nil {
		return wire.Refused(wire.CodeRequestMalformed, "%v", err)
	}
	reply := wire.OpReply{OK: true, Imports: make([]wire.ImportResult, 0, len(req.Rows))}
	imported := 0
	for i, row := range req.Rows {
		res := g.importRow(ctx, tenant, operator, csub, row)
		res.Row, res.Reference = i+1, row.Reference
		if res.Code == wire.CodeLedgerUnavailable {
			// The store did not answer: the rows after it are not tried,
			// and a re-run of the same file completes the import.
			reply.Imports = append(reply.Imports, res)
			break
		}
		if res.Status == wire.ImportImported {
			imported++
		}
		reply.Imports = append(reply.Imports, res)
	}
	g.log.Info("prior exposure imported", "tenant", tenant, "operator", operator, "rows", len(req.Rows), "imported", imported)
	return reply
}

func (g *Gateway) importRow(ctx context.Context, tenant, operator, csub string, row wire.ImportRow) wire.ImportResult {
	refused := func(r *kernel.Refusal) wire.ImportResult {
		return wire.ImportResult{Status: wire.ImportRefused, Code: r.Code, Reason: r.Reason}
	}
	cmd := kernel.ImportRow{GuaranteeID: row.GuaranteeID, Resource: row.Resource, Window: row.Window, Amount: row.Amount,
		Reference: row.Reference, Operator: operator, Now: g.clock.Now()}
	if r := kernel.CheckImportRow(cmd); r != nil {
		return refused(r)
	}
	pin, pr := g.pinOf(tenant, row.GuaranteeID)
	if pr != nil {
		return refused(pr)
	}
	if r := pin.Definition.CheckWindowKey(row.Window); r != nil {
		return refused(r)
	}
	ref, err := aggregates.ExposureWindowRef(tenant, row.GuaranteeID, row.Resource, row.Window)
	if err != nil {
		return refused(kernel.RefuseResource(err))
	}
	carries, err := g.carriesOf(tenant, kernel.Hold{GuaranteeID: row.GuaranteeID, Resource: row.Resource, Window: row.Window})
	if err != nil {
		return refused(kernel.RefuseResource(err))
	}
	st := kernel.ImportState{Pin: pin}
	var d kernel.Decision
	// The control subject (the guarantee's latest limit) is read, not
	// guarded: a one-event append carries no guard. A limit lowered during
	// the import decides the rows after it.
	var ctl map[string]*kernel.Control
	binds := []aggregates.Binding{aggregates.Bind(ref, &st.Ledger, &d.Events), aggregates.Read(controlRef(csub), &ctl, "control")}
	for _, c := range carries {
		binds = append(binds, aggregates.Read(c.ref, &st.Replaced, c.key))
	}
	res, err := g.engine.Do(ctx, aggregates.Tx{Tenant: tenant, Bind: binds,
		Decide: func() *kernel.Refusal {
			st.Control = ctl["control"]
			d = kernel.DecideImportRow(st, cmd)
			return d.Refusal
		}})
	switch {
	case err != nil:
		return wire.ImportResult{Status: wire.ImportRefused, Code: wire.CodeLedgerUnavailable, Reason: err.Error()}
	case res.Refusal != nil:
		return refused(res.Refusal)
	case len(d.Events) == 0:
		return wire.ImportResult{Status: wire.ImportAlready}
	}
	return wire.ImportResult{Status: wire.ImportImported}
}
