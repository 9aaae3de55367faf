package wire

// Retry is the retry class of a code: what a client may do after a
// refusal that carries it. Persisted and documented names are the string
// values.
type Retry string

// Retry classes.
const (
	// RetryNever: the same request is refused again; change it.
	RetryNever Retry = "never"
	// RetrySame: the outcome is unknown; resend the same request (same run
	// and operation key) to learn it.
	RetrySame Retry = "same"
	// RetryLater: nothing was stored; resend later, with backoff.
	RetryLater Retry = "later"
	// RetryOperator: refused until an operator acts (releases the kill
	// switch, resets a breaker, resolves an incident, approves).
	RetryOperator Retry = "operator"
)

// retries is the retry class of every code of the catalog (TestRetryClasses
// holds it to Codes).
var retries = map[Code]Retry{
	CodeRequestMalformed:           RetryNever,
	CodeCapabilityNotSurfaced:      RetryNever,
	CodeAuthorityDenied:            RetryOperator,
	CodePolicyDenied:               RetryNever,
	CodeApprovalRequired:           RetryOperator,
	CodeApprovalMismatch:           RetryNever,
	CodeApprovalRedeemed:           RetryNever,
	CodeApprovalExpired:            RetryOperator,
	CodeApprovalDenied:             RetryNever,
	CodeEvidenceInsufficient:       RetryNever,
	CodeRunBudgetExhausted:         RetryNever,
	CodeExecutorFenced:             RetryNever,
	CodeKillSwitchEngaged:          RetryOperator,
	CodeResourceInvalid:            RetryNever,
	CodeAmountInvalid:              RetryNever,
	CodeExceeded:                   RetryNever,
	CodeImportConflict:             RetryNever,
	CodeImportsSaturated:           RetryNever,
	CodeDefinitionMismatch:         RetryOperator,
	CodeDefinitionInvalid:          RetryOperator,
	CodeContention:                 RetryLater,
	CodeReceiptsSaturated:          RetryLater,
	CodeAttemptClosed:              RetryNever,
	CodeAttemptKnown:               RetryNever,
	CodeAttemptUnknown:             RetryNever,
	CodeDispatchActive:             RetryOperator,
	CodeUnresolvedAttempt:          RetryOperator,
	CodeNotStarted:                 RetryNever,
	CodeAbsenceUnproven:            RetryOperator,
	CodeObservationContradictsSeal: RetryNever,
	CodeOperationConflict:          RetryNever,
	CodeContextInvalid:             RetryNever,
	CodeRunAlreadyAdmitted:         RetryNever,
	CodeEvidenceRecordConflict:     RetryNever,
	CodeAuditNotFound:              RetryNever,
	CodeAuditNotCheckpointed:       RetryLater,
	CodeProjectionUnavailable:      RetryLater,
	CodeLedgerUnavailable:          RetrySame,
	CodeOverloaded:                 RetryLater,
	CodeBreakerOpen:                RetryOperator,
	CodeStoredEventRefused:         RetryNever,
	CodeRateLimited:                RetryLater,
	CodeLogIntegrityFailed:         RetryOperator,
	CodeLogUnwitnessed:             RetryLater,
	CodeReplyTooLarge:              RetrySame,
	CodeDomainMismatch:             RetryOperator,
	CodeOperatorScopeDenied:        RetryOperator,
	CodeSecondOperatorRequired:     RetryOperator,
	CodePackVersionConflict:        RetryNever,
	CodePackUnknown:                RetryOperator,
	CodePackVersionsExhausted:      RetryOperator,
	CodeReleaseGateFailed:          RetryOperator,
	CodeContextTooLarge:            RetryNever,
	CodeGuardrailRefused:           RetryOperator,
	CodeRequestExpired:             RetryNever,
}

// RetryOf returns the retry class of a code of the catalog ("" for a code
// it does not hold).
func RetryOf(c Code) Retry { return retries[c] }
