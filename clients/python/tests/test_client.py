"""The Python client against a real contextosd."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import time

import pytest
from conftest import PASSWORDS, REPO, Daemon, _free_port

import contextos_ledger as ledger
from contextos_ledger import (
    AuthorityDenied,
    CapabilityNotSurfaced,
    Client,
    Proposal,
    Refused,
    SharedGuaranteeExceeded,
    SyncClient,
    Unreachable,
)


def refund(run: str, key: str, order: str, amount: int) -> Proposal:
    return Proposal(run, key, "adp_payments.issue_refund", {"order_id": order, "amount_minor": amount, "currency": "INR"})


async def admit(d: Daemon, run: str, principal: str) -> None:
    async with await d.connect("ops_alice") as ops:
        await ops.admit_run(run, principal, calls=5, amount=200000)


def test_codes_are_the_catalog() -> None:
    common = json.loads((REPO / "docs/schema/common.json").read_text())
    codes = common["$defs"]["code"]["enum"]
    assert [c.value for c in ledger.Code] == codes
    assert list(ledger.REFUSALS) == codes
    for code, cls in ledger.REFUSALS.items():
        assert issubclass(cls, Refused) and cls().code == code


def test_retry_classes_are_the_catalog() -> None:
    """Each code's class carries its retry class, read here from wire/codes.go
    and wire/retry.go independently of the generator that wrote the classes."""
    codes = dict(re.findall(r'^\s*(Code\w+)\s+Code = "([a-z_]+)"', (REPO / "wire/codes.go").read_text(), re.M))
    src = (REPO / "wire/retry.go").read_text()
    classes = dict(re.findall(r'^\s*(Retry\w+)\s+Retry = "([a-z]+)"', src, re.M))
    table = re.search(r"var retries = map\[Code\]Retry\{(.*?)\n\}", src, re.S)
    assert table, "wire/retry.go: no retries map"
    want = {codes[c]: classes[r] for c, r in re.findall(r"(Code\w+):\s*(Retry\w+),", table.group(1))}
    assert set(want) == set(ledger.REFUSALS)
    assert {code: cls.retry for code, cls in ledger.REFUSALS.items()} == want
    assert set(want.values()) == {"never", "same", "later", "operator"}
    assert ledger.retry_of("approval_required") == "operator" and ledger.retry_of("ledger_unavailable") == "same"
    assert ledger.retry_of("no_such_code") == "" and ledger.refused("no_such_code").retry == ""


def test_seed_race(daemon: Daemon) -> None:
    """Two agents race INR 800 refunds on one order (ceiling INR 1,000) from
    two connections at once: one applied, one shared_guarantee_exceeded, one
    provider call."""

    async def main() -> None:
        await admit(daemon, "py_run_email", "agent_email")
        await admit(daemon, "py_run_chat", "agent_chat")
        before = daemon.provider_stats()["calls"]
        email, chat = await daemon.connect("agent_email"), await daemon.connect("agent_chat")
        try:
            results = await asyncio.gather(email.propose(refund("py_run_email", "refund-py_881", "py_ord_881", 80000)),
                                           chat.propose(refund("py_run_chat", "refund-py_881", "py_ord_881", 80000)),
                                           return_exceptions=True)
        finally:
            await email.close()
            await chat.close()
        applied = [r for r in results if isinstance(r, ledger.Decision) and r.status == "applied"]
        exceeded = [r for r in results if isinstance(r, SharedGuaranteeExceeded)]
        assert len(applied) == 1 and len(exceeded) == 1, results
        assert exceeded[0].decision.available == 20000
        assert applied[0].committed == 80000 and applied[0].guarantees[0].guarantee_id == "refunds-per-order"
        assert daemon.provider_stats()["calls"] == before + 1

    asyncio.run(main())


def test_resend_after_lost_reply(daemon: Daemon) -> None:
    """The first request reaches the daemon but its reply is lost; the
    client resends the same operation key and learns the outcome of the one
    operation, with one provider call."""

    async def main() -> None:
        await admit(daemon, "py_run_lost", "agent_email")
        before = daemon.provider_stats()["calls"]
        ops = await daemon.connect("ops_alice")
        resends = []

        async def settled(n: int, why: BaseException) -> None:
            # Let the lost request finish before resending, so that the
            # resend finds the operation settled, not in flight.
            resends.append(why)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                rows = await ops.exposure(resource="py_ord_lost")
                if rows and rows[0]["committed"] == 30000:
                    return
                await asyncio.sleep(0.01)
            raise AssertionError("the lost request never settled")

        agent = await daemon.connect("agent_email", on_resend=settled)
        real = agent._conn.request
        lost = []

        async def lose_first(subject: str, payload: bytes, timeout: float) -> bytes:
            if not lost:
                lost.append(subject)
                await agent._conn.publish(subject, payload, reply=agent._conn.new_inbox())
                raise asyncio.TimeoutError()
            return await real(subject, payload, timeout)

        agent._conn.request = lose_first  # type: ignore[method-assign]
        try:
            d = await agent.propose(refund("py_run_lost", "op-lost", "py_ord_lost", 30000))
            assert d.status == "applied" and len(resends) == 1
            again = await agent.propose(refund("py_run_lost", "op-lost", "py_ord_lost", 30000))
            assert (again.operation_id, again.attempt_id) == (d.operation_id, d.attempt_id)
            assert daemon.provider_stats()["calls"] == before + 1
        finally:
            await agent.close()
            await ops.close()

    asyncio.run(main())


def test_typed_errors(daemon: Daemon) -> None:
    async def main() -> None:
        async with await daemon.connect("agent_phone") as agent:
            with pytest.raises(CapabilityNotSurfaced):
                await agent.propose(Proposal("r", "k", "no.such", {}))
            with pytest.raises(ledger.SharedGuaranteeAmountInvalid):
                await agent.propose(Proposal("r", "k2", "adp_payments.issue_refund", {"order_id": "o", "amount_minor": 1.5}))
            with pytest.raises(ledger.RequestMalformed):
                await agent.propose(Proposal("r" * 257, "k3", "adp_payments.issue_refund", {}))
            start = time.monotonic()
            with pytest.raises(AuthorityDenied):  # the server refuses an agent's publish on an operator subject
                await agent.exposure()
            assert time.monotonic() - start < 3
        with pytest.raises(AuthorityDenied):
            await Client.connect(daemon.url, tenant="acme", principal="agent_phone", password="wrong")
        with pytest.raises(Unreachable):
            await Client.connect(f"nats://127.0.0.1:{_free_port()}", tenant="acme", principal="agent_phone", password="x", timeout=1)
        with pytest.raises(ValueError):
            await Client.connect(daemon.url, tenant="acme", principal="ops.alice", password="x")

    asyncio.run(main())


def test_compile_context(context_daemon: Daemon) -> None:
    async def main() -> None:
        async with await context_daemon.connect("agent_email") as agent:
            cc = await agent.compile_context("run_ctx", "adp_payments.issue_refund")
            assert isinstance(cc, ledger.CompiledContext)
            assert re.fullmatch("[0-9a-f]{64}", cc.digest) and cc.context["digest"] == cc.digest
            assert cc.context["run"]["principal"] == "agent_email" and cc.context["run"]["run_id"] == "run_ctx"
            assert cc.gate.decision_key == "refund.issue" and cc.gate.sufficiency == "sufficient" and cc.gate.commit_allowed
            assert cc.tools == [ledger.ToolExposure("adp_payments.issue_refund", exposed=True, dispatch_allowed=True,
                                                    gated_by="refund.issue", version="1")]
            with pytest.raises(CapabilityNotSurfaced) as e:
                await agent.compile_context("run_ctx", "no.such")
            assert e.value.code == "capability_not_surfaced" and e.value.reason
            with pytest.raises(ledger.RequestMalformed):
                await agent.compile_context("run_ctx", "adp_payments.issue_refund", evidence_refs=[""])
        async with await context_daemon.connect("agent_chat") as other:
            # The server refuses a publish on another agent's context subject.
            start = time.monotonic()
            with pytest.raises(AuthorityDenied):
                await other._request(ledger.context_subject("acme", "agent_email"),
                                     ledger.ContextRequest("run_ctx", "adp_payments.issue_refund").to_json(), 5.0)
            assert time.monotonic() - start < 3

    asyncio.run(main())


def test_compile_context_without_a_pack(daemon: Daemon) -> None:
    async def main() -> None:
        async with await daemon.connect("agent_phone") as agent:
            with pytest.raises(ledger.ContextInvalid) as e:
                await agent.compile_context("run_ctx", "adp_payments.issue_refund")
            assert e.value.code == "context_invalid"

    asyncio.run(main())


def test_operator_calls(daemon: Daemon) -> None:
    async def main() -> None:
        async with await daemon.connect("ops_alice") as ops:
            run = await ops.admit_run("py_run_ops", "agent_phone", calls=2, amount=5000)
            assert run["admitted"] and run["calls"] == 2
            with pytest.raises(ledger.RunAlreadyAdmitted):
                await ops.admit_run("py_run_ops", "agent_phone", calls=3, amount=5000)
            assert (await ops.run("py_run_ops"))["used_calls"] == 0
            assert (await ops.revoke("agent_phone", "adp_payments.issue_refund"))["granted"] is False
            async with await daemon.connect("agent_phone") as agent:
                with pytest.raises(AuthorityDenied):
                    await agent.propose(refund("py_run_ops", "k1", "py_ord_ops", 100))
                assert (await ops.grant("agent_phone", "adp_payments.issue_refund"))["granted"] is True
                d = await agent.propose(refund("py_run_ops", "k2", "py_ord_ops", 100))
                assert d.status == "applied"
            assert (await ops.run("py_run_ops"))["used_calls"] == 1
            assert any(r["resource"] == "py_ord_ops" for r in await ops.exposure())
            assert isinstance(await ops.attempts(), list)
            with pytest.raises(ledger.SharedGuaranteeAttemptUnknown):
                await ops.close_attempt("nope")
            assert await ops.kill_switch() is False

    asyncio.run(main())


def test_confirm(two_person_daemon: Daemon) -> None:
    """Under the two-person rule a limit raise by ops_alice is held: refused
    SecondOperatorRequired with the request's id in its data, the limit
    unchanged; ops_alice cannot confirm it herself; ops_bob's confirm
    carries it out, and a second confirmation is refused."""

    async def main() -> None:
        d = two_person_daemon

        async def limit(ops: Client) -> int:
            return int((await ops.guarantee_history("refunds-per-order"))[-1]["limit"])

        async with await d.connect("ops_alice") as alice, await d.connect("ops_bob") as bob:
            before = await limit(alice)
            with pytest.raises(ledger.SecondOperatorRequired) as held:
                await alice.op("guarantee-set-limit", {"guarantee_id": "refunds-per-order", "limit": before + 5000, "reason": "season"})
            request_id = (held.value.data or {}).get("request_id")
            assert isinstance(request_id, str) and request_id, held.value.data
            assert await limit(alice) == before
            with pytest.raises(ledger.SecondOperatorRequired):
                await alice.confirm(request_id)
            assert await limit(alice) == before
            assert (await bob.confirm(request_id))["ok"] is True
            assert await limit(alice) == before + 5000
            with pytest.raises(ledger.RequestMalformed):
                await bob.confirm(request_id)

    asyncio.run(main())


def test_sync_client(daemon: Daemon) -> None:
    with SyncClient(daemon.url, tenant="acme", principal="ops_alice", password=PASSWORDS["ops_alice"]) as ops:
        ops.admit_run("py_run_sync", "agent_chat", calls=2, amount=1000)
        assert ops.run("py_run_sync")["calls"] == 2
    with SyncClient(daemon.url, tenant="acme", principal="agent_chat", password=PASSWORDS["agent_chat"]) as agent:
        d = agent.propose(refund("py_run_sync", "s1", "py_ord_sync", 500))
        assert d.status == "applied" and d.available == 99500
        with pytest.raises(SharedGuaranteeExceeded):
            agent.propose(refund("py_run_sync", "s2", "py_ord_sync", 100000))


def test_paged_lists(daemon: Daemon) -> None:
    """The list verbs answer a page at a time: exposure_page pages through by
    next_cursor, exposure collects every page and raises MoreRows past its
    bound, a resource is selected by its digest, and a malformed cursor is
    refused request_malformed."""

    async def main() -> None:
        await admit(daemon, "py_run_pages", "agent_email")
        orders = ["py_pg_1", "py_pg_2", "py_pg_3"]
        async with await daemon.connect("agent_email") as agent:
            for i, order in enumerate(orders):
                assert (await agent.propose(refund("py_run_pages", f"pg{i}", order, 10))).status == "applied"
        async with await daemon.connect("ops_alice") as ops:
            seen, cursor, pages = [], "", 0
            while True:
                page = await ops.exposure_page(limit=2, cursor=cursor)
                assert len(page.rows) <= 2
                seen += [r["resource"] for r in page.rows]
                pages += 1
                if not page.next_cursor:
                    break
                cursor = page.next_cursor
            assert pages >= 2 and len(seen) == len(set(seen)) and set(orders) <= set(seen)
            assert [r["resource"] for r in await ops.exposure()] == seen
            with pytest.raises(ledger.MoreRows) as more:
                await ops.exposure(max_rows=1)
            assert len(more.value.rows) == 1 and more.value.next_cursor
            one = await ops.exposure(resource_digest=hashlib.sha256(b"py_pg_2").hexdigest())
            assert len(one) == 1 and one[0]["resource"] == "py_pg_2" and one[0]["committed"] == 10
            with pytest.raises(ledger.RequestMalformed):
                await ops.attempts_page(cursor="not a cursor")

    asyncio.run(main())
