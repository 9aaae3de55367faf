"""The async and sync clients of contextosd's agent and operator APIs."""

from __future__ import annotations

import asyncio
import inspect
import json
import ssl
import threading
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Coroutine, Dict, List, Optional, Sequence, TypeVar, Union

import nats.errors

from .connection import (
    DEFAULT_URL,
    AuthorizationRefused,
    Connection,
    Credentials,
    InsecureTransport,
    PermissionViolation,
    Reconnect,
    TLSSettings,
    open_connection,
)
from .errors import Code, Refused, Unreachable, Unresolved, refused, retry_of
from .types import CompiledContext, ContextRequest, Decision, Proposal

#: How long propose resends when no deadline is given, in seconds.
DEFAULT_PROPOSE_DEADLINE = 120.0

OnResend = Callable[[int, BaseException], Union[None, Awaitable[None]]]
T = TypeVar("T")

#: The daemon's page sizes (docs/wire.md): rows of a list verb's page when
#: no limit is given, and the most a page may ask for.
DEFAULT_PAGE_LIMIT = 100
MAX_PAGE_LIMIT = 500
#: The most rows the calls that page through to the end collect.
MAX_LIST_ROWS = 10000


@dataclass
class Page:
    """One page of a list verb: its rows and the cursor of the next page
    ("" after the last; pass it as ``cursor`` as it came)."""

    rows: List[Dict[str, Any]] = field(default_factory=list)
    next_cursor: str = ""


class MoreRows(Exception):
    """Raised by a call that pages through a list when it reached its bound
    (``max_rows``) before the end: ``rows`` are those read, ``next_cursor``
    continues."""

    def __init__(self, rows: List[Dict[str, Any]], next_cursor: str) -> None:
        super().__init__(f"stopped after {len(rows)} rows, more remain (continue from cursor {next_cursor})")
        self.rows = rows
        self.next_cursor = next_cursor


PageFetch = Callable[[int, str], Awaitable[Page]]


async def collect(fetch: PageFetch, max_rows: int = MAX_LIST_ROWS, cursor: str = "") -> List[Dict[str, Any]]:
    """Pages through a list with ``fetch(limit, cursor)`` from ``cursor`` to
    its end and returns every row, at most ``max_rows``; past the bound it
    raises MoreRows. A daemon that answers a cursor with itself is an error,
    never a loop."""
    rows: List[Dict[str, Any]] = []
    while True:
        page = await fetch(min(max_rows - len(rows), MAX_PAGE_LIMIT), cursor)
        rows.extend(page.rows)
        if not page.next_cursor:
            return rows
        if page.next_cursor == cursor:
            raise ValueError(f"the daemon answered cursor {cursor} with itself")
        if len(rows) >= max_rows:
            raise MoreRows(rows, page.next_cursor)
        cursor = page.next_cursor


def inbox_prefix(tenant: str, principal: str) -> str:
    """The only inbox a principal may subscribe to."""
    return f"_INBOX.{tenant}.{principal}"


def propose_subject(tenant: str, principal: str) -> str:
    """Where an agent publishes proposals."""
    return f"ctx.v1.{tenant}.{principal}.propose"


def context_subject(tenant: str, principal: str) -> str:
    """Where an agent asks for its run's compiled context."""
    return f"ctx.v1.{tenant}.{principal}.context"


def read_context(raw: bytes) -> CompiledContext:
    """Decodes a compile reply as compile_context reads it: the compiled
    context, or the code's Refused subclass raised."""
    r = json.loads(raw)
    if not isinstance(r, dict) or not isinstance(r.get("status"), str):
        raise ValueError(f"not a compile reply: {raw[:200]!r}")
    if r["status"] != "compiled":
        raise refused(r.get("code", ""), r.get("reason", ""))
    return CompiledContext.from_reply(r)


def op_subject(tenant: str, verb: str, operator: str) -> str:
    """Where an operator sends a verb."""
    return f"ctx.v1.{tenant}.ops.{verb}.{operator}"


def read_decision(raw: bytes) -> Decision:
    """Decodes a decision reply as propose reads it: refused raises the code's
    Refused subclass, except overloaded (refused before anything was stored),
    which propose resends as it resends unknown. An unknown whose code's
    retry class is "never" (stored_event_refused after the dispatch) raises
    the code's Refused subclass too: resending cannot learn that outcome."""
    d = Decision.from_json(raw)
    if d.status == "refused" and d.code != Code.OVERLOADED.value:
        raise refused(d.code, d.reason, d)
    if d.status == "unknown" and retry_of(d.code) == "never":
        raise refused(d.code, d.reason, d)
    return d


def read_op_reply(raw: bytes) -> Dict[str, Any]:
    """Decodes an operator reply as op reads it: the reply once it says ok,
    else the code's Refused subclass is raised."""
    r = json.loads(raw)
    if not isinstance(r, dict):
        raise ValueError(f"not an operator reply: {raw[:200]!r}")
    if not r.get("ok"):
        e = refused(r.get("code", ""), r.get("reason", ""))
        e.data = r.get("data")
        raise e
    return r


def page_of(reply: Dict[str, Any], member: str) -> Page:
    """The page of a list verb's reply whose rows are in member."""
    return Page(reply.get(member) or [], reply.get("next_cursor") or "")


class Client:
    """A connection of one principal (agent or operator) to contextosd.

    Use ``await Client.connect(...)``; ``async with`` closes it.
    """

    def __init__(self, conn: Connection, tenant: str, principal: str, timeout: float,
                 on_resend: Optional[OnResend]) -> None:
        self._conn = conn
        self.tenant = tenant
        self.principal = principal
        self.timeout = timeout
        self.on_resend = on_resend

    @classmethod
    async def connect(cls, url: str = DEFAULT_URL, *, tenant: str, principal: str, password: Optional[str] = None,
                      token: Optional[str] = None, nkey_file: Optional[str] = None, creds_file: Optional[str] = None,
                      tls_ca_file: Optional[str] = None, tls_cert_file: Optional[str] = None,
                      tls_key_file: Optional[str] = None, tls: Union[bool, ssl.SSLContext, None] = None,
                      allow_plaintext: bool = False, reconnect: Optional[Reconnect] = None,
                      timeout: float = 5.0, on_resend: Optional[OnResend] = None) -> Client:
        """Connects as ``<tenant>.<principal>`` through its inbox.

        One credential: ``password`` (the NATS user ``<tenant>.<principal>``),
        ``token``, ``nkey_file`` (a user nkey seed file) or ``creds_file``
        (a NATS credentials file). TLS is on with ``tls_ca_file`` (a PEM CA
        bundle instead of the system roots), a client certificate
        (``tls_cert_file`` with ``tls_key_file``), ``tls`` (True for the
        system roots, or an ``ssl.SSLContext``) or a ``tls://`` URL; ``url``
        may list a cluster's servers, comma-separated. A lost connection is
        re-established as ``reconnect`` says (on by default).

        Raises InsecureTransport instead of exposing a secret (the server
        asks for TLS and no TLS settings were given, TLS settings were given
        and the server has no TLS, or a password or token would cross plain
        TCP to a host that is not loopback without ``allow_plaintext``);
        AuthorityDenied when the server refuses the credentials; Unreachable
        when it cannot be reached; ValueError for a tenant or principal that
        is not one subject token or more than one credential.
        """
        for ident in (tenant, principal):
            if not ident or any(c in ident for c in ".*> \t\r\n"):
                raise ValueError(f"{ident!r} is not a tenant or principal id: one subject token, no '.', '*', '>' or space")
        settings = TLSSettings(ca_file=tls_ca_file, cert_file=tls_cert_file, key_file=tls_key_file,
                               context=tls if isinstance(tls, ssl.SSLContext) else None, enabled=tls is True)
        try:
            conn = await open_connection(url, user=f"{tenant}.{principal}",
                                         credentials=Credentials(password=password, token=token, nkey_file=nkey_file,
                                                                 creds_file=creds_file),
                                         tls=settings, inbox_prefix=inbox_prefix(tenant, principal),
                                         name="contextos-ledger-python", timeout=timeout, reconnect=reconnect or Reconnect(),
                                         allow_plaintext=allow_plaintext)
        except AuthorizationRefused as e:
            raise refused(Code.AUTHORITY_DENIED.value, f"the NATS server refused the credentials of {tenant}.{principal}: {e}") from e
        except (InsecureTransport, ValueError):
            raise
        except (nats.errors.Error, OSError, asyncio.TimeoutError, ssl.SSLError) as e:
            raise Unreachable(f"connect {url}: {e!r}") from e
        return cls(conn, tenant, principal, timeout, on_resend)

    async def close(self) -> None:
        """Closes the connection."""
        await self._conn.close()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def _request(self, subject: str, body: bytes, timeout: float) -> bytes:
        try:
            return await self._conn.request(subject, body, timeout)
        except PermissionViolation as e:
            raise refused(Code.AUTHORITY_DENIED.value, f"the NATS server refused the publish: {e}") from e

    async def propose(self, proposal: Proposal, deadline: float = DEFAULT_PROPOSE_DEADLINE) -> Decision:
        """Sends a proposal and returns its decision.

        Resends the same bytes (same run id and operation key: the daemon
        answers from the operation it already opened and never dispatches
        twice) when no reply comes in time, the reply is unknown or the
        daemon refused it overloaded (before storing anything), waiting
        longer each time, for at most ``deadline`` seconds.

        applied, not_applied and pending return the decision; refused, and
        unknown with a code that resending cannot help (read_decision),
        raise the code's Refused subclass (its ``decision`` has the
        balances); at the deadline Unresolved is raised.
        """
        body = proposal.to_json()
        subject = propose_subject(self.tenant, self.principal)
        loop = asyncio.get_running_loop()
        end = loop.time() + deadline
        wait, backoff = self.timeout, 0.05
        last: Optional[Decision] = None
        resends = 0
        while True:
            why: BaseException
            try:
                raw = await self._request(subject, body, max(0.001, min(wait, end - loop.time())))
                d = read_decision(raw)
                if d.status in ("applied", "not_applied", "pending"):
                    return d
                last, why = d, Unreachable(f"status {d.status}: {d.reason}")
            except (asyncio.TimeoutError, nats.errors.NoRespondersError) as e:
                why = e
            except nats.errors.Error as e:
                raise Unreachable(f"propose: {e!r}") from e
            if loop.time() + backoff >= end:
                raise Unresolved(f"outcome unknown after {resends} resends ({why!r}); resend the same operation key to learn it",
                                 last, resends)
            await asyncio.sleep(backoff)
            resends += 1
            if self.on_resend is not None:
                r = self.on_resend(resends, why)
                if inspect.isawaitable(r):
                    await r
            backoff, wait = min(2 * backoff, 2.0), min(2 * wait, 30.0)

    async def compile_context(self, run_id: str, capability_id: str,
                              evidence_refs: Optional[Sequence[str]] = None) -> CompiledContext:
        """Asks for the compiled context of the agent's run (docs/context.md):
        payload blocks by bucket, the evidence gate of the capability's
        decision, omissions, negative state and the derived tool exposure.

        It stores nothing and grants nothing, and it is one request, never
        resent. A refusal raises the code's Refused subclass (rate_limited
        and overloaded included: it spends the same rate as a proposal); no
        reply in time raises Unreachable.
        """
        body = ContextRequest(run_id, capability_id, evidence_refs).to_json()
        try:
            raw = await self._request(context_subject(self.tenant, self.principal), body, self.timeout)
        except (asyncio.TimeoutError, nats.errors.Error) as e:
            raise Unreachable(f"compile context: {e!r}") from e
        return read_context(raw)

    async def op(self, verb: str, body: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        """Sends an operator verb and returns its reply once it says ok.

        A refusal raises the code's Refused subclass. Operator verbs are
        never resent: on Unreachable the outcome is unknown.
        """
        raw = json.dumps(body or {}, separators=(",", ":")).encode()
        try:
            reply = await self._request(op_subject(self.tenant, verb, self.principal), raw, self.timeout)
        except (asyncio.TimeoutError, nats.errors.Error) as e:
            raise Unreachable(f"{verb}: {e!r}") from e
        return read_op_reply(reply)

    async def _data(self, verb: str, body: Dict[str, Any]) -> Dict[str, Any]:
        return (await self.op(verb, body)).get("data") or {}

    # One call per operator verb (docs/wire.md).

    async def _page(self, verb: str, member: str, body: Dict[str, Any], limit: int, cursor: str) -> Page:
        return page_of(await self.op(verb, _drop_empty({**body, "limit": limit or None, "cursor": cursor})), member)

    async def exposure_page(self, guarantee_id: str = "", resource: str = "", *, resource_digest: str = "",
                            limit: int = 0, cursor: str = "") -> Page:
        """One page of the balances of the tenant's resources. A resource id
        over 256 bytes is shown shortened, its SHA-256 in resource_digest:
        ``resource_digest`` selects it by that digest."""
        body = {"guarantee_id": guarantee_id, "resource": resource, "resource_digest": resource_digest}
        return await self._page("exposure", "exposure", body, limit, cursor)

    async def exposure(self, guarantee_id: str = "", resource: str = "", *, resource_digest: str = "",
                       max_rows: int = MAX_LIST_ROWS) -> List[Dict[str, Any]]:
        """Balances of the tenant's resources, every page (at most max_rows; MoreRows past it)."""
        return await collect(lambda limit, cursor: self.exposure_page(guarantee_id, resource, resource_digest=resource_digest,
                                                                      limit=limit, cursor=cursor), max_rows)

    async def attempts_page(self, *, limit: int = 0, cursor: str = "") -> Page:
        """One page of the open attempts, in attempt id order."""
        return await self._page("attempts", "attempts", {}, limit, cursor)

    async def attempts(self, *, max_rows: int = MAX_LIST_ROWS) -> List[Dict[str, Any]]:
        """Open attempts with the next safe step of each, every page (at most max_rows; MoreRows past it)."""
        return await collect(lambda limit, cursor: self.attempts_page(limit=limit, cursor=cursor), max_rows)

    async def reconcile(self, attempt_id: str = "") -> List[Dict[str, Any]]:
        """Queries the provider about one attempt (every unresolved one without an id)."""
        body: Dict[str, Any] = {"attempt_id": attempt_id} if attempt_id else {"all": True}
        return (await self.op("reconcile", body)).get("settled") or []

    async def close_attempt(self, attempt_id: str, guarantee_id: str = "", resource: str = "", reason: str = "", *,
                            resource_digest: str = "") -> Dict[str, Any]:
        """Closes an unstarted attempt (or tombstones an unknown one, on a
        resource named by its id or its digest)."""
        body = _drop_empty({"attempt_id": attempt_id, "guarantee_id": guarantee_id, "resource": resource,
                            "resource_digest": resource_digest, "reason": reason})
        return await self.op("close-attempt", body)

    async def assert_absence(self, attempt_id: str, artifact_ref: str) -> List[Dict[str, Any]]:
        """Releases an observed attempt on the operator's signed assertion."""
        return (await self.op("assert-absence", {"attempt_id": attempt_id, "artifact_ref": artifact_ref})).get("settled") or []

    async def confirm(self, request_id: str) -> Dict[str, Any]:
        """Confirms another operator's request that the tenant's two-person
        rule held (the ``request_id`` in the ``data`` of the
        SecondOperatorRequired it was refused with) and returns the reply of
        the action it carries out. The requester cannot confirm its own
        request, and the confirming operator needs the scope of its verb."""
        return await self.op("confirm", {"request_id": request_id})

    async def kill_switch(self, engaged: Optional[bool] = None, reason: str = "") -> bool:
        """Reads (engaged None) or sets the tenant's kill switch."""
        body: Dict[str, Any] = {"reason": reason} if reason else {}
        if engaged is not None:
            body["engaged"] = engaged
        return bool((await self.op("kill-switch", body)).get("kill_switch"))

    async def admit_run(self, run_id: str, principal: str, calls: int, amount: int, parent_run_id: str = "", pack: str = "") -> Dict[str, Any]:
        """Gives a run its budget and pins a context pack version (pack: id@version or digest; empty: the promoted one); returns the run."""
        body: Dict[str, Any] = {"run_id": run_id, "principal": principal, "calls": calls, "amount": amount}
        if parent_run_id:
            body["parent_run_id"] = parent_run_id
        if pack:
            body["pack"] = pack
        return (await self._data("admit-run", body)).get("run") or {}

    async def run(self, run_id: str) -> Dict[str, Any]:
        """A run's budget."""
        return (await self._data("run", {"run_id": run_id})).get("run") or {}

    async def grant(self, principal: str, capability_id: str, reason: str = "") -> Dict[str, Any]:
        """Grants a principal a capability."""
        return await self._data("grant", _drop_empty({"principal": principal, "capability_id": capability_id, "reason": reason}))

    async def revoke(self, principal: str, capability_id: str, reason: str = "") -> Dict[str, Any]:
        """Revokes a principal's capability."""
        return await self._data("revoke", _drop_empty({"principal": principal, "capability_id": capability_id, "reason": reason}))

    async def approve(self, action_digest: str, risk: str = "high", expires_in: str = "15m", reason: str = "") -> Dict[str, Any]:
        """Approves one action digest; returns approval_id, action_digest, risk, expires_at."""
        return await self._data("approve", _drop_empty({"action_digest": action_digest, "risk": risk, "expires_in": expires_in, "reason": reason}))

    async def deny(self, reason: str, action_digest: str = "", risk: str = "high", approval_id: str = "") -> Dict[str, Any]:
        """Answers a pending approval request (action digest and risk) no, or
        withdraws an unused approval (approval_id), with a reason."""
        body = {"approval_id": approval_id, "reason": reason} if approval_id else {"action_digest": action_digest, "risk": risk, "reason": reason}
        return await self._data("deny", body)

    async def evidence(self, candidate: Optional[Dict[str, Any]] = None, marker: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        """Publishes one evidence candidate or one conflict marker."""
        return await self._data("evidence", {"candidate": candidate} if candidate is not None else {"marker": marker})

    async def approvals_page(self, *, limit: int = 0, cursor: str = "") -> Page:
        """One page of the proposals waiting for an approval, oldest first."""
        return await self._page("approvals", "approvals", {}, limit, cursor)

    async def approvals(self, *, max_rows: int = MAX_LIST_ROWS) -> List[Dict[str, Any]]:
        """Proposals waiting for an approval, every page (at most max_rows; MoreRows past it)."""
        return await collect(lambda limit, cursor: self.approvals_page(limit=limit, cursor=cursor), max_rows)

    async def incidents_page(self, *, limit: int = 0, cursor: str = "") -> Page:
        """One page of the tenant's incidents, oldest first."""
        return await self._page("incidents", "incidents", {}, limit, cursor)

    async def incidents(self, *, max_rows: int = MAX_LIST_ROWS) -> List[Dict[str, Any]]:
        """The tenant's incidents, every page (at most max_rows; MoreRows past it)."""
        return await collect(lambda limit, cursor: self.incidents_page(limit=limit, cursor=cursor), max_rows)

    async def guarantee_history_page(self, guarantee_id: str, *, limit: int = 0, cursor: str = "") -> Page:
        """One page of a guarantee's versions, its pin first."""
        return await self._page("guarantee-history", "versions", {"guarantee_id": guarantee_id}, limit, cursor)

    async def guarantee_history(self, guarantee_id: str, *, max_rows: int = MAX_LIST_ROWS) -> List[Dict[str, Any]]:
        """Every version of a guarantee, its pin first (at most max_rows; MoreRows past it)."""
        return await collect(lambda limit, cursor: self.guarantee_history_page(guarantee_id, limit=limit, cursor=cursor), max_rows)


def _drop_empty(d: Dict[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in d.items() if v not in ("", None)}


class SyncClient:
    """The blocking form of Client: the same calls, without await.

    It runs its own event loop in a daemon thread; use it as a context
    manager or call close().
    """

    def __init__(self, url: str = DEFAULT_URL, *, tenant: str, principal: str, password: Optional[str] = None,
                 timeout: float = 5.0, on_resend: Optional[Callable[[int, BaseException], None]] = None,
                 **options: Any) -> None:
        """Connects as Client.connect does; ``options`` are its other
        keyword arguments (token, nkey_file, creds_file, tls_ca_file,
        tls_cert_file, tls_key_file, tls, allow_plaintext, reconnect)."""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="contextos-ledger", daemon=True)
        self._thread.start()
        try:
            self._client: Client = self._call(Client.connect(url, tenant=tenant, principal=principal, password=password,
                                                             timeout=timeout, on_resend=on_resend, **options))
        except BaseException:
            self._stop()
            raise
        self.tenant, self.principal = tenant, principal

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def _stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    def close(self) -> None:
        """Closes the connection and stops the loop."""
        if self._loop.is_closed():
            return
        self._call(self._client.close())
        self._stop()

    def __enter__(self) -> SyncClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def propose(self, proposal: Proposal, deadline: float = DEFAULT_PROPOSE_DEADLINE) -> Decision:
        """Client.propose, blocking."""
        return self._call(self._client.propose(proposal, deadline))

    def op(self, verb: str, body: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        """Client.op, blocking."""
        return self._call(self._client.op(verb, body))

    def __getattr__(self, name: str) -> Any:
        # Every other operator call of Client, blocking.
        f = getattr(Client, name, None)
        if f is None or name.startswith("_") or not inspect.iscoroutinefunction(f):
            raise AttributeError(name)
        method = getattr(self._client, name)
        return lambda *a, **kw: self._call(method(*a, **kw))


__all__ = ["Client", "SyncClient", "Refused", "Unreachable", "Unresolved", "InsecureTransport", "Reconnect", "inbox_prefix",
           "propose_subject", "context_subject", "read_context", "op_subject", "DEFAULT_URL", "DEFAULT_PROPOSE_DEADLINE", "Page", "MoreRows", "collect",
           "DEFAULT_PAGE_LIMIT", "MAX_PAGE_LIMIT", "MAX_LIST_ROWS"]
