#!/usr/bin/env python3
"""A refund agent on the OpenAI Agents SDK, its tools governed by the ledger.

The agent's model is the SDK's own scripted model (agents.testing.
ScriptedModel): no key, no network; swap in a real model and nothing else
changes. Its two tools come from contextos_ledger.frameworks.openai_agents:
a refund and a goodwill credit (which needs an operator's approval). The
story: a refund applied; one pending and one whose outcome is unknown, both
asked again later under the same operation keys once the provider settled
them; a credit the ledger wants approved, held by the SDK's human-in-the-loop
(needs_approval) until an operator approves it; a refund over the order's
ceiling, an error result the agent reports. See story.py for the
environment; `make demo-frameworks` runs it against a real contextosd.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List

from agents import Agent, RunConfig, Runner, ToolCallOutputItem
from agents.testing import ScriptedModel, assistant_message, function_call
from contextos_ledger.frameworks import LedgerTool
from contextos_ledger.frameworks.openai_agents import approval_request, function_tool, supply_approval

from story import ARGS, CREDIT, REFUND, Story, connect, main, provider, provider_calls, refund, settle

NO_TRACING = RunConfig(tracing_disabled=True)  # nothing leaves this machine


def outcomes(result: Any) -> List[Dict[str, Any]]:
    """The outcome JSON of each tool call of a run (the last line of each output)."""
    import json

    return [json.loads(str(i.output).splitlines()[-1]) for i in result.new_items if isinstance(i, ToolCallOutputItem)]


async def story() -> int:
    s = Story("An OpenAI Agents SDK agent (agent_email) refunds through the ledger")
    run = os.environ["AGENT_RUN"]
    async with await connect("AGENT", "AGENT_PASSWORD") as client, await connect("OPS", "OPS_PASSWORD") as ops:
        refund_tool = LedgerTool(client, REFUND, run, name="issue_refund", parameters=ARGS,
                                 description="Refund part of an order, in minor units.", deadline=2)
        credit_tool = LedgerTool(client, CREDIT, run, name="issue_goodwill_credit", parameters=ARGS,
                                 description="A goodwill credit on an order; an operator approves each.", deadline=2,
                                 operations=refund_tool.operations)
        model = ScriptedModel()
        agent = Agent(name="support", instructions="Refund what customers are owed, within policy.", model=model,
                      tools=[function_tool(refund_tool), function_tool(credit_tool)])
        calls = provider_calls()

        s.step("1. Three refunds: the provider answers the first, leaves the second pending, the third unreadable")
        provider("/admin/script", {"modes": ["applied", "pending", "weird"]})
        model.extend([[function_call("issue_refund", refund("oa_ord_1", 30000), call_id="call_1")],
                      [function_call("issue_refund", refund("oa_ord_2", 20000), call_id="call_2")],
                      [function_call("issue_refund", refund("oa_ord_3", 10000), call_id="call_3")],
                      [assistant_message("One refund is done; two are waiting for the provider.")]])
        first = await Runner.run(agent, "Refund INR 300 on oa_ord_1, INR 200 on oa_ord_2 and INR 100 on oa_ord_3.", run_config=NO_TRACING)
        applied, pending, unknown = outcomes(first)
        for what, o in (("oa_ord_1", applied), ("oa_ord_2", pending), ("oa_ord_3", unknown)):
            s.show(what, o)
        s.check(applied["status"] == "applied" and applied["balances"]["available"] == 70000, "applied, INR 700 left on oa_ord_1")
        s.check((pending["kind"], pending["status"]) == ("retry", "pending"), "pending is a retry")
        s.check((unknown["kind"], unknown["status"]) == ("retry", "unknown"), "unknown is a retry")
        print(f"     agent: {first.final_output}")

        s.step("2. The provider settles both; an operator reconciles (ctx reconcile); the agent asks again")
        s.check(await settle(ops, pending["attempt_id"]) and await settle(ops, unknown["attempt_id"]), "both reconciled as applied")
        model.extend([[function_call("issue_refund", refund("oa_ord_2", 20000), call_id="call_4")],
                      [function_call("issue_refund", refund("oa_ord_3", 10000), call_id="call_5")],
                      [assistant_message("Both refunds went through.")]])
        second = await Runner.run(agent, "Check on the refunds of oa_ord_2 and oa_ord_3.", run_config=NO_TRACING)
        for name, o, before in zip(("oa_ord_2", "oa_ord_3"), outcomes(second), (pending, unknown)):
            s.show(name, o)
            s.check(o["status"] == "applied" and o["operation_key"] == before["operation_key"] and o["operation_id"] == before["operation_id"],
                    f"applied, under the same key {before['operation_key']} (the same operation)")
        s.check(provider_calls() == calls + 3, "no second provider call for either")

        s.step("3. A goodwill credit: the ledger asks for an approval; the SDK holds the next call for a human")
        args = refund("oa_ord_4", 5000)
        model.extend([[function_call("issue_goodwill_credit", args, call_id="call_6")],
                      [function_call("issue_goodwill_credit", args, call_id="call_7")]])
        third = await Runner.run(agent, "Credit INR 50 on oa_ord_4 for the delay.", run_config=NO_TRACING)
        (asked,) = outcomes(third)
        s.show("oa_ord_4", asked)
        s.check(asked["kind"] == "approval" and len(third.interruptions) == 1, "approval_required, and the run stops with an interruption")
        item = third.interruptions[0]
        request = approval_request(credit_tool, item)
        s.check(request is not None and request.action_digest == asked["action_digest"], "the interruption carries the action digest")
        assert request is not None
        grant = await ops.approve(request.action_digest, reason="the team lead agreed")  # ctx approve --digest ...
        print(f"     operator: approved {request.action_digest[:16]}… as {grant['approval_id']}")
        supply_approval(credit_tool, item, grant["approval_id"])
        state = third.to_state()
        state.approve(item)
        model.extend([[assistant_message("The credit is done.")]])
        resumed = await Runner.run(agent, state, run_config=NO_TRACING)
        credited = outcomes(resumed)[-1]
        s.show("oa_ord_4", credited)
        s.check(credited["status"] == "applied", "applied with the approval, under a new operation key")

        s.step("4. A refund over the order's ceiling: an error result, and the agent tells the customer")
        model.extend([[function_call("issue_refund", refund("oa_ord_1", 80000), call_id="call_8")],
                      [assistant_message("I cannot refund more on oa_ord_1: its refund ceiling is reached.")]])
        fourth = await Runner.run(agent, "Refund INR 800 more on oa_ord_1.", run_config=NO_TRACING)
        (exceeded,) = outcomes(fourth)
        s.show("oa_ord_1", exceeded)
        s.check((exceeded["kind"], exceeded["code"], exceeded["retry"]) == ("error", "shared_guarantee_exceeded", "never"),
                "shared_guarantee_exceeded, retry class never")
        print(f"     agent: {fourth.final_output}")
        s.check(provider_calls() == calls + 4, "4 provider calls in all")
        model.assert_complete()
    return s.end()


if __name__ == "__main__":
    main(story)
