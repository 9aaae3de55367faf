"""A capability of the ledger as an agent's tool, over the NATS client."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Sequence

from ..client import Client
from ..errors import LedgerError
from ..types import Proposal
from .operations import Operations
from .outcome import Outcome, outcome_of_decision, outcome_of_error

#: How long one call resends a proposal whose outcome is unknown before it
#: returns a ``retry`` outcome, in seconds.
DEFAULT_CALL_DEADLINE = 10.0

#: The arguments' schema when none is given: any JSON object.
ANY_OBJECT: Dict[str, Any] = {"type": "object", "additionalProperties": True}


class LedgerTool:
    """One capability of the ledger, called by an agent in one run.

    ``call`` proposes the arguments through ``client`` and maps the decision
    to an Outcome (outcome.py); the adapters of each framework
    (``contextos_ledger.frameworks.openai_agents``, ``.langchain``) wrap it.
    ``name``, ``description`` and ``parameters`` (the JSON Schema of the
    arguments) are what the model is shown. ``operations`` keeps the keys of
    open operations and the approvals (share one between the tools of one run).
    """

    def __init__(self, client: Client, capability_id: str, run_id: str, *, name: str = "", description: str = "",
                 parameters: Optional[Mapping[str, Any]] = None, evidence_refs: Optional[Sequence[str]] = None,
                 deadline: float = DEFAULT_CALL_DEADLINE, operations: Optional[Operations] = None) -> None:
        if not capability_id or not run_id:
            raise ValueError("a capability id and a run id are needed")
        self.client = client
        self.capability_id = capability_id
        self.run_id = run_id
        self.name = name or capability_id.replace(".", "_")
        self.description = description or f"Calls {capability_id} through the ContextOS ledger, which decides whether it may run."
        self.parameters: Dict[str, Any] = dict(parameters or ANY_OBJECT)
        self.evidence_refs = list(evidence_refs) if evidence_refs else None
        self.deadline = deadline
        self.operations = operations or Operations()

    async def call(self, arguments: Mapping[str, Any], *, call_id: Optional[str] = None,
                   approval_id: Optional[str] = None) -> Outcome:
        """Proposes the call and returns its outcome; a refusal, an outcome
        still unknown at the deadline and an unreachable daemon are outcomes,
        never exceptions."""
        args = dict(arguments)

        async def send(key: str, approval: Optional[str]) -> Outcome:
            p = Proposal(self.run_id, key, self.capability_id, args, evidence_refs=self.evidence_refs, approval_id=approval)
            try:
                d = await self.client.propose(p, deadline=self.deadline)
            except LedgerError as e:
                return outcome_of_error(e, self.capability_id, key, args)
            return outcome_of_decision(d, self.capability_id, key, args)

        return await self.operations.call(self.capability_id, args, send, call_id=call_id, approval_id=approval_id)

    def approval_request(self, arguments: Mapping[str, Any]) -> Optional[Outcome]:
        """The outstanding approval_required outcome of these arguments, if any."""
        return self.operations.approval_request(self.capability_id, arguments)

    def supply_approval(self, arguments: Mapping[str, Any], approval_id: str) -> None:
        """Gives the next call with these arguments an operator's approval id."""
        self.operations.supply_approval(self.capability_id, arguments, approval_id)


__all__ = ["LedgerTool", "DEFAULT_CALL_DEADLINE", "ANY_OBJECT"]
