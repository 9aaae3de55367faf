"""What the framework tests share: the capabilities of examples/frameworks,
and the world around an agent (the provider settles, an operator reconciles
and approves)."""

from __future__ import annotations

import json
from typing import Any, Dict

from conftest import Daemon

from contextos_ledger import Client

REFUND = "adp_payments.issue_refund"
CREDIT = "adp_payments.issue_goodwill_credit"
SCHEMA: Dict[str, Any] = {"type": "object", "additionalProperties": False, "required": ["order_id", "amount_minor", "currency"],
                          "properties": {"order_id": {"type": "string"}, "amount_minor": {"type": "integer", "minimum": 1},
                                         "currency": {"type": "string"}}}


def refund_args(order: str, amount: int) -> Dict[str, Any]:
    return {"order_id": order, "amount_minor": amount, "currency": "INR"}


async def settle(d: Daemon, ops: Client, attempt_id: str) -> None:
    """The provider settles the attempt as succeeded and the operator
    reconciles it: the ledger learns it was applied."""
    assert attempt_id
    d.provider_post("/admin/settle", {"idempotency_key": attempt_id, "status": "succeeded"})
    rows = await ops.reconcile(attempt_id)
    assert rows and rows[0].get("outcome") == "applied", rows


def last_json(text: str) -> Dict[str, Any]:
    """The outcome JSON of a tool result's text (its last line)."""
    out: Dict[str, Any] = json.loads(text.strip().splitlines()[-1])
    return out
