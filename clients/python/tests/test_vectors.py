"""The wire vectors (testdata/wire) read with the client's own decoding: no daemon."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Dict, List, Tuple

import pytest
from conftest import REPO

from contextos_ledger.client import page_of, read_decision, read_op_reply
from contextos_ledger.errors import REFUSALS, Code, Refused, refused, retry_of
from contextos_ledger.types import Decision, EvidenceGate, Proposal

VECTORS = REPO / "testdata" / "wire"


def vectors() -> List[Tuple[str, Dict[str, Any]]]:
    out = [(str(p.relative_to(VECTORS)), json.loads(p.read_text())) for p in sorted(VECTORS.rglob("*.json"))]
    assert out, f"no vectors in {VECTORS}"
    return out


ALL = vectors()


def same(got: Any, want: Any) -> bool:
    """got is want, except for members want leaves out that got holds at their zero value."""
    if isinstance(want, dict):
        return (isinstance(got, dict) and all(k in got and same(got[k], v) for k, v in want.items())
                and all(got[k] in (None, "", 0, [], False) for k in got.keys() - want.keys()))
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and all(same(g, w) for g, w in zip(got, want))
    return type(got) is type(want) and bool(got == want)


def wire(v: Dict[str, Any]) -> bytes:
    return json.dumps(v["message"]).encode()


@pytest.mark.parametrize("name,v", [(n, v) for n, v in ALL if v["schema"] == "proposal"], ids=lambda x: x if isinstance(x, str) else "")
def test_proposal(name: str, v: Dict[str, Any]) -> None:
    assert json.loads(Proposal(**v["message"]).to_json()) == v["message"]


@pytest.mark.parametrize("name,v", [(n, v) for n, v in ALL if v["schema"] == "decision"], ids=lambda x: x if isinstance(x, str) else "")
def test_decision(name: str, v: Dict[str, Any]) -> None:
    msg = v["message"]
    assert set(msg) <= {f.name for f in dataclasses.fields(Decision)}, "a member the client does not read"
    if (v["status"] == "refused" and v["code"] != Code.OVERLOADED.value) or (v["status"] == "unknown" and v.get("retry") == "never"):
        with pytest.raises(Refused) as e:
            read_decision(wire(v))
        assert type(e.value) is REFUSALS[v["code"]] is type(refused(v["code"]))
        assert e.value.code == v["code"] and e.value.retry == v["retry"] and e.value.reason == msg["reason"]
        d = e.value.decision
    else:
        # unknown (but for a code never retried), and overloaded (refused before anything was stored), come back for propose to resend.
        d = read_decision(wire(v))
        assert retry_of(v.get("code", "")) == v.get("retry", "")
    assert isinstance(d, Decision) and d.status == v["status"]
    assert same(dataclasses.asdict(d), msg)
    if "evidence_gate" in msg:
        g = d.evidence_gate
        assert isinstance(g, EvidenceGate) and g.commit_allowed == (g.sufficiency == "sufficient")
        assert same(dataclasses.asdict(g), msg["evidence_gate"])
    else:
        assert d.evidence_gate is None


@pytest.mark.parametrize("name,v", [(n, v) for n, v in ALL if v["schema"] == "op-reply"], ids=lambda x: x if isinstance(x, str) else "")
def test_op_reply(name: str, v: Dict[str, Any]) -> None:
    if "code" in v:
        with pytest.raises(REFUSALS[v["code"]]) as e:
            read_op_reply(wire(v))
        assert e.value.code == v["code"] and e.value.retry == v["retry"] and e.value.decision is None
        return
    r = read_op_reply(wire(v))
    assert r == v["message"]
    if "member" in v:
        p = page_of(r, v["member"])
        assert len(p.rows) == v.get("rows", 0)
        assert p.next_cursor == v["message"].get("next_cursor", "")
        assert name.endswith("-page.json") == bool(p.next_cursor)


def test_every_code_and_status_has_a_vector() -> None:
    decisions = [v for _, v in ALL if v["schema"] == "decision"]
    assert {v["code"] for v in decisions if "code" in v} == {c.value for c in Code}
    assert {v["status"] for v in decisions} == {"applied", "not_applied", "pending", "unknown", "refused"}
    assert {c.value for c in Code} == set(REFUSALS)
