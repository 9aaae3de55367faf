"""The MCP adapter (the official MCP Python SDK's client) against a real
contextosd's MCP gateway: a scripted agent over list_tools and call_tool."""

from __future__ import annotations

import asyncio

from conftest import Daemon
from world import CREDIT, REFUND, Proxy, refund_args, settle

from contextos_ledger.frameworks.mcp import LedgerMCP

TOKEN = "demo-phone-token-0123456789abcdef"


def test_mcp_maps_each_outcome(frameworks_daemon: Daemon) -> None:
    """The gateway's tools are listed; applied is a result, pending and
    unknown are retries resent under the same key, approval_required is an
    approval whose approved call goes under a new key, and refusals (a
    ceiling, the kill switch, arguments the tool's schema refuses) are errors
    with their code and retry class."""
    d = frameworks_daemon

    async def main() -> None:
        async with await d.connect("ops_alice") as ops:
            await ops.admit_run("mcp_run", "agent_phone", calls=20, amount=500000)
            async with LedgerMCP(d.mcp_url, TOKEN, "mcp_run") as ledger:
                tools = {t.name: t for t in await ledger.tools()}
                assert set(tools) == {REFUND, CREDIT}
                assert tools[REFUND].input_schema["required"] == ["run_id", "operation_key", "arguments"]
                calls = d.provider_stats()["calls"]

                d.provider_post("/admin/script", {"modes": ["applied", "pending", "weird"]})
                applied = await ledger.call(REFUND, refund_args("mcp_ord_1", 30000), call_id="mcp-1")
                assert (applied.kind, applied.status, applied.operation_key) == ("result", "applied", "mcp-1")
                assert applied.balances and applied.balances["available"] == 70000
                pending = await ledger.call(REFUND, refund_args("mcp_ord_2", 20000), call_id="mcp-2")
                assert (pending.kind, pending.status, pending.retry) == ("retry", "pending", "same")
                unknown = await ledger.call(REFUND, refund_args("mcp_ord_3", 10000), call_id="mcp-3")
                assert (unknown.kind, unknown.status, unknown.retry) == ("retry", "unknown", "same")

                await settle(d, ops, pending.attempt_id)
                await settle(d, ops, unknown.attempt_id)
                for args, before in ((refund_args("mcp_ord_2", 20000), pending), (refund_args("mcp_ord_3", 10000), unknown)):
                    done = await ledger.call(REFUND, args, call_id="mcp-later")
                    assert (done.kind, done.status) == ("result", "applied"), done
                    assert (done.operation_key, done.operation_id) == (before.operation_key, before.operation_id)
                assert d.provider_stats()["calls"] == calls + 3

                asked = await ledger.call(CREDIT, refund_args("mcp_ord_4", 5000), call_id="mcp-4")
                assert (asked.kind, asked.code, asked.retry) == ("approval", "approval_required", "operator")
                assert ledger.approval_request(CREDIT, refund_args("mcp_ord_4", 5000)) == asked
                grant = await ops.approve(asked.action_digest, reason="the team lead agreed")
                credited = await ledger.call(CREDIT, refund_args("mcp_ord_4", 5000), call_id="mcp-5", approval_id=grant["approval_id"])
                assert (credited.kind, credited.status, credited.operation_key) == ("result", "applied", f"mcp-5+{grant['approval_id']}")

                exceeded = await ledger.call(REFUND, refund_args("mcp_ord_1", 80000))
                assert (exceeded.kind, exceeded.code, exceeded.retry) == ("error", "shared_guarantee_exceeded", "never")
                assert exceeded.reason and exceeded.balances and exceeded.balances["available"] == 70000
                no_amount = await ledger.call(REFUND, {"order_id": "mcp_ord_6"})
                assert (no_amount.kind, no_amount.code, no_amount.retry) == ("error", "shared_guarantee_amount_invalid", "never")
                no_tool = await ledger.call("adp_payments.no_such_tool", refund_args("mcp_ord_6", 100))
                assert (no_tool.kind, no_tool.code, no_tool.retry) == ("error", "request_malformed", "never"), no_tool
                await ops.kill_switch(True, "mcp test")
                try:
                    stopped = await ledger.call(REFUND, refund_args("mcp_ord_7", 100))
                finally:
                    await ops.kill_switch(False, "mcp test done")
                assert (stopped.kind, stopped.code, stopped.retry) == ("error", "kill_switch_engaged", "operator")
                assert d.provider_stats()["calls"] == calls + 4

            # The network fails mid-session: a retry, and the next call resends the same key.
            host, port = d.mcp_url.split("//")[1].split("/")[0].split(":")
            async with Proxy(host, int(port)) as proxy:
                async with LedgerMCP(f"http://127.0.0.1:{proxy.port}/mcp", TOKEN, "mcp_run", timeout=5) as ledger:
                    assert len(await ledger.tools()) == 2
                    proxy.break_all()
                    lost = await ledger.call(REFUND, refund_args("mcp_ord_8", 100), call_id="mcp-8")
                    assert (lost.kind, lost.status, lost.retry) == ("retry", "unknown", "same"), lost
                    again = await ledger.call(REFUND, refund_args("mcp_ord_8", 100), call_id="mcp-9")
                    assert (again.kind, again.operation_key) == ("retry", "mcp-8")

    asyncio.run(main())
