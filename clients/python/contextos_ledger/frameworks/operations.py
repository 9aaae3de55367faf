"""The operation keys and approvals of an agent's governed tool calls.

A model that repeats a call does not know operation keys. Operations picks
them so that the resend rule holds whatever the model does: while a call's
outcome is open (``pending`` or ``unknown``), any call of the same capability
with the same arguments resends the same key (and the same approval id), so
the daemon answers from the operation it already opened and never dispatches
twice; once the outcome is decided, the next call of that action is a new
operation. A call with a framework's tool-call id gets a key derived from it,
so a framework that runs the same call again (LangGraph resuming after an
interrupt, the Agents SDK after an approval) resends the same key too.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections import OrderedDict
from typing import Any, Awaitable, Callable, Mapping, Optional, Tuple, TypeVar

from .outcome import Outcome

#: The longest operation key the daemon takes, in bytes (docs/wire.md).
MAX_KEY_BYTES = 256
#: How many open operations, approval requests and supplied approvals are
#: kept each, by default; past it the oldest is forgotten.
DEFAULT_MAX_ENTRIES = 1024

Send = Callable[[str, Optional[str]], Awaitable[Outcome]]
V = TypeVar("V")


def action_of(capability_id: str, arguments: Mapping[str, Any]) -> str:
    """The identity of an action: its capability and its arguments as
    canonical JSON (sorted keys), hashed."""
    body = json.dumps([capability_id, arguments], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(body.encode()).hexdigest()


def bounded_key(key: str) -> str:
    """key itself when the daemon takes it, else a digest of it."""
    if 0 < len(key.encode()) <= MAX_KEY_BYTES:
        return key
    return "sha256-" + hashlib.sha256(key.encode()).hexdigest()


class Operations:
    """The keys of open operations, the approval requests and the approvals
    supplied for them, by action; each bounded at ``max_entries``.

    One Operations serves one agent's run: keys are unique within a run.
    """

    def __init__(self, *, key_prefix: str = "", max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self.key_prefix = key_prefix
        self.max_entries = max_entries
        self._open: OrderedDict[str, Tuple[str, Optional[str]]] = OrderedDict()
        self._requests: OrderedDict[str, Outcome] = OrderedDict()
        self._granted: OrderedDict[str, str] = OrderedDict()

    def _keep(self, table: OrderedDict[str, V], action: str, value: V) -> None:
        table[action] = value
        table.move_to_end(action)
        while len(table) > self.max_entries:
            table.popitem(last=False)

    def new_key(self, call_id: Optional[str] = None) -> str:
        """The key of a new operation: derived from the framework's tool-call
        id when there is one, else random."""
        return bounded_key(self.key_prefix + (call_id or uuid.uuid4().hex))

    def open_key(self, capability_id: str, arguments: Mapping[str, Any]) -> Optional[str]:
        """The key of the action's open operation (pending or unknown), if any."""
        opened = self._open.get(action_of(capability_id, arguments))
        return opened[0] if opened else None

    def approval_request(self, capability_id: str, arguments: Mapping[str, Any]) -> Optional[Outcome]:
        """The action's outstanding approval_required outcome (with its
        action digest), if its last call was refused for want of one."""
        return self._requests.get(action_of(capability_id, arguments))

    def supply_approval(self, capability_id: str, arguments: Mapping[str, Any], approval_id: str) -> None:
        """Records an operator's approval id for the action: its next call
        proposes with it, under a new operation key."""
        if not approval_id:
            raise ValueError("an approval id is needed")
        self._keep(self._granted, action_of(capability_id, arguments), approval_id)

    async def call(self, capability_id: str, arguments: Mapping[str, Any], send: Send, *, call_id: Optional[str] = None,
                   approval_id: Optional[str] = None) -> Outcome:
        """Calls ``send(operation_key, approval_id)`` under the key the resend
        rule gives and records what the outcome means for the next call.

        An open operation of the action is resent as it was (its key and
        approval id, whatever is passed). Otherwise the call is a new
        operation: the key comes from ``call_id`` (or is random), and with an
        approval id (passed, or supplied earlier) the key is derived from that
        key and the approval, since a refusal is final for its key.
        """
        act = action_of(capability_id, arguments)
        opened = self._open.get(act)
        if opened is not None:
            key, approval_id = opened
        else:
            if approval_id is None:
                approval_id = self._granted.get(act)
            key = self.new_key(call_id)
            if approval_id:
                key = bounded_key(f"{key}+{approval_id}")
        outcome = await send(key, approval_id)
        if outcome.kind == "retry":
            self._keep(self._open, act, (key, approval_id))
        else:
            self._open.pop(act, None)
        if outcome.kind == "approval" and not approval_id:
            self._keep(self._requests, act, outcome)
        elif outcome.kind != "retry":
            self._requests.pop(act, None)
            if approval_id and self._granted.get(act) == approval_id:
                del self._granted[act]
        return outcome


__all__ = ["Operations", "Send", "action_of", "bounded_key", "MAX_KEY_BYTES", "DEFAULT_MAX_ENTRIES"]
