"""The messages of the ctx.v1 wire contract (docs/wire.md, docs/schema/)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Literal, Mapping, Optional, Sequence

Status = Literal["applied", "not_applied", "pending", "unknown", "refused"]

#: Statuses after which a proposal is not resent.
DEFINITIVE = ("applied", "not_applied", "pending", "refused")


@dataclass(frozen=True)
class Proposal:
    """The body of ctx.v1.<tenant>.<principal>.propose."""

    run_id: str
    operation_key: str
    capability_id: str
    arguments: Mapping[str, Any]
    evidence_refs: Optional[Sequence[str]] = None
    approval_id: Optional[str] = None

    def to_json(self) -> bytes:
        """The proposal's bytes; the same proposal always gives the same bytes."""
        body: Dict[str, Any] = {"run_id": self.run_id, "operation_key": self.operation_key,
                                "capability_id": self.capability_id, "arguments": dict(self.arguments)}
        if self.evidence_refs:
            body["evidence_refs"] = list(self.evidence_refs)
        if self.approval_id:
            body["approval_id"] = self.approval_id
        return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass(frozen=True)
class GuaranteeRow:
    """One guarantee's balances in a decision."""

    guarantee_id: str
    resource: str
    limit: int
    committed: int
    held: int
    available: int
    #: What the guarantees this one replaces committed and held on the resource; it counts against the limit.
    carried: int = 0


@dataclass(frozen=True)
class Decision:
    """The reply to a proposal."""

    status: Status
    code: str = ""
    reason: str = ""
    operation_id: str = ""
    attempt_id: str = ""
    action_digest: str = ""
    resource: str = ""
    limit: Optional[int] = None
    committed: Optional[int] = None
    held: Optional[int] = None
    available: Optional[int] = None
    guarantees: List[GuaranteeRow] = field(default_factory=list)
    evidence_gate: Optional[Dict[str, Any]] = None

    @classmethod
    def from_json(cls, b: bytes) -> Decision:
        """Decodes a decision; members this version does not know are ignored."""
        d = json.loads(b)
        if not isinstance(d, dict) or not isinstance(d.get("status"), str):
            raise ValueError(f"not a decision: {b[:200]!r}")
        rows = [GuaranteeRow(**{k: g.get(k) for k in ("guarantee_id", "resource", "limit", "committed", "held", "available")},
                             carried=g.get("carried", 0))
                for g in d.get("guarantees") or []]
        return cls(status=d["status"], code=d.get("code", ""), reason=d.get("reason", ""),
                   operation_id=d.get("operation_id", ""), attempt_id=d.get("attempt_id", ""),
                   action_digest=d.get("action_digest", ""), resource=d.get("resource", ""),
                   limit=d.get("limit"), committed=d.get("committed"), held=d.get("held"), available=d.get("available"),
                   guarantees=rows, evidence_gate=d.get("evidence_gate"))
