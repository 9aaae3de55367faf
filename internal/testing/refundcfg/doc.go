// Package refundcfg holds the one refund configuration of the tests and
// test tools (refund.toml) and the edits that derive every variant from
// it: another risk, an evidence rule, a breaker, a policy, another
// ceiling, a tool's own tenants. It imports nothing of the repository, so
// the tests of config and daemon use it as daemontest, the simulator, the
// chaos driver and the benchmarks do. TestOneRefundConfiguration fails
// when a test or a testdata file writes a [[capabilities]] table outside
// this package without a reason on its allow-list.
//
//	text := refundcfg.Text(t.TempDir(), providerURL)
//	text = refundcfg.EditBlock(text, "capabilities", refundcfg.Capability,
//		`risk = "medium"`, `risk = "high"`)
//	cfg, err := config.Parse([]byte(text))
//
// Every edit panics if the text it edits is not there exactly once, so a
// change of refund.toml cannot silently drop a test's variant.
package refundcfg
