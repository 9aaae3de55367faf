"""The NATS protocol module against a scripted server: replies split across
reads, a reply with its own reply subject, a late reply to an abandoned
request, a publish the server refuses, and a fatal -ERR."""

from __future__ import annotations

import asyncio
from typing import Awaitable, Callable

import pytest

from contextos_ledger import _nats

Handler = Callable[[bytes, bytes, asyncio.StreamWriter], Awaitable[None]]


async def serve(on_pub: Handler) -> asyncio.AbstractServer:
    async def conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b'INFO {"server_id":"t","headers":true,"proto":1}\r\n')
        subs = {}
        while True:
            line = await reader.readline()
            if not line:
                return
            if line.startswith(b"PING"):
                writer.write(b"PONG\r\n")
            elif line.startswith(b"SUB "):
                subject, sid = line.split()[1:3]
                subs[subject.rstrip(b"*")] = sid
            elif line.startswith(b"PUB "):
                parts = line.split()
                payload = (await reader.readexactly(int(parts[-1]) + 2))[:-2]
                reply = parts[2] if len(parts) == 4 else b""
                sid = next((s for p, s in subs.items() if reply.startswith(p)), b"0")
                await on_pub(parts[1] + b" " + reply + b" " + sid, payload, writer)
            await writer.drain()

    return await asyncio.start_server(conn, "127.0.0.1", 0)


def url(server: asyncio.AbstractServer) -> str:
    return "nats://127.0.0.1:%d" % server.sockets[0].getsockname()[1]


def test_replies_split_across_reads_and_late_ones_dropped() -> None:
    async def main() -> None:
        slow_reply = []

        async def on_pub(head: bytes, payload: bytes, w: asyncio.StreamWriter) -> None:
            subject, reply, sid = head.split()
            if payload == b"slow":
                slow_reply.append(reply)
                return  # answered later, after the requester gave up
            msg = b"MSG %s %s _INBOX.x.y %d\r\n%s\r\n" % (reply, sid, len(payload) + 5, b"echo:" + payload)
            for i in range(0, len(msg), 3):  # three bytes at a time
                w.write(msg[i:i + 3])
                await w.drain()
            if payload == b"after-slow":
                w.write(b"MSG %s %s 4\r\nlate\r\n" % (slow_reply[0], sid))

        server = await serve(on_pub)
        nc = await _nats.connect(url(server), user="acme.a", password="p", inbox_prefix="_INBOX.acme.a")
        try:
            assert await nc.request("s", b"hello", 2) == b"echo:hello"
            with pytest.raises(asyncio.TimeoutError):
                await nc.request("s", b"slow", 0.05)
            assert await nc.request("s", b"after-slow", 2) == b"echo:after-slow"
            await nc.flush()  # the late reply arrived and was dropped
            assert await nc.request("s", b"again", 2) == b"echo:again"
        finally:
            await nc.close()
            server.close()

    asyncio.run(main())


def test_refused_publish_and_fatal_error() -> None:
    async def main() -> None:
        async def on_pub(head: bytes, payload: bytes, w: asyncio.StreamWriter) -> None:
            subject = head.split()[0]
            if subject == b"forbidden":
                w.write(b"-ERR 'Permissions Violation for Publish to \"forbidden\"'\r\n")
            elif subject == b"fatal":
                w.write(b"-ERR 'Stale Connection'\r\n")

        server = await serve(on_pub)
        nc = await _nats.connect(url(server), user="acme.a", password="p", inbox_prefix="_INBOX.acme.a")
        try:
            with pytest.raises(_nats.PermissionViolation) as e:
                await nc.request("forbidden", b"{}", 2)
            assert e.value.subject == "forbidden"
            with pytest.raises(_nats.NatsError):
                await nc.request("fatal", b"{}", 2)
            with pytest.raises(_nats.NatsError):
                await nc.request("anything", b"{}", 2)
        finally:
            await nc.close()
            server.close()

    asyncio.run(main())


def test_authorization_refused() -> None:
    async def main() -> None:
        async def conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.write(b'INFO {"server_id":"t"}\r\n')
            await reader.readline()
            writer.write(b"-ERR 'Authorization Violation'\r\n")
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(conn, "127.0.0.1", 0)
        try:
            with pytest.raises(_nats.AuthorizationError):
                await _nats.connect(url(server), user="acme.a", password="wrong")
        finally:
            server.close()

    asyncio.run(main())
