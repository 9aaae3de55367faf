// Package grader decides, from a case's labels alone, whether its decision
// should commit. It never sees the compiler's inputs and does not import
// the kernel (TestGraderIsIndependent holds it to that): `ctx context eval`
// compares the compiler's gate with this verdict, so a compiler bug and a
// mislabelled encoding both show as a disagreement rather than agreeing with
// themselves.
//
// The policy, per obligation of the decision:
//
//  1. The claimants are the snapshots that claim the obligation. None: the
//     obligation is not covered.
//  2. Claimants that give different answers are a conflict, whatever their
//     freshness, trust or size: a stale or untrusted contradiction still
//     says the decision's basis is contested. A conflict closes only through
//     a resolution the case's policy accepts: an accountable review by a
//     principal other than the agent that selects some claimants (not all);
//     the best-ranked source when exactly one claimant holds the best rank;
//     the single newest claimant when it comes from the system of record.
//     A rule's winner must be usable. Claimants a resolution did not select
//     are superseded for every obligation.
//  3. The usable claimants are those neither superseded nor stale,
//     untrusted or out of budget. At least one is needed, and they must
//     come from at least min_families distinct source families (one when
//     unset); refs of one family count once.
//
// The decision commits when every obligation closes.
package grader
