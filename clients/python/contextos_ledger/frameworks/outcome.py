"""What a governed tool call came to, in the terms an agent framework acts on.

Every adapter maps the ledger's answer to one of four kinds:

* ``result``: the call is decided: ``applied`` (done, with the balances) or
  ``not_applied`` (the provider did not do it; another try is a new operation).
* ``retry``: the outcome is not known yet: ``pending`` (the provider will
  settle it) or ``unknown`` (no answer, or the provider's answer could not be
  read). The call must be repeated with the **same** operation key (the
  resend rule, docs/wire.md): the adapters remember the key of every open
  operation by its capability and arguments, so a repeated call resends it and
  never opens a second operation.
* ``approval``: refused ``approval_required``: an operator must approve the
  ``action_digest``; with the approval the call is proposed again under a new
  operation key with the approval id.
* ``error``: any other refusal, with its stable code, its retry class
  (wire/retry.go: ``never``, ``later``, ``operator``) and the reason; and an
  ``unknown`` whose code is never retried (``stored_event_refused`` after the
  provider was called: repeating the call cannot learn the outcome).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Literal, Mapping, Optional

from ..errors import Code, Refused, Unreachable, Unresolved, retry_of
from ..types import Decision

Kind = Literal["result", "retry", "approval", "error"]

#: The next step an agent is told for each kind of outcome, by status or retry class.
_NEXT = {
    "applied": "done: the action took effect",
    "not_applied": "the provider did not do it; calling the tool again is a new attempt",
    "pending": "accepted and not settled yet: call the tool again later with the same arguments to learn the outcome "
               "(the same operation key is resent; nothing is done twice)",
    "unknown": "the outcome is not known yet: call the tool again with the same arguments "
               "(the same operation key is resent, never a new one; nothing is done twice)",
    "never": "refused: retrying the same request is refused again; change it or give up",
    "later": "refused before anything was stored: retry later, with backoff",
    "operator": "refused until an operator acts: hand over to a human",
    "same": "the outcome is not known yet: call the tool again with the same arguments",
    "": "refused with a code this client does not know: see docs/errors.md",
}


@dataclass(frozen=True)
class Outcome:
    """One governed tool call's outcome: its kind, the ledger's status and
    code, the code's retry class, the operation key it went under and the
    balances of the decision."""

    kind: Kind
    status: str
    capability_id: str
    operation_key: str
    code: str = ""
    retry: str = ""
    reason: str = ""
    operation_id: str = ""
    attempt_id: str = ""
    action_digest: str = ""
    balances: Optional[Dict[str, Any]] = None
    evidence_gate: Optional[Dict[str, Any]] = None
    next: str = ""
    arguments: Mapping[str, Any] = field(default_factory=dict)

    @property
    def is_error(self) -> bool:
        """Whether a framework should flag the tool result as an error (a refusal)."""
        return self.kind in ("error", "approval")

    def to_dict(self) -> Dict[str, Any]:
        """The outcome as the JSON object a model reads (empty members left out)."""
        out: Dict[str, Any] = {"kind": self.kind, "status": self.status, "capability_id": self.capability_id,
                               "operation_key": self.operation_key}
        for k in ("code", "retry", "reason", "operation_id", "attempt_id", "action_digest"):
            v = getattr(self, k)
            if v:
                out[k] = v
        if self.balances:
            out["balances"] = self.balances
        if self.evidence_gate:
            out["evidence_gate"] = self.evidence_gate
        out["next"] = self.next
        return out

    def to_json(self) -> str:
        """to_dict as compact JSON text."""
        return json.dumps(self.to_dict(), separators=(",", ":"), ensure_ascii=False)

    def text(self) -> str:
        """The tool result's text: for a refusal ``<code> (retry <class>): <reason>``
        (the stable code first, as the MCP gateway writes it), then the JSON."""
        if self.is_error:
            return f"{self.code} (retry {self.retry or 'unknown'}): {self.reason}\n{self.to_json()}"
        return self.to_json()


def _balances(d: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    b = {k: d[k] for k in ("resource", "limit", "committed", "held", "available") if d.get(k) not in (None, "")}
    rows: List[Any] = list(d.get("guarantees") or [])
    if rows:
        b["guarantees"] = rows
    return b or None


def outcome_of_reply(reply: Mapping[str, Any], capability_id: str, operation_key: str, arguments: Mapping[str, Any]) -> Outcome:
    """Maps a decision reply (the JSON of docs/wire.md, as the NATS API and
    the MCP gateway's structured content carry it)."""
    status = str(reply.get("status") or "unknown")
    code = str(reply.get("code") or "")
    common: Dict[str, Any] = dict(capability_id=capability_id, operation_key=operation_key, reason=str(reply.get("reason") or ""),
                                  operation_id=str(reply.get("operation_id") or ""), attempt_id=str(reply.get("attempt_id") or ""),
                                  action_digest=str(reply.get("action_digest") or ""), balances=_balances(reply),
                                  evidence_gate=reply.get("evidence_gate"), arguments=dict(arguments))
    if status in ("applied", "not_applied"):
        return Outcome("result", status, next=_NEXT[status], **common)
    if status == "refused":
        retry = retry_of(code)
        if code == Code.APPROVAL_REQUIRED.value:
            digest = common["action_digest"]
            return Outcome("approval", status, code=code, retry=retry,
                           next=f"an operator must approve action digest {digest} (ctx approve --digest {digest}); "
                                "the call is then proposed again with the approval, under a new operation key", **common)
        if retry == "same" or code == Code.OVERLOADED.value:
            # Decided before anything was stored, or not known: the same key is safe and needed.
            return Outcome("retry", status, code=code, retry=retry, next=_NEXT["same" if retry == "same" else "later"], **common)
        return Outcome("error", status, code=code, retry=retry, next=_NEXT.get(retry, _NEXT[""]), **common)
    if status == "unknown" and retry_of(code) == "never":
        return Outcome("error", status, code=code, retry="never",
                       next="the outcome is not recorded and calling again cannot learn it: hand over to a human", **common)
    # pending, unknown (with or without a code such as ledger_unavailable), or a status this version does not know.
    return Outcome("retry", status if status == "pending" else "unknown", code=code, retry="same",
                   next=_NEXT["pending" if status == "pending" else "unknown"], **common)


def outcome_of_decision(d: Decision, capability_id: str, operation_key: str, arguments: Mapping[str, Any]) -> Outcome:
    """Maps a Decision of the Python client."""
    reply: Dict[str, Any] = {"status": d.status, "code": d.code, "reason": d.reason, "operation_id": d.operation_id,
                             "attempt_id": d.attempt_id, "action_digest": d.action_digest, "resource": d.resource,
                             "limit": d.limit, "committed": d.committed, "held": d.held, "available": d.available,
                             "guarantees": [vars(g) for g in d.guarantees], "evidence_gate": d.evidence_gate}
    return outcome_of_reply(reply, capability_id, operation_key, arguments)


def outcome_of_error(e: BaseException, capability_id: str, operation_key: str, arguments: Mapping[str, Any]) -> Outcome:
    """Maps what Client.propose raised: a refusal (with its decision), an
    outcome still unknown at the deadline, or an unreachable daemon (the
    proposal may have arrived: the same key is resent). Any other exception
    is not the ledger's answer and is raised again."""
    if isinstance(e, Refused):
        if isinstance(e.decision, Decision):
            return outcome_of_decision(e.decision, capability_id, operation_key, arguments)
        return outcome_of_reply({"status": "refused", "code": e.code, "reason": e.reason}, capability_id, operation_key, arguments)
    if isinstance(e, Unresolved):
        if isinstance(e.last, Decision):
            # The last answer, with its ids and balances; still unknown whatever it said.
            d = dataclasses.replace(e.last, status="unknown", reason=str(e))
            return outcome_of_decision(d, capability_id, operation_key, arguments)
        return outcome_of_reply({"status": "unknown", "reason": str(e)}, capability_id, operation_key, arguments)
    if isinstance(e, Unreachable):
        return outcome_of_reply({"status": "unknown", "reason": str(e)}, capability_id, operation_key, arguments)
    raise e


__all__ = ["Kind", "Outcome", "outcome_of_reply", "outcome_of_decision", "outcome_of_error"]
