"""The OpenAI Agents SDK adapter against a real contextosd, with the SDK's
own scripted model (agents.testing.ScriptedModel: no key, no network)."""

from __future__ import annotations

import asyncio
from typing import Any, Dict, List

from agents import Agent, RunConfig, Runner, ToolCallOutputItem
from agents.testing import ScriptedModel, assistant_message, function_call
from conftest import Daemon
from world import CREDIT, REFUND, SCHEMA, last_json, refund_args, settle

from contextos_ledger.frameworks import LedgerTool
from contextos_ledger.frameworks.openai_agents import approval_request, function_tool, supply_approval

NO_TRACING = RunConfig(tracing_disabled=True)


def outputs(result: Any) -> List[Dict[str, Any]]:
    """The outcome of each tool call of a run, in order."""
    return [last_json(str(i.output)) for i in result.new_items if isinstance(i, ToolCallOutputItem)]


def test_openai_agents_maps_each_outcome(frameworks_daemon: Daemon) -> None:
    """applied, pending and unknown are tool results (the last two resent
    under the same key when the model calls again); approval_required holds
    the model's next call of that action through needs_approval until a human
    approves it in the run state with an operator's approval id; a refusal is
    an error text with its code and retry class, and the run goes on."""
    d = frameworks_daemon

    async def main() -> None:
        async with await d.connect("ops_alice") as ops, await d.connect("agent_email") as client:
            await ops.admit_run("oa_run", "agent_email", calls=20, amount=500000)
            refund = LedgerTool(client, REFUND, "oa_run", name="issue_refund", parameters=SCHEMA, deadline=1.5)
            credit = LedgerTool(client, CREDIT, "oa_run", name="issue_goodwill_credit", parameters=SCHEMA, deadline=1.5,
                                operations=refund.operations)
            model = ScriptedModel()
            agent = Agent(name="support", instructions="Refund what the customer is owed.", model=model,
                          tools=[function_tool(refund), function_tool(credit)])
            calls = d.provider_stats()["calls"]

            # 1. applied, pending and unknown.
            d.provider_post("/admin/script", {"modes": ["applied", "pending", "weird"]})
            model.extend([[function_call("issue_refund", refund_args("oa_ord_1", 30000), call_id="oa-1")],
                          [function_call("issue_refund", refund_args("oa_ord_2", 20000), call_id="oa-2")],
                          [function_call("issue_refund", refund_args("oa_ord_3", 10000), call_id="oa-3")],
                          [assistant_message("One refund done, two waiting.")]])
            first = await Runner.run(agent, "refund orders oa_ord_1, oa_ord_2, oa_ord_3", run_config=NO_TRACING)
            applied, pending, unknown = outputs(first)
            assert (applied["kind"], applied["status"], applied["balances"]["available"]) == ("result", "applied", 70000)
            assert (pending["kind"], pending["status"], pending["retry"]) == ("retry", "pending", "same")
            assert (unknown["kind"], unknown["status"], unknown["retry"]) == ("retry", "unknown", "same")
            assert pending["operation_key"] == "oa-2" and unknown["operation_key"] == "oa-3"
            assert first.final_output == "One refund done, two waiting."

            # 2. The world settles both; the model calls again (new call ids): the same keys, the same operations.
            await settle(d, ops, pending["attempt_id"])
            await settle(d, ops, unknown["attempt_id"])
            model.extend([[function_call("issue_refund", refund_args("oa_ord_2", 20000), call_id="oa-4")],
                          [function_call("issue_refund", refund_args("oa_ord_3", 10000), call_id="oa-5")],
                          [assistant_message("Both refunds went through.")]])
            second = await Runner.run(agent, "check the refunds of oa_ord_2 and oa_ord_3", run_config=NO_TRACING)
            for done, before in zip(outputs(second), (pending, unknown)):
                assert (done["kind"], done["status"]) == ("result", "applied"), done
                assert (done["operation_key"], done["operation_id"]) == (before["operation_key"], before["operation_id"])
            assert d.provider_stats()["calls"] == calls + 3

            # 3. approval_required, then the SDK's human-in-the-loop.
            args = refund_args("oa_ord_4", 5000)
            model.extend([[function_call("issue_goodwill_credit", args, call_id="oa-6")],
                          [function_call("issue_goodwill_credit", args, call_id="oa-7")]])
            third = await Runner.run(agent, "credit oa_ord_4 INR 50 for the delay", run_config=NO_TRACING)
            (asked,) = outputs(third)
            assert (asked["kind"], asked["code"], asked["retry"]) == ("approval", "approval_required", "operator")
            assert len(third.interruptions) == 1, "the second call of the action waits for a human"
            item = third.interruptions[0]
            request = approval_request(credit, item)
            assert request is not None and request.action_digest == asked["action_digest"]
            assert approval_request(refund, item) is None
            grant = await ops.approve(request.action_digest, reason="the team lead agreed")
            supply_approval(credit, item, grant["approval_id"])
            state = third.to_state()
            state.approve(item)
            model.extend([[assistant_message("Credited.")]])
            resumed = await Runner.run(agent, state, run_config=NO_TRACING)
            (credited,) = outputs(resumed)[-1:]
            assert (credited["kind"], credited["status"]) == ("result", "applied"), credited
            assert credited["operation_key"] == f"oa-7+{grant['approval_id']}"
            assert resumed.final_output == "Credited." and not resumed.interruptions

            # 4. Refusals are error results; the run goes on to the model's answer.
            model.extend([[function_call("issue_refund", refund_args("oa_ord_1", 80000), call_id="oa-8")],
                          [assistant_message("The order's refund ceiling is reached.")]])
            fourth = await Runner.run(agent, "refund oa_ord_1 INR 800 more", run_config=NO_TRACING)
            (text,) = [str(i.output) for i in fourth.new_items if isinstance(i, ToolCallOutputItem)]
            assert text.startswith("shared_guarantee_exceeded (retry never): refunds-per-order: committed 30000 + held 0 + amount 80000")
            exceeded = last_json(text)
            assert (exceeded["kind"], exceeded["balances"]["available"]) == ("error", 70000)
            assert fourth.final_output == "The order's refund ceiling is reached."
            await ops.kill_switch(True, "openai agents test")
            try:
                model.extend([[function_call("issue_refund", refund_args("oa_ord_5", 100), call_id="oa-9")],
                              [assistant_message("Refunds are stopped; a human will follow up.")]])
                fifth = await Runner.run(agent, "refund oa_ord_5", run_config=NO_TRACING)
            finally:
                await ops.kill_switch(False, "openai agents test done")
            (stopped,) = outputs(fifth)
            assert (stopped["kind"], stopped["code"], stopped["retry"]) == ("error", "kill_switch_engaged", "operator")
            assert d.provider_stats()["calls"] == calls + 4
            model.assert_complete()

    asyncio.run(main())
