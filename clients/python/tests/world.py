"""What the framework tests share: the capabilities of examples/frameworks,
and the world around an agent (the provider settles, an operator reconciles
and approves)."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Dict, List

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


class Proxy:
    """A TCP proxy on loopback in front of a real server, which can cut every
    connection (a network that fails mid-session). Use ``async with``."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self.cut = False
        self._server: Any = None
        self._writers: List[asyncio.StreamWriter] = []

    async def __aenter__(self) -> Proxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.break_all()
        self._server.close()
        await self._server.wait_closed()

    def break_all(self) -> None:
        """Closes every open connection and refuses new ones from now on."""
        self.cut = True
        for w in self._writers:
            w.close()
        self._writers.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.cut:
            writer.close()
            return
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        self._writers += [writer, up_writer]

        async def pipe(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            try:
                while not self.cut and (data := await r.read(65536)):
                    w.write(data)
                    await w.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                w.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
