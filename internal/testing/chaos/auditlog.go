package chaos

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"fmt"
	"strings"
	"time"

	"github.com/contextos/ledger/audit"
	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/projections"
	"github.com/contextos/ledger/verifier"
	"github.com/nats-io/nats.go/jetstream"
)

// AuditLogCheck is what the run found in the tenant's signed audit log once
// every contextosd's projector had caught up.
type AuditLogCheck struct {
	Records     int64
	Checkpoints int
	Err         error // nil when the log verifies and records each event once, in order
}

// checkAuditLog waits (until deadline) for the tenant's audit log to record
// the tenant's last event, then reads the whole log as an auditor would and
// checks it: the chain and the checkpoints verify under the runtime key, and
// the records hold exactly the tenant's events, each once, in stream order.
// Several contextosd write the one log, racing for every append and every
// checkpoint while they are killed and paused; a projector that forked or
// corrupted it would stop, and the wait would end without the last event.
func checkAuditLog(ctx context.Context, store *events.JetStore, js jetstream.JetStream, tenant string, key ed25519.PublicKey, deadline time.Time) AuditLogCheck {
	fail := func(format string, args ...any) AuditLogCheck {
		return AuditLogCheck{Err: fmt.Errorf(format, args...)}
	}
	prefix := codec.TenantPrefix(tenant)
	var want []events.Stored
	if err := store.Replay(ctx, 1, func(st events.Stored) error {
		if strings.HasPrefix(st.Subject, prefix) {
			want = append(want, st)
		}
		return nil
	}); err != nil {
		return fail("replay: %w", err)
	}
	if len(want) == 0 {
		return fail("no events of %s in the stream", tenant)
	}
	last := want[len(want)-1].Seq
	log := projections.NewAuditLog(js, projections.AuditStreamName)
	for {
		tail, ok, err := log.Tail(ctx, tenant)
		if err == nil && ok && tail.Record.EventSeq >= last {
			break
		}
		if time.Now().After(deadline) {
			got := uint64(0)
			if ok {
				got = tail.Record.EventSeq
			}
			return fail("the audit log records events up to %d of %d after waiting (last error: %v)", got, last, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	e := audit.Entries{Tenant: tenant, Records: [][]byte{}, Checkpoints: [][]byte{}}
	var recs []audit.Record
	if err := log.Records(ctx, tenant, 0, 0, func(r projections.StoredRecord) error {
		e.Records = append(e.Records, r.Raw)
		recs = append(recs, r.Record)
		return nil
	}); err != nil {
		return fail("read the records: %w", err)
	}
	if err := log.Checkpoints(ctx, tenant, 0, 0, func(c projections.StoredCheckpoint) error {
		if c.Checkpoint.Size <= int64(len(e.Records)) {
			e.Checkpoints = append(e.Checkpoints, c.Note)
		}
		return nil
	}); err != nil {
		return fail("read the checkpoints: %w", err)
	}
	res := AuditLogCheck{Records: int64(len(e.Records)), Checkpoints: len(e.Checkpoints)}
	keys, err := audit.KeysFor(tenant, key)
	if err != nil {
		res.Err = err
		return res
	}
	b, err := audit.MarshalEntries(e)
	if err != nil {
		res.Err = err
		return res
	}
	v, err := verifier.VerifyEntriesPolicy(b, keys, verifier.Policy{AllowPartial: true}) // the tail past the last checkpoint is checked as a chain
	switch {
	case err != nil:
		res.Err = err
	case !v.OK():
		res.Err = fmt.Errorf("the audit log does not verify: %v", v.Failure)
	case len(recs) != len(want):
		res.Err = fmt.Errorf("%d records for %d events", len(recs), len(want))
	default:
		for i, st := range want {
			if recs[i].EventSeq != st.Seq || recs[i].Subject != st.Subject || !bytes.Equal(recs[i].Event, st.Raw) {
				res.Err = fmt.Errorf("record %d holds event %d on %s, want event %d on %s", i, recs[i].EventSeq, recs[i].Subject, st.Seq, st.Subject)
				break
			}
		}
	}
	return res
}
