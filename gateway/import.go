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
	if _, err := codec.Subject(tenant, "control"); err != nil {
		return wire.Refused(wire.CodeRequestMalformed, "%v", err)
	}
	reply := wire.OpReply{OK: true, Imports: make([]wire.ImportResult, 0, len(req.Rows))}
	imported := 0
	for i, row := range req.Rows {
		res := g.importRow(ctx, tenant, operator, row)
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

func (g *Gateway) importRow(ctx context.Context, tenant, operator string, row wire.ImportRow) wire.ImportResult {
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
	if _, err := aggregates.ExposureWindowRef(tenant, row.GuaranteeID, row.Resource, row.Window); err != nil {
		return refused(kernel.RefuseResource(err))
	}
	carries, err := g.carriesOf(tenant, kernel.Hold{GuaranteeID: row.GuaranteeID, Resource: row.Resource, Window: row.Window})
	if err != nil {
		return refused(kernel.RefuseResource(err))
	}
	in := kernel.ImportInput{Row: cmd, Pin: pin}
	for _, c := range carries {
		in.Replaced = append(in.Replaced, c.key)
	}
	eff, err := g.engine.Run(ctx, tenant, in.Step())
	switch {
	case err != nil:
		code, reason := storeFault(err)
		return wire.ImportResult{Status: wire.ImportRefused, Code: code, Reason: reason}
	case eff.Refusal != nil:
		return refused(eff.Refusal)
	case len(eff.Events(in.Ledger())) == 0:
		return wire.ImportResult{Status: wire.ImportAlready}
	}
	return wire.ImportResult{Status: wire.ImportImported}
}
