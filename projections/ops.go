package projections

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"github.com/contextos/ledger/audit"

	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/verifier"
)

// The operator verbs served by Ops, on "ctx.v1.<tenant>.ops.<verb>.<operator>".
const (
	VerbAuditExport      = "audit-export"      // records by index, paged
	VerbAuditCheckpoints = "audit-checkpoints" // signed checkpoints, paged
	VerbAuditKeys        = "audit-keys"        // keys.json
	VerbAuditProve       = "audit-prove"       // proof.json of one event's record
	// consistency.json: an older checkpoint is a prefix of the latest
	VerbAuditProveConsistency = "audit-prove-consistency"
	VerbEventsExport          = "events-export" // events.jsonl lines, paged
	VerbExposureView          = "exposure-view" // view.json
)

// Verbs lists the operator verbs of Ops.
var Verbs = []string{VerbAuditExport, VerbAuditCheckpoints, VerbAuditKeys, VerbAuditProve, VerbAuditProveConsistency,
	VerbEventsExport, VerbExposureView}

// Stable codes of refused ops replies, besides kernel.CodeRequestMalformed.
const (
	CodeNotFound        = kernel.CodeAuditNotFound         // no record holds the event
	CodeNotCheckpointed = kernel.CodeAuditNotCheckpointed  // the record is not covered by a checkpoint yet; retry later
	CodeUnavailable     = kernel.CodeProjectionUnavailable // the log or stream could not be read, or the view is stopped
)

// PageRequest is the body of a paged verb. From is a record index
// (audit-export) or a stream sequence (events-export, audit-checkpoints; 0 =
// the start); Limit caps the items per page (0 = DefaultPageLimit, at most
// MaxPageLimit). A reply is also cut before it would exceed the reply budget.
type PageRequest struct {
	From  uint64 `json:"from"`
	Limit int    `json:"limit"`
}

// ProveRequest is the body of audit-prove.
type ProveRequest struct {
	EventID string `json:"event_id"`
}

// ConsistencyRequest is the body of audit-prove-consistency: the size of
// the older checkpoint, one the log holds.
type ConsistencyRequest struct {
	OldSize int64 `json:"old_size"`
}

// Page sizes.
const (
	DefaultPageLimit = 256
	MaxPageLimit     = 4096
	// DefaultMaxReply is the default reply budget in bytes, under NATS'
	// default max_payload of 1 MiB.
	DefaultMaxReply = 900 * 1024
)

// OpsReply is the reply of every verb of Ops. Exported files travel as
// standard base64 of their exact bytes, so that no JSON re-encoding on the way
// (HTML escaping, say) can alter a canonical record.
type OpsReply struct {
	OK     bool        `json:"ok"`
	Code   kernel.Code `json:"code,omitempty"`
	Reason string      `json:"reason,omitempty"`
	// Items are the page's records (audit-export), signed checkpoints
	// (audit-checkpoints) or events.jsonl lines without their newline
	// (events-export).
	Items [][]byte `json:"items,omitempty"`
	Next  uint64   `json:"next,omitempty"` // the From of the next page
	Done  bool     `json:"done,omitempty"` // no more items now
	// File is keys.json (audit-keys), proof.json (audit-prove),
	// consistency.json (audit-prove-consistency) or view.json
	// (exposure-view).
	File []byte `json:"file,omitempty"`
}

// OpsConfig configures Ops.
type OpsConfig struct {
	Log    *AuditLog
	Events events.Store
	// PublicKeys are the runtime's Ed25519 public keys (the current one and
	// any retired one that signed events still in the log): audit-keys
	// publishes them as the tenant's keys.json (verifier.KeysFor).
	PublicKeys []ed25519.PublicKey
	// WitnessKeys are the cosignature verifier keys of the witnesses that
	// cosign the checkpoints; audit-keys publishes them too.
	WitnessKeys []string
	Model       *Model // serves exposure-view; nil refuses it
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
	if cfg.MaxReply <= 0 {
		cfg.MaxReply = DefaultMaxReply
	}
	return &Ops{cfg: cfg}
}

// Handler returns the handler of verb, in the shape of the gateway's
// OpHandler (the gateway checks that operator is one of tenant's operators
// and mounts it: g.Mount(verb, gateway.OpHandler(ops.Handler(verb)))). It
// returns nil for an unknown verb.
func (o *Ops) Handler(verb string) func(ctx context.Context, tenant, operator string, body []byte) any {
	known := false
	for _, v := range Verbs {
		known = known || v == verb
	}
	if !known {
		return nil
	}
	return func(ctx context.Context, tenant, _ string, body []byte) any {
		return o.Handle(ctx, tenant, verb, body)
	}
}

// Handle serves one verb for tenant. It never returns an error: a refusal is
// a reply with OK false and a stable code.
func (o *Ops) Handle(ctx context.Context, tenant, verb string, body []byte) OpsReply {
	if err := codec.ValidToken(tenant); err != nil {
		return refusedReply(kernel.CodeRequestMalformed, "tenant: %v", err)
	}
	switch verb {
	case VerbAuditExport, VerbAuditCheckpoints, VerbEventsExport:
		var req PageRequest
		if err := decodeRequest(body, &req); err != nil {
			return refusedReply(kernel.CodeRequestMalformed, "%v", err)
		}
		if req.Limit < 0 || req.Limit > MaxPageLimit {
			return refusedReply(kernel.CodeRequestMalformed, "limit must be 0..%d", MaxPageLimit)
		}
		if req.Limit == 0 {
			req.Limit = DefaultPageLimit
		}
		switch verb {
		case VerbAuditExport:
			return o.auditExport(ctx, tenant, req)
		case VerbAuditCheckpoints:
			return o.auditCheckpoints(ctx, tenant, req)
		}
		return o.eventsExport(ctx, tenant, req)
	case VerbAuditKeys:
		if err := decodeRequest(body, &struct{}{}); err != nil {
			return refusedReply(kernel.CodeRequestMalformed, "%v", err)
		}
		keys, err := verifier.KeysFor(tenant, o.cfg.PublicKeys...)
		if err == nil {
			keys.WitnessKeys = append(keys.WitnessKeys, o.cfg.WitnessKeys...)
		}
		if err != nil {
			return refusedReply(CodeUnavailable, "%v", err)
		}
		return fileReply(verifier.MarshalKeys(keys))
	case VerbAuditProve:
		var req ProveRequest
		if err := decodeRequest(body, &req); err != nil {
			return refusedReply(kernel.CodeRequestMalformed, "%v", err)
		}
		if err := codec.ValidEventID(req.EventID); err != nil {
			return refusedReply(kernel.CodeRequestMalformed, "event_id: %v", err)
		}
		return o.prove(ctx, tenant, req.EventID)
	case VerbAuditProveConsistency:
		var req ConsistencyRequest
		if err := decodeRequest(body, &req); err != nil {
			return refusedReply(kernel.CodeRequestMalformed, "%v", err)
		}
		if req.OldSize <= 0 || req.OldSize > audit.MaxIndex {
			return refusedReply(kernel.CodeRequestMalformed, "old_size must be a checkpoint's size, 1..%d", int64(audit.MaxIndex))
		}
		return o.proveConsistency(ctx, tenant, req.OldSize)
	case VerbExposureView:
		if err := decodeRequest(body, &struct{}{}); err != nil {
			return refusedReply(kernel.CodeRequestMalformed, "%v", err)
		}
		if o.cfg.Model == nil {
			return refusedReply(CodeUnavailable, "no read model runs here")
		}
		if err := o.cfg.Model.Sync(ctx); err != nil {
			return refusedReply(CodeUnavailable, "%v", err)
		}
		return fileReply(verifier.MarshalView(o.cfg.Model.View(tenant)))
	}
	return refusedReply(kernel.CodeRequestMalformed, "unknown verb %q", verb)
}

func refusedReply(code kernel.Code, format string, args ...any) OpsReply {
	return OpsReply{Code: code, Reason: fmt.Sprintf(format, args...)}
}

// fileReply is the reply carrying a file, or the refusal of a file that
// could not be made.
func fileReply(b []byte, err error) OpsReply {
	if err != nil {
		return refusedReply(CodeUnavailable, "%v", err)
	}
	return OpsReply{OK: true, File: b}
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

func (o *Ops) auditExport(ctx context.Context, tenant string, req PageRequest) OpsReply {
	if req.From > audit.MaxIndex {
		return refusedReply(kernel.CodeRequestMalformed, "from out of range")
	}
	from := int64(req.From)
	tail, ok, err := o.cfg.Log.Tail(ctx, tenant)
	if err != nil {
		return refusedReply(CodeUnavailable, "%v", err)
	}
	if !ok || from > tail.Record.Index {
		if (!ok && from == 0) || (ok && from == tail.Record.Index+1) {
			return OpsReply{OK: true, Items: [][]byte{}, Next: req.From, Done: true}
		}
		return refusedReply(kernel.CodeRequestMalformed, "from %d is beyond the log's end", from)
	}
	seq, ok, err := o.cfg.Log.SeqOfIndex(ctx, tenant, from)
	if err != nil || !ok {
		return refusedReply(CodeUnavailable, "record %d: %v", from, err)
	}
	b := budget{left: o.cfg.MaxReply - 256}
	reply := OpsReply{OK: true, Items: [][]byte{}}
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
		return refusedReply(CodeUnavailable, "%v", err)
	}
	reply.Next = uint64(next)
	reply.Done = next > tail.Record.Index
	return reply
}

func (o *Ops) auditCheckpoints(ctx context.Context, tenant string, req PageRequest) OpsReply {
	b := budget{left: o.cfg.MaxReply - 256}
	reply := OpsReply{OK: true, Items: [][]byte{}, Next: req.From}
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
		return refusedReply(CodeUnavailable, "%v", err)
	}
	reply.Done = !stopped && len(reply.Items) < req.Limit
	return reply
}

func (o *Ops) eventsExport(ctx context.Context, tenant string, req PageRequest) OpsReply {
	if o.cfg.Events == nil {
		return refusedReply(CodeUnavailable, "no event store here")
	}
	from := req.From
	if from == 0 {
		from = 1
	}
	b := budget{left: o.cfg.MaxReply - 256}
	reply := OpsReply{OK: true, Items: [][]byte{}, Next: from}
	err := o.cfg.Events.ReplayTenant(ctx, tenant, from, func(st events.Stored) error {
		if len(reply.Items) == req.Limit {
			return errStop
		}
		line, err := verifier.MarshalEventLine(st.Seq, st.Subject, st.Raw)
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
		return refusedReply(CodeUnavailable, "%v", err)
	default:
		reply.Done = true
	}
	return reply
}

func (o *Ops) prove(ctx context.Context, tenant, eventID string) OpsReply {
	cp, ok, err := o.cfg.Log.LastCheckpoint(ctx, tenant)
	if err != nil {
		return refusedReply(CodeUnavailable, "%v", err)
	}
	index, found, err := findEvent(ctx, o.cfg.Log, tenant, eventID)
	switch {
	case err != nil:
		return refusedReply(CodeUnavailable, "%v", err)
	case !found:
		return refusedReply(CodeNotFound, "no audit record of tenant %s holds event %s", tenant, eventID)
	case !ok || cp.Checkpoint.Size <= index:
		return refusedReply(CodeNotCheckpointed, "record %d of event %s is not covered by a checkpoint yet; retry later", index, eventID)
	}
	ranges, err := audit.InclusionRanges(index, cp.Checkpoint.Size)
	if err != nil {
		return refusedReply(CodeUnavailable, "%v", err)
	}
	ps, err := logPass(ctx, o.cfg.Log, newChain(tenant), cp.Checkpoint.Size, ranges, []audit.Checkpoint{cp.Checkpoint}, index)
	if err != nil {
		return refusedReply(CodeUnavailable, "%v", err)
	}
	return fileReply(verifier.MarshalProof(verifier.Proof{Tenant: tenant, Index: index, Record: ps.raw, Checkpoint: cp.Note, Hashes: ps.hashes}))
}

// proveConsistency proves that the tenant's checkpoint of oldSize records is
// a prefix of its latest checkpoint, from the records as the log holds them
// (both checkpoints are first checked against those records).
func (o *Ops) proveConsistency(ctx context.Context, tenant string, oldSize int64) OpsReply {
	cur, ok, err := o.cfg.Log.LastCheckpoint(ctx, tenant)
	if err != nil {
		return refusedReply(CodeUnavailable, "%v", err)
	}
	if !ok || cur.Checkpoint.Size < oldSize {
		return refusedReply(CodeNotCheckpointed, "no checkpoint of tenant %s covers %d records yet; retry later", tenant, oldSize)
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
		return refusedReply(CodeUnavailable, "%v", err)
	}
	if old == nil {
		return refusedReply(CodeNotFound, "tenant %s has no checkpoint of %d records", tenant, oldSize)
	}
	ranges, err := audit.ConsistencyRanges(oldSize, cur.Checkpoint.Size)
	if err != nil {
		return refusedReply(CodeUnavailable, "%v", err)
	}
	ps, err := logPass(ctx, o.cfg.Log, newChain(tenant), cur.Checkpoint.Size, ranges, []audit.Checkpoint{old.Checkpoint, cur.Checkpoint}, -1)
	if err != nil {
		return refusedReply(CodeUnavailable, "%v", err)
	}
	return fileReply(verifier.MarshalConsistency(verifier.Consistency{Tenant: tenant, Old: old.Note, New: cur.Note, Hashes: ps.hashes}))
}

// KeysFor returns the keys an auditor of tenant needs when events, records
// and checkpoints are signed by the given runtime signers: what audit-keys
// publishes.
func KeysFor(tenant string, signers ...codec.Signer) (verifier.Keys, error) {
	pubs := make([]ed25519.PublicKey, 0, len(signers))
	for _, s := range signers {
		if len(s.Key) != ed25519.PrivateKeySize {
			return verifier.Keys{}, errors.New("projections: KeysFor: signer without an Ed25519 key")
		}
		pubs = append(pubs, s.Key.Public().(ed25519.PublicKey))
	}
	return verifier.KeysFor(tenant, pubs...)
}
