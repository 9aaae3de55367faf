"""The ledger's capabilities as LangChain tools, for LangGraph graphs
(``pip install 'contextos-ledger[langgraph]'``).

    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition
    from langgraph.types import Command
    from contextos_ledger.frameworks import LedgerTool
    from contextos_ledger.frameworks.langchain import approval_requests, ledger_tool

    refund = ledger_tool(LedgerTool(client, "adp_payments.issue_refund", run_id="run_42", name="issue_refund",
                                    parameters={...}))
    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)                # a chat model bound to [refund]
    graph.add_node("tools", ToolNode([refund]))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    app = graph.compile(checkpointer=InMemorySaver())  # interrupts need a checkpointer
    out = await app.ainvoke({"messages": [...]}, config)
    for request in approval_requests(out):            # the ledger asked for an approval
        ...                                           # an operator approves request["action_digest"]
        out = await app.ainvoke(Command(resume={"approval_id": approval_id}), config)

What the graph gets (a ToolMessage whose ``artifact`` is the outcome's JSON,
outcome.py):

* ``applied`` / ``not_applied``: a successful ToolMessage with the balances.
* ``pending`` / ``unknown``: a successful ToolMessage asking for the call
  again with the same arguments; the tool resends the same operation key.
* ``approval_required``: an ``interrupt`` (langgraph.types.interrupt) whose
  value is the outcome (``type: contextos_approval``, ``action_digest``,
  ``arguments``). Resume with ``Command(resume={"approval_id": ...})`` (or the
  id as a string) and the call is proposed with it under a new operation key;
  resume with anything else and the ToolMessage says it was not approved.
  With ``approval="result"`` (a tool used outside a graph) it is an error
  ToolMessage carrying the digest instead.
* any other refusal: a ToolMessage with ``status="error"`` whose text starts
  with ``<code> (retry <class>): <reason>``; the graph goes on.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Literal, Mapping, Optional, Tuple, Union

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, ToolException
from langgraph.types import interrupt
from pydantic import ConfigDict

from .outcome import Outcome
from .tool import LedgerTool

#: The ``type`` of the value of an interrupt for an approval.
APPROVAL_INTERRUPT = "contextos_approval"


def _approval_id(answer: Any) -> Tuple[str, str]:
    """(approval id, "") from a resume value that grants one, else ("", why not)."""
    if isinstance(answer, str) and answer:
        return answer, ""
    if isinstance(answer, Mapping):
        if isinstance(answer.get("approval_id"), str) and answer["approval_id"]:
            return answer["approval_id"], ""
        return "", str(answer.get("reason") or "no approval id in the resume value")
    return "", "no approval id in the resume value"


class LedgerLangChainTool(BaseTool):
    """A LedgerTool as a LangChain tool (use ``ledger_tool``). Async only:
    call it with ``ainvoke`` (as ToolNode does in an async graph)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    ledger: LedgerTool
    approval: Literal["interrupt", "result"] = "interrupt"
    handle_tool_error: Union[bool, str, Any, None] = True

    def _to_args_and_kwargs(self, tool_input: Union[str, Dict[str, Any]],
                            tool_call_id: Optional[str]) -> Tuple[Tuple[str, ...], Dict[str, Any]]:
        # The arguments go to _arun as one mapping, with the tool-call id the
        # operation key is derived from.
        args, kwargs = super()._to_args_and_kwargs(tool_input, tool_call_id)
        if args:
            raise ToolException("request_malformed (retry never): the tool's arguments are not a JSON object")
        return (), {"arguments": kwargs, "tool_call_id": tool_call_id}

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the ledger's tools are async: call them with ainvoke")

    async def _arun(self, arguments: Dict[str, Any], tool_call_id: Optional[str] = None) -> Any:
        outcome = await self.ledger.call(arguments, call_id=tool_call_id)
        if outcome.kind == "approval" and self.approval == "interrupt":
            approval_id, why = _approval_id(interrupt({"type": APPROVAL_INTERRUPT, **outcome.to_dict(),
                                                       "arguments": dict(arguments)}))
            if approval_id:
                outcome = await self.ledger.call(arguments, call_id=tool_call_id, approval_id=approval_id)
            else:
                outcome = dataclasses.replace(outcome, next=f"not approved ({why}): do not retry without an approval")
        return self._message(outcome, tool_call_id)

    def _message(self, outcome: Outcome, tool_call_id: Optional[str]) -> Any:
        if tool_call_id is None:
            if outcome.is_error:
                raise ToolException(outcome.text())
            return outcome.to_json()
        return ToolMessage(content=outcome.text(), artifact=outcome.to_dict(), tool_call_id=tool_call_id, name=self.name,
                           status="error" if outcome.is_error else "success")


def ledger_tool(tool: LedgerTool, *, approval: Literal["interrupt", "result"] = "interrupt") -> LedgerLangChainTool:
    """The LangChain tool of a LedgerTool: its name, description and
    parameters (as the JSON Schema ``args_schema``)."""
    return LedgerLangChainTool(name=tool.name, description=tool.description, args_schema=dict(tool.parameters),
                               ledger=tool, approval=approval)


def approval_requests(state: Any) -> List[Dict[str, Any]]:
    """The approval requests a graph stopped on: the values of the
    ``__interrupt__`` entries of an ``ainvoke`` result (or of a state
    snapshot's ``interrupts``) made by the ledger's tools."""
    found = state.get("__interrupt__", ()) if isinstance(state, Mapping) else getattr(state, "interrupts", ())
    return [dict(i.value) for i in found or () if isinstance(i.value, Mapping) and i.value.get("type") == APPROVAL_INTERRUPT]


__all__ = ["LedgerLangChainTool", "ledger_tool", "approval_requests", "APPROVAL_INTERRUPT"]
