// Package projections builds the read models of the event stream: the
// hash-chained audit log of every tenant (with a Merkle tree and signed,
// witnessed checkpoints) and the in-memory exposure view. Both keep no cursor of
// their own: the audit log's last record names the last event it recorded,
// and the view rebuilds from the stream at start, so each resumes exactly
// where it stopped.
//
// The usage loop of the daemon:
//
//	_, _ = projections.EnsureAuditStream(ctx, js, projections.AuditStreamOptions{})
//	log := projections.NewAuditLog(js, projections.AuditStreamName)
//	for _, tenant := range tenants {
//		p, _ := projections.NewAuditProjector(projections.AuditConfig{
//			Tenant: tenant, Events: store, Log: log, Signer: signer, Notify: nc})
//		go p.Run(ctx) // any number of replicas: one chain, each event once
//	}
//	view := projections.NewExposureView(store)
//	go view.Run(ctx, nc, 0, logf)
//	keys, _ := projections.KeysFor(tenant, signer)
//	ops := projections.NewOps(projections.OpsConfig{Log: log, Events: store, Keys: keys, View: view})
//	for _, verb := range projections.Verbs {
//		gw.Mount(verb, gateway.OpHandler(ops.Handler(verb)))
//	}
//
// and of a client (ctx audit export):
//
//	c := &client.AuditClient{NC: nc, Tenant: tenant, Operator: me}
//	entries, _ := c.ExportAudit(ctx)
//	b, _ := audit.MarshalEntries(audit.Entries(entries)) // entries.json, verified offline
//
// The record, checkpoint and cosignature formats, the chain's rules and the
// export files (entries.json, proofs, keys.json, events.jsonl) are package
// audit's and view.json is package exposure's, so the writer here and the
// offline checker (package verifier, which this package never imports)
// share one encoder; docs/audit.md describes them.
package projections
