"""The Python client the way production connects: TLS with a private CA and
client certificates, nkey, password and creds-file users (cmd/tlsenv), a
server restart, and the refusals that keep a secret off plain TCP."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, Dict, List, Tuple

import pytest
from conftest import TLSEnv

import contextos_ledger as ledger
from contextos_ledger import AuthorityDenied, Client, InsecureTransport, Proposal, Reconnect, SyncClient


def refund(run: str, key: str, order: str, amount: int) -> Proposal:
    return Proposal(run, key, "adp_payments.issue_refund", {"order_id": order, "amount_minor": amount, "currency": "INR"})


def test_tls_nkey_password_and_reconnect(tlsenv: TLSEnv) -> None:
    """An operator (password over TLS) admits a run; an agent (nkey over
    TLS, client certificate) proposes; after the server restarts, the same
    client reconnects through its inbox prefix and proposes again."""

    async def main() -> None:
        async with await Client.connect(tlsenv.url, tenant="acme", principal="ops_alice", password=tlsenv.info["passwords"]["ops_alice"],
                                        **tlsenv.tls) as ops:
            await ops.admit_run("py_tls_run", "agent_email", calls=5, amount=100000)
        before = tlsenv.provider_stats()["calls"]
        agent = await Client.connect(tlsenv.url, tenant="acme", principal="agent_email", nkey_file=tlsenv.info["nkeys"]["agent_email"],
                                     reconnect=Reconnect(time_wait=0.2), **tlsenv.tls)
        try:
            d = await agent.propose(refund("py_tls_run", "py-tls-1", "py_tls_ord", 1000))
            assert d.status == "applied"
            assert agent._conn.nc.connected_url is not None
            await asyncio.get_running_loop().run_in_executor(None, tlsenv.restart)
            d2 = await agent.propose(refund("py_tls_run", "py-tls-2", "py_tls_ord", 1000), deadline=60)
            assert d2.status == "applied" and d2.committed == 2000
            assert agent._conn.nc.stats["reconnects"] >= 1
            assert tlsenv.provider_stats()["calls"] == before + 2
        finally:
            await agent.close()

    asyncio.run(main())


def test_creds_file(tlsenv: TLSEnv) -> None:
    """A creds file over TLS is accepted by the operator-mode server (nobody
    answers there, so the proposal stays unresolved); one signed by an
    untrusted account is refused authority_denied."""

    async def main() -> None:
        async with await Client.connect(tlsenv.creds_url, tenant="acme", principal="agent_chat", creds_file=tlsenv.info["creds"]["agent_chat"],
                                        timeout=0.05, **tlsenv.tls) as c:
            with pytest.raises(ledger.Unresolved) as e:
                await c.propose(refund("r", "k", "o", 1), deadline=0.5)
            assert e.value.resends > 0
        with pytest.raises(AuthorityDenied):
            await Client.connect(tlsenv.creds_url, tenant="acme", principal="agent_chat", creds_file=tlsenv.info["stranger_creds"], **tlsenv.tls)
        with pytest.raises(AuthorityDenied):
            await Client.connect(tlsenv.url, tenant="acme", principal="agent_chat", password="wrong", **tlsenv.tls)
        with pytest.raises(ValueError):
            await Client.connect(tlsenv.url, tenant="acme", principal="agent_chat", password="x", creds_file="y", **tlsenv.tls)

    asyncio.run(main())


def test_sync_client_tls(tlsenv: TLSEnv) -> None:
    with SyncClient(tlsenv.url, tenant="acme", principal="ops_alice", nkey_file=tlsenv.info["nkeys"]["ops_alice"], **tlsenv.tls) as ops:
        assert isinstance(ops.exposure(), list)


class FakeServer:
    """A loopback NATS server that records what clients send: INFO (with
    tls_required as said), PONG to each PING; it never speaks TLS."""

    def __init__(self, tls_required: bool) -> None:
        self.tls_required = tls_required
        self.connections = 0
        self.received = b""
        self.server: asyncio.AbstractServer

    async def start(self) -> FakeServer:
        self.server = await asyncio.start_server(self._conn, "127.0.0.1", 0)
        return self

    @property
    def port(self) -> int:
        port: int = self.server.sockets[0].getsockname()[1]
        return port

    async def _conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        info = {"server_id": "fake", "version": "2.12.0", "proto": 1, "headers": True, "max_payload": 1048576,
                "tls_required": self.tls_required}
        writer.write(b"INFO " + json.dumps(info).encode() + b"\r\n")
        await writer.drain()
        try:
            while True:
                line = await reader.readline()
                if not line:
                    return
                self.received += line
                if line.startswith(b"PING"):
                    writer.write(b"PONG\r\n")
                    await writer.drain()
        except ConnectionError:
            return
        finally:
            writer.close()

    def connects(self) -> List[Dict[str, Any]]:
        return [json.loads(line[len(b"CONNECT "):]) for line in self.received.splitlines() if line.startswith(b"CONNECT ")]


SECRET = "s3cret-password"


def test_refuses_secret_in_clear(tlsenv: TLSEnv) -> None:
    """No CONNECT (and no password) reaches a server that asks for TLS when
    the client has no TLS settings; TLS settings and a plain server refuse
    too; a password or token is not sent over plain TCP to a host that is
    not loopback (0.0.0.0, which the kernel routes here, so a mistake would
    show) unless allow_plaintext says so."""

    async def main() -> None:
        tls_fake = await FakeServer(tls_required=True).start()
        plain = await FakeServer(tls_required=False).start()
        try:
            with pytest.raises(InsecureTransport, match="asks for TLS"):
                await Client.connect(f"nats://127.0.0.1:{tls_fake.port}", tenant="acme", principal="agent_email", password=SECRET)
            assert tls_fake.connections == 1 and tls_fake.connects() == [] and SECRET.encode() not in tls_fake.received

            with pytest.raises(InsecureTransport, match="asks for TLS"):
                await Client.connect(tlsenv.url, tenant="acme", principal="agent_email", password=tlsenv.info["passwords"]["agent_email"])

            with pytest.raises(InsecureTransport, match="does not speak TLS"):
                await Client.connect(f"nats://127.0.0.1:{plain.port}", tenant="acme", principal="agent_email", password=SECRET, **tlsenv.tls)
            assert plain.connects() == [] and SECRET.encode() not in plain.received

            seen = plain.connections
            for cred in ({"password": SECRET}, {"token": SECRET}):
                with pytest.raises(InsecureTransport, match="plain TCP"):
                    await Client.connect(f"nats://0.0.0.0:{plain.port}", tenant="acme", principal="agent_email", **cred)
            assert plain.connections == seen, "a refused connection was dialled"

            sent: List[Tuple[str, Dict[str, Any]]] = []
            for cred in ({"password": SECRET}, {"token": SECRET}):
                c = await Client.connect(f"nats://0.0.0.0:{plain.port}", tenant="acme", principal="agent_email", allow_plaintext=True, **cred)
                await c.close()
                sent.append((next(iter(cred)), plain.connects()[-1]))
            assert sent[0][1]["user"] == "acme.agent_email" and sent[0][1]["pass"] == SECRET
            assert sent[1][1]["auth_token"] == SECRET
            # On loopback a password in clear is allowed (the embedded default).
            c = await Client.connect(f"nats://127.0.0.1:{plain.port}", tenant="acme", principal="agent_email", password=SECRET)
            await c.close()
        finally:
            tls_fake.server.close()
            plain.server.close()

    asyncio.run(main())


def test_permission_violation_is_immediate(tlsenv: TLSEnv) -> None:
    """A publish the server refuses ends the request at once as
    AuthorityDenied, over TLS as in clear."""

    async def main() -> None:
        async with await Client.connect(tlsenv.url, tenant="acme", principal="agent_phone", nkey_file=tlsenv.info["nkeys"]["agent_phone"],
                                        **tlsenv.tls) as agent:
            start = time.monotonic()
            with pytest.raises(AuthorityDenied):
                await agent.exposure()
            assert time.monotonic() - start < 3

    asyncio.run(main())
