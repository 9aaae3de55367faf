// Package events holds the event envelope (canonical JCS encoding, strict
// decoding, Ed25519 signatures), the subject scheme and the event store: a
// JetStream stream with per-subject optimistic concurrency, plus an in-memory
// reference store that passes the same conformance suite (events/storetest).
//
// The write path of an aggregate (see package aggregates) is a
// load-decide-append loop; the store's job is to make the append conditional
// on what was loaded:
//
//	srv, _ := events.StartEmbedded(events.EmbeddedConfig{DataDir: dir}) // or events.Connect(url)
//	nc, _ := srv.InProcessConn()
//	js, _ := jetstream.New(nc)
//	events.EnsureStream(ctx, js, events.StreamOptions{})
//	store := events.NewJetStore(js, events.StreamName)
//	signer := codec.NewSigner(key) // key from codec.LoadPrivateKey
//
//	subject, _ := codec.ExposureSubject(tenant, guaranteeID, resource)
//	for attempt := 0; attempt < maxAttempts; attempt++ {
//		history, err := store.Read(ctx, subject, 0)        // load
//		last := uint64(0)
//		if n := len(history); n > 0 {
//			last = history[n-1].Seq
//		}
//		body, refusal := decide(history, command)          // decide (kernel, pure)
//		if refusal != nil {
//			return refusal
//		}
//		env, err := signer.Seal(typ, 1, eventID, tenant, codec.FormatTime(now), body)
//		seq, err := store.Append(ctx, subject, last, env)  // append iff nothing changed
//		switch {
//		case err == nil:
//			return seq                                       // durable: safe to act
//		case errors.Is(err, events.ErrConflict):
//			continue                                         // someone else appended: re-read, re-decide
//		default:
//			// Outcome unknown (timeout, lost ack): retry the same Append with the
//			// same envelope; an exact retry is recognised, never doubled.
//		}
//	}
//
// Several subjects that must change together (a reservation and its operation
// record, say) go through AppendBatch, a JetStream atomic batch: all or
// nothing, each subject with its own expected sequence.
//
// Readers that need the whole history (projections, the verifier) use Replay,
// decode bodies with DecodeBody and verify signatures with a Keyring.
//
// Time and randomness are inputs: Seal takes the event id and time,
// GenerateKey takes an io.Reader. See docs/storage.md for the stream layout,
// durability settings and the server behaviour this package relies on.
package events
