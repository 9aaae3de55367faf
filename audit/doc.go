// Package audit defines a tenant's audit log and checks it: the record
// format (one struct, one canonical encoding), sealing a record around a
// stored event, folding records into a chain and the compact range of
// its Merkle tree (proofs are streamed from compact ranges), signed
// checkpoints of that tree, witness cosignatures of the checkpoints, and
// the reasons a record or checkpoint is refused; and the files a tenant's
// log is exported as, each one struct with one encoding and a strict
// parser: entries.json (Entries), proof.json (Proof), consistency.json
// (Consistency), keys.json (Keys) and events.jsonl (EventLine,
// ReadEvents). It does no I/O beyond reading a given io.Reader: the
// projector (package projections) writes the log over NATS with it, and the
// offline verifier (package verifier) checks exports with it, so both agree
// on every byte.
//
// The writer's loop:
//
//	var c audit.Chain
//	rec, raw, err := audit.Seal(tenant, c.Size(), c.PrevHash(), seq, subject, eventRaw, env)
//	// append raw to the log, then
//	err = c.Append(rec, raw)
//	note, err := audit.SignCheckpoint(c.Checkpoint(origin), signer)
//
// The checker's loop:
//
//	rec, env, err := audit.Parse(raw)       // strict form, event decoded
//	err = audit.VerifyEvent(rec, env, ring) // the event's own signature
//	err = c.Append(rec, raw)                // position, prev_hash, order
//	cp, err := audit.OpenCheckpoint(note, logKeys, witnesses)
//	err = c.CheckCheckpoint(cp.Checkpoint)
package audit
