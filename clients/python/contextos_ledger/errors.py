"""The stable refusal codes of the kernel's catalog and one exception per code.

Generated from docs/schema/common.json (the catalog of kernel/codes.go);
tests/test_codes.py fails when they differ.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Dict, Optional, Type


class Code(str, Enum):
    """A stable refusal code (docs/errors.md)."""

    REQUEST_MALFORMED = "request_malformed"
    CAPABILITY_NOT_SURFACED = "capability_not_surfaced"
    AUTHORITY_DENIED = "authority_denied"
    POLICY_DENIED = "policy_denied"
    APPROVAL_REQUIRED = "approval_required"
    APPROVAL_MISMATCH = "approval_mismatch"
    APPROVAL_REDEEMED = "approval_redeemed"
    APPROVAL_EXPIRED = "approval_expired"
    EVIDENCE_INSUFFICIENT = "evidence_insufficient"
    RUN_BUDGET_EXHAUSTED = "run_budget_exhausted"
    EXECUTOR_FENCED = "executor_fenced"
    KILL_SWITCH_ENGAGED = "kill_switch_engaged"
    SHARED_GUARANTEE_RESOURCE_INVALID = "shared_guarantee_resource_invalid"
    SHARED_GUARANTEE_AMOUNT_INVALID = "shared_guarantee_amount_invalid"
    SHARED_GUARANTEE_EXCEEDED = "shared_guarantee_exceeded"
    SHARED_GUARANTEE_DEFINITION_MISMATCH = "shared_guarantee_definition_mismatch"
    SHARED_GUARANTEE_DEFINITION_INVALID = "shared_guarantee_definition_invalid"
    SHARED_GUARANTEE_CONTENTION = "shared_guarantee_contention"
    SHARED_GUARANTEE_RECEIPTS_SATURATED = "shared_guarantee_receipts_saturated"
    SHARED_GUARANTEE_ATTEMPT_CLOSED = "shared_guarantee_attempt_closed"
    SHARED_GUARANTEE_ATTEMPT_KNOWN = "shared_guarantee_attempt_known"
    SHARED_GUARANTEE_ATTEMPT_UNKNOWN = "shared_guarantee_attempt_unknown"
    SHARED_GUARANTEE_DISPATCH_ACTIVE = "shared_guarantee_dispatch_active"
    SHARED_GUARANTEE_UNRESOLVED_ATTEMPT = "shared_guarantee_unresolved_attempt"
    SHARED_GUARANTEE_NOT_STARTED = "shared_guarantee_not_started"
    SHARED_GUARANTEE_ABSENCE_UNPROVEN = "shared_guarantee_absence_unproven"
    OBSERVATION_CONTRADICTS_SEAL = "observation_contradicts_seal"
    OPERATION_KEY_CONFLICT = "operation_key_conflict"
    CONTEXT_INVALID = "context_invalid"
    RUN_ALREADY_ADMITTED = "run_already_admitted"
    EVIDENCE_RECORD_CONFLICT = "evidence_record_conflict"
    AUDIT_NOT_FOUND = "audit_not_found"
    AUDIT_NOT_CHECKPOINTED = "audit_not_checkpointed"
    PROJECTION_UNAVAILABLE = "projection_unavailable"


class LedgerError(Exception):
    """Every error of this package."""


class Refused(LedgerError):
    """A refusal by contextosd (or by the NATS server) with its stable code.

    ``decision`` is the full decision of a refused proposal (balances, action
    digest, evidence gate), None for an operator verb. Catch one code with its
    subclass (``except SharedGuaranteeExceeded``) or all with ``Refused``.
    """

    code: str = ""

    def __init__(self, code: str = "", reason: str = "", decision: Optional[Any] = None) -> None:
        code = code or type(self).code
        super().__init__(f"refused {code}: {reason}" if reason else f"refused {code}")
        self.code = code
        self.reason = reason
        self.decision = decision


class Unreachable(LedgerError):
    """contextosd could not be reached: no connection, no responder, or no reply in time."""


class Unresolved(LedgerError):
    """A proposal whose outcome was still unknown at the deadline.

    The operation may exist: resend the same proposal (same run id and
    operation key) later to learn its outcome, never a new key.
    """

    def __init__(self, message: str, last: Optional[Any] = None, resends: int = 0) -> None:
        super().__init__(message)
        self.last = last
        self.resends = resends



class RequestMalformed(Refused):
    """Refused request_malformed (docs/errors.md)."""

    code = "request_malformed"


class CapabilityNotSurfaced(Refused):
    """Refused capability_not_surfaced (docs/errors.md)."""

    code = "capability_not_surfaced"


class AuthorityDenied(Refused):
    """Refused authority_denied (docs/errors.md)."""

    code = "authority_denied"


class PolicyDenied(Refused):
    """Refused policy_denied (docs/errors.md)."""

    code = "policy_denied"


class ApprovalRequired(Refused):
    """Refused approval_required (docs/errors.md)."""

    code = "approval_required"


class ApprovalMismatch(Refused):
    """Refused approval_mismatch (docs/errors.md)."""

    code = "approval_mismatch"


class ApprovalRedeemed(Refused):
    """Refused approval_redeemed (docs/errors.md)."""

    code = "approval_redeemed"


class ApprovalExpired(Refused):
    """Refused approval_expired (docs/errors.md)."""

    code = "approval_expired"


class EvidenceInsufficient(Refused):
    """Refused evidence_insufficient (docs/errors.md)."""

    code = "evidence_insufficient"


class RunBudgetExhausted(Refused):
    """Refused run_budget_exhausted (docs/errors.md)."""

    code = "run_budget_exhausted"


class ExecutorFenced(Refused):
    """Refused executor_fenced (docs/errors.md)."""

    code = "executor_fenced"


class KillSwitchEngaged(Refused):
    """Refused kill_switch_engaged (docs/errors.md)."""

    code = "kill_switch_engaged"


class SharedGuaranteeResourceInvalid(Refused):
    """Refused shared_guarantee_resource_invalid (docs/errors.md)."""

    code = "shared_guarantee_resource_invalid"


class SharedGuaranteeAmountInvalid(Refused):
    """Refused shared_guarantee_amount_invalid (docs/errors.md)."""

    code = "shared_guarantee_amount_invalid"


class SharedGuaranteeExceeded(Refused):
    """Refused shared_guarantee_exceeded (docs/errors.md)."""

    code = "shared_guarantee_exceeded"


class SharedGuaranteeDefinitionMismatch(Refused):
    """Refused shared_guarantee_definition_mismatch (docs/errors.md)."""

    code = "shared_guarantee_definition_mismatch"


class SharedGuaranteeDefinitionInvalid(Refused):
    """Refused shared_guarantee_definition_invalid (docs/errors.md)."""

    code = "shared_guarantee_definition_invalid"


class SharedGuaranteeContention(Refused):
    """Refused shared_guarantee_contention (docs/errors.md)."""

    code = "shared_guarantee_contention"


class SharedGuaranteeReceiptsSaturated(Refused):
    """Refused shared_guarantee_receipts_saturated (docs/errors.md)."""

    code = "shared_guarantee_receipts_saturated"


class SharedGuaranteeAttemptClosed(Refused):
    """Refused shared_guarantee_attempt_closed (docs/errors.md)."""

    code = "shared_guarantee_attempt_closed"


class SharedGuaranteeAttemptKnown(Refused):
    """Refused shared_guarantee_attempt_known (docs/errors.md)."""

    code = "shared_guarantee_attempt_known"


class SharedGuaranteeAttemptUnknown(Refused):
    """Refused shared_guarantee_attempt_unknown (docs/errors.md)."""

    code = "shared_guarantee_attempt_unknown"


class SharedGuaranteeDispatchActive(Refused):
    """Refused shared_guarantee_dispatch_active (docs/errors.md)."""

    code = "shared_guarantee_dispatch_active"


class SharedGuaranteeUnresolvedAttempt(Refused):
    """Refused shared_guarantee_unresolved_attempt (docs/errors.md)."""

    code = "shared_guarantee_unresolved_attempt"


class SharedGuaranteeNotStarted(Refused):
    """Refused shared_guarantee_not_started (docs/errors.md)."""

    code = "shared_guarantee_not_started"


class SharedGuaranteeAbsenceUnproven(Refused):
    """Refused shared_guarantee_absence_unproven (docs/errors.md)."""

    code = "shared_guarantee_absence_unproven"


class ObservationContradictsSeal(Refused):
    """Refused observation_contradicts_seal (docs/errors.md)."""

    code = "observation_contradicts_seal"


class OperationKeyConflict(Refused):
    """Refused operation_key_conflict (docs/errors.md)."""

    code = "operation_key_conflict"


class ContextInvalid(Refused):
    """Refused context_invalid (docs/errors.md)."""

    code = "context_invalid"


class RunAlreadyAdmitted(Refused):
    """Refused run_already_admitted (docs/errors.md)."""

    code = "run_already_admitted"


class EvidenceRecordConflict(Refused):
    """Refused evidence_record_conflict (docs/errors.md)."""

    code = "evidence_record_conflict"


class AuditNotFound(Refused):
    """Refused audit_not_found (docs/errors.md)."""

    code = "audit_not_found"


class AuditNotCheckpointed(Refused):
    """Refused audit_not_checkpointed (docs/errors.md)."""

    code = "audit_not_checkpointed"


class ProjectionUnavailable(Refused):
    """Refused projection_unavailable (docs/errors.md)."""

    code = "projection_unavailable"


REFUSALS: Dict[str, Type[Refused]] = {
    "request_malformed": RequestMalformed,
    "capability_not_surfaced": CapabilityNotSurfaced,
    "authority_denied": AuthorityDenied,
    "policy_denied": PolicyDenied,
    "approval_required": ApprovalRequired,
    "approval_mismatch": ApprovalMismatch,
    "approval_redeemed": ApprovalRedeemed,
    "approval_expired": ApprovalExpired,
    "evidence_insufficient": EvidenceInsufficient,
    "run_budget_exhausted": RunBudgetExhausted,
    "executor_fenced": ExecutorFenced,
    "kill_switch_engaged": KillSwitchEngaged,
    "shared_guarantee_resource_invalid": SharedGuaranteeResourceInvalid,
    "shared_guarantee_amount_invalid": SharedGuaranteeAmountInvalid,
    "shared_guarantee_exceeded": SharedGuaranteeExceeded,
    "shared_guarantee_definition_mismatch": SharedGuaranteeDefinitionMismatch,
    "shared_guarantee_definition_invalid": SharedGuaranteeDefinitionInvalid,
    "shared_guarantee_contention": SharedGuaranteeContention,
    "shared_guarantee_receipts_saturated": SharedGuaranteeReceiptsSaturated,
    "shared_guarantee_attempt_closed": SharedGuaranteeAttemptClosed,
    "shared_guarantee_attempt_known": SharedGuaranteeAttemptKnown,
    "shared_guarantee_attempt_unknown": SharedGuaranteeAttemptUnknown,
    "shared_guarantee_dispatch_active": SharedGuaranteeDispatchActive,
    "shared_guarantee_unresolved_attempt": SharedGuaranteeUnresolvedAttempt,
    "shared_guarantee_not_started": SharedGuaranteeNotStarted,
    "shared_guarantee_absence_unproven": SharedGuaranteeAbsenceUnproven,
    "observation_contradicts_seal": ObservationContradictsSeal,
    "operation_key_conflict": OperationKeyConflict,
    "context_invalid": ContextInvalid,
    "run_already_admitted": RunAlreadyAdmitted,
    "evidence_record_conflict": EvidenceRecordConflict,
    "audit_not_found": AuditNotFound,
    "audit_not_checkpointed": AuditNotCheckpointed,
    "projection_unavailable": ProjectionUnavailable,
}


def refused(code: str, reason: str = "", decision: Optional[Any] = None) -> Refused:
    """The exception of a code (Refused itself for a code this version does not know)."""
    return REFUSALS.get(code, Refused)(code, reason, decision)


__all__ = ["Code", "LedgerError", "Refused", "Unreachable", "Unresolved", "REFUSALS", "refused"] + [c.__name__ for c in REFUSALS.values()]
