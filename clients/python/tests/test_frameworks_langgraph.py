"""The LangChain tool in a LangGraph graph against a real contextosd, with
LangChain's fake chat model emitting the tool calls (no key, no network)."""

from __future__ import annotations

import asyncio
from typing import Any, Dict, Iterator, List

import pytest
from conftest import Daemon
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command
from world import CREDIT, REFUND, SCHEMA, refund_args, settle

from contextos_ledger.frameworks import LedgerTool
from contextos_ledger.frameworks.langchain import APPROVAL_INTERRUPT, approval_requests, ledger_tool


def call(name: str, args: Dict[str, Any], call_id: str) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id, "type": "tool_call"}])


class Script:
    """The messages the fake model says next, appended by the test."""

    def __init__(self) -> None:
        self.queue: List[AIMessage] = []

    def __iter__(self) -> Iterator[AIMessage]:
        return self

    def __next__(self) -> AIMessage:
        if not self.queue:
            raise AssertionError("the model was called past its script")
        return self.queue.pop(0)


def graph(tools: List[Any], script: Script) -> Any:
    model = GenericFakeChatModel(messages=script)

    async def think(state: MessagesState) -> Dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    g = StateGraph(MessagesState)
    g.add_node("model", think)
    g.add_node("tools", ToolNode(tools))
    g.add_edge(START, "model")
    g.add_conditional_edges("model", tools_condition)
    g.add_edge("tools", "model")
    return g.compile(checkpointer=InMemorySaver())


def tool_messages(out: Dict[str, Any]) -> List[ToolMessage]:
    return [m for m in out["messages"] if isinstance(m, ToolMessage)]


def test_langgraph_maps_each_outcome(frameworks_daemon: Daemon) -> None:
    """applied, pending and unknown are successful ToolMessages (the last two
    resent under the same key when the model calls again); approval_required
    interrupts the graph, and resuming it with the operator's approval id
    proposes the call with it; a refusal is an error ToolMessage with its code
    and retry class, and the graph goes on."""
    d = frameworks_daemon

    async def main() -> None:
        async with await d.connect("ops_alice") as ops, await d.connect("agent_chat") as client:
            await ops.admit_run("lg_run", "agent_chat", calls=20, amount=500000)
            refund = LedgerTool(client, REFUND, "lg_run", name="issue_refund", parameters=SCHEMA, deadline=1.5)
            credit = LedgerTool(client, CREDIT, "lg_run", name="issue_goodwill_credit", parameters=SCHEMA, deadline=1.5,
                                operations=refund.operations)
            script = Script()
            app = graph([ledger_tool(refund), ledger_tool(credit)], script)
            calls = d.provider_stats()["calls"]

            # 1. applied, pending and unknown.
            d.provider_post("/admin/script", {"modes": ["applied", "pending", "weird"]})
            script.queue += [call("issue_refund", refund_args("lg_ord_1", 30000), "lg-1"),
                             call("issue_refund", refund_args("lg_ord_2", 20000), "lg-2"),
                             call("issue_refund", refund_args("lg_ord_3", 10000), "lg-3"),
                             AIMessage(content="One refund done, two waiting.")]
            out = await app.ainvoke({"messages": [HumanMessage("refund three orders")]}, {"configurable": {"thread_id": "lg-a"}})
            applied, pending, unknown = (m.artifact for m in tool_messages(out))
            assert [m.status for m in tool_messages(out)] == ["success"] * 3
            assert (applied["kind"], applied["status"], applied["balances"]["available"]) == ("result", "applied", 70000)
            assert (pending["kind"], pending["status"], pending["operation_key"]) == ("retry", "pending", "lg-2")
            assert (unknown["kind"], unknown["status"], unknown["operation_key"]) == ("retry", "unknown", "lg-3")
            assert out["messages"][-1].content == "One refund done, two waiting."

            # 2. Settled; the model calls again: the same keys, the same operations, no new provider call.
            await settle(d, ops, pending["attempt_id"])
            await settle(d, ops, unknown["attempt_id"])
            script.queue += [call("issue_refund", refund_args("lg_ord_2", 20000), "lg-4"),
                             call("issue_refund", refund_args("lg_ord_3", 10000), "lg-5"),
                             AIMessage(content="Both went through.")]
            out = await app.ainvoke({"messages": [HumanMessage("check them")]}, {"configurable": {"thread_id": "lg-b"}})
            for m, before in zip(tool_messages(out), (pending, unknown)):
                assert (m.artifact["status"], m.artifact["operation_key"]) == ("applied", before["operation_key"])
                assert m.artifact["operation_id"] == before["operation_id"]
            assert d.provider_stats()["calls"] == calls + 3

            # 3. approval_required interrupts; the resumed graph proposes with the approval.
            thread = {"configurable": {"thread_id": "lg-c"}}
            script.queue += [call("issue_goodwill_credit", refund_args("lg_ord_4", 5000), "lg-6")]
            out = await app.ainvoke({"messages": [HumanMessage("credit lg_ord_4")]}, thread)
            (request,) = approval_requests(out)
            assert (request["type"], request["code"], request["retry"]) == (APPROVAL_INTERRUPT, "approval_required", "operator")
            assert request["arguments"] == refund_args("lg_ord_4", 5000) and len(request["action_digest"]) == 64
            assert approval_requests(await app.aget_state(thread)) == [request]
            grant = await ops.approve(request["action_digest"], reason="the team lead agreed")
            script.queue += [AIMessage(content="Credited.")]
            out = await app.ainvoke(Command(resume={"approval_id": grant["approval_id"]}), thread)
            (credited,) = tool_messages(out)
            assert credited.status == "success" and credited.artifact["status"] == "applied", credited
            assert credited.artifact["operation_key"] == f"lg-6+{grant['approval_id']}"
            assert out["messages"][-1].content == "Credited." and not approval_requests(out)

            # A human who does not approve: the ToolMessage says so, as an error.
            thread = {"configurable": {"thread_id": "lg-d"}}
            script.queue += [call("issue_goodwill_credit", refund_args("lg_ord_5", 4000), "lg-7")]
            out = await app.ainvoke({"messages": [HumanMessage("credit lg_ord_5")]}, thread)
            assert len(approval_requests(out)) == 1
            script.queue += [AIMessage(content="Not credited.")]
            out = await app.ainvoke(Command(resume={"approved": False, "reason": "not for this order"}), thread)
            (refused,) = tool_messages(out)
            assert refused.status == "error" and refused.artifact["code"] == "approval_required"
            assert "not approved (not for this order)" in refused.artifact["next"]

            # 4. Refusals are error ToolMessages; the graph goes on.
            await ops.kill_switch(True, "langgraph test")
            try:
                script.queue += [call("issue_refund", refund_args("lg_ord_6", 100), "lg-8"), AIMessage(content="Stopped.")]
                out = await app.ainvoke({"messages": [HumanMessage("refund lg_ord_6")]}, {"configurable": {"thread_id": "lg-e"}})
            finally:
                await ops.kill_switch(False, "langgraph test done")
            (stopped,) = tool_messages(out)
            assert stopped.status == "error" and str(stopped.content).startswith("kill_switch_engaged (retry operator): ")
            script.queue += [call("issue_refund", refund_args("lg_ord_1", 80000), "lg-9"), AIMessage(content="Ceiling reached.")]
            out = await app.ainvoke({"messages": [HumanMessage("refund lg_ord_1 more")]}, {"configurable": {"thread_id": "lg-f"}})
            (exceeded,) = tool_messages(out)
            assert exceeded.status == "error" and (exceeded.artifact["code"], exceeded.artifact["retry"]) == ("shared_guarantee_exceeded", "never")
            assert out["messages"][-1].content == "Ceiling reached."
            assert d.provider_stats()["calls"] == calls + 4 and not script.queue

    asyncio.run(main())


def test_langchain_tool_outside_a_graph(frameworks_daemon: Daemon) -> None:
    """Without a tool call (plain arguments), a result is the outcome's JSON
    and a refusal the error text; approval="result" answers
    approval_required with the digest instead of an interrupt; the sync path
    says it is async only."""
    d = frameworks_daemon

    async def main() -> None:
        async with await d.connect("ops_alice") as ops, await d.connect("agent_chat") as client:
            await ops.admit_run("lg_run_plain", "agent_chat", calls=5, amount=100000)
            credit = ledger_tool(LedgerTool(client, CREDIT, "lg_run_plain", parameters=SCHEMA), approval="result")
            text = await credit.ainvoke(refund_args("lg_ord_p1", 100))
            assert text.startswith("approval_required (retry operator): ")
            msg = await credit.ainvoke({"type": "tool_call", "name": credit.name, "id": "lgp-1", "args": refund_args("lg_ord_p1", 100)})
            assert isinstance(msg, ToolMessage) and msg.status == "error" and msg.artifact["kind"] == "approval"
            refund = ledger_tool(LedgerTool(client, REFUND, "lg_run_plain", parameters=SCHEMA))
            assert '"status":"applied"' in await refund.ainvoke(refund_args("lg_ord_p2", 100))
            with pytest.raises(NotImplementedError):
                refund.invoke(refund_args("lg_ord_p3", 100))

    asyncio.run(main())
