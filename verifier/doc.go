// Package verifier checks a tenant's exported audit log and recomputes its
// exposure balances offline: it never talks to NATS and needs nothing but the
// exported files and the trusted public keys.
//
// It also defines those files, so that the writer (package projections) and
// the checker share one encoder: an audit Record, the signed Checkpoint of the
// Merkle tree over the records, the entries.json export, an inclusion Proof,
// the keys.json trust file, events.jsonl lines and the view.json exposure
// view. Every decoder is strict (unknown fields, trailing data and
// non-canonical bytes are refused) and never panics.
//
// The usage loop of an auditor:
//
//	keys, err := verifier.ParseKeys(keysJSON)         // trusted out of band
//	res, err := verifier.VerifyEntries(entriesJSON, keys)
//	if err != nil { ... }                              // the file is not an export
//	if !res.OK() {
//		fmt.Println(res.Index, res.Reason)             // first bad record and why
//	}
//	err = verifier.VerifyProof(proofJSON, keys)        // one record, without the log
//	bal, err := verifier.Replay(eventsJSONL, keys.Keyring)
//	diffs := verifier.Compare(bal, view)               // offline balances vs the live view
//
// Every balance comes from kernel.Ledger.Apply: this package routes events to
// ledgers and never does arithmetic on balances itself.
package verifier
