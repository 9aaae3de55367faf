"""Adapters of the ledger for agent frameworks.

The core (this package) needs nothing beyond the client: ``LedgerTool`` is a
capability as a tool of one run, ``Outcome`` what a call came to (``result``,
``retry``, ``approval`` or ``error``, outcome.py), ``Operations`` the operation
keys and approvals behind the resend rule (operations.py). Each framework's
module needs that framework, installed with the package's extra of its name:

* ``contextos_ledger.frameworks.openai_agents``: function tools of the OpenAI
  Agents SDK (``contextos-ledger[openai-agents]``);
* ``contextos_ledger.frameworks.langchain``: LangChain tools for LangGraph
  graphs (``contextos-ledger[langgraph]``);
* ``contextos_ledger.frameworks.mcp``: an agent's session with contextosd's
  MCP gateway on the MCP Python SDK (``contextos-ledger[mcp]``).
"""

from .operations import DEFAULT_MAX_ENTRIES, MAX_KEY_BYTES, Operations, action_of, bounded_key
from .outcome import Kind, Outcome, outcome_of_decision, outcome_of_error, outcome_of_reply
from .tool import ANY_OBJECT, DEFAULT_CALL_DEADLINE, LedgerTool

__all__ = ["LedgerTool", "Outcome", "Kind", "Operations", "outcome_of_reply", "outcome_of_decision", "outcome_of_error",
           "action_of", "bounded_key", "MAX_KEY_BYTES", "DEFAULT_MAX_ENTRIES", "ANY_OBJECT", "DEFAULT_CALL_DEADLINE"]
