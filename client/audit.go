package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/contextos/ledger/wire"
	"github.com/nats-io/nats.go"
)

// AuditError is a refused reply of an audit verb.
type AuditError struct {
	Verb   string
	Code   wire.Code
	Reason string
}

// Error implements error.
func (e *AuditError) Error() string {
	return fmt.Sprintf("%s refused: %s: %s", e.Verb, e.Code, e.Reason)
}

// AuditClient calls the audit and export verbs (audit-export,
// audit-checkpoints, audit-keys, audit-prove, audit-prove-consistency,
// events-export, exposure-view) as an operator and pages through exports.
// The connection's inbox prefix must be the operator's own (the server lets
// a principal subscribe to nothing else).
type AuditClient struct {
	NC       *nats.Conn
	Tenant   string
	Operator string
	Timeout  time.Duration // per request; default 30s
	PageSize int           // items asked per page; default wire.DefaultExportLimit
	// Progress, when set, is called after each page with the verb and the
	// number of items received so far.
	Progress func(verb string, items int)
}

// Call sends one verb and returns its reply; a refusal is an *AuditError.
func (c *AuditClient) Call(ctx context.Context, verb string, req any) (wire.OpReply, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return wire.OpReply{}, err
	}
	t := c.Timeout
	if t <= 0 {
		t = 30 * time.Second
	}
	rctx, cancel := context.WithTimeout(ctx, t)
	defer cancel()
	m, err := c.NC.RequestWithContext(rctx, wire.OpSubject(c.Tenant, verb, c.Operator), body)
	if err != nil {
		return wire.OpReply{}, fmt.Errorf("%s: %w (is contextosd running, and are you an operator of %s?)", verb, err, c.Tenant)
	}
	var r wire.OpReply
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return wire.OpReply{}, fmt.Errorf("%s: bad reply: %w", verb, err)
	}
	if !r.OK {
		return wire.OpReply{}, &AuditError{Verb: verb, Code: r.Code, Reason: r.Reason}
	}
	return r, nil
}

func (c *AuditClient) pages(ctx context.Context, verb string, from uint64, fn func([]byte) error) (uint64, error) {
	n := 0
	for {
		r, err := c.Call(ctx, verb, wire.ExportRequest{From: from, Limit: c.PageSize})
		if err != nil {
			return from, err
		}
		for _, it := range r.Items {
			if err := fn(it); err != nil {
				return from, err
			}
		}
		n += len(r.Items)
		if c.Progress != nil {
			c.Progress(verb, n)
		}
		if r.Done {
			return r.Next, nil
		}
		if r.Next <= from && len(r.Items) == 0 {
			return from, fmt.Errorf("%s: the server made no progress from %d", verb, from)
		}
		from = r.Next
	}
}

// AuditEntries is a tenant's exported audit log: its records in index
// order and its signed checkpoint notes, by increasing size (the fields of
// audit.Entries, which verifies them).
type AuditEntries struct {
	Tenant      string
	Records     [][]byte
	Checkpoints [][]byte
}

// ExportAudit fetches the tenant's whole audit log: the checkpoints
// published so far, then every record from index 0. A checkpoint covers
// only records already in the log, so the records fetched after it cover
// every checkpoint fetched (checkpoints published meanwhile are left for
// the next export).
func (c *AuditClient) ExportAudit(ctx context.Context) (AuditEntries, error) {
	e := AuditEntries{Tenant: c.Tenant, Records: [][]byte{}, Checkpoints: [][]byte{}}
	if _, err := c.pages(ctx, wire.VerbAuditCheckpoints, 0, func(b []byte) error {
		e.Checkpoints = append(e.Checkpoints, b)
		return nil
	}); err != nil {
		return AuditEntries{}, err
	}
	if _, err := c.pages(ctx, wire.VerbAuditExport, 0, func(b []byte) error {
		e.Records = append(e.Records, b)
		return nil
	}); err != nil {
		return AuditEntries{}, err
	}
	return e, nil
}

// ExportEvents writes the tenant's events as events.jsonl to w, from stream
// sequence from (0 = the start). It returns the number of lines and the
// sequence to continue from later.
func (c *AuditClient) ExportEvents(ctx context.Context, w io.Writer, from uint64) (lines int, next uint64, err error) {
	next, err = c.pages(ctx, wire.VerbEventsExport, from, func(b []byte) error {
		lines++
		if _, err := w.Write(b); err != nil {
			return err
		}
		_, err := w.Write([]byte{'\n'})
		return err
	})
	return lines, next, err
}

// File fetches a one-file verb: audit-keys (keys.json), exposure-view
// (view.json) or audit-prove with a ProveRequest (proof.json).
func (c *AuditClient) File(ctx context.Context, verb string, req any) ([]byte, error) {
	if req == nil {
		req = struct{}{}
	}
	r, err := c.Call(ctx, verb, req)
	if err != nil {
		return nil, err
	}
	return r.File, nil
}
