#!/usr/bin/env python3
"""A refund agent as a LangGraph graph, its tools governed by the ledger.

The graph is the usual agent loop (a model node, a ToolNode, tools_condition)
with a checkpointer; the model is LangChain's fake chat model emitting the
tool calls of a script (no key, no network); swap in a real chat model bound
to the tools and nothing else changes. The tools come from
contextos_ledger.frameworks.langchain. The story: a refund applied; one
pending and one unknown, asked again later under the same operation keys
once the provider settled them; a goodwill credit that interrupts the graph
for an operator's approval, resumed with the approval id; a refund over the
order's ceiling, an error ToolMessage the agent reports. See story.py for
the environment; `make demo-frameworks` runs it against a real contextosd.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Iterator, List

from contextos_ledger.frameworks import LedgerTool
from contextos_ledger.frameworks.langchain import approval_requests, ledger_tool
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command

from story import ARGS, CREDIT, REFUND, Story, connect, main, provider, provider_calls, refund, settle


class Script(Iterator[AIMessage]):
    """What the fake model says next: the story appends before each turn."""

    def __init__(self) -> None:
        self.queue: List[AIMessage] = []

    def __next__(self) -> AIMessage:
        return self.queue.pop(0)

    def call(self, tool: str, args: Dict[str, Any], call_id: str) -> None:
        self.queue.append(AIMessage(content="", tool_calls=[{"name": tool, "args": args, "id": call_id, "type": "tool_call"}]))

    def say(self, text: str) -> None:
        self.queue.append(AIMessage(content=text))


def build(tools: List[Any], script: Script) -> Any:
    model = GenericFakeChatModel(messages=script)

    async def think(state: MessagesState) -> Dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    g = StateGraph(MessagesState)
    g.add_node("model", think)
    g.add_node("tools", ToolNode(tools))
    g.add_edge(START, "model")
    g.add_conditional_edges("model", tools_condition)
    g.add_edge("tools", "model")
    return g.compile(checkpointer=InMemorySaver())  # an interrupt needs a checkpointer


def results(out: Dict[str, Any], since: int = 0) -> List[Dict[str, Any]]:
    """The outcome (a ToolMessage's artifact) of each tool call after message ``since``."""
    return [m.artifact for m in out["messages"][since:] if isinstance(m, ToolMessage)]


async def story() -> int:
    s = Story("A LangGraph agent (agent_chat) refunds through the ledger")
    run = os.environ["AGENT_RUN"]
    async with await connect("AGENT", "AGENT_PASSWORD") as client, await connect("OPS", "OPS_PASSWORD") as ops:
        refund_tool = LedgerTool(client, REFUND, run, name="issue_refund", parameters=ARGS,
                                 description="Refund part of an order, in minor units.", deadline=2)
        credit_tool = LedgerTool(client, CREDIT, run, name="issue_goodwill_credit", parameters=ARGS,
                                 description="A goodwill credit on an order; an operator approves each.", deadline=2,
                                 operations=refund_tool.operations)
        script = Script()
        app = build([ledger_tool(refund_tool), ledger_tool(credit_tool)], script)
        calls = provider_calls()

        s.step("1. Three refunds: the provider answers the first, leaves the second pending, the third unreadable")
        provider("/admin/script", {"modes": ["applied", "pending", "weird"]})
        script.call("issue_refund", refund("lg_ord_1", 30000), "call_1")
        script.call("issue_refund", refund("lg_ord_2", 20000), "call_2")
        script.call("issue_refund", refund("lg_ord_3", 10000), "call_3")
        script.say("One refund is done; two are waiting for the provider.")
        out = await app.ainvoke({"messages": [HumanMessage("Refund INR 300 on lg_ord_1, 200 on lg_ord_2, 100 on lg_ord_3.")]},
                                {"configurable": {"thread_id": "refunds"}})
        applied, pending, unknown = results(out)
        for what, o in (("lg_ord_1", applied), ("lg_ord_2", pending), ("lg_ord_3", unknown)):
            s.show(what, o)
        s.check(applied["status"] == "applied" and applied["balances"]["available"] == 70000, "applied, INR 700 left on lg_ord_1")
        s.check((pending["kind"], unknown["kind"]) == ("retry", "retry"), "pending and unknown are retries")

        s.step("2. The provider settles both; an operator reconciles; the agent asks again in the same thread")
        s.check(await settle(ops, pending["attempt_id"]) and await settle(ops, unknown["attempt_id"]), "both reconciled as applied")
        seen = len(out["messages"])
        script.call("issue_refund", refund("lg_ord_2", 20000), "call_4")
        script.call("issue_refund", refund("lg_ord_3", 10000), "call_5")
        script.say("Both refunds went through.")
        out = await app.ainvoke({"messages": [HumanMessage("Check on them.")]}, {"configurable": {"thread_id": "refunds"}})
        for name, o, before in zip(("lg_ord_2", "lg_ord_3"), results(out, seen), (pending, unknown)):
            s.show(name, o)
            s.check(o["status"] == "applied" and (o["operation_key"], o["operation_id"]) == (before["operation_key"], before["operation_id"]),
                    f"applied, under the same key {before['operation_key']} (the same operation)")
        s.check(provider_calls() == calls + 3, "no second provider call for either")

        s.step("3. A goodwill credit: the graph stops on an interrupt until an operator approves")
        thread = {"configurable": {"thread_id": "credit"}}
        script.call("issue_goodwill_credit", refund("lg_ord_4", 5000), "call_6")
        out = await app.ainvoke({"messages": [HumanMessage("Credit INR 50 on lg_ord_4 for the delay.")]}, thread)
        requests = approval_requests(out)
        s.check(len(requests) == 1 and requests[0]["code"] == "approval_required", "interrupted: approval_required, with the action digest")
        digest = requests[0]["action_digest"] if requests else ""
        grant = await ops.approve(digest, reason="the team lead agreed")  # ctx approve --digest ...
        print(f"     operator: approved {digest[:16]}… as {grant['approval_id']}")
        script.say("The credit is done.")
        out = await app.ainvoke(Command(resume={"approval_id": grant["approval_id"]}), thread)
        (credited,) = results(out)
        s.show("lg_ord_4", credited)
        s.check(credited["status"] == "applied", "resumed: applied with the approval, under a new operation key")

        s.step("4. A refund over the order's ceiling: an error ToolMessage, and the agent tells the customer")
        script.call("issue_refund", refund("lg_ord_1", 80000), "call_7")
        script.say("I cannot refund more on lg_ord_1: its refund ceiling is reached.")
        out = await app.ainvoke({"messages": [HumanMessage("Refund INR 800 more on lg_ord_1.")]}, {"configurable": {"thread_id": "more"}})
        (msg,) = [m for m in out["messages"] if isinstance(m, ToolMessage)]
        s.show("lg_ord_1", msg.artifact)
        s.check(msg.status == "error" and (msg.artifact["code"], msg.artifact["retry"]) == ("shared_guarantee_exceeded", "never"),
                "an error ToolMessage: shared_guarantee_exceeded, retry class never")
        print(f"     agent: {out['messages'][-1].content}")
        s.check(provider_calls() == calls + 4 and not script.queue, "4 provider calls in all, the script spent")
    return s.end()


if __name__ == "__main__":
    main(story)
