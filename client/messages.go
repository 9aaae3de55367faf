package client

import "github.com/contextos/ledger/wire"

// Status is what a decision says about an operation.
type Status = wire.Status

// The statuses of a decision.
const (
	StatusRefused    = wire.StatusRefused
	StatusApplied    = wire.StatusApplied
	StatusNotApplied = wire.StatusNotApplied
	StatusPending    = wire.StatusPending
	StatusUnknown    = wire.StatusUnknown
)

// The wire messages are the wire package's own structs (one struct per
// message).
type (
	// Proposal is the body of ctx.v1.<tenant>.<principal>.propose.
	Proposal = wire.Proposal
	// Decision is the reply to a proposal.
	Decision = wire.Reply
	// GuaranteeRow is one guarantee's balances in a decision.
	GuaranteeRow = wire.GuaranteeRow
	// ExposureRow is one resource's balances (the exposure verb).
	ExposureRow = wire.ExposureRow
	// AttemptRow is an open attempt with its next safe step (the attempts verb).
	AttemptRow = wire.AttemptRow
	// SettleRow is what an operator action did to one attempt.
	SettleRow = wire.SettleRow
	// Run is a run's budget (the run and admit-run verbs).
	Run = wire.Run
	// SetLimitRequest is the body of guarantee-set-limit.
	SetLimitRequest = wire.SetLimitRequest
	// VersionRow is one version of a guarantee (guarantee-set-limit, guarantee-history).
	VersionRow = wire.VersionRow
)

// The request bodies of the operator verbs (docs/wire.md).
type (
	// OpRequest is the body of exposure, attempts, reconcile,
	// close-attempt, assert-absence and kill-switch.
	OpRequest = wire.OpRequest
	// GrantRequest is the body of grant and revoke.
	GrantRequest = wire.GrantRequest
	// ApproveRequest is the body of approve.
	ApproveRequest = wire.ApproveRequest
	// AdmitRunRequest is the body of admit-run.
	AdmitRunRequest = wire.AdmitRunRequest
	// PackRef names a published context pack version.
	PackRef = wire.PackRef
	// Packs lists a tenant's pack versions and the promoted one.
	Packs = wire.Packs
	// PackPromoteRequest is the body of pack-promote.
	PackPromoteRequest = wire.PackPromoteRequest
	// EvidenceRequest is the body of evidence.
	EvidenceRequest = wire.EvidenceRequest
	// DenyRequest is the body of deny: approve's, with a required reason.
	// Without ApprovalID it answers a pending approval request (the action
	// digest of an approval_required reply, at the capability's risk) no;
	// with one it withdraws that approval, granted and not yet redeemed.
	DenyRequest = wire.DenyRequest
)

// The data of operator replies.
type (
	// Denial is what deny recorded.
	Denial = wire.Denial
	// Approval is what approve grants: the id a proposal names in
	// approval_id.
	Approval = wire.Approval
	// AuthorityChange is what grant and revoke recorded (Recorded is false
	// when the authority already was so).
	AuthorityChange = wire.AuthorityChange
)
