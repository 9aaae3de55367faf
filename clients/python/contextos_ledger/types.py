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


Sufficiency = Literal["sufficient", "insufficient"]
ConflictStatus = Literal["unresolved", "resolved"]


@dataclass(frozen=True)
class ConflictResolution:
    """How a resolved conflict was resolved (docs/schema/conflict-marker.json#/$defs/resolution).

    ``kind`` is ``accountable_review`` (with ``resolved_by``), ``source_priority`` or
    ``authoritative_refresh`` (with ``rule_id``), or empty for a resolution made outside the
    pack's rules."""

    resolution_ref: str
    selected_evidence_refs: List[str]
    kind: str = ""
    resolved_by: str = ""
    rule_id: str = ""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ConflictResolution:
        return cls(resolution_ref=d["resolution_ref"], selected_evidence_refs=list(d["selected_evidence_refs"]),
                   kind=d.get("kind", ""), resolved_by=d.get("resolved_by", ""), rule_id=d.get("rule_id", ""))


@dataclass(frozen=True)
class EvidenceConflictMarker:
    """Evidence refs that disagree on (subject, predicate) (docs/schema/conflict-marker.json)."""

    conflict_id: str
    evidence_refs: List[str]
    requirements: List[str]
    status: ConflictStatus
    subject: str
    predicate: str
    values: List[str]
    resolution: Optional[ConflictResolution] = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> EvidenceConflictMarker:
        r = d.get("resolution")
        return cls(conflict_id=d["conflict_id"], evidence_refs=list(d["evidence_refs"]),
                   requirements=list(d["requirements"]), status=d["status"], subject=d["subject"],
                   predicate=d["predicate"], values=list(d["values"]),
                   resolution=ConflictResolution.from_dict(r) if r is not None else None)


@dataclass(frozen=True)
class EvidenceGate:
    """The evidence gate of the capability's decision (docs/context.md, docs/schema/evidence-gate.json).

    ``commit_allowed`` is true exactly when ``sufficiency`` is ``sufficient``; ``unresolved`` is
    ``required`` minus ``satisfied``."""

    decision_key: str
    required: List[str]
    satisfied: List[str]
    unresolved: List[str]
    conflicts: List[EvidenceConflictMarker]
    sufficiency: Sufficiency
    commit_allowed: bool

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> EvidenceGate:
        if not isinstance(d, Mapping):
            raise ValueError(f"not an evidence gate: {d!r:.200}")
        return cls(decision_key=d["decision_key"], required=list(d["required"]), satisfied=list(d["satisfied"]),
                   unresolved=list(d["unresolved"]),
                   conflicts=[EvidenceConflictMarker.from_dict(m) for m in d["conflicts"]],
                   sufficiency=d["sufficiency"], commit_allowed=bool(d["commit_allowed"]))


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
    evidence_gate: Optional[EvidenceGate] = None

    @classmethod
    def from_json(cls, b: bytes) -> Decision:
        """Decodes a decision; members this version does not know are ignored."""
        d = json.loads(b)
        if not isinstance(d, dict) or not isinstance(d.get("status"), str):
            raise ValueError(f"not a decision: {b[:200]!r}")
        rows = [GuaranteeRow(**{k: g.get(k) for k in ("guarantee_id", "resource", "limit", "committed", "held", "available")},
                             carried=g.get("carried", 0))
                for g in d.get("guarantees") or []]
        gate = d.get("evidence_gate")
        return cls(status=d["status"], code=d.get("code", ""), reason=d.get("reason", ""),
                   operation_id=d.get("operation_id", ""), attempt_id=d.get("attempt_id", ""),
                   action_digest=d.get("action_digest", ""), resource=d.get("resource", ""),
                   limit=d.get("limit"), committed=d.get("committed"), held=d.get("held"), available=d.get("available"),
                   guarantees=rows, evidence_gate=EvidenceGate.from_dict(gate) if gate is not None else None)


@dataclass(frozen=True)
class ContextRequest:
    """The body of ctx.v1.<tenant>.<principal>.context: the run, the capability whose
    context pack and decision govern the next step, and the evidence refs a proposal
    would name."""

    run_id: str
    capability_id: str
    evidence_refs: Optional[Sequence[str]] = None

    def to_json(self) -> bytes:
        body: Dict[str, Any] = {"run_id": self.run_id, "capability_id": self.capability_id}
        if self.evidence_refs:
            body["evidence_refs"] = list(self.evidence_refs)
        return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass(frozen=True)
class ToolExposure:
    """One tool of a compiled context's derived exposure (docs/schema/compiled-context.json#/properties/tools).

    ``reason`` says why a tool is not exposed or not dispatchable, empty when it is both."""

    capability_id: str
    exposed: bool
    gated_by: str = ""
    version: str = ""
    dispatch_allowed: bool = False
    reason: str = ""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ToolExposure:
        return cls(capability_id=d["capability_id"], exposed=bool(d["exposed"]), dispatch_allowed=bool(d["dispatch_allowed"]),
                   gated_by=d.get("gated_by", ""), reason=d.get("reason", ""), version=d.get("version", ""))


@dataclass(frozen=True)
class CompiledContext:
    """A run's compiled context as the daemon served it (docs/context.md, schema
    docs/schema/compiled-context.json): its digest, the evidence gate and the tool
    exposure typed, and the whole context as decoded JSON in ``context``. It stores
    nothing and grants nothing: a later proposal is decided as always."""

    digest: str
    gate: EvidenceGate
    tools: List[ToolExposure]
    context: Dict[str, Any]

    @classmethod
    def from_reply(cls, d: Mapping[str, Any]) -> CompiledContext:
        """Decodes the compiled member of a compile reply (status compiled)."""
        cc = d.get("context")
        if not isinstance(cc, dict) or not isinstance(d.get("digest"), str):
            raise ValueError(f"not a compiled context: {d!r:.200}")
        return cls(digest=d["digest"], gate=EvidenceGate.from_dict(cc["gate"]),
                   tools=[ToolExposure.from_dict(t) for t in cc.get("tools") or []], context=cc)
