#!/usr/bin/env python3
"""A refund agent on the official MCP Python SDK, calling contextosd's MCP
gateway (docs/mcp.md) through contextos_ledger.frameworks.mcp.

The agent is a scripted loop (no model, no key): it lists the gateway's tools
(one per capability), then works through a plan of tool calls, acting on each
outcome as the adapter maps it: a result is done, a retry is asked again
later (the adapter resends the same operation key), an approval waits for an
operator's approval id, an error is reported. The story is the one the other
framework agents tell. See story.py for the environment (CTX_MCP_URL and
AGENT_MCP_TOKEN here); `make demo-frameworks` runs it against a real
contextosd.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Tuple

from contextos_ledger.frameworks import Outcome
from contextos_ledger.frameworks.mcp import LedgerMCP

from story import CREDIT, REFUND, Story, connect, main, provider, provider_calls, refund, settle


async def story() -> int:
    s = Story("An MCP agent (agent_phone) refunds through contextosd's MCP gateway")
    async with await connect("OPS", "OPS_PASSWORD") as ops, \
            LedgerMCP(os.environ["CTX_MCP_URL"], os.environ["AGENT_MCP_TOKEN"], os.environ["AGENT_RUN"]) as ledger:
        tools = {t.name: t for t in await ledger.tools()}
        s.step(f"0. The gateway lists {len(tools)} tools: {', '.join(sorted(tools))}")
        s.check({REFUND, CREDIT} <= set(tools), "the refund and the goodwill credit are tools")
        calls = provider_calls()

        s.step("1. Three refunds: the provider answers the first, leaves the second pending, the third unreadable")
        provider("/admin/script", {"modes": ["applied", "pending", "weird"]})
        plan: List[Tuple[str, Dict[str, Any]]] = [(REFUND, refund("mcp_ord_1", 30000)), (REFUND, refund("mcp_ord_2", 20000)),
                                                  (REFUND, refund("mcp_ord_3", 10000))]
        later: List[Tuple[str, Dict[str, Any], Outcome]] = []
        for tool, args in plan:
            o = await ledger.call(tool, args)
            s.show(args["order_id"], o)
            if o.kind == "retry":
                later.append((tool, args, o))  # ask again later: the adapter resends the same key
        s.check([o.status for _, _, o in later] == ["pending", "unknown"], "pending and unknown are retries")

        s.step("2. The provider settles both; an operator reconciles; the agent asks again")
        s.check(all([await settle(ops, o.attempt_id) for _, _, o in later]), "both reconciled as applied")
        for tool, args, before in later:
            o = await ledger.call(tool, args)
            s.show(args["order_id"], o)
            s.check(o.status == "applied" and (o.operation_key, o.operation_id) == (before.operation_key, before.operation_id),
                    f"applied, under the same key {before.operation_key} (the same operation)")
        s.check(provider_calls() == calls + 3, "no second provider call for either")

        s.step("3. A goodwill credit: an approval outcome; the agent waits for an operator's approval id")
        credit = refund("mcp_ord_4", 5000)
        asked = await ledger.call(CREDIT, credit)
        s.show("mcp_ord_4", asked)
        s.check(asked.kind == "approval" and len(asked.action_digest) == 64, "approval_required, with the action digest")
        grant = await ops.approve(asked.action_digest, reason="the team lead agreed")  # ctx approve --digest ...
        print(f"     operator: approved {asked.action_digest[:16]}… as {grant['approval_id']}")
        credited = await ledger.call(CREDIT, credit, approval_id=grant["approval_id"])
        s.show("mcp_ord_4", credited)
        s.check(credited.status == "applied" and credited.operation_key != asked.operation_key,
                "applied with the approval, under a new operation key")

        s.step("4. A refund over the order's ceiling: an error, and the agent tells the customer")
        exceeded = await ledger.call(REFUND, refund("mcp_ord_1", 80000))
        s.show("mcp_ord_1", exceeded)
        s.check((exceeded.kind, exceeded.code, exceeded.retry) == ("error", "shared_guarantee_exceeded", "never"),
                "shared_guarantee_exceeded, retry class never")
        s.check(provider_calls() == calls + 4, "4 provider calls in all")
    return s.end()


if __name__ == "__main__":
    main(story)
