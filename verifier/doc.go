// Package verifier checks a tenant's exported audit log and recomputes its
// exposure balances offline: it never talks to NATS and needs nothing but the
// exported files and the trusted public keys.
//
// Those files are defined where the writer (package projections) finds them
// too, so this package stays a standalone reader that the runtime never
// imports: the entries.json export, proofs, keys.json and events.jsonl in
// package audit (with the record, checkpoint and cosignature formats and
// the chain's rules), view.json in package exposure. An auditor parses them
// with those packages and checks them with this one. Every decoder is
// strict (unknown fields, trailing data and non-canonical bytes are
// refused) and never panics.
//
// The usage loop of an auditor:
//
//	keys, err := audit.ParseKeys(keysJSON)            // trusted out of band
//	res, err := verifier.VerifyEntriesPolicy(entriesJSON, keys, verifier.Policy{
//		MinSize: kept, Witnesses: ws, Quorum: 1})      // complete, witnessed
//	if err != nil { ... }                              // the file is not an export
//	if !res.OK() {
//		fmt.Println(res.Failure.Index, res.Failure.Reason) // first bad record and why
//	}
//	err = verifier.VerifyProof(proofJSON, keys)        // one record, without the log
//	bal, err := verifier.Replay(eventsJSONL, keys.Keyring)
//	diffs := verifier.Compare(bal, view)               // offline balances vs the live view
//
// Every balance comes from kernel.Ledger.Apply: this package routes events to
// ledgers and never does arithmetic on balances itself.
package verifier
