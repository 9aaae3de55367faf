"""The gate's types against docs/schema and the context vectors."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from conftest import REPO

from contextos_ledger import ConflictResolution, Decision, EvidenceConflictMarker, EvidenceGate


def schema(name: str) -> Any:
    return json.loads((REPO / "docs/schema" / f"{name}.json").read_text())


def test_gate_types_have_the_schemas_members() -> None:
    marker = schema("conflict-marker")
    for cls, props in ((EvidenceGate, schema("evidence-gate")["properties"]),
                       (EvidenceConflictMarker, marker["properties"]),
                       (ConflictResolution, marker["$defs"]["resolution"]["properties"])):
        assert sorted(f.name for f in dataclasses.fields(cls)) == sorted(props), cls.__name__


def test_decision_decodes_its_gate() -> None:
    want = json.loads((REPO / "testdata/context/conflict_resolved_review/want.json").read_text())
    d = Decision.from_json(json.dumps({"status": "applied", "evidence_gate": want["gate"]}).encode())
    g = d.evidence_gate
    assert isinstance(g, EvidenceGate)
    assert g.commit_allowed and g.sufficiency == "sufficient" and g.unresolved == []
    assert g.required == want["gate"]["required"]
    m = g.conflicts[0]
    assert m.status == "resolved" and m.resolution is not None
    assert m.resolution.kind == "accountable_review" and m.resolution.resolved_by
    assert Decision.from_json(b'{"status":"applied"}').evidence_gate is None
    refused = json.loads((REPO / "testdata/context/conflict_unresolved/want.json").read_text())["gate"]
    g = Decision.from_json(json.dumps({"status": "refused", "evidence_gate": refused}).encode()).evidence_gate
    assert g is not None and not g.commit_allowed and g.unresolved == ["order_lookup"] and g.conflicts[0].resolution is None
