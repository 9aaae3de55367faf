package client

import (
	"github.com/contextos/ledger/gateway"
	"github.com/contextos/ledger/kernel"
)

// Code is a stable refusal code of the kernel's catalog (docs/errors.md).
type Code = kernel.Code

// The codes of the kernel's catalog, re-exported so that a client compares
// against the very constants the daemon decides with.
const (
	CodeRequestMalformed           = kernel.CodeRequestMalformed
	CodeCapabilityNotSurfaced      = kernel.CodeCapabilityNotSurfaced
	CodeAuthorityDenied            = kernel.CodeAuthorityDenied
	CodePolicyDenied               = kernel.CodePolicyDenied
	CodeApprovalRequired           = kernel.CodeApprovalRequired
	CodeApprovalMismatch           = kernel.CodeApprovalMismatch
	CodeApprovalRedeemed           = kernel.CodeApprovalRedeemed
	CodeApprovalExpired            = kernel.CodeApprovalExpired
	CodeEvidenceInsufficient       = kernel.CodeEvidenceInsufficient
	CodeRunBudgetExhausted         = kernel.CodeRunBudgetExhausted
	CodeExecutorFenced             = kernel.CodeExecutorFenced
	CodeKillSwitchEngaged          = kernel.CodeKillSwitchEngaged
	CodeResourceInvalid            = kernel.CodeResourceInvalid
	CodeAmountInvalid              = kernel.CodeAmountInvalid
	CodeExceeded                   = kernel.CodeExceeded
	CodeDefinitionMismatch         = kernel.CodeDefinitionMismatch
	CodeDefinitionInvalid          = kernel.CodeDefinitionInvalid
	CodeContention                 = kernel.CodeContention
	CodeReceiptsSaturated          = kernel.CodeReceiptsSaturated
	CodeAttemptClosed              = kernel.CodeAttemptClosed
	CodeAttemptKnown               = kernel.CodeAttemptKnown
	CodeAttemptUnknown             = kernel.CodeAttemptUnknown
	CodeDispatchActive             = kernel.CodeDispatchActive
	CodeUnresolvedAttempt          = kernel.CodeUnresolvedAttempt
	CodeNotStarted                 = kernel.CodeNotStarted
	CodeAbsenceUnproven            = kernel.CodeAbsenceUnproven
	CodeObservationContradictsSeal = kernel.CodeObservationContradictsSeal
	CodeOperationConflict          = kernel.CodeOperationConflict
	CodeContextInvalid             = kernel.CodeContextInvalid
	CodeRunAlreadyAdmitted         = kernel.CodeRunAlreadyAdmitted
	CodeEvidenceRecordConflict     = kernel.CodeEvidenceRecordConflict
	CodeAuditNotFound              = kernel.CodeAuditNotFound
	CodeAuditNotCheckpointed       = kernel.CodeAuditNotCheckpointed
	CodeProjectionUnavailable      = kernel.CodeProjectionUnavailable
	CodeLedgerUnavailable          = kernel.CodeLedgerUnavailable
	CodeOverloaded                 = kernel.CodeOverloaded
	CodeBreakerOpen                = kernel.CodeBreakerOpen
	CodeApprovalDenied             = kernel.CodeApprovalDenied
	CodeStoredEventRefused         = kernel.CodeStoredEventRefused
	CodeRateLimited                = kernel.CodeRateLimited
	CodeReplyTooLarge              = kernel.CodeReplyTooLarge
	CodeDomainMismatch             = kernel.CodeDomainMismatch
	CodeLogIntegrityFailed         = kernel.CodeLogIntegrityFailed
	CodeLogUnwitnessed             = kernel.CodeLogUnwitnessed
)

// Status is what a decision says about an operation.
type Status = kernel.Status

// The statuses of a decision.
const (
	StatusRefused    = kernel.StatusRefused
	StatusApplied    = kernel.StatusApplied
	StatusNotApplied = kernel.StatusNotApplied
	StatusPending    = kernel.StatusPending
	StatusUnknown    = kernel.StatusUnknown
)

// The wire messages are the gateway's own structs (one struct per message).
type (
	// Proposal is the body of ctx.v1.<tenant>.<principal>.propose.
	Proposal = gateway.Proposal
	// Decision is the reply to a proposal.
	Decision = gateway.Reply
	// GuaranteeRow is one guarantee's balances in a decision.
	GuaranteeRow = gateway.GuaranteeRow
	// ExposureRow is one resource's balances (the exposure verb).
	ExposureRow = gateway.ExposureRow
	// AttemptRow is an open attempt with its next safe step (the attempts verb).
	AttemptRow = gateway.AttemptRow
	// SettleRow is what an operator action did to one attempt.
	SettleRow = gateway.SettleRow
	// Run is a run's budget (the run and admit-run verbs).
	Run = kernel.Run
	// SetLimitRequest is the body of guarantee-set-limit.
	SetLimitRequest = gateway.SetLimitRequest
	// VersionRow is one version of a guarantee (guarantee-set-limit, guarantee-history).
	VersionRow = gateway.VersionRow
)
