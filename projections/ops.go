package projections

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"

	"github.com/contextos/ledger/audit"
	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/exposure"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
)

// Verbs lists the operator verbs of Ops.
var Verbs = []string{wire.VerbAuditExport, wire.VerbAuditCheckpoints, wire.VerbAuditKeys, wire.VerbAuditProve, wire.VerbAuditProveConsistency,
	wire.VerbEventsExport, wire.VerbExposureView, wire.VerbReport}

// DefaultMaxReply is the default reply budget in bytes, under NATS'
// default max_payload of 1 MiB.
const DefaultMaxReply = 900 * 1024

// OpsConfig configures Ops.
type OpsConfig struct {
	Log    *AuditLog
	Events events.Store
	// PublicKeys are the runtime's Ed25519 public keys (the current one and
	// any retired one that signed events still in the log): audit-keys
	// publishes them as the tenant's keys.json (audit.KeysFor).
	PublicKeys []ed25519.PublicKey
	// WitnessKeys are the cosignature verifier keys of the witnesses that
	// cosign the checkpoints; audit-keys publishes them too.
	WitnessKeys []string
	Model       *Model // serves exposure-view and report; nil refuses them
	// Now is the clock of report's ages (default time.Now).
	Now func() time.Time
	// MaxReply is the reply budget in bytes (default DefaultMaxReply).
	MaxReply int
}

// Ops serves the audit and export verbs. The tenant always comes from the
// subject, never from a body. It keeps nothing between requests: a proof
// reads the log again (logPass). Safe for concurrent use.
type Ops struct {
	cfg OpsConfig
}

// NewOps returns the verbs' handlers.
func NewOps(cfg OpsConfig) *Ops {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxReply <= 0 {
		cfg.MaxReply = DefaultMaxReply
	}
	return &Ops{cfg: cfg}
}

// Handler returns the handler of verb, in the shape of the gateway's
// OpHandler (the gateway checks that operator is one of tenant's operators
// and mounts it: g.Mount(verb, gateway.OpHandler(ops.Handler(verb)))). It
// returns nil for an unknown verb.
func (o *Ops) Handler(verb string) func(ctx context.Context, tenant, operator string, body []byte) wire.OpReply {
	known := false
	for _, v := range Verbs {
		known = known || v == verb
	}
	if !known {
		return nil
	}
	return func(ctx context.Context, tenant, _ string, body []byte) wire.OpReply {
		return o.Handle(ctx, tenant, verb, body)
	}
}

// Handle serves one verb for tenant. It never returns an error: a refusal is
// a reply with OK false and a stable code.
func (o *Ops) Handle(ctx context.Context, tenant, verb string, body []byte) wire.OpReply {
	if err := codec.ValidToken(tenant); err != nil {
		return wire.Refused(wire.CodeRequestMalformed, "tenant: %v", err)
	}
	switch verb {
	case wire.VerbAuditExport, wire.VerbAuditCheckpoints, wire.VerbEventsExport:
		var req wire.ExportRequest
		if err := decodeRequest(body, &req); err != nil {
			return wire.Refused(wire.CodeRequestMalformed, "%v", err)
		}
		if req.Limit < 0 || req.Limit > wire.MaxExportLimit {
			return wire.Refused(wire.CodeRequestMalformed, "limit must be 0..%d", wire.MaxExportLimit)
		}
		if req.Limit == 0 {
			req.Limit = wire.DefaultExportLimit
		}
		switch verb {
		case wire.VerbAuditExport:
			return o.auditExport(ctx, tenant, req)
		case wire.VerbAuditCheckpoints:
			return o.auditCheckpoints(ctx, tenant, req)
		}
		return o.eventsExport(ctx, tenant, req)
	case wire.VerbAuditKeys:
		if err := decodeRequest(body, &struct{}{}); err != nil {
			return wire.Refused(wire.CodeRequestMalformed, "%v", err)
		}
		keys, err := audit.KeysFor(tenant, o.cfg.PublicKeys...)
		if err == nil {
			keys.WitnessKeys = append(keys.WitnessKeys, o.cfg.WitnessKeys...)
		}
		if err != nil {
			return wire.Refused(wire.CodeProjectionUnavailable, "%v", err)
		}
		return fileReply(audit.MarshalKeys(keys))
	case wire.VerbAuditProve:
		var req wire.ProveRequest
		if err := decodeRequest(body, &req); err != nil {
			return wire.Refused(wire.CodeRequestMalformed, "%v", err)
		}
		if err := codec.ValidEventID(req.EventID); err != nil {
			return wire.Refused(wire.CodeRequestMalformed, "event_id: %v", err)
		}
		return o.prove(ctx, tenant, req.EventID)
	case wire.VerbAuditProveConsistency:
		var req wire.ConsistencyRequest
		if err := decodeRequest(body, &req); err != nil {
			return wire.Refused(wire.CodeRequestMalformed, "%v", err)
		}
		if req.OldSize <= 0 || req.OldSize > audit.MaxIndex {
			return wire.Refused(wire.CodeRequestMalformed, "old_size must be a checkpoint's size, 1..%d", int64(audit.MaxIndex))
		}
		return o.proveConsistency(ctx, tenant, req.OldSize)
	case wire.VerbExposureView:
		if err := decodeRequest(body, &struct{}{}); err != nil {
			return wire.Refused(wire.CodeRequestMalformed, "%v", err)
		}
		if o.cfg.Model == nil {
			return wire.Refused(wire.CodeProjectionUnavailable, "no read model runs here")
		}
		if err := o.cfg.Model.Sync(ctx); err != nil {
			return wire.Refused(wire.CodeProjectionUnavailable, "%v", err)
		}
		return fileReply(exposure.MarshalView(o.cfg.Model.View(tenant)))
	case wire.VerbReport:
		var req wire.ReportRequest
		if err := decodeRequest(body, &req); err != nil {
			return wire.Refused(wire.CodeRequestMalformed, "%v", err)
		}
		if o.cfg.Model == nil {
			return wire.Refused(wire.CodeProjectionUnavailable, "no read model runs here")
		}
		if err := o.cfg.Model.Sync(ctx); err != nil {
			return wire.Refused(wire.CodeProjectionUnavailable, "%v", err)
		}
		return wire.OpReply{OK: true, Outcomes: o.cfg.Model.Outcomes(tenant, req.GuaranteeID, o.cfg.Now())}
	}
	return wire.Refused(wire.CodeRequestMalformed, "unknown verb %q", verb)
}

// fileReply is the reply carrying a file, or the refusal of a file that
// could not be made.
func fileReply(b []byte, err error) wire.OpReply {
	if err != nil {
		return wire.Refused(wire.CodeProjectionUnavailable, "%v", err)
	}
	return wire.OpReply{OK: true, File: b}
}

// decodeRequest decodes a request body strictly; an empty body is {}.
func decodeRequest(body []byte, into any) error {
	if err := kernel.DecodeOptionalRequest(body, into); err != nil {
		return fmt.Errorf("request: %w", err)
	}
	return nil
}

// budget tracks a reply's size: base64 of each item plus a little framing.
type budget struct{ left int }

func (b *budget) fits(n int) bool {
	need := (n+2)/3*4 + 4
	if need > b.left {
		return false
	}
	b.left -= need
	return true
}

func (o *Ops) auditExport(ctx context.Context, tenant string, req wire.ExportRequest) wire.OpReply {
	if req.From > audit.MaxIndex {
		return wire.Refused(wire.CodeRequestMalformed, "from out of range")
	}
	from := int64(req.From)
	tail, ok, err := o.cfg.Log.Tail(ctx, tenant)
	if err != nil {
		return wire.Refused(wire.CodeProjectionUnavailable, "%v", err)
	}
	if !ok || from > tail.Record.Index {
		if (!ok && from == 0) || (ok && from == tail.Record.Index+1) {
			return wire.OpReply{OK: true, Items: [][]byte{}, Next: req.From, Done: true}
		}
		return wire.Refused(wire.CodeRequestMalformed, "from %d is beyond the log's end", from)
	}
	seq, ok, err := o.cfg.Log.SeqOfIndex(ctx, tenant, from)
	if err != nil || !ok {
		return wire.Refused(wire.CodeProjectionUnavailable, "record %d: %v", from, err)
	}
	b := budget{left: o.cfg.MaxReply - 256}
	reply := wire.OpReply{OK: true, Items: [][]byte{}}
	next := from
	err = o.cfg.Log.Records(ctx, tenant, seq, req.Limit, func(r StoredRecord) error {
		if r.Record.Index != next {
			return fmt.Errorf("audit log of %q: record %d where %d was expected", tenant, r.Record.Index, next)
		}
		if len(reply.Items) > 0 && !b.fits(len(r.Raw)) {
			return errStop
		}
		reply.Items = append(reply.Items, r.Raw)
		next++
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return wire.Refused(wire.CodeProjectionUnavailable, "%v", err)
	}
	reply.Next = uint64(next)
	reply.Done = next > tail.Record.Index
	return reply
}

func (o *Ops) auditCheckpoints(ctx context.Context, tenant string, req wire.ExportRequest) wire.OpReply {
	b := budget{left: o.cfg.MaxReply - 256}
	reply := wire.OpReply{OK: true, Items: [][]byte{}, Next: req.From}
	stopped := false
	err := o.cfg.Log.Checkpoints(ctx, tenant, req.From, req.Limit, func(c StoredCheckpoint) error {
		if len(reply.Items) > 0 && !b.fits(len(c.Note)) {
			stopped = true
			return errStop
		}
		reply.Items = append(reply.Items, c.Note)
		reply.Next = c.Seq + 1
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return wire.Refused(wire.CodeProjectionUnavailable, "%v", err)
	}
	reply.Done = !stopped && len(reply.Items) < req.Limit
	return reply
}

func (o *Ops) eventsExport(ctx context.Context, tenant string, req wire.ExportRequest) wire.OpReply {
	if o.cfg.Events == nil {
		return wire.Refused(wire.CodeProjectionUnavailable, "no event store here")
	}
	from := req.From
	if from == 0 {
		from = 1
	}
	b := budget{left: o.cfg.MaxReply - 256}
	reply := wire.OpReply{OK: true, Items: [][]byte{}, Next: from}
	err := o.cfg.Events.ReplayTenant(ctx, tenant, from, func(st events.Stored) error {
		if len(reply.Items) == req.Limit {
			return errStop
		}
		line, err := audit.MarshalEventLine(st.Seq, st.Subject, st.Raw)
		if err != nil {
			return fmt.Errorf("event %d: %w", st.Seq, err)
		}
		line = line[:len(line)-1]
		if len(reply.Items) > 0 && !b.fits(len(line)) {
			return errStop
		}
		reply.Items = append(reply.Items, line)
		reply.Next = st.Seq + 1
		return nil
	})
	switch {
	case errors.Is(err, errStop):
	case err != nil:
		return wire.Refused(wire.CodeProjectionUnavailable, "%v", err)
	default:
		reply.Done = true
	}
	return reply
}

func (o *Ops) prove(ctx context.Context, tenant, eventID string) wire.OpReply {
	cp, ok, err := o.cfg.Log.LastCheckpoint(ctx, tenant)
	if err != nil {
		return wire.Refused(wire.CodeProjectionUnavailable, "%v", err)
	}
	index, found, err := findEvent(ctx, o.cfg.Log, tenant, eventID)
	switch {
	case err != nil:
		return wire.Refused(wire.CodeProjectionUnavailable, "%v", err)
	case !found:
		return wire.Refused(wire.CodeAuditNotFound, "no audit record of tenant %s holds event %s", tenant, eventID)
	case !ok || cp.Checkpoint.Size <= index:
		return wire.Refused(wire.CodeAuditNotCheckpointed, "record %d of event %s is not covered by a checkpoint yet; retry later", index, eventID)
	}
	ranges, err := audit.InclusionRanges(index, cp.Checkpoint.Size)
	if err != nil {
		return wire.Refused(wire.CodeProjectionUnavailable, "%v", err)
	}
	ps, err := logPass(ctx, o.cfg.Log, newChain(tenant), cp.Checkpoint.Size, ranges, []audit.Checkpoint{cp.Checkpoint}, index)
	if err != nil {
		return wire.Refused(wire.CodeProjectionUnavailable, "%v", err)
	}
	return fileReply(audit.MarshalProof(audit.Proof{Tenant: tenant, Index: index, Record: ps.raw, Checkpoint: cp.Note, Hashes: ps.hashes}))
}

// proveConsistency proves that the tenant's checkpoint of oldSize records is
// a prefix of its latest checkpoint, from the records as the log holds them
// (both checkpoints are first checked against those records).
func (o *Ops) proveConsistency(ctx context.Context, tenant string, oldSize int64) wire.OpReply {
	cur, ok, err := o.cfg.Log.LastCheckpoint(ctx, tenant)
	if err != nil {
		return wire.Refused(wire.CodeProjectionUnavailable, "%v", err)
	}
	if !ok || cur.Checkpoint.Size < oldSize {
		return wire.Refused(wire.CodeAuditNotCheckpointed, "no checkpoint of tenant %s covers %d records yet; retry later", tenant, oldSize)
	}
	var old *StoredCheckpoint
	err = o.cfg.Log.Checkpoints(ctx, tenant, 0, 0, func(c StoredCheckpoint) error {
		if c.Checkpoint.Size == oldSize {
			old = &c
			return errStop
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return wire.Refused(wire.CodeProjectionUnavailable, "%v", err)
	}
	if old == nil {
		return wire.Refused(wire.CodeAuditNotFound, "tenant %s has no checkpoint of %d records", tenant, oldSize)
	}
	ranges, err := audit.ConsistencyRanges(oldSize, cur.Checkpoint.Size)
	if err != nil {
		return wire.Refused(wire.CodeProjectionUnavailable, "%v", err)
	}
	ps, err := logPass(ctx, o.cfg.Log, newChain(tenant), cur.Checkpoint.Size, ranges, []audit.Checkpoint{old.Checkpoint, cur.Checkpoint}, -1)
	if err != nil {
		return wire.Refused(wire.CodeProjectionUnavailable, "%v", err)
	}
	return fileReply(audit.MarshalConsistency(audit.Consistency{Tenant: tenant, Old: old.Note, New: cur.Note, Hashes: ps.hashes}))
}

// KeysFor returns the keys an auditor of tenant needs when events, records
// and checkpoints are signed by the given runtime signers: what audit-keys
// publishes.
func KeysFor(tenant string, signers ...codec.Signer) (audit.Keys, error) {
	pubs := make([]ed25519.PublicKey, 0, len(signers))
	for _, s := range signers {
		if len(s.Key) != ed25519.PrivateKeySize {
			return audit.Keys{}, errors.New("projections: KeysFor: signer without an Ed25519 key")
		}
		pubs = append(pubs, s.Key.Public().(ed25519.PublicKey))
	}
	return audit.KeysFor(tenant, pubs...)
}
