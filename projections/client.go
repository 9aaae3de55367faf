package projections

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/contextos/ledger/audit"
	"github.com/contextos/ledger/verifier"
	"github.com/contextos/ledger/wire"
	"github.com/nats-io/nats.go"
)

// OpsError is a refused ops reply.
type OpsError struct {
	Verb   string
	Code   wire.Code
	Reason string
}

// Error implements error.
func (e *OpsError) Error() string { return fmt.Sprintf("%s refused: %s: %s", e.Verb, e.Code, e.Reason) }

// OpsClient calls the verbs of Ops as an operator and pages through
// exports. The connection's inbox prefix must be the operator's own (the
// server lets a principal subscribe to nothing else).
type OpsClient struct {
	NC       *nats.Conn
	Tenant   string
	Operator string
	Timeout  time.Duration // per request; default 30s
	PageSize int           // items asked per page; default DefaultPageLimit
	// Progress, when set, is called after each page with the verb and the
	// number of items received so far.
	Progress func(verb string, items int)
}

// Call sends one verb and returns its reply; a refusal is an *OpsError.
func (c *OpsClient) Call(ctx context.Context, verb string, req any) (wire.OpReply, error) {
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
		return wire.OpReply{}, &OpsError{Verb: verb, Code: r.Code, Reason: r.Reason}
	}
	return r, nil
}

func (c *OpsClient) pages(ctx context.Context, verb string, from uint64, fn func([]byte) error) (uint64, error) {
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

// ExportAudit fetches the tenant's whole audit log: every record from index
// 0 and the checkpoints whose size the fetched records cover (checkpoints
// published meanwhile are left for the next export).
func (c *OpsClient) ExportAudit(ctx context.Context) (verifier.Entries, error) {
	e := verifier.Entries{Tenant: c.Tenant, Records: [][]byte{}, Checkpoints: [][]byte{}}
	if _, err := c.pages(ctx, wire.VerbAuditExport, 0, func(b []byte) error {
		e.Records = append(e.Records, b)
		return nil
	}); err != nil {
		return verifier.Entries{}, err
	}
	if _, err := c.pages(ctx, wire.VerbAuditCheckpoints, 0, func(b []byte) error {
		cp, err := audit.ReadCheckpoint(b)
		if err != nil {
			return fmt.Errorf("%s: %w", wire.VerbAuditCheckpoints, err)
		}
		if cp.Size <= int64(len(e.Records)) {
			e.Checkpoints = append(e.Checkpoints, b)
		}
		return nil
	}); err != nil {
		return verifier.Entries{}, err
	}
	return e, nil
}

// ExportEvents writes the tenant's events as events.jsonl to w, from stream
// sequence from (0 = the start). It returns the number of lines and the
// sequence to continue from later.
func (c *OpsClient) ExportEvents(ctx context.Context, w io.Writer, from uint64) (lines int, next uint64, err error) {
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
func (c *OpsClient) File(ctx context.Context, verb string, req any) ([]byte, error) {
	if req == nil {
		req = struct{}{}
	}
	r, err := c.Call(ctx, verb, req)
	if err != nil {
		return nil, err
	}
	return r.File, nil
}
