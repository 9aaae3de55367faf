"""The ledger's capabilities as function tools of the OpenAI Agents SDK
(``pip install 'contextos-ledger[openai-agents]'``).

    from agents import Agent, Runner
    from contextos_ledger.frameworks import LedgerTool
    from contextos_ledger.frameworks.openai_agents import approval_request, function_tool, supply_approval

    refund = LedgerTool(client, "adp_payments.issue_refund", run_id="run_42", name="issue_refund",
                        parameters={"type": "object", "properties": {...}, "required": [...]})
    agent = Agent(name="support", instructions="...", tools=[function_tool(refund)])
    result = await Runner.run(agent, "refund order ord_881")
    while result.interruptions:                      # an approval the ledger asked for
        state = result.to_state()
        for item in result.interruptions:
            request = approval_request(refund, item)  # its action digest, for an operator
            supply_approval(refund, item, approval_id)  # what the operator's `ctx approve` returned
            state.approve(item)                       # or state.reject(item)
        result = await Runner.run(agent, state)

What the model reads (the tool's output, outcome.py):

* ``applied`` / ``not_applied``: the outcome's JSON, with the balances.
* ``pending`` / ``unknown``: the outcome's JSON, asking for the call again
  with the same arguments; the tool resends the same operation key.
* ``approval_required``: an error text with the action digest. The model's
  next call with the same arguments is then held by the SDK's human-in-the-loop
  mechanism (``needs_approval``): the run stops with an interruption, a human
  has an operator approve the digest, the approval id is supplied, the call is
  approved in the run state and the resumed run proposes it with the approval.
* any other refusal: an error text ``<code> (retry <class>): <reason>`` and
  the JSON; the run goes on, the model decides.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Optional

from agents import FunctionTool, RunContextWrapper, ToolApprovalItem
from agents.tool_context import ToolContext

from .outcome import Outcome
from .tool import LedgerTool


def _arguments(raw: Optional[str]) -> Dict[str, Any]:
    args = json.loads(raw or "{}")
    if not isinstance(args, dict):
        raise ValueError("the tool's arguments are not a JSON object")
    return args


def function_tool(tool: LedgerTool, *, strict_json_schema: bool = False) -> FunctionTool:
    """The Agents SDK tool of a LedgerTool: its name, description and
    parameters, an invocation that returns the outcome's text, and an approval
    policy that holds a call whose action is waiting for an operator's
    approval. ``strict_json_schema`` asks the SDK for OpenAI's strict mode,
    which needs a schema that fits it."""

    async def invoke(ctx: ToolContext[Any], raw: str) -> str:
        try:
            args = _arguments(raw)
        except ValueError as e:
            return f"request_malformed (retry never): {e}"
        outcome = await tool.call(args, call_id=ctx.tool_call_id or None)
        return outcome.text()

    async def needs_approval(ctx: RunContextWrapper[Any], params: Dict[str, Any], call_id: str) -> bool:
        return tool.approval_request(params) is not None

    return FunctionTool(name=tool.name, description=tool.description, params_json_schema=dict(tool.parameters),
                        on_invoke_tool=invoke, strict_json_schema=strict_json_schema, needs_approval=needs_approval)


def approval_request(tool: LedgerTool, item: ToolApprovalItem) -> Optional[Outcome]:
    """The approval_required outcome (action digest, arguments) behind an
    interruption of this tool, or None when the interruption is another's."""
    if item.name != tool.name:
        return None
    try:
        return tool.approval_request(_arguments(item.arguments))
    except ValueError:
        return None


def supply_approval(tool: LedgerTool, item: ToolApprovalItem, approval_id: str) -> None:
    """Gives the interrupted call an operator's approval id: once the item is
    approved in the run state, the resumed run proposes with it."""
    tool.supply_approval(_arguments(item.arguments), approval_id)


__all__ = ["function_tool", "approval_request", "supply_approval"]
