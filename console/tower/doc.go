// Package tower is the fleet view: it reads several runtimes' audit logs,
// each one tenant's signed, hash-chained log (origin contextos/audit/<tenant>)
// checked against keys trusted out of band, either from an exported
// entries.json file or live through an operator's audit-export verb. It
// verifies each chain and its checkpoints with package verifier, replays the
// verified records through the verifier's fold (every balance comes from the
// kernel), and shows one table of exposure, incidents, approvals and kill
// switches across them, with at most a bounded number of rows per tenant so
// that no tenant crowds another out. A chain that does not verify is
// reported with its first bad record, and none of its figures are shown.
//
// The fleet kill switch engages (or releases) the kill switch of every
// configured tenant that has live operator credentials, through that
// operator's own connection, and reports which runtimes acknowledged.
//
// The usage loop:
//
//	cfg, err := tower.LoadConfig("tower.toml")
//	t := tower.New(cfg)
//	fleet := t.Refresh(ctx)               // verify every chain, fold the verified ones
//	acks := t.KillSwitch(ctx, true, why)  // engage everywhere; one ack per tenant
//	srv, err := t.Serve()                 // or the web page of both
package tower
