// Package chaos drives the gateway the way many agents would, records what
// they saw for the linearizability checker (package lincheck), and runs
// real contextosd processes against real NATS servers while it injects
// faults: SIGKILL at exact points of the dispatch sequence and at random,
// SIGSTOP/SIGCONT pauses, restarts of NATS nodes, and a provider that times
// out or answers pending. At the end it reconciles and accounts: ceiling
// violations, acknowledged events lost, linearizability, provider effects
// against committed receipts, stranded exposure.
//
// The usage loop (see cmd/chaos and chaos_test.go):
//
//	res, err := chaos.Run(ctx, chaos.Options{Mode: chaos.ModeSingle, ...})
//	res.Table(os.Stdout)
//	if !res.OK() { os.Exit(1) }
package chaos
