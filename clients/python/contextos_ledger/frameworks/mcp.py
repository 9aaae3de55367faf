"""An agent's session with contextosd's MCP gateway, on the official MCP
Python SDK (``pip install 'contextos-ledger[mcp]'``).

    from contextos_ledger.frameworks.mcp import LedgerMCP

    async with LedgerMCP("http://127.0.0.1:7411/mcp", token, run_id="run_42") as ledger:
        tools = await ledger.tools()                  # every surfaced capability, as MCP tools
        outcome = await ledger.call("adp_payments.issue_refund",
                                    {"order_id": "ord_881", "amount_minor": 80000, "currency": "INR"})

The gateway (docs/mcp.md) takes the proposal less its capability id as the
tool's input and answers with the decision as structured content (``isError``
for a refusal, its text starting ``<code>: ``). ``call`` builds that input
(``run_id``, ``operation_key``, ``arguments``, ``approval_id``,
``evidence_refs``) and maps the answer to an Outcome (outcome.py), with the
resend rule of Operations: a ``pending`` or ``unknown`` call, and a call the
gateway did not answer (a broken connection, a ``503``), is ``retry``, and the
next call with the same arguments resends the same operation key.
Each call is its own MCP session over one HTTP connection pool.
``approval_required`` is an ``approval`` outcome with the action digest; once
an operator approved it, ``call(..., approval_id=...)`` (or
``supply_approval``) proposes it under a new operation key.
"""

from __future__ import annotations

import contextlib
import re
from typing import Any, AsyncIterator, Dict, List, Mapping, Optional, Sequence

import httpx2
import mcp_types
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from .operations import Operations
from .outcome import Outcome, outcome_of_reply

#: The most tool-list pages read (a gateway that pages forever is an error, not a loop).
MAX_TOOL_PAGES = 100

# CONTEXT_TOOL is the gateway's compile tool (docs/context.md): it returns
# the run's compiled context and is never a proposal.
CONTEXT_TOOL = "context_compile"

# RUN_HEADER names the run whose tools the gateway lists (mcpgw.RunHeader).
RUN_HEADER = "Contextos-Run-Id"

_CODE_TEXT = re.compile(r"^([a-z][a-z_]*): (.*)", re.S)


def _text(result: mcp_types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, mcp_types.TextContent))


def reply_of(result: mcp_types.CallToolResult) -> Dict[str, Any]:
    """The decision reply of a tool result: its structured content, or for an
    error result without it, the code and reason of its text."""
    sc = result.structured_content
    if isinstance(sc, dict) and isinstance(sc.get("status"), str):
        return sc
    text = _text(result)
    if result.is_error:
        m = _CODE_TEXT.match(text)
        if m:
            return {"status": "refused", "code": m.group(1), "reason": m.group(2)}
        return {"status": "unknown", "reason": f"an error result without a code: {text[:500]}"}
    return {"status": "unknown", "reason": f"a result without a decision: {text[:500]}"}


def _mcp_error(e: BaseException) -> Optional[MCPError]:
    """The MCP error in e (or in an exception group the transport raised)."""
    if isinstance(e, MCPError):
        return e
    for sub in getattr(e, "exceptions", None) or ():  # an exception group (builtin from Python 3.11)
        found = _mcp_error(sub) if isinstance(sub, BaseException) else None
        if found is not None:
            return found
    return None


class LedgerMCP:
    """One agent's MCP client of contextosd, for one run.

    ``url`` is the gateway's endpoint (``http://<[mcp] listen>/mcp``),
    ``token`` the agent's ``mcp_token`` (sent as a bearer token, never
    logged). Use it with ``async with``: it keeps one HTTP connection pool,
    and each call is its own MCP session (the gateway keeps none), so a
    connection broken mid-call fails that call alone, never the next.
    """

    def __init__(self, url: str, token: str, run_id: str, *, timeout: float = 30.0, operations: Optional[Operations] = None,
                 evidence_refs: Optional[Sequence[str]] = None) -> None:
        if not token or not run_id:
            raise ValueError("a token and a run id are needed")
        self.url = url
        self.run_id = run_id
        self.timeout = timeout
        self.operations = operations or Operations()
        self.evidence_refs = list(evidence_refs) if evidence_refs else None
        self._token = token
        self._http: Optional[httpx2.AsyncClient] = None

    async def __aenter__(self) -> LedgerMCP:
        # The run header makes the gateway list the run's tools (those of
        # the context pack it pinned); each call still names its run.
        self._http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {self._token}", RUN_HEADER: self.run_id},
                                        timeout=httpx2.Timeout(self.timeout))
        return self

    async def __aexit__(self, *exc: Any) -> None:
        http, self._http = self._http, None
        if http is not None:
            await http.aclose()

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[Client]:
        """An MCP session of the SDK's client with the gateway (inside ``async with``)."""
        if self._http is None:
            raise RuntimeError("LedgerMCP is used inside `async with`")
        async with Client(streamable_http_client(self.url, http_client=self._http)) as client:
            yield client

    async def tools(self) -> List[mcp_types.Tool]:
        """Every capability tool the gateway lists (one per surfaced
        capability). The gateway's ``context_compile`` tool is not a
        capability and is left out: each listed tool is called as a proposal."""
        out: List[mcp_types.Tool] = []
        cursor: Optional[str] = None
        async with self.session() as client:
            for _ in range(MAX_TOOL_PAGES):
                page = await client.list_tools(cursor=cursor)
                out.extend(t for t in page.tools if t.name != CONTEXT_TOOL)
                if not page.next_cursor or page.next_cursor == cursor:
                    return out
                cursor = page.next_cursor
        raise RuntimeError(f"the gateway listed more than {MAX_TOOL_PAGES} pages of tools")

    async def call(self, tool: str, arguments: Mapping[str, Any], *, call_id: Optional[str] = None,
                   approval_id: Optional[str] = None) -> Outcome:
        """Calls a capability's tool and returns its outcome; refusals and
        unanswered calls are outcomes, never exceptions."""
        args = dict(arguments)

        async def send(key: str, approval: Optional[str]) -> Outcome:
            body: Dict[str, Any] = {"run_id": self.run_id, "operation_key": key, "arguments": args}
            if approval:
                body["approval_id"] = approval
            if self.evidence_refs:
                body["evidence_refs"] = self.evidence_refs
            try:
                async with self.session() as client:
                    result = await client.call_tool(tool, body)
            except Exception as e:
                err = _mcp_error(e)
                if err is not None and err.code == mcp_types.INVALID_PARAMS:
                    # Refused by the protocol layer (no such tool, input off its schema): nothing was proposed.
                    return outcome_of_reply({"status": "refused", "code": "request_malformed", "reason": err.message}, tool, key, args)
                # No answer (a broken connection, a 503, a timeout) or an answer without a decision: it may
                # have been proposed, so the same key is resent.
                why = f"MCP error {err.code}: {err.message}" if err is not None else f"the gateway did not answer: {e!r}"
                return outcome_of_reply({"status": "unknown", "reason": why}, tool, key, args)
            return outcome_of_reply(reply_of(result), tool, key, args)

        return await self.operations.call(tool, args, send, call_id=call_id, approval_id=approval_id)

    def approval_request(self, tool: str, arguments: Mapping[str, Any]) -> Optional[Outcome]:
        """The outstanding approval_required outcome of a call, if any."""
        return self.operations.approval_request(tool, arguments)

    def supply_approval(self, tool: str, arguments: Mapping[str, Any], approval_id: str) -> None:
        """Gives the next call of the tool with these arguments an operator's approval id."""
        self.operations.supply_approval(tool, arguments, approval_id)


__all__ = ["LedgerMCP", "reply_of", "MAX_TOOL_PAGES"]
