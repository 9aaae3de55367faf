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
// The review queue lists, per log, the proposals waiting for an approval
// (read live) and the two-person requests no second operator confirmed
// (read from the verified log), each actionable through the runtime's own
// approve, deny and confirm verbs, and the operators' decisions the log
// signed (who decided what). The guardrails and the waivers in force are
// folded from the verified log with the kernel's Control.Apply; the page
// publishes a guardrail to every runtime of the session's tenants, and
// grants or revokes a waiver on one tenant's runtimes (review.go,
// review_serve.go).
//
// The fleet kill switch engages (or releases) the kill switch of every
// runtime of the tenants it is sent for, each through an operator's own
// connection, and reports which runtimes acknowledged.
//
// The web page (Serve) acts only as the operators logged into it: an
// operator logs into a tenant with the runtime's operator credentials,
// checked by every runtime the tenant is configured on; a session may hold
// logins of several tenants, and reads, refreshes and acts on those tenants
// only, through those logins' connections, so each runtime records the
// operator who acted. Before a login it serves nothing of any tenant. The
// last verified reading of each log is kept and read again when older than
// the page's interval or on request. The command-line entry points
// (Refresh, KillSwitch) act as each tenant's configured operator instead.
//
// The usage loop:
//
//	cfg, err := tower.LoadConfig("tower.toml")
//	t := tower.New(cfg)
//	fleet := t.Refresh(ctx)               // as the configured operators: verify every chain, fold the verified ones
//	acks := t.KillSwitch(ctx, true, why)  // as the configured operators: engage everywhere; one ack per tenant
//	srv, err := t.Serve(30 * time.Second) // or the web page, as whoever logs in
package tower
