"""A minimal NATS client (core protocol only) on asyncio.

It implements the part of the NATS client protocol the ledger's clients
need: INFO/CONNECT with user and password (or a token), PING/PONG, SUB/UNSUB,
PUB with a reply subject under a custom inbox prefix, MSG/HMSG parsing (for
the no-responders status) and -ERR handling, with one multiplexed inbox
subscription for requests, as nats.py does.

It exists because nats-py cannot be installed here; its surface
(``connect``, ``request``, ``publish``, ``close``) mirrors nats-py's so that
nats-py can replace it: ``await nats.connect(url, user=..., password=...,
inbox_prefix=...)`` and ``await nc.request(subject, payload, timeout)``.
It does not do TLS, JetStream, reconnection or nkey/JWT authentication.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import string
from typing import Dict, Optional
from urllib.parse import urlparse

__all__ = ["Connection", "NatsError", "NoRespondersError", "PermissionViolation", "AuthorizationError", "connect"]

_CRLF = b"\r\n"
_MAX_CONTROL_LINE = 4096
_ALPHABET = string.ascii_letters + string.digits


class NatsError(Exception):
    """A NATS protocol or connection error."""


class NoRespondersError(NatsError):
    """Nobody subscribes to the request's subject."""


class PermissionViolation(NatsError):
    """The server refused a publish or a subscription of this user."""

    def __init__(self, message: str, subject: str = "") -> None:
        super().__init__(message)
        self.subject = subject


class AuthorizationError(NatsError):
    """The server refused the credentials."""


def _token(n: int = 22) -> str:
    return "".join(secrets.choice(_ALPHABET) for _ in range(n))


class Connection:
    """One connection to a NATS server."""

    def __init__(self) -> None:
        self._reader: Optional[asyncio.StreamReader] = None
        self._writer: Optional[asyncio.StreamWriter] = None
        self._read_task: Optional[asyncio.Task[None]] = None
        self._pongs: "list[asyncio.Future[None]]" = []
        self._next_sid = 1
        self._inbox_prefix = "_INBOX"
        self._resp_sid = 0
        self._resp_prefix = ""
        self._pending: Dict[str, "asyncio.Future[bytes]"] = {}
        self._pending_subject: Dict[str, str] = {}
        self._closed = False
        self._error: Optional[Exception] = None
        self._sub_error: Optional[PermissionViolation] = None
        self.server_info: Dict[str, object] = {}

    async def _connect(self, url: str, user: Optional[str], password: Optional[str], token: Optional[str],
                       name: str, inbox_prefix: str, timeout: float) -> None:
        u = urlparse(url if "://" in url else "nats://" + url)
        if u.scheme not in ("nats", ""):
            raise NatsError(f"unsupported scheme {u.scheme!r} (only nats://, no TLS)")
        host, port = u.hostname or "127.0.0.1", u.port or 4222
        if u.username and not user:
            user, password = u.username, u.password
        self._inbox_prefix = inbox_prefix
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
        except (OSError, asyncio.TimeoutError) as e:
            raise NatsError(f"cannot reach {host}:{port}: {e}") from e
        self._reader, self._writer = reader, writer
        line = await asyncio.wait_for(reader.readline(), timeout)
        if not line.startswith(b"INFO "):
            raise NatsError(f"expected INFO, got {line[:80]!r}")
        self.server_info = json.loads(line[5:])
        opts = {"verbose": False, "pedantic": False, "tls_required": False, "name": name, "lang": "python3",
                "version": "0.1.0", "protocol": 1, "headers": True, "no_responders": True}
        if user:
            opts["user"], opts["pass"] = user, password or ""
        elif token:
            opts["auth_token"] = token
        writer.write(b"CONNECT " + json.dumps(opts).encode() + _CRLF + b"PING" + _CRLF)
        await writer.drain()
        # The server answers PONG, or -ERR and closes.
        while True:
            line = await asyncio.wait_for(reader.readline(), timeout)
            if not line:
                raise NatsError("the server closed the connection during CONNECT")
            if line.startswith(b"PONG"):
                break
            if line.startswith(b"-ERR"):
                msg = line[4:].strip().strip(b"'").decode(errors="replace")
                if "authorization" in msg.lower() or "authentication" in msg.lower():
                    raise AuthorizationError(msg)
                raise NatsError(msg)
            if line.startswith(b"PING"):
                writer.write(b"PONG" + _CRLF)
            # +OK and INFO updates are ignored.
        self._read_task = asyncio.get_running_loop().create_task(self._read_loop())

    # The read loop.

    async def _read_loop(self) -> None:
        assert self._reader is not None
        try:
            while True:
                line = await self._reader.readuntil(_CRLF)
                if len(line) > _MAX_CONTROL_LINE:
                    raise NatsError("control line too long")
                if line.startswith(b"MSG "):
                    await self._on_msg(line[4:-2].split(), headers=False)
                elif line.startswith(b"HMSG "):
                    await self._on_msg(line[5:-2].split(), headers=True)
                elif line.startswith(b"PING"):
                    self._write(b"PONG" + _CRLF)
                elif line.startswith(b"PONG"):
                    if self._pongs:
                        f = self._pongs.pop(0)
                        if not f.done():
                            f.set_result(None)
                elif line.startswith(b"-ERR"):
                    self._on_err(line[4:].strip().strip(b"'").decode(errors="replace"))
                # +OK and INFO are ignored.
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError, NatsError) as e:
            self._fail(NatsError(f"connection lost: {e}"))
        except asyncio.CancelledError:
            self._fail(NatsError("connection closed"))
            raise

    async def _on_msg(self, args: "list[bytes]", headers: bool) -> None:
        assert self._reader is not None
        subject = args[0].decode()
        if headers:
            hdr_len, total = int(args[-2]), int(args[-1])
        else:
            hdr_len, total = 0, int(args[-1])
        data = await self._reader.readexactly(total + 2)
        hdr, payload = data[:hdr_len], data[hdr_len:total]
        token = subject[len(self._resp_prefix):] if subject.startswith(self._resp_prefix) else None
        fut = self._pending.pop(token, None) if token is not None else None
        if fut is None or fut.done():
            return  # a late reply to a request that gave up: dropped
        self._pending_subject.pop(token or "", None)
        if hdr:
            status = hdr.split(_CRLF, 1)[0].split()
            if len(status) >= 2 and status[1] == b"503":
                fut.set_exception(NoRespondersError("no responders"))
                return
        fut.set_result(payload)

    def _on_err(self, msg: str) -> None:
        low = msg.lower()
        if low.startswith("permissions violation"):
            subject = msg.rsplit(" ", 1)[-1].strip('"')
            if "subscription" in low:
                self._sub_error = PermissionViolation(msg, subject)
                return
            for token, subj in list(self._pending_subject.items()):
                if subj == subject:
                    fut = self._pending.pop(token, None)
                    self._pending_subject.pop(token, None)
                    if fut is not None and not fut.done():
                        fut.set_exception(PermissionViolation(msg, subject))
            return
        # Any other -ERR is fatal: the server closes the connection.
        self._fail(NatsError(msg))

    def _fail(self, err: Exception) -> None:
        self._error = err
        for fut in list(self._pending.values()) + self._pongs:
            if not fut.done():
                fut.set_exception(err)
        self._pending.clear()
        self._pending_subject.clear()
        self._pongs.clear()

    def _write(self, b: bytes) -> None:
        if self._closed or self._writer is None:
            raise NatsError("connection closed")
        if self._error is not None:
            raise self._error
        self._writer.write(b)

    # The API (nats-py's names).

    async def publish(self, subject: str, payload: bytes = b"", reply: str = "") -> None:
        """Publishes payload on subject, with an optional reply subject."""
        head = f"PUB {subject} {reply} {len(payload)}" if reply else f"PUB {subject} {len(payload)}"
        self._write(head.encode() + _CRLF + payload + _CRLF)
        assert self._writer is not None
        await self._writer.drain()

    async def flush(self, timeout: float = 5.0) -> None:
        """Waits until the server has processed everything sent so far."""
        fut: "asyncio.Future[None]" = asyncio.get_running_loop().create_future()
        self._pongs.append(fut)
        self._write(b"PING" + _CRLF)
        await asyncio.wait_for(fut, timeout)

    def new_inbox(self) -> str:
        """A fresh subject under the inbox prefix."""
        return f"{self._inbox_prefix}.{_token()}"

    async def _ensure_resp_sub(self) -> None:
        if self._resp_sid:
            return
        self._resp_prefix = f"{self._inbox_prefix}.{_token()}."
        sid = self._next_sid
        self._next_sid += 1
        self._write(f"SUB {self._resp_prefix}* {sid}".encode() + _CRLF)
        self._resp_sid = sid
        # A subscription the server refuses shows as -ERR before the PONG.
        await self.flush()
        if self._sub_error is not None:
            self._resp_sid = 0
            raise self._sub_error

    async def request(self, subject: str, payload: bytes = b"", timeout: float = 5.0) -> bytes:
        """Sends a request and returns the reply's payload.

        Raises asyncio.TimeoutError without a reply in time,
        NoRespondersError when nobody listens, PermissionViolation when the
        server refuses the publish.
        """
        await self._ensure_resp_sub()
        token = _token()
        fut: "asyncio.Future[bytes]" = asyncio.get_running_loop().create_future()
        self._pending[token] = fut
        self._pending_subject[token] = subject
        try:
            await self.publish(subject, payload, reply=self._resp_prefix + token)
            return await asyncio.wait_for(fut, timeout)
        finally:
            self._pending.pop(token, None)
            self._pending_subject.pop(token, None)

    async def close(self) -> None:
        """Closes the connection."""
        if self._closed:
            return
        if self._writer is not None and self._error is None:
            try:
                if self._resp_sid:
                    self._writer.write(f"UNSUB {self._resp_sid}".encode() + _CRLF)
                await self._writer.drain()
            except (ConnectionError, OSError):
                pass
        self._closed = True
        if self._read_task is not None:
            self._read_task.cancel()
            try:
                await self._read_task
            except (asyncio.CancelledError, Exception):
                pass
        if self._writer is not None:
            self._writer.close()
            try:
                await self._writer.wait_closed()
            except (ConnectionError, OSError):
                pass


async def connect(url: str = "nats://127.0.0.1:4222", *, user: Optional[str] = None, password: Optional[str] = None,
                  token: Optional[str] = None, name: str = "contextos-ledger-python", inbox_prefix: str = "_INBOX",
                  connect_timeout: float = 5.0) -> Connection:
    """Connects to a NATS server (nats-py's signature, in part)."""
    nc = Connection()
    try:
        await nc._connect(url, user, password, token, name, inbox_prefix, connect_timeout)
    except BaseException:
        await nc.close()
        raise
    return nc
