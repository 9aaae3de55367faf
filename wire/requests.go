package wire

import "encoding/json"

// GrantRequest is the body of the grant and revoke verbs.
type GrantRequest struct {
	Principal    string `json:"principal"`
	CapabilityID string `json:"capability_id"`
	Reason       string `json:"reason,omitempty"`
}

// ApproveRequest is the body of the approve verb: the exact action digest
// (from an approval_required reply), the capability's risk and how long the
// approval stays redeemable (a Go duration, at most 24h).
type ApproveRequest struct {
	ActionDigest string `json:"action_digest"`
	Risk         string `json:"risk"`
	ExpiresIn    string `json:"expires_in"`
	Reason       string `json:"reason,omitempty"`
}

// DenyRequest is the body of the deny verb: approve's, with a reason that
// is required. Without approval_id it answers a pending approval request
// (the action digest of an approval_required reply, at the capability's
// risk) no, under a new approval id; with one it withdraws that approval,
// granted and not yet redeemed.
type DenyRequest struct {
	ApprovalID   string `json:"approval_id,omitempty"`
	ActionDigest string `json:"action_digest,omitempty"`
	Risk         string `json:"risk,omitempty"`
	Reason       string `json:"reason"`
}

// AdmitRunRequest is the body of the admit-run verb.
type AdmitRunRequest struct {
	RunID       string `json:"run_id"`
	ParentRunID string `json:"parent_run_id,omitempty"`
	Principal   string `json:"principal"`
	Calls       int64  `json:"calls"`
	Amount      int64  `json:"amount"`
	// Pack is the context pack version the run pins: "id@version" or its
	// digest. Empty: the promoted version, if any.
	Pack string `json:"pack,omitempty"`
}

// PackPublishRequest is the body of pack-publish: a ContextPack.
type PackPublishRequest struct {
	Pack json.RawMessage `json:"pack"`
}

// PackPromoteRequest is the body of pack-promote: the version ("id@version"
// or digest) and the release evaluation of it and of the promoted version
// on one held-out case set (kernel.ReleaseEval; docs/context.md).
type PackPromoteRequest struct {
	Version string          `json:"version"`
	Eval    json.RawMessage `json:"eval,omitempty"`
}

// PacksRequest is the optional body of packs: with Version ("id@version"
// or digest), the reply's data also carries that version's pack.
type PacksRequest struct {
	Version string `json:"version,omitempty"`
}

// Packs is the data of the packs verb: the published versions, oldest
// first, and the promoted one.
type Packs struct {
	Versions []PackRef `json:"versions"`
	Promoted *PackRef  `json:"promoted,omitempty"`
}

// RunRequest is the body of the run verb (read a run's budget).
type RunRequest struct {
	RunID string `json:"run_id"`
}

// EvidenceRequest is the body of the evidence verb: exactly one evidence
// candidate or one conflict marker (or its resolution), in the kernel's
// JSON form.
type EvidenceRequest struct {
	Candidate json.RawMessage `json:"candidate,omitempty"`
	Marker    json.RawMessage `json:"marker,omitempty"`
}

// SetLimitRequest is the body of guarantee-set-limit: a new version of a
// guarantee's default limit, of one resource's limit, or of its mode.
type SetLimitRequest struct {
	GuaranteeID string `json:"guarantee_id"`
	Resource    string `json:"resource,omitempty"`
	Limit       int64  `json:"limit,omitempty"`
	Mode        string `json:"mode,omitempty"`
	Reason      string `json:"reason"`
}

// GuaranteeHistoryRequest is the body of guarantee-history; Limit and
// Cursor page it (paging.go).
type GuaranteeHistoryRequest struct {
	GuaranteeID string `json:"guarantee_id"`
	Limit       int    `json:"limit,omitempty"`
	Cursor      string `json:"cursor,omitempty"`
}

// ListRequest is the body of approvals and incidents.
type ListRequest struct {
	Limit  int    `json:"limit,omitempty"`
	Cursor string `json:"cursor,omitempty"`
}

// IntegrityRequest is the body of the integrity-resolve verb.
type IntegrityRequest struct {
	Resolution  string `json:"resolution"`   // restored or rotated (kernel.ResolutionRestored, kernel.ResolutionRotated)
	ArtifactRef string `json:"artifact_ref"` // the ticket or record behind it
	Statement   string `json:"statement"`    // what happened, signed into the log
}

// BreakerRequest is the body of the breaker verb: empty to list the
// tenant's breakers, or a capability with reset set to close its breaker.
type BreakerRequest struct {
	CapabilityID string `json:"capability_id,omitempty"`
	Reset        bool   `json:"reset,omitempty"`
	Reason       string `json:"reason,omitempty"`
}

// ExportRequest is the body of a paged export verb (audit-export,
// audit-checkpoints, events-export). From is a record index (audit-export)
// or a stream sequence (events-export, audit-checkpoints; 0 = the start);
// Limit caps the items per page (0 = DefaultExportLimit, at most
// MaxExportLimit). A reply is also cut before it would exceed the reply
// budget.
type ExportRequest struct {
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

// ConfirmRequest is the body of confirm: the id of a pending request that
// the tenant's two-person rule held for a second operator (the data
// "request_id" of the second_operator_required reply).
type ConfirmRequest struct {
	RequestID string `json:"request_id"`
}
