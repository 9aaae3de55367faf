// Package witness serves a C2SP tlog-witness over HTTP (add-checkpoint),
// keeps its state in a file, and submits checkpoints to witnesses as a log.
// The rules (what a witness cosigns) are audit.Witness's; this package is
// the transport and the storage around them.
//
// A witness:
//
//	w, err := witness.Open(cosigner, logKeys, "/var/lib/witness/state.json")
//	http.Handle("/", w.Handler())
//
// A log, after signing a checkpoint:
//
//	c := &witness.Client{URL: "http://127.0.0.1:7380", Key: cosignerVerifier}
//	lines, err := c.Submit(ctx, tree, signedNote)
package witness
