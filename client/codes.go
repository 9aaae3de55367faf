package client

import "github.com/contextos/ledger/wire"

// Code is a stable refusal code of the catalog (wire.Codes, docs/errors.md).
type Code = wire.Code

// The codes of the catalog, re-exported so that a client compares against
// the very constants the daemon decides with (generated: go generate ./wire).
const (
	CodeRequestMalformed           = wire.CodeRequestMalformed
	CodeCapabilityNotSurfaced      = wire.CodeCapabilityNotSurfaced
	CodeAuthorityDenied            = wire.CodeAuthorityDenied
	CodePolicyDenied               = wire.CodePolicyDenied
	CodeApprovalRequired           = wire.CodeApprovalRequired
	CodeApprovalMismatch           = wire.CodeApprovalMismatch
	CodeApprovalRedeemed           = wire.CodeApprovalRedeemed
	CodeApprovalExpired            = wire.CodeApprovalExpired
	CodeEvidenceInsufficient       = wire.CodeEvidenceInsufficient
	CodeRunBudgetExhausted         = wire.CodeRunBudgetExhausted
	CodeExecutorFenced             = wire.CodeExecutorFenced
	CodeKillSwitchEngaged          = wire.CodeKillSwitchEngaged
	CodeResourceInvalid            = wire.CodeResourceInvalid
	CodeAmountInvalid              = wire.CodeAmountInvalid
	CodeExceeded                   = wire.CodeExceeded
	CodeDefinitionMismatch         = wire.CodeDefinitionMismatch
	CodeDefinitionInvalid          = wire.CodeDefinitionInvalid
	CodeContention                 = wire.CodeContention
	CodeReceiptsSaturated          = wire.CodeReceiptsSaturated
	CodeAttemptClosed              = wire.CodeAttemptClosed
	CodeAttemptKnown               = wire.CodeAttemptKnown
	CodeAttemptUnknown             = wire.CodeAttemptUnknown
	CodeDispatchActive             = wire.CodeDispatchActive
	CodeUnresolvedAttempt          = wire.CodeUnresolvedAttempt
	CodeNotStarted                 = wire.CodeNotStarted
	CodeAbsenceUnproven            = wire.CodeAbsenceUnproven
	CodeObservationContradictsSeal = wire.CodeObservationContradictsSeal
	CodeOperationConflict          = wire.CodeOperationConflict
	CodeContextInvalid             = wire.CodeContextInvalid
	CodeRunAlreadyAdmitted         = wire.CodeRunAlreadyAdmitted
	CodeEvidenceRecordConflict     = wire.CodeEvidenceRecordConflict
	CodeAuditNotFound              = wire.CodeAuditNotFound
	CodeAuditNotCheckpointed       = wire.CodeAuditNotCheckpointed
	CodeProjectionUnavailable      = wire.CodeProjectionUnavailable
	CodeLedgerUnavailable          = wire.CodeLedgerUnavailable
	CodeOverloaded                 = wire.CodeOverloaded
	CodeBreakerOpen                = wire.CodeBreakerOpen
	CodeApprovalDenied             = wire.CodeApprovalDenied
	CodeStoredEventRefused         = wire.CodeStoredEventRefused
	CodeRateLimited                = wire.CodeRateLimited
	CodeReplyTooLarge              = wire.CodeReplyTooLarge
	CodeDomainMismatch             = wire.CodeDomainMismatch
	CodeLogIntegrityFailed         = wire.CodeLogIntegrityFailed
	CodeLogUnwitnessed             = wire.CodeLogUnwitnessed
)
