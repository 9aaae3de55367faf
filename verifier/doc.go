// Package verifier checks a tenant's exported audit log and recomputes its
// exposure balances offline: it never talks to NATS and needs nothing but the
// exported files and the trusted public keys.
//
// It also defines those files: the entries.json export, an inclusion Proof,
// a Consistency proof, the keys.json trust file, events.jsonl lines and the
// view.json exposure view. The record, checkpoint and cosignature formats
// inside them, and the rules that fold records into a chain, are package
// audit's, which the writer (package projections) uses too. Every decoder
// is strict (unknown fields, trailing data and non-canonical bytes are
// refused) and never panics.
//
// The usage loop of an auditor:
//
//	keys, err := verifier.ParseKeys(keysJSON)         // trusted out of band
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
