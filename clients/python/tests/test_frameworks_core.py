"""The framework adapters' core against a real contextosd: each status and
refusal mapped to its outcome, and the resend rule's keys."""

from __future__ import annotations

import asyncio

import pytest
from conftest import Daemon
from world import CREDIT, REFUND, SCHEMA, refund_args, settle

import contextos_ledger as ledger
from contextos_ledger.frameworks import LedgerTool, Operations, Outcome, action_of, bounded_key, outcome_of_error, outcome_of_reply


def test_each_status_and_refusal(frameworks_daemon: Daemon) -> None:
    """applied is a result with the balances; pending and unknown are retries
    that resend the same operation key (one provider call each, the same
    operation once settled); approval_required is an approval with the action
    digest, and the approved call goes under a new key; other refusals are
    errors with their code, retry class and reason."""
    d = frameworks_daemon

    async def main() -> None:
        async with await d.connect("ops_alice") as ops, await d.connect("agent_email") as agent:
            await ops.admit_run("core_run", "agent_email", calls=20, amount=500000)
            refund = LedgerTool(agent, REFUND, "core_run", name="issue_refund", parameters=SCHEMA, deadline=1.5)
            credit = LedgerTool(agent, CREDIT, "core_run", parameters=SCHEMA, deadline=1.5, operations=refund.operations)
            assert credit.name == "adp_payments_issue_goodwill_credit"
            calls = d.provider_stats()["calls"]

            applied = await refund.call(refund_args("core_ord_1", 30000), call_id="call-1")
            assert (applied.kind, applied.status, applied.retry) == ("result", "applied", "")
            assert applied.operation_key == "call-1" and not applied.is_error
            assert applied.balances and applied.balances["committed"] == 30000 and applied.balances["available"] == 70000
            assert applied.balances["guarantees"][0]["guarantee_id"] == "refunds-per-order"

            d.provider_post("/admin/script", {"modes": ["pending", "weird"]})
            pending = await refund.call(refund_args("core_ord_2", 20000), call_id="call-2")
            assert (pending.kind, pending.status, pending.retry) == ("retry", "pending", "same")
            assert pending.operation_key == "call-2" and pending.attempt_id
            unknown = await refund.call(refund_args("core_ord_3", 10000), call_id="call-3")
            assert (unknown.kind, unknown.status, unknown.retry) == ("retry", "unknown", "same")
            assert refund.operations.open_key(REFUND, refund_args("core_ord_3", 10000)) == "call-3"
            # Called again before anything settled (a new tool-call id): the same key, still open.
            again = await refund.call(refund_args("core_ord_2", 20000), call_id="call-2b")
            assert (again.kind, again.operation_key, again.operation_id) == ("retry", "call-2", pending.operation_id)
            assert d.provider_stats()["calls"] == calls + 3

            await settle(d, ops, pending.attempt_id)
            await settle(d, ops, unknown.attempt_id)
            for args, first in ((refund_args("core_ord_2", 20000), pending), (refund_args("core_ord_3", 10000), unknown)):
                done = await refund.call(args, call_id="call-later")
                assert (done.kind, done.status) == ("result", "applied"), done
                assert (done.operation_key, done.operation_id, done.attempt_id) == (first.operation_key, first.operation_id, first.attempt_id)
            assert d.provider_stats()["calls"] == calls + 3, "a resend never dispatches again"
            # Decided: the next call of the same action is a new operation.
            assert refund.operations.open_key(REFUND, refund_args("core_ord_2", 20000)) is None

            asked = await credit.call(refund_args("core_ord_4", 5000), call_id="call-4")
            assert (asked.kind, asked.code, asked.retry) == ("approval", "approval_required", "operator") and asked.is_error
            assert len(asked.action_digest) == 64 and asked.action_digest in asked.next
            assert credit.approval_request(refund_args("core_ord_4", 5000)) == asked
            grant = await ops.approve(asked.action_digest, reason="a goodwill credit the team lead agreed")
            credit.supply_approval(refund_args("core_ord_4", 5000), grant["approval_id"])
            approved = await credit.call(refund_args("core_ord_4", 5000), call_id="call-5")
            assert (approved.kind, approved.status) == ("result", "applied"), approved
            assert approved.operation_key == f"call-5+{grant['approval_id']}"
            assert credit.approval_request(refund_args("core_ord_4", 5000)) is None

            exceeded = await refund.call(refund_args("core_ord_1", 80000))
            assert (exceeded.kind, exceeded.status, exceeded.code, exceeded.retry) == ("error", "refused", "shared_guarantee_exceeded", "never")
            assert exceeded.reason and exceeded.balances and exceeded.balances["available"] == 70000
            assert exceeded.text().startswith("shared_guarantee_exceeded (retry never): ")
            assert len(exceeded.operation_key) == 32  # no tool-call id: a random key

            await ops.kill_switch(True, "core test")
            try:
                stopped = await refund.call(refund_args("core_ord_5", 100))
            finally:
                await ops.kill_switch(False, "core test done")
            assert (stopped.kind, stopped.code, stopped.retry) == ("error", "kill_switch_engaged", "operator")

            unadmitted = LedgerTool(agent, REFUND, "core_run_nobody_admitted", parameters=SCHEMA)
            budget = await unadmitted.call(refund_args("core_ord_6", 100))
            assert (budget.kind, budget.code, budget.retry) == ("error", "run_budget_exhausted", "never")
            assert d.provider_stats()["calls"] == calls + 4

    asyncio.run(main())


def test_unreachable_is_a_retry_of_the_same_key(frameworks_daemon: Daemon) -> None:
    """A daemon that does not answer in time gives a retry, never an
    exception, and the call is resent under the same key."""

    async def main() -> None:
        agent = await frameworks_daemon.connect("agent_chat")
        tool = LedgerTool(agent, REFUND, "core_run_gone", parameters=SCHEMA, deadline=0.3)
        await agent.close()  # every request now fails: nothing can be sent
        first = await tool.call(refund_args("core_ord_gone", 100), call_id="gone-1")
        assert (first.kind, first.status, first.retry) == ("retry", "unknown", "same"), first
        second = await tool.call(refund_args("core_ord_gone", 100), call_id="gone-2")
        assert second.kind == "retry" and second.operation_key == "gone-1"

    asyncio.run(main())


def test_operations_keys_are_bounded() -> None:
    """Keys from tool-call ids, digests past the daemon's 256 bytes, and at
    most max_entries open operations remembered."""
    ops = Operations(key_prefix="agent-", max_entries=2)
    assert ops.new_key("c1") == "agent-c1" and len(ops.new_key()) == len("agent-") + 32
    long = "x" * 300
    assert bounded_key(long).startswith("sha256-") and len(bounded_key(long)) == 71 and bounded_key("k") == "k"
    assert action_of("a", {"x": 1, "y": 2}) == action_of("a", {"y": 2, "x": 1}) != action_of("b", {"x": 1, "y": 2})
    with pytest.raises(ValueError):
        Operations(max_entries=0)

    sent = []

    async def pending(key: str, approval: object) -> Outcome:
        sent.append(key)
        return Outcome("retry", "pending", "cap", key, retry="same")

    async def main() -> None:
        for i in range(3):
            await ops.call("cap", {"i": i}, pending, call_id=f"c{i}")
        assert ops.open_key("cap", {"i": 0}) is None  # the oldest is forgotten past the bound
        assert ops.open_key("cap", {"i": 1}) == "agent-c1" and ops.open_key("cap", {"i": 2}) == "agent-c2"
        await ops.call("cap", {"i": 2}, pending, call_id="other")
        assert sent[-1] == "agent-c2"

    asyncio.run(main())


def test_every_refusal_code_has_an_outcome() -> None:
    """Every code of the catalog maps to an outcome, never an exception:
    approval_required to an approval, the codes whose outcome is not known
    (retry class same) and overloaded to a retry of the same key, every other
    to an error carrying its code, retry class and reason; a code this
    version does not know to an error with no retry class."""
    args = {"order_id": "o", "amount_minor": 1}
    for code, cls in ledger.REFUSALS.items():
        for o in (outcome_of_reply({"status": "refused", "code": code, "reason": "why"}, REFUND, "k", args),
                  outcome_of_error(cls(reason="why"), REFUND, "k", args)):
            assert (o.code, o.retry, o.reason, o.operation_key) == (code, cls.retry, "why", "k")
            want = "approval" if code == "approval_required" else "retry" if cls.retry == "same" or code == "overloaded" else "error"
            assert o.kind == want, (code, o.kind)
            assert o.is_error == (want != "retry")
            assert o.text().startswith(f"{code} (retry {cls.retry}): why\n" if o.is_error else "{")
    odd = outcome_of_reply({"status": "refused", "code": "a_future_code", "reason": "r"}, REFUND, "k", args)
    assert (odd.kind, odd.retry) == ("error", "") and "docs/errors.md" in odd.next
    for status in ("pending", "unknown", "a_future_status"):
        o = outcome_of_reply({"status": status}, REFUND, "k", args)
        assert (o.kind, o.retry) == ("retry", "same") and o.status in ("pending", "unknown")
    # An unknown that repeating the call cannot learn is an error, raised or replied.
    sealed = ledger.Decision(status="unknown", code="stored_event_refused", reason="why")
    for o in (outcome_of_reply({"status": "unknown", "code": "stored_event_refused", "reason": "why"}, REFUND, "k", args),
              outcome_of_error(ledger.StoredEventRefused(reason="why", decision=sealed), REFUND, "k", args)):
        assert (o.kind, o.status, o.code, o.retry) == ("error", "unknown", "stored_event_refused", "never") and o.is_error, o
    with pytest.raises(KeyError):
        outcome_of_error(KeyError("not the ledger's"), REFUND, "k", args)
