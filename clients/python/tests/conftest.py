"""Starts a real contextosd (embedded NATS with JetStream) and the synthetic
payment provider for the suite, from binaries built out of this repository
(or taken from $CONTEXTOS_BIN), with the shared-guarantees example's
configuration or the framework agents' (examples/frameworks)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest

from contextos_ledger import Client, Unreachable

REPO = Path(__file__).resolve().parents[3]
PASSWORDS = {"agent_email": "email-demo-secret", "agent_chat": "chat-demo-secret",
             "agent_phone": "phone-demo-secret", "ops_alice": "alice-demo-secret", "ops_bob": "bob-demo-secret-pw"}


class Daemon:
    def __init__(self, url: str, provider: str, mcp_url: str = "") -> None:
        self.url = url
        self.provider = provider
        self.mcp_url = mcp_url

    def provider_stats(self) -> Dict[str, int]:
        with urllib.request.urlopen(self.provider + "/admin/stats", timeout=5) as r:
            return json.load(r)

    def provider_post(self, path: str, body: Dict[str, Any]) -> None:
        """POSTs to the synthetic provider's admin API (/admin/script, /admin/settle)."""
        req = urllib.request.Request(self.provider + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=5):
            pass

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


@contextlib.contextmanager
def _run_daemon(config: Path) -> Iterator[Daemon]:
    """contextosd with the configuration at ``config`` (its {{DATA}},
    {{LISTEN}}, {{MCP_LISTEN}} and {{PROVIDER}} filled in) and the synthetic
    provider, until the block ends."""
    tmp = Path(tempfile.mkdtemp(prefix="contextos-py-"))
    procs = []
    try:
        bin_dir = _binaries(tmp)
        port_file = tmp / "provider.addr"
        logs = open(tmp / "logs.txt", "wb")
        procs.append(subprocess.Popen([str(bin_dir / "demo-provider"), "--port-file", str(port_file)], stderr=logs))
        provider = "http://" + _wait_file(port_file, 10)
        listen, mcp_listen = f"127.0.0.1:{_free_port()}", f"127.0.0.1:{_free_port()}"
        cfg = config.read_text()
        cfg = (cfg.replace("{{DATA}}", str(tmp / "data")).replace("{{LISTEN}}", listen).replace("{{PROVIDER}}", provider)
               .replace("{{MCP_LISTEN}}", mcp_listen))
        (tmp / "contextos.toml").write_text(cfg)
        procs.append(subprocess.Popen([str(bin_dir / "contextosd"), "--config", str(tmp / "contextos.toml")], stderr=logs))
        d = Daemon("nats://" + listen, provider, f"http://{mcp_listen}/mcp" if "{{MCP_LISTEN}}" in config.read_text() else "")
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


@pytest.fixture(scope="session")
def daemon() -> Iterator[Daemon]:
    """The shared-guarantees example's daemon."""
    with _run_daemon(REPO / "examples/shared-guarantees/contextos.toml") as d:
        yield d


@pytest.fixture(scope="session")
def frameworks_daemon() -> Iterator[Daemon]:
    """The framework agents' daemon (examples/frameworks): the MCP gateway
    on, and a goodwill credit that needs an operator's approval."""
    with _run_daemon(REPO / "examples/frameworks/contextos.toml") as d:
        yield d


#: The context pack the context daemon puts the refund capability under: a
#: decision that requires no evidence (its gate is sufficient) gating the
#: refund tool.
REFUND_PACK = {"schema": "context_pack.v1", "pack_id": "refunds", "version": "1",
               "buckets": [{"name": "evidence", "max_tokens": 100}],
               "decisions": [{"decision_key": "refund.issue"}],
               "tools": [{"capability_id": "adp_payments.issue_refund", "gated_by": "refund.issue"}]}


@pytest.fixture(scope="session")
def context_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    """The shared-guarantees example's daemon with its refund capability
    under REFUND_PACK, so its agents can compile their runs' context."""
    tmp = tmp_path_factory.mktemp("context")
    (tmp / "refunds-pack.json").write_text(json.dumps(REFUND_PACK))
    cfg = (REPO / "examples/shared-guarantees/contextos.toml").read_text()
    cap = 'id = "adp_payments.issue_refund"\n'
    assert cap in cfg, "the example's configuration has no refund capability"
    cfg = cfg.replace(cap, cap + f'decision_key = "refund.issue"\ncontext_pack = "{tmp / "refunds-pack.json"}"\n', 1)
    (tmp / "contextos.toml").write_text(cfg)
    with _run_daemon(tmp / "contextos.toml") as d:
        yield d


@pytest.fixture(scope="session")
def two_person_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    """The shared-guarantees example's daemon with tenant acme under the
    two-person rule for limit raises, and a second operator, ops_bob."""
    tmp = tmp_path_factory.mktemp("two-person")
    cfg = (REPO / "examples/shared-guarantees/contextos.toml").read_text()
    tenant, ops = 'id = "acme"\n', '  [[tenants.operators]]\n'
    assert tenant in cfg and ops in cfg, "the example's configuration has no tenant acme with an operator"
    cfg = cfg.replace(tenant, tenant + 'two_person = ["limit_raise"]\n', 1)
    cfg = cfg.replace(ops, ops + f'  id = "ops_bob"\n  password = "{PASSWORDS["ops_bob"]}"\n\n' + ops, 1)
    (tmp / "contextos.toml").write_text(cfg)
    with _run_daemon(tmp / "contextos.toml") as d:
        yield d


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


class TLSEnv:
    """cmd/tlsenv: a TLS-only nats-server verifying client certificates, with
    each principal as a password and an nkey user and a runtime behind it;
    an operator-mode TLS server with each principal as a creds user."""

    def __init__(self, proc: subprocess.Popen[str], info: Dict[str, Any]) -> None:
        self._proc = proc
        self.info = info
        self.url: str = info["url"]
        self.creds_url: str = info["creds_url"]
        self.tls: Dict[str, str] = {"tls_ca_file": info["ca_file"], "tls_cert_file": info["cert_file"], "tls_key_file": info["key_file"]}

    def restart(self) -> None:
        """Restarts the server with the runtime on the same port."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write("restart\n")
        self._proc.stdin.flush()
        line = self._proc.stdout.readline().strip()
        if line != "restarted":
            raise RuntimeError(f"tlsenv restart: {line!r}")

    def provider_stats(self) -> Dict[str, int]:
        with urllib.request.urlopen(self.info["provider"] + "/admin/stats", timeout=5) as r:
            stats: Dict[str, int] = json.load(r)
            return stats


@pytest.fixture(scope="session")
def tlsenv() -> Iterator[TLSEnv]:
    tmp = Path(tempfile.mkdtemp(prefix="contextos-py-tls-"))
    given = os.environ.get("CONTEXTOS_BIN")
    if given:
        exe = Path(given).resolve() / "tlsenv"
    else:
        env = dict(os.environ)
        env.setdefault("GOTOOLCHAIN", "go1.27.3")
        subprocess.run(["go", "build", "-o", str(tmp / "tlsenv"), "./cmd/tlsenv"], cwd=REPO, env=env, check=True)
        exe = tmp / "tlsenv"
    proc = subprocess.Popen([str(exe), "--config", str(REPO / "examples/shared-guarantees/contextos.toml"), "--dir", str(tmp / "env")],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError("tlsenv did not start (see its stderr)")
        yield TLSEnv(proc, json.loads(line))
    finally:
        if proc.stdin is not None:
            proc.stdin.close()  # end of input stops it
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(tmp, ignore_errors=True)
