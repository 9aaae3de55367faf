"""contextos_ledger: the Python client of the ContextOS ledger (ctx.v1, docs/wire.md).

    import asyncio
    from contextos_ledger import Client, Proposal, SharedGuaranteeExceeded

    async def main():
        async with await Client.connect("nats://127.0.0.1:4222", tenant="acme",
                                        principal="agent_email", password="...") as c:
            try:
                d = await c.propose(Proposal("run_1", "refund-ord_881", "adp_payments.issue_refund",
                                             {"order_id": "ord_881", "amount_minor": 80000, "currency": "INR"}))
                print(d.status, d.available)
            except SharedGuaranteeExceeded as e:
                print("ceiling reached; available", e.decision.available)

    asyncio.run(main())
"""

from ._version import __version__
from .client import (
    DEFAULT_PAGE_LIMIT,
    DEFAULT_PROPOSE_DEADLINE,
    DEFAULT_URL,
    MAX_LIST_ROWS,
    MAX_PAGE_LIMIT,
    Client,
    MoreRows,
    Page,
    SyncClient,
    collect,
    context_subject,
    inbox_prefix,
    op_subject,
    page_of,
    propose_subject,
    read_context,
    read_decision,
    read_op_reply,
)
from .connection import InsecureTransport, Reconnect
from .errors import *  # noqa: F401,F403  (Code, LedgerError, Refused, Unreachable, Unresolved, one class per code)
from .errors import REFUSALS, Code, LedgerError, Refused, Unreachable, Unresolved, refused, retry_of
from .types import (
    DEFINITIVE,
    CompiledContext,
    ConflictResolution,
    ContextRequest,
    Decision,
    EvidenceConflictMarker,
    EvidenceGate,
    GuaranteeRow,
    Proposal,
    Status,
    ToolExposure,
)

__all__ = ["__version__", "Client", "SyncClient", "InsecureTransport", "Reconnect", "Proposal", "Decision", "GuaranteeRow", "Status",
           "EvidenceGate", "EvidenceConflictMarker", "ConflictResolution", "CompiledContext", "ContextRequest", "ToolExposure",
           "DEFINITIVE", "Code", "LedgerError",
           "Refused", "Unreachable", "Unresolved", "REFUSALS", "refused", "retry_of", "inbox_prefix", "propose_subject", "context_subject", "op_subject",
           "DEFAULT_URL", "DEFAULT_PROPOSE_DEADLINE", "Page", "MoreRows", "collect", "DEFAULT_PAGE_LIMIT", "MAX_PAGE_LIMIT",
           "MAX_LIST_ROWS", "read_decision", "read_context", "read_op_reply", "page_of"] + [cls.__name__ for cls in REFUSALS.values()]
