import { CODES, type Code, type Decision } from "./wire.js";

/** Every error of this package. */
export class LedgerError extends Error {}

/**
 * A refusal by contextosd (or by the NATS server) with its stable code.
 * `decision` is the full decision of a refused proposal (balances, action
 * digest, evidence gate). Test with `instanceof Refused` and `.code`, or with
 * the code's own class (`instanceof SharedGuaranteeExceeded`).
 */
export class Refused extends LedgerError {
  readonly code: Code | string;
  readonly reason: string;
  readonly decision?: Decision;
  constructor(code: Code | string, reason = "", decision?: Decision) {
    super(reason ? `refused ${code}: ${reason}` : `refused ${code}`);
    this.name = "Refused";
    this.code = code;
    this.reason = reason;
    this.decision = decision;
  }
}

/** contextosd could not be reached: no connection, no responder, or no reply in time. */
export class Unreachable extends LedgerError {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "Unreachable";
  }
}

/**
 * A proposal whose outcome was still unknown at the deadline. The operation
 * may exist: resend the same proposal (same run id and operation key) later,
 * never a new key.
 */
export class Unresolved extends LedgerError {
  constructor(message: string, readonly last: Decision | undefined, readonly resends: number) {
    super(message);
    this.name = "Unresolved";
  }
}

/** Refused request_malformed (docs/errors.md). */
export class RequestMalformed extends Refused {
  constructor(reason = "", decision?: Decision) {
    super("request_malformed", reason, decision);
    this.name = "RequestMalformed";
  }
}

/** Refused capability_not_surfaced (docs/errors.md). */
export class CapabilityNotSurfaced extends Refused {
  constructor(reason = "", decision?: Decision) {
    super("capability_not_surfaced", reason, decision);
    this.name = "CapabilityNotSurfaced";
  }
}

/** Refused authority_denied (docs/errors.md). */
export class AuthorityDenied extends Refused {
  constructor(reason = "", decision?: Decision) {
    super("authority_denied", reason, decision);
    this.name = "AuthorityDenied";
  }
}

/** Refused policy_denied (docs/errors.md). */
export class PolicyDenied extends Refused {
  constructor(reason = "", decision?: Decision) {
    super("policy_denied", reason, decision);
    this.name = "PolicyDenied";
  }
}

/** Refused approval_required (docs/errors.md). */
export class ApprovalRequired extends Refused {
  constructor(reason = "", decision?: Decision) {
    super("approval_required", reason, decision);
    this.name = "ApprovalRequired";
  }
}

/** Refused approval_mismatch (docs/errors.md). */
export class ApprovalMismatch extends Refused {
  constructor(reason = "", decision?: Decision) {
    super("approval_mismatch", reason, decision);
    this.name = "ApprovalMismatch";
  }
}

/** Refused approval_redeemed (docs/errors.md). */
export class ApprovalRedeemed extends Refused {
  constructor(reason = "", decision?: Decision) {
    super("approval_redeemed", reason, decision);
    this.name = "ApprovalRedeemed";
  }
}

/** Refused approval_expired (docs/errors.md). */
export class ApprovalExpired extends Refused {
  constructor(reason = "", decision?: Decision) {
    super("approval_expired", reason, decision);
    this.name = "ApprovalExpired";
  }
}

/** Refused evidence_insufficient (docs/errors.md). */
export class EvidenceInsufficient extends Refused {
  constructor(reason = "", decision?: Decision) {
    super("evidence_insufficient", reason, decision);
    this.name = "EvidenceInsufficient";
  }
}

/** Refused run_budget_exhausted (docs/errors.md). */
export class RunBudgetExhausted extends Refused {
  constructor(reason = "", decision?: Decision) {
    super("run_budget_exhausted", reason, decision);
    this.name = "RunBudgetExhausted";
  }
}

/** Refused executor_fenced (docs/errors.md). */
export class ExecutorFenced extends Refused {
  constructor(reason = "", decision?: Decision) {
    super("executor_fenced", reason, decision);
    this.name = "ExecutorFenced";
  }
}

/** Refused kill_switch_engaged (docs/errors.md). */
export class KillSwitchEngaged extends Refused {
  constructor(reason = "", decision?: Decision) {
    super("kill_switch_engaged", reason, decision);
    this.name = "KillSwitchEngaged";
  }
}

/** Refused shared_guarantee_resource_invalid (docs/errors.md). */
export class SharedGuaranteeResourceInvalid extends Refused {
  constructor(reason = "", decision?: Decision) {
    super("shared_guarantee_resource_invalid", reason, decision);
    this.name = "SharedGuaranteeResourceInvalid";
  }
}

/** Refused shared_guarantee_amount_invalid (docs/errors.md). */
export class SharedGuaranteeAmountInvalid extends Refused {
  constructor(reason = "", decision?: Decision) {
    super("shared_guarantee_amount_invalid", reason, decision);
    this.name = "SharedGuaranteeAmountInvalid";
  }
}

/** Refused shared_guarantee_exceeded (docs/errors.md). */
export class SharedGuaranteeExceeded extends Refused {
  constructor(reason = "", decision?: Decision) {
    super("shared_guarantee_exceeded", reason, decision);
    this.name = "SharedGuaranteeExceeded";
  }
}

/** Refused shared_guarantee_definition_mismatch (docs/errors.md). */
export class SharedGuaranteeDefinitionMismatch extends Refused {
  constructor(reason = "", decision?: Decision) {
    super("shared_guarantee_definition_mismatch", reason, decision);
    this.name = "SharedGuaranteeDefinitionMismatch";
  }
}

/** Refused shared_guarantee_definition_invalid (docs/errors.md). */
export class SharedGuaranteeDefinitionInvalid extends Refused {
  constructor(reason = "", decision?: Decision) {
    super("shared_guarantee_definition_invalid", reason, decision);
    this.name = "SharedGuaranteeDefinitionInvalid";
  }
}

/** Refused shared_guarantee_contention (docs/errors.md). */
export class SharedGuaranteeContention extends Refused {
  constructor(reason = "", decision?: Decision) {
    super("shared_guarantee_contention", reason, decision);
    this.name = "SharedGuaranteeContention";
  }
}

/** Refused shared_guarantee_receipts_saturated (docs/errors.md). */
export class SharedGuaranteeReceiptsSaturated extends Refused {
  constructor(reason = "", decision?: Decision) {
    super("shared_guarantee_receipts_saturated", reason, decision);
    this.name = "SharedGuaranteeReceiptsSaturated";
  }
}

/** Refused shared_guarantee_attempt_closed (docs/errors.md). */
export class SharedGuaranteeAttemptClosed extends Refused {
  constructor(reason = "", decision?: Decision) {
    super("shared_guarantee_attempt_closed", reason, decision);
    this.name = "SharedGuaranteeAttemptClosed";
  }
}

/** Refused shared_guarantee_attempt_known (docs/errors.md). */
export class SharedGuaranteeAttemptKnown extends Refused {
  constructor(reason = "", decision?: Decision) {
    super("shared_guarantee_attempt_known", reason, decision);
    this.name = "SharedGuaranteeAttemptKnown";
  }
}

/** Refused shared_guarantee_attempt_unknown (docs/errors.md). */
export class SharedGuaranteeAttemptUnknown extends Refused {
  constructor(reason = "", decision?: Decision) {
    super("shared_guarantee_attempt_unknown", reason, decision);
    this.name = "SharedGuaranteeAttemptUnknown";
  }
}

/** Refused shared_guarantee_dispatch_active (docs/errors.md). */
export class SharedGuaranteeDispatchActive extends Refused {
  constructor(reason = "", decision?: Decision) {
    super("shared_guarantee_dispatch_active", reason, decision);
    this.name = "SharedGuaranteeDispatchActive";
  }
}

/** Refused shared_guarantee_unresolved_attempt (docs/errors.md). */
export class SharedGuaranteeUnresolvedAttempt extends Refused {
  constructor(reason = "", decision?: Decision) {
    super("shared_guarantee_unresolved_attempt", reason, decision);
    this.name = "SharedGuaranteeUnresolvedAttempt";
  }
}

/** Refused shared_guarantee_not_started (docs/errors.md). */
export class SharedGuaranteeNotStarted extends Refused {
  constructor(reason = "", decision?: Decision) {
    super("shared_guarantee_not_started", reason, decision);
    this.name = "SharedGuaranteeNotStarted";
  }
}

/** Refused shared_guarantee_absence_unproven (docs/errors.md). */
export class SharedGuaranteeAbsenceUnproven extends Refused {
  constructor(reason = "", decision?: Decision) {
    super("shared_guarantee_absence_unproven", reason, decision);
    this.name = "SharedGuaranteeAbsenceUnproven";
  }
}

/** Refused observation_contradicts_seal (docs/errors.md). */
export class ObservationContradictsSeal extends Refused {
  constructor(reason = "", decision?: Decision) {
    super("observation_contradicts_seal", reason, decision);
    this.name = "ObservationContradictsSeal";
  }
}

/** Refused operation_key_conflict (docs/errors.md). */
export class OperationKeyConflict extends Refused {
  constructor(reason = "", decision?: Decision) {
    super("operation_key_conflict", reason, decision);
    this.name = "OperationKeyConflict";
  }
}

/** Refused context_invalid (docs/errors.md). */
export class ContextInvalid extends Refused {
  constructor(reason = "", decision?: Decision) {
    super("context_invalid", reason, decision);
    this.name = "ContextInvalid";
  }
}

/** Refused run_already_admitted (docs/errors.md). */
export class RunAlreadyAdmitted extends Refused {
  constructor(reason = "", decision?: Decision) {
    super("run_already_admitted", reason, decision);
    this.name = "RunAlreadyAdmitted";
  }
}

/** Refused evidence_record_conflict (docs/errors.md). */
export class EvidenceRecordConflict extends Refused {
  constructor(reason = "", decision?: Decision) {
    super("evidence_record_conflict", reason, decision);
    this.name = "EvidenceRecordConflict";
  }
}

/** Refused audit_not_found (docs/errors.md). */
export class AuditNotFound extends Refused {
  constructor(reason = "", decision?: Decision) {
    super("audit_not_found", reason, decision);
    this.name = "AuditNotFound";
  }
}

/** Refused audit_not_checkpointed (docs/errors.md). */
export class AuditNotCheckpointed extends Refused {
  constructor(reason = "", decision?: Decision) {
    super("audit_not_checkpointed", reason, decision);
    this.name = "AuditNotCheckpointed";
  }
}

/** Refused projection_unavailable (docs/errors.md). */
export class ProjectionUnavailable extends Refused {
  constructor(reason = "", decision?: Decision) {
    super("projection_unavailable", reason, decision);
    this.name = "ProjectionUnavailable";
  }
}

/** The class of each code. */
export const REFUSALS: Record<Code, new (reason?: string, decision?: Decision) => Refused> = {
  request_malformed: RequestMalformed,
  capability_not_surfaced: CapabilityNotSurfaced,
  authority_denied: AuthorityDenied,
  policy_denied: PolicyDenied,
  approval_required: ApprovalRequired,
  approval_mismatch: ApprovalMismatch,
  approval_redeemed: ApprovalRedeemed,
  approval_expired: ApprovalExpired,
  evidence_insufficient: EvidenceInsufficient,
  run_budget_exhausted: RunBudgetExhausted,
  executor_fenced: ExecutorFenced,
  kill_switch_engaged: KillSwitchEngaged,
  shared_guarantee_resource_invalid: SharedGuaranteeResourceInvalid,
  shared_guarantee_amount_invalid: SharedGuaranteeAmountInvalid,
  shared_guarantee_exceeded: SharedGuaranteeExceeded,
  shared_guarantee_definition_mismatch: SharedGuaranteeDefinitionMismatch,
  shared_guarantee_definition_invalid: SharedGuaranteeDefinitionInvalid,
  shared_guarantee_contention: SharedGuaranteeContention,
  shared_guarantee_receipts_saturated: SharedGuaranteeReceiptsSaturated,
  shared_guarantee_attempt_closed: SharedGuaranteeAttemptClosed,
  shared_guarantee_attempt_known: SharedGuaranteeAttemptKnown,
  shared_guarantee_attempt_unknown: SharedGuaranteeAttemptUnknown,
  shared_guarantee_dispatch_active: SharedGuaranteeDispatchActive,
  shared_guarantee_unresolved_attempt: SharedGuaranteeUnresolvedAttempt,
  shared_guarantee_not_started: SharedGuaranteeNotStarted,
  shared_guarantee_absence_unproven: SharedGuaranteeAbsenceUnproven,
  observation_contradicts_seal: ObservationContradictsSeal,
  operation_key_conflict: OperationKeyConflict,
  context_invalid: ContextInvalid,
  run_already_admitted: RunAlreadyAdmitted,
  evidence_record_conflict: EvidenceRecordConflict,
  audit_not_found: AuditNotFound,
  audit_not_checkpointed: AuditNotCheckpointed,
  projection_unavailable: ProjectionUnavailable,
};

/** The error of a code (Refused itself for a code this version does not know). */
export function refused(code: string, reason = "", decision?: Decision): Refused {
  const known = (CODES as readonly string[]).includes(code) ? REFUSALS[code as Code] : undefined;
  return known ? new known(reason, decision) : new Refused(code, reason, decision);
}
