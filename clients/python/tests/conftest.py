"""Starts a real contextosd (embedded NATS with JetStream) and the synthetic
payment provider for the suite, from binaries built out of this repository
(or taken from $CONTEXTOS_BIN), with the shared-guarantees example's
configuration."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Dict, Iterator

import pytest

from contextos_ledger import Client, Unreachable

REPO = Path(__file__).resolve().parents[3]
PASSWORDS = {"agent_email": "email-demo-secret", "agent_chat": "chat-demo-secret",
             "agent_phone": "phone-demo-secret", "ops_alice": "alice-demo-secret"}


class Daemon:
    def __init__(self, url: str, provider: str) -> None:
        self.url = url
        self.provider = provider

    def provider_stats(self) -> Dict[str, int]:
        with urllib.request.urlopen(self.provider + "/admin/stats", timeout=5) as r:
            return json.load(r)

    async def connect(self, principal: str, **kw) -> Client:
        return await Client.connect(self.url, tenant="acme", principal=principal, password=PASSWORDS[principal], **kw)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_file(path: Path, limit: float) -> str:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if path.exists() and path.stat().st_size > 0:
            return path.read_text()
        time.sleep(0.05)
    raise RuntimeError(f"{path} did not appear")


def _binaries(tmp: Path) -> Path:
    given = os.environ.get("CONTEXTOS_BIN")
    if given:
        return Path(given).resolve()
    out = tmp / "bin"
    out.mkdir()
    env = dict(os.environ)
    env.setdefault("GOTOOLCHAIN", "go1.27.3")
    subprocess.run(["go", "build", "-o", str(out), "./cmd/contextosd", "./cmd/demo-provider"], cwd=REPO, env=env, check=True)
    return out


@pytest.fixture(scope="session")
def daemon() -> Iterator[Daemon]:
    tmp = Path(tempfile.mkdtemp(prefix="contextos-py-"))
    procs = []
    try:
        bin_dir = _binaries(tmp)
        port_file = tmp / "provider.addr"
        logs = open(tmp / "logs.txt", "wb")
        procs.append(subprocess.Popen([str(bin_dir / "demo-provider"), "--port-file", str(port_file)], stderr=logs))
        provider = "http://" + _wait_file(port_file, 10)
        listen = f"127.0.0.1:{_free_port()}"
        cfg = (REPO / "examples/shared-guarantees/contextos.toml").read_text()
        cfg = cfg.replace("{{DATA}}", str(tmp / "data")).replace("{{LISTEN}}", listen).replace("{{PROVIDER}}", provider)
        (tmp / "contextos.toml").write_text(cfg)
        procs.append(subprocess.Popen([str(bin_dir / "contextosd"), "--config", str(tmp / "contextos.toml")], stderr=logs))
        d = Daemon("nats://" + listen, provider)
        asyncio.run(_ready(d))
        yield d
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


async def _ready(d: Daemon) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            c = await d.connect("ops_alice", timeout=1.0)
            try:
                await c.exposure()
                return
            finally:
                await c.close()
        except Unreachable:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)
