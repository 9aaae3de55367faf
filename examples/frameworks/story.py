"""The world around the framework agents of this folder: the connection
settings from the environment, the synthetic provider (told to answer
pending or an unreadable state, then to settle), the operator who reconciles
and approves, and the checks each story makes.

Environment: CTX_NATS (default nats://127.0.0.1:4222), CTX_TENANT, AGENT and
AGENT_PASSWORD (the agent), AGENT_RUN (a run an operator admitted), OPS and
OPS_PASSWORD (the operator who approves and reconciles), PROVIDER (the
synthetic provider's URL, cmd/demo-provider), and for the MCP agent
CTX_MCP_URL and AGENT_MCP_TOKEN.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request
from typing import Any, Dict

from contextos_ledger.client import Client

REFUND = "adp_payments.issue_refund"
CREDIT = "adp_payments.issue_goodwill_credit"
#: The arguments' JSON Schema, as the capabilities' arguments_schema says.
ARGS: Dict[str, Any] = {"type": "object", "additionalProperties": False, "required": ["order_id", "amount_minor", "currency"],
                        "properties": {"order_id": {"type": "string"}, "amount_minor": {"type": "integer", "minimum": 1},
                                       "currency": {"type": "string"}}}


def refund(order: str, amount: int) -> Dict[str, Any]:
    return {"order_id": order, "amount_minor": amount, "currency": "INR"}


class Story:
    """Prints the story's steps and counts the checks that failed."""

    def __init__(self, title: str) -> None:
        self.failures = 0
        print(f"── {title}", flush=True)

    def step(self, text: str) -> None:
        print(f"\n   {text}", flush=True)

    def show(self, what: str, outcome: Any) -> None:
        o = outcome if isinstance(outcome, dict) else outcome.to_dict()
        detail = " ".join(f"{k}={o[k]}" for k in ("status", "code", "retry", "operation_key") if o.get(k))
        print(f"     {what}: {o['kind']}: {detail}\n       -> {o['next']}", flush=True)

    def check(self, ok: bool, text: str) -> None:
        print(f"     {'✓' if ok else '✗'} {text}", flush=True)
        if not ok:
            self.failures += 1

    def end(self) -> int:
        print("\n   every check held" if not self.failures else f"\n   {self.failures} check(s) did not hold", flush=True)
        return 1 if self.failures else 0


async def connect(principal_var: str, password_var: str) -> Client:
    return await Client.connect(os.environ.get("CTX_NATS", "nats://127.0.0.1:4222"), tenant=os.environ["CTX_TENANT"],
                                principal=os.environ[principal_var], password=os.environ[password_var])


def provider(path: str, body: Dict[str, Any]) -> None:
    """POSTs to the synthetic provider's admin API."""
    req = urllib.request.Request(os.environ["PROVIDER"] + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=5):
        pass


def provider_calls() -> int:
    with urllib.request.urlopen(os.environ["PROVIDER"] + "/admin/stats", timeout=5) as r:
        return int(json.load(r)["calls"])


async def settle(ops: Client, attempt_id: str) -> bool:
    """The provider settles the attempt as succeeded; the operator reconciles
    it (ctx reconcile): the ledger learns it was applied."""
    provider("/admin/settle", {"idempotency_key": attempt_id, "status": "succeeded"})
    rows = await ops.reconcile(attempt_id)
    return bool(rows) and rows[0].get("outcome") == "applied"


def main(run: Any) -> None:
    """Runs an async story and exits with its status."""
    import asyncio

    sys.exit(asyncio.run(run()))
