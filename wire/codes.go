package wire

// Code is a stable error code of the wire contract. Codes appear in decision
// replies, operator replies, refusal events and the audit log; once published
// a code never changes meaning. docs/errors.md documents each; the clients'
// copies are generated from Codes (go generate ./wire).
type Code string

// The catalog of stable codes. Add new codes here, to Codes and to the retry
// classes (retry.go), then run go generate ./wire; never reuse one.
const (
	CodeRequestMalformed           Code = "request_malformed"
	CodeCapabilityNotSurfaced      Code = "capability_not_surfaced"
	CodeAuthorityDenied            Code = "authority_denied"
	CodePolicyDenied               Code = "policy_denied"
	CodeApprovalRequired           Code = "approval_required"
	CodeApprovalMismatch           Code = "approval_mismatch"
	CodeApprovalRedeemed           Code = "approval_redeemed"
	CodeApprovalExpired            Code = "approval_expired"
	CodeApprovalDenied             Code = "approval_denied"
	CodeEvidenceInsufficient       Code = "evidence_insufficient"
	CodeRunBudgetExhausted         Code = "run_budget_exhausted"
	CodeExecutorFenced             Code = "executor_fenced"
	CodeKillSwitchEngaged          Code = "kill_switch_engaged"
	CodeResourceInvalid            Code = "shared_guarantee_resource_invalid"
	CodeAmountInvalid              Code = "shared_guarantee_amount_invalid"
	CodeExceeded                   Code = "shared_guarantee_exceeded"
	CodeDefinitionMismatch         Code = "shared_guarantee_definition_mismatch"
	CodeDefinitionInvalid          Code = "shared_guarantee_definition_invalid"
	CodeContention                 Code = "shared_guarantee_contention"
	CodeReceiptsSaturated          Code = "shared_guarantee_receipts_saturated"
	CodeAttemptClosed              Code = "shared_guarantee_attempt_closed"
	CodeAttemptKnown               Code = "shared_guarantee_attempt_known"
	CodeAttemptUnknown             Code = "shared_guarantee_attempt_unknown"
	CodeDispatchActive             Code = "shared_guarantee_dispatch_active"
	CodeUnresolvedAttempt          Code = "shared_guarantee_unresolved_attempt"
	CodeNotStarted                 Code = "shared_guarantee_not_started"
	CodeAbsenceUnproven            Code = "shared_guarantee_absence_unproven"
	CodeObservationContradictsSeal Code = "observation_contradicts_seal"
	CodeOperationConflict          Code = "operation_key_conflict"
	CodeContextInvalid             Code = "context_invalid"
	CodeRunAlreadyAdmitted         Code = "run_already_admitted"
	CodeEvidenceRecordConflict     Code = "evidence_record_conflict"
	CodeAuditNotFound              Code = "audit_not_found"
	CodeAuditNotCheckpointed       Code = "audit_not_checkpointed"
	CodeProjectionUnavailable      Code = "projection_unavailable"
	CodeLedgerUnavailable          Code = "ledger_unavailable"
	CodeOverloaded                 Code = "overloaded"
	CodeBreakerOpen                Code = "circuit_breaker_open"
	CodeStoredEventRefused         Code = "stored_event_refused"
	CodeRateLimited                Code = "rate_limited"
	CodeReplyTooLarge              Code = "reply_too_large"
	// CodeDomainMismatch: a proposal does not hold every guarantee pinned
	// in its tenant's stream over its capability (the deciding replica is
	// configured without it), or a configuration leaves such a guarantee
	// out. Not retryable by the agent: an operator reconfigures the replica.
	CodeDomainMismatch     Code = "enforcement_domain_mismatch"
	CodeLogIntegrityFailed Code = "log_integrity_failed"
	CodeLogUnwitnessed     Code = "log_unwitnessed"
	// CodeOperatorScopeDenied: the operator's configured scopes do not
	// include the one the verb needs (read, approve, recover, resolve,
	// limits, kill_switch). Recorded as a signed operator.refused event.
	CodeOperatorScopeDenied Code = "operator_scope_denied"
	// CodeSecondOperatorRequired: the action needs a second operator (the
	// tenant's two-person rule): the reply to the first operator names the
	// pending request, which another operator with the same scope
	// confirms; the requester confirming it is refused with this code too.
	CodeSecondOperatorRequired Code = "second_operator_required"
	// CodePackVersionConflict: a context pack version is published again
	// with other content (versions are immutable; publish a new version).
	CodePackVersionConflict Code = "pack_version_conflict"
	// CodePackUnknown: the pack version named (id@version or digest) was
	// never published, or a rollback has no earlier promotion to restore.
	CodePackUnknown Code = "pack_unknown"
	// CodePackVersionsExhausted: the tenant's catalog of pack versions is
	// full (kernel.MaxPackVersions).
	CodePackVersionsExhausted Code = "pack_versions_exhausted"
	// CodeReleaseGateFailed: a promotion's evaluation does not pass the
	// release gate (more false closures than the promoted version, false
	// abstentions beyond the bound, or figures of other versions or cases).
	CodeReleaseGateFailed Code = "release_gate_failed"
	// CodeImportConflict: an import of prior exposure names a reference
	// the resource ledger already imported with another amount. The
	// recorded import stands; correct the file.
	CodeImportConflict Code = "shared_guarantee_import_conflict"
	// CodeImportsSaturated: the resource ledger already records the
	// maximum number of imports; import one total for the resource.
	CodeImportsSaturated Code = "shared_guarantee_imports_saturated"
	// CodeContextTooLarge: a compiled context is larger than
	// MaxContextBytes; it is never cut short. Nothing was stored.
	CodeContextTooLarge Code = "context_too_large"
	// CodeGuardrailRefused: a guardrail (a fleet rule an operator or tower
	// published on the tenant's control subject: a capability disabled, a
	// cap per proposal) refuses the proposal, and no waiver in force
	// covers its run or resource.
	CodeGuardrailRefused Code = "guardrail_refused"
	// CodeRequestExpired: a two-person request was confirmed after its
	// time to live (the tenant's request_ttl); nothing is carried out.
	CodeRequestExpired Code = "request_expired"
)

// Codes lists every code of the catalog, in declaration order.
var Codes = []Code{
	CodeRequestMalformed, CodeCapabilityNotSurfaced, CodeAuthorityDenied, CodePolicyDenied,
	CodeApprovalRequired, CodeApprovalMismatch, CodeApprovalRedeemed, CodeApprovalExpired,
	CodeEvidenceInsufficient, CodeRunBudgetExhausted, CodeExecutorFenced, CodeKillSwitchEngaged,
	CodeResourceInvalid, CodeAmountInvalid, CodeExceeded, CodeDefinitionMismatch,
	CodeDefinitionInvalid, CodeContention, CodeReceiptsSaturated, CodeAttemptClosed,
	CodeAttemptKnown, CodeAttemptUnknown, CodeDispatchActive, CodeUnresolvedAttempt,
	CodeNotStarted, CodeAbsenceUnproven, CodeObservationContradictsSeal, CodeOperationConflict,
	CodeContextInvalid, CodeRunAlreadyAdmitted, CodeEvidenceRecordConflict,
	CodeAuditNotFound, CodeAuditNotCheckpointed, CodeProjectionUnavailable, CodeLedgerUnavailable, CodeOverloaded,
	CodeBreakerOpen,
	CodeApprovalDenied,
	CodeStoredEventRefused, CodeRateLimited,
	CodeReplyTooLarge,
	CodeDomainMismatch,
	CodeLogIntegrityFailed, CodeLogUnwitnessed,
	CodeOperatorScopeDenied, CodeSecondOperatorRequired,
	CodePackVersionConflict, CodePackUnknown, CodePackVersionsExhausted, CodeReleaseGateFailed,
	CodeImportConflict, CodeImportsSaturated,
	CodeContextTooLarge,
	CodeGuardrailRefused, CodeRequestExpired,
}
