package gateway

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/kernel"
	"github.com/nats-io/nats.go"
)

// inflight tracks the attempts this process is dispatching, which its own
// reconciler must leave alone.
type inflight struct{ m sync.Map }

func (f *inflight) add(id string)      { f.m.Store(id, struct{}{}) }
func (f *inflight) done(id string)     { f.m.Delete(id) }
func (f *inflight) has(id string) bool { _, ok := f.m.Load(id); return ok }

// Start pins every guarantee, loads the index and the kill switches, follows
// kill-switch changes made by other replicas, and starts the background
// reconciler. It returns once the gateway can serve.
func (g *Gateway) Start(ctx context.Context, nc *nats.Conn) error {
	if err := g.PinAll(ctx); err != nil {
		return err
	}
	if err := g.index.catchUp(ctx, g.store); err != nil {
		return err
	}
	for _, t := range g.cfg.Tenants {
		g.setKill(t.ID, g.index.killEngaged(t.ID))
	}
	if nc != nil {
		// Every replica sees every stored control event: the stream's
		// messages are delivered to plain subscribers of its subjects.
		sub, err := nc.Subscribe(events.SubjectPrefix+"*.control", func(m *nats.Msg) {
			env, err := events.Decode(m.Data)
			if err != nil {
				return
			}
			ev, err := kernel.DecodeEvent(env.Type, env.V, env.Body)
			if k, ok := ev.(kernel.KillSwitchSet); ok && err == nil {
				g.setKill(strings.Split(m.Subject, ".")[2], k.Engaged)
			}
		})
		if err != nil {
			return err
		}
		g.subs = append(g.subs, sub)
		if err := g.Serve(ctx, nc); err != nil {
			return err
		}
	}
	go g.flushRefusals(ctx)
	if iv := g.cfg.Runtime.ReconcileInterval.Duration; iv > 0 {
		go g.reconcileLoop(ctx, iv)
	}
	return nil
}

func (g *Gateway) reconcileLoop(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			g.ReconcileOnce(ctx)
		}
	}
}

// ReconcileOnce makes one pass over every unresolved operation: started
// attempts are queried by their idempotency key and a definitive answer
// settles them; attempts reserved but never started by an executor that is
// gone (older than the grace period, not in flight here) are closed, which
// also fences that executor.
func (g *Gateway) ReconcileOnce(ctx context.Context) []SettleRow {
	if err := g.index.catchUp(ctx, g.store); err != nil {
		g.log.Warn("reconciler could not read the ledger", "err", err)
		return nil
	}
	var rows []SettleRow
	for _, oe := range g.index.unresolved() {
		a, _ := oe.op.Current()
		if g.inflight.has(a.AttemptID) {
			continue
		}
		cp, _ := g.cfg.Capability(oe.op.CapabilityID)
		if !a.Started {
			if g.clock.Now().Sub(oe.reservedAt[a.AttemptID]) < g.reconcileGrace(cp) {
				continue
			}
			r := g.opClose(ctx, oe.tenant, "reconciler", OpRequest{AttemptID: a.AttemptID, Reason: "executor lost before dispatch-start"})
			rows = append(rows, SettleRow{AttemptID: a.AttemptID, Status: kernel.StatusNotApplied, Code: r.Code, Reason: r.Reason})
			continue
		}
		row := g.reconcileOne(ctx, oe.tenant, a.AttemptID, "reconciler")
		if row.Code != kernel.CodeDispatchActive {
			rows = append(rows, row)
		}
	}
	return rows
}
