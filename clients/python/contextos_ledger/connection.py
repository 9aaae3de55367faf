"""The NATS connection of a principal, on nats-py: TLS, credentials,
reconnection, and the rules that keep a secret off plain TCP.

Every principal uses its own inbox prefix (``_INBOX.<tenant>.<principal>``,
the only subjects the server lets it subscribe to); nats-py keeps it across
reconnections. A publish the server refuses ends the requests on that
subject at once (``PermissionViolation``) instead of letting them time out.
"""

from __future__ import annotations

import asyncio
import ipaddress
import random
import ssl
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Set, Tuple
from urllib.parse import urlparse

import nats
import nats.errors
from nats.aio.client import Client as _NATS

from .errors import LedgerError

DEFAULT_URL = "nats://127.0.0.1:4222"


class InsecureTransport(LedgerError, ValueError):
    """A connection refused because it would expose a secret.

    The server asked for TLS and the client was given no TLS settings; or
    the client was given TLS settings and the server does not speak TLS; or
    a password or token would cross plain TCP to a host that is not
    loopback without ``allow_plaintext=True``.
    """


class PermissionViolation(Exception):
    """The NATS server refused a publish of this user."""

    def __init__(self, message: str, subject: str) -> None:
        super().__init__(message)
        self.subject = subject


@dataclass(frozen=True)
class Credentials:
    """How a principal proves who it is; at most one kind.

    ``password`` goes with the NATS user ``<tenant>.<principal>``; ``token``
    is a server token; ``nkey_file`` is a user nkey seed file ("SU...") and
    ``creds_file`` a NATS credentials file (JWT and seed). An nkey or a
    creds file only signs the server's nonce; a password or a token is sent
    as it is, so it never crosses plain TCP to a host that is not loopback.
    """

    password: Optional[str] = None
    token: Optional[str] = None
    nkey_file: Optional[str] = None
    creds_file: Optional[str] = None

    def check(self) -> None:
        given = [k for k, v in (("password", self.password), ("token", self.token), ("nkey_file", self.nkey_file),
                                ("creds_file", self.creds_file)) if v]
        if len(given) > 1:
            raise ValueError(f"give one credential, not {' and '.join(given)}")

    @property
    def secret(self) -> bool:
        return bool(self.password or self.token)


@dataclass(frozen=True)
class TLSSettings:
    """TLS for the connection: a CA bundle instead of the system roots, a
    client certificate for servers that verify clients, or a ready
    ``ssl.SSLContext``; ``enabled=True`` alone uses the system roots."""

    ca_file: Optional[str] = None
    cert_file: Optional[str] = None
    key_file: Optional[str] = None
    context: Optional[ssl.SSLContext] = None
    enabled: bool = False

    @property
    def given(self) -> bool:
        return bool(self.enabled or self.context is not None or self.ca_file or self.cert_file)

    def ssl_context(self) -> ssl.SSLContext:
        if self.context is not None:
            return self.context
        if bool(self.cert_file) != bool(self.key_file):
            raise ValueError("a client certificate needs both tls_cert_file and tls_key_file")
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=self.ca_file)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        if self.cert_file:
            ctx.load_cert_chain(self.cert_file, self.key_file)
        return ctx


@dataclass(frozen=True)
class Reconnect:
    """What happens when the connection is lost: nats-py reconnects (to any
    server of the list or that the cluster named), resubscribes the
    inbox, and checks the server with a PING every ``ping_interval``
    seconds, declaring the connection lost after ``max_outstanding_pings``
    unanswered ones."""

    enabled: bool = True
    max_attempts: int = 60
    time_wait: float = 2.0
    ping_interval: float = 20.0
    max_outstanding_pings: int = 3


class _Refused(nats.errors.Error):
    """Raised inside nats-py's connection attempt to stop it before CONNECT."""

    def __init__(self, message: str) -> None:
        super().__init__()
        self.message = message

    def __str__(self) -> str:
        return self.message


def _loopback(host: Optional[str]) -> bool:
    if not host:
        return False
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _GuardedNATS(_NATS):
    """nats-py's client, with the secret rules applied to each attempt.

    nats-py upgrades to TLS only when the server asks for it (trusting the
    system roots unless told otherwise) and sends its CONNECT on whatever
    it has. This subclass refuses, before CONNECT: a TLS upgrade it was
    not given settings for, a plain connection when it was given them, and
    a password or token on plain TCP to a host that is not loopback.
    """

    def __init__(self, tls: TLSSettings, secret: bool, allow_plaintext: bool) -> None:
        super().__init__()
        self._tls_settings = tls
        self._secret = secret
        self._allow_plaintext = allow_plaintext
        self._tls_this_attempt = False

    @property
    def ssl_context(self) -> ssl.SSLContext:
        # nats-py asks for the context only when it is about to upgrade.
        if not self._tls_settings.given:
            raise _Refused("the server asks for TLS and no TLS settings were given (tls_ca_file, tls_cert_file, "
                           "or tls=True for the system roots)")
        self._tls_this_attempt = True
        return self._tls_settings.ssl_context()

    async def _process_connect_init(self) -> None:
        self._tls_this_attempt = False
        await super()._process_connect_init()

    def _connect_command(self) -> bytes:
        host = self._current_server.uri.hostname if self._current_server else None
        if self._tls_settings.given and not self._tls_this_attempt:
            raise _Refused(f"TLS settings were given and the server at {host} does not speak TLS")
        if self._secret and not self._tls_this_attempt and not self._allow_plaintext and not _loopback(host):
            raise _Refused(f"a password or token would cross plain TCP to {host}: give TLS settings or allow_plaintext=True")
        return super()._connect_command()


def _servers(url: str) -> List[str]:
    out = []
    for u in url.split(","):
        u = u.strip()
        if u:
            out.append(u if "://" in u else "nats://" + u)
    return out


class Connection:
    """One principal's connection: requests under its inbox prefix, with
    the server's refusals of a publish turned into PermissionViolation."""

    def __init__(self, nc: _GuardedNATS) -> None:
        self.nc = nc
        self._watch: Dict[int, Tuple[str, asyncio.Future[None]]] = {}
        self._next = 0

    async def _on_error(self, e: Exception) -> None:
        # nats-py reports a refused publish here and keeps the request
        # waiting; end the requests on that subject now.
        msg = str(e)
        if "permissions violation for publish" not in msg.lower():
            self.last_error = e
            return
        subject = msg.strip().rstrip("'\"").rsplit(" ", 1)[-1].strip("'\"")
        for subj, fut in list(self._watch.values()):
            if subj == subject and not fut.done():
                fut.set_exception(PermissionViolation(msg, subject))

    async def request(self, subject: str, payload: bytes, timeout: float) -> bytes:
        """Sends a request and returns its reply's payload.

        Raises nats.errors.TimeoutError without a reply in time,
        nats.errors.NoRespondersError when nobody listens, and
        PermissionViolation when the server refuses the publish.
        """
        self._next += 1
        key = self._next
        refused: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._watch[key] = (subject, refused)
        req = asyncio.ensure_future(self.nc.request(subject, payload, timeout=timeout))
        waits: Set[asyncio.Future[Any]] = {req, refused}
        try:
            done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            if req in done:
                return req.result().data
            req.cancel()
            refused.result()  # raises the PermissionViolation
            raise AssertionError("unreachable")
        finally:
            del self._watch[key]
            if not refused.done():
                refused.cancel()
            if not req.done():
                req.cancel()

    async def publish(self, subject: str, payload: bytes, reply: str = "") -> None:
        """Publishes payload on subject with an optional reply subject."""
        await self.nc.publish(subject, payload, reply=reply)
        await self.nc.flush()

    def new_inbox(self) -> str:
        """A fresh subject under the principal's inbox prefix."""
        return self.nc.new_inbox()

    async def close(self) -> None:
        """Closes the connection (pending requests end)."""
        if not self.nc.is_closed:
            await self.nc.close()


class AuthorizationRefused(Exception):
    """The server refused the credentials."""


async def open_connection(url: str, *, user: Optional[str], credentials: Credentials, tls: TLSSettings, inbox_prefix: str,
                          name: str, timeout: float, reconnect: Reconnect, allow_plaintext: bool) -> Connection:
    """Connects to one of url's servers (a comma-separated list), trying each
    once in random order; reconnection is on afterwards as ``reconnect`` says.

    Raises InsecureTransport, AuthorizationRefused, or the last server's
    error when none could be reached.
    """
    credentials.check()
    servers = _servers(url)
    if not servers:
        raise ValueError("no NATS URL")
    tls_given = tls.given or any(urlparse(s).scheme == "tls" for s in servers)
    if tls_given and not tls.given:
        tls = TLSSettings(enabled=True)
    if tls.given:
        tls.ssl_context()  # a bad CA or certificate file fails here, not in an attempt
    elif credentials.secret and not allow_plaintext:
        for s in servers:
            host = urlparse(s).hostname
            if not _loopback(host):
                raise InsecureTransport(f"a password or token would cross plain TCP to {host}: give TLS settings "
                                        "(tls_ca_file, a tls:// URL) or allow_plaintext=True")
    kw: Dict[str, Any] = {}
    if credentials.password is not None:
        kw["user"], kw["password"] = user, credentials.password
    if credentials.token:
        kw["token"] = credentials.token
    if credentials.nkey_file:
        kw["nkeys_seed"] = credentials.nkey_file
    if credentials.creds_file:
        kw["user_credentials"] = credentials.creds_file
    order = random.sample(servers, len(servers))
    last: Optional[BaseException] = None
    for first in order:
        conn = Connection(_GuardedNATS(tls, credentials.secret, allow_plaintext))
        try:
            # This server first, the others after it without waiting
            # (nats-py's pool, which it reconnects through later); a
            # refusal or dead servers are reported now, not after nats-py's
            # reconnect loop, whose settings apply once connected.
            await conn.nc.connect(servers=[first] + [s for s in servers if s != first], dont_randomize=True,
                                  allow_reconnect=False, max_reconnect_attempts=1, reconnect_time_wait=0,
                                  connect_timeout=max(1, round(timeout)), name=name,
                                  inbox_prefix=inbox_prefix, error_cb=conn._on_error,
                                  ping_interval=max(1, round(reconnect.ping_interval)),
                                  max_outstanding_pings=reconnect.max_outstanding_pings, **kw)
        except _Refused as e:
            await conn.close()
            raise InsecureTransport(str(e)) from None
        except (nats.errors.Error, OSError, asyncio.TimeoutError, ssl.SSLError) as e:
            cause = conn.last_error if isinstance(e, nats.errors.NoServersError) and conn.last_error else e
            await conn.close()
            if "authorization violation" in str(cause).lower():
                raise AuthorizationRefused(str(cause)) from e
            last = cause
            continue
        conn.nc.options.update(allow_reconnect=reconnect.enabled, max_reconnect_attempts=reconnect.max_attempts,
                               reconnect_time_wait=reconnect.time_wait)
        return conn
    assert last is not None
    raise last
