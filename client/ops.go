package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/contextos/ledger/wire"
	"github.com/nats-io/nats.go"
)

// Op sends an operator verb with req as its body and decodes the reply
// into out (any struct or map; nil to ignore). A refusal is a Refused. An
// operator verb is never resent: on Unreachable its outcome is unknown.
func (c *Client) Op(ctx context.Context, verb string, req, out any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("%s: %w", verb, err)
	}
	raw, err := c.OpRaw(ctx, verb, body)
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s: bad reply: %w", verb, err)
	}
	return nil
}

// OpRaw sends an operator verb's body as is and returns the reply's bytes
// once it says ok.
func (c *Client) OpRaw(ctx context.Context, verb string, body []byte) (json.RawMessage, error) {
	m, err := c.request(ctx, wire.OpSubject(c.tenant, verb, c.principal), body, c.timeout)
	if err != nil {
		var r Refused
		if errors.As(err, &r) {
			return nil, r
		}
		if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrConnectionClosed) {
			return nil, Unreachable{Op: verb, Err: err}
		}
		return nil, fmt.Errorf("%s: %w", verb, err)
	}
	if err := readOpReply(verb, m.Data); err != nil {
		var r Refused
		if errors.As(err, &r) {
			return m.Data, r
		}
		return nil, err
	}
	return m.Data, nil
}

// readOpReply checks an operator reply: nil once it says ok, a Refused
// with its code when it does not.
func readOpReply(verb string, data []byte) error {
	var h wire.OpReply
	if err := json.Unmarshal(data, &h); err != nil {
		return fmt.Errorf("%s: bad reply: %w", verb, err)
	}
	if !h.OK {
		return Refused{Code: h.Code, Reason: h.Reason}
	}
	return nil
}

// opData sends a verb whose reply carries a data object and decodes it.
func (c *Client) opData(ctx context.Context, verb string, req, data any) error {
	var r struct {
		Data json.RawMessage `json:"data"`
	}
	if err := c.Op(ctx, verb, req, &r); err != nil {
		return err
	}
	if err := json.Unmarshal(r.Data, data); err != nil {
		return fmt.Errorf("%s: bad reply data: %w", verb, err)
	}
	return nil
}

// Exposure returns the balances of the tenant's resources, optionally of
// one guarantee or resource, paging through to the end (Collect, at most
// MaxListRows rows).
func (c *Client) Exposure(ctx context.Context, guaranteeID, resource string) ([]ExposureRow, error) {
	return Collect(ctx, Page{}, 0, func(ctx context.Context, p Page) ([]ExposureRow, string, error) {
		return c.ExposurePage(ctx, OpRequest{GuaranteeID: guaranteeID, Resource: resource, Limit: p.Limit, Cursor: p.Cursor})
	})
}

// ExposurePage returns one page of balances: req names the filters
// (guarantee_id, resource or resource_digest) and the page (limit,
// cursor). next is the cursor of the next page, "" after the last.
func (c *Client) ExposurePage(ctx context.Context, req OpRequest) (rows []ExposureRow, next string, err error) {
	var r wire.OpReply
	err = c.Op(ctx, "exposure", req, &r)
	return r.Exposure, r.NextCursor, err
}

// Attempts returns the open attempts with the next safe step of each,
// paging through to the end (Collect, at most MaxListRows rows).
func (c *Client) Attempts(ctx context.Context) ([]AttemptRow, error) {
	return Collect(ctx, Page{}, 0, c.AttemptsPage)
}

// AttemptsPage returns one page of the open attempts and the cursor of the
// next ("" after the last).
func (c *Client) AttemptsPage(ctx context.Context, p Page) (rows []AttemptRow, next string, err error) {
	var r wire.OpReply
	err = c.Op(ctx, "attempts", OpRequest{Limit: p.Limit, Cursor: p.Cursor}, &r)
	return r.Attempts, r.NextCursor, err
}

// Reconcile asks the provider about one attempt (or, with attemptID
// empty, every unresolved attempt of the tenant) and records the answers.
func (c *Client) Reconcile(ctx context.Context, attemptID string) ([]SettleRow, error) {
	var r wire.OpReply
	err := c.Op(ctx, "reconcile", OpRequest{AttemptID: attemptID, All: attemptID == ""}, &r)
	return r.Settled, err
}

// CloseAttempt closes an attempt whose dispatch never started, or
// tombstones an unknown one on the named guarantee and resource.
func (c *Client) CloseAttempt(ctx context.Context, attemptID, guaranteeID, resource, reason string) (wire.OpReply, error) {
	var r wire.OpReply
	err := c.Op(ctx, "close-attempt", OpRequest{AttemptID: attemptID, GuaranteeID: guaranteeID, Resource: resource, Reason: reason}, &r)
	return r, err
}

// AssertAbsence releases an observed attempt on the operator's signed
// assertion, citing an artifact.
func (c *Client) AssertAbsence(ctx context.Context, attemptID, artifactRef string) ([]SettleRow, error) {
	var r wire.OpReply
	err := c.Op(ctx, "assert-absence", OpRequest{AttemptID: attemptID, ArtifactRef: artifactRef}, &r)
	return r.Settled, err
}

// Confirm confirms another operator's request that the tenant's two-person
// rule held (a Refused with CodeSecondOperatorRequired names its id), and
// returns the reply of the action it carries out.
func (c *Client) Confirm(ctx context.Context, requestID string) (wire.OpReply, error) {
	var r wire.OpReply
	err := c.Op(ctx, wire.VerbConfirm, wire.ConfirmRequest{RequestID: requestID}, &r)
	return r, err
}

// KillSwitch reads the tenant's kill switch (engage nil) or sets it, and
// returns its state.
func (c *Client) KillSwitch(ctx context.Context, engage *bool, reason string) (bool, error) {
	var r wire.OpReply
	if err := c.Op(ctx, "kill-switch", OpRequest{Engaged: engage, Reason: reason}, &r); err != nil {
		return false, err
	}
	if r.KillSwitch == nil {
		return false, errors.New("kill-switch: reply without its state")
	}
	return *r.KillSwitch, nil
}

// AdmitRun gives a run its budget.
func (c *Client) AdmitRun(ctx context.Context, req AdmitRunRequest) (Run, error) {
	var d struct {
		Run Run `json:"run"`
	}
	err := c.opData(ctx, "admit-run", req, &d)
	return d.Run, err
}

// Run reads a run's budget.
func (c *Client) Run(ctx context.Context, runID string) (Run, error) {
	var d struct {
		Run Run `json:"run"`
	}
	err := c.opData(ctx, "run", wire.RunRequest{RunID: runID}, &d)
	return d.Run, err
}

// Grant grants a principal a capability.
func (c *Client) Grant(ctx context.Context, principal, capabilityID, reason string) (AuthorityChange, error) {
	var d AuthorityChange
	err := c.opData(ctx, "grant", GrantRequest{Principal: principal, CapabilityID: capabilityID, Reason: reason}, &d)
	return d, err
}

// Revoke revokes a principal's capability.
func (c *Client) Revoke(ctx context.Context, principal, capabilityID, reason string) (AuthorityChange, error) {
	var d AuthorityChange
	err := c.opData(ctx, "revoke", GrantRequest{Principal: principal, CapabilityID: capabilityID, Reason: reason}, &d)
	return d, err
}

// Approve approves one action digest (single use, until it expires).
func (c *Client) Approve(ctx context.Context, req ApproveRequest) (Approval, error) {
	var d Approval
	err := c.opData(ctx, "approve", req, &d)
	return d, err
}

// Deny answers a pending approval request no, or withdraws an unused
// approval, with a reason.
func (c *Client) Deny(ctx context.Context, req DenyRequest) (Denial, error) {
	var d Denial
	err := c.opData(ctx, "deny", req, &d)
	return d, err
}

// Evidence publishes one evidence candidate or one conflict marker (JSON
// in the kernel's form) and returns the reply's data.
func (c *Client) Evidence(ctx context.Context, req EvidenceRequest) (map[string]any, error) {
	var d map[string]any
	err := c.opData(ctx, "evidence", req, &d)
	return d, err
}

// Approvals lists the proposals waiting for an approval (the read model's
// approvals verb), each as the daemon describes it, oldest first, paging
// through to the end (Collect, at most MaxListRows rows).
func (c *Client) Approvals(ctx context.Context) ([]map[string]any, error) {
	return Collect(ctx, Page{}, 0, c.ApprovalsPage)
}

// ApprovalsPage returns one page of the pending approvals and the cursor
// of the next ("" after the last).
func (c *Client) ApprovalsPage(ctx context.Context, p Page) (rows []map[string]any, next string, err error) {
	var r struct {
		Approvals  []map[string]any `json:"approvals"`
		NextCursor string           `json:"next_cursor"`
	}
	err = c.Op(ctx, "approvals", wire.ListRequest(p), &r)
	return r.Approvals, r.NextCursor, err
}

// Incidents lists the tenant's incidents (the read model's incidents
// verb), oldest first, paging through to the end (Collect, at most
// MaxListRows rows).
func (c *Client) Incidents(ctx context.Context) ([]map[string]any, error) {
	return Collect(ctx, Page{}, 0, c.IncidentsPage)
}

// IncidentsPage returns one page of the incidents and the cursor of the
// next ("" after the last).
func (c *Client) IncidentsPage(ctx context.Context, p Page) (rows []map[string]any, next string, err error) {
	var r struct {
		Incidents  []map[string]any `json:"incidents"`
		NextCursor string           `json:"next_cursor"`
	}
	err = c.Op(ctx, "incidents", wire.ListRequest(p), &r)
	return r.Incidents, r.NextCursor, err
}

// Audit returns the client of the audit verbs (audit-export,
// audit-checkpoints, audit-keys, audit-prove, audit-prove-consistency,
// events-export, exposure-view) on this connection: it pages the exports
// and decodes their files.
func (c *Client) Audit() *AuditClient {
	return &AuditClient{NC: c.nc, Tenant: c.tenant, Operator: c.principal, Timeout: c.timeout}
}

// SetLimit records a new version of a guarantee: its default limit, one
// resource's limit (req.Resource), or its mode; req.Reason is required. It
// returns the latest versions (the last page of the history), the new one
// last.
func (c *Client) SetLimit(ctx context.Context, req SetLimitRequest) ([]VersionRow, error) {
	var r wire.OpReply
	err := c.Op(ctx, "guarantee-set-limit", req, &r)
	return r.Versions, err
}

// GuaranteeHistory returns every version of a guarantee, its pin first,
// paging through to the end (Collect, at most MaxListRows rows).
func (c *Client) GuaranteeHistory(ctx context.Context, guaranteeID string) ([]VersionRow, error) {
	return Collect(ctx, Page{}, 0, func(ctx context.Context, p Page) ([]VersionRow, string, error) {
		return c.GuaranteeHistoryPage(ctx, guaranteeID, p)
	})
}

// GuaranteeHistoryPage returns one page of a guarantee's versions and the
// cursor of the next ("" after the last).
func (c *Client) GuaranteeHistoryPage(ctx context.Context, guaranteeID string, p Page) (rows []VersionRow, next string, err error) {
	var r wire.OpReply
	err = c.Op(ctx, "guarantee-history", wire.GuaranteeHistoryRequest{GuaranteeID: guaranteeID, Limit: p.Limit, Cursor: p.Cursor}, &r)
	return r.Versions, r.NextCursor, err
}

// DecisionsPage returns one page of the tenant's decision records that
// match every filter f sets (its Limit and Cursor are p's), oldest first,
// and the cursor of the next ("" after the last).
func (c *Client) DecisionsPage(ctx context.Context, f wire.DecisionsRequest, p Page) (rows []map[string]any, next string, err error) {
	var r struct {
		Decisions  []map[string]any `json:"decisions"`
		NextCursor string           `json:"next_cursor"`
	}
	f.Limit, f.Cursor = p.Limit, p.Cursor
	err = c.Op(ctx, wire.VerbDecisions, f, &r)
	return r.Decisions, r.NextCursor, err
}

// PublishPack publishes a context pack version (the pack's JSON).
func (c *Client) PublishPack(ctx context.Context, pack json.RawMessage) (Packs, bool, error) {
	var d struct {
		Packs    Packs `json:"packs"`
		Recorded bool  `json:"recorded"`
	}
	err := c.opData(ctx, wire.VerbPackPublish, wire.PackPublishRequest{Pack: pack}, &d)
	return d.Packs, d.Recorded, err
}

// PromotePack promotes a published version through the release gate.
func (c *Client) PromotePack(ctx context.Context, req PackPromoteRequest) (Packs, bool, error) {
	var d struct {
		Packs    Packs `json:"packs"`
		Recorded bool  `json:"recorded"`
	}
	err := c.opData(ctx, wire.VerbPackPromote, req, &d)
	return d.Packs, d.Recorded, err
}

// RollbackPack re-promotes the version promoted before the current one.
func (c *Client) RollbackPack(ctx context.Context) (Packs, error) {
	var d struct {
		Packs Packs `json:"packs"`
	}
	err := c.opData(ctx, wire.VerbPackRollback, struct{}{}, &d)
	return d.Packs, err
}

// PackVersions lists the tenant's pack versions; with version ("id@version"
// or digest) it also returns that version's pack JSON.
func (c *Client) PackVersions(ctx context.Context, version string) (Packs, json.RawMessage, error) {
	var d struct {
		Packs Packs           `json:"packs"`
		Pack  json.RawMessage `json:"pack"`
	}
	err := c.opData(ctx, wire.VerbPacks, wire.PacksRequest{Version: version}, &d)
	return d.Packs, d.Pack, err
}
