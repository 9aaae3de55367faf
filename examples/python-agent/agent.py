#!/usr/bin/env python3
"""A scripted refund agent on the Python client (no model key needed).

It proposes each refund of its script through contextos_ledger (installed:
``pip install contextos-ledger``) and handles every status and refusal as an
agent should. The connection comes from the environment: CTX_NATS (default
nats://127.0.0.1:4222), CTX_TENANT, AGENT (the principal), one credential
(AGENT_PASSWORD, AGENT_NKEY or AGENT_CREDS), CTX_TLSCA, CTX_TLSCERT and
CTX_TLSKEY for TLS, and AGENT_RUN (the run an operator admitted).

    AGENT=agent_email AGENT_PASSWORD=... AGENT_RUN=run_1 CTX_TENANT=acme \\
        python3 agent.py refund-ord_881:ord_881:80000

Each argument is KEY:ORDER:AMOUNT (amount in minor units). With --json it
prints one JSON object per refund; with --wait it connects, prints "ready"
and waits for a line on stdin before proposing (so a driver can start two
agents at the same instant).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any, Dict

import contextos_ledger as ledger
from contextos_ledger import Client, Proposal


def handle(key: str, order: str, amount: int, outcome: Any) -> Dict[str, Any]:
    """What the agent does with each answer: the status, and the next step."""
    out: Dict[str, Any] = {"operation_key": key, "order_id": order, "amount_minor": amount}
    if isinstance(outcome, ledger.Decision):
        out.update(status=outcome.status, attempt_id=outcome.attempt_id, operation_id=outcome.operation_id,
                   available=outcome.available)
        out["next"] = {
            "applied": "done: the provider refunded",
            "not_applied": "the provider did not refund; a new attempt needs a new operation key",
            "pending": "the provider will settle it; resend the same key later to learn the outcome",
        }[outcome.status]
        return out
    out["status"] = "refused" if isinstance(outcome, ledger.Refused) else "error"
    if isinstance(outcome, ledger.SharedGuaranteeExceeded):
        out.update(code=outcome.code, available=outcome.decision.available,
                   next="the order's refund ceiling is reached: tell the customer, do not retry")
    elif isinstance(outcome, ledger.ApprovalRequired):
        out.update(code=outcome.code, action_digest=outcome.decision.action_digest,
                   next=f"ask an operator: ctx approve --digest {outcome.decision.action_digest}; then propose again "
                        "under a new operation key with approval_id")
    elif isinstance(outcome, ledger.KillSwitchEngaged):
        out.update(code=outcome.code, next="the tenant's kill switch is engaged: stop and hand over to a human")
    elif isinstance(outcome, ledger.RunBudgetExhausted):
        out.update(code=outcome.code, next="this run has no budget left: ask an operator to admit a run")
    elif isinstance(outcome, (ledger.AuthorityDenied, ledger.PolicyDenied)):
        out.update(code=outcome.code, next="not allowed: escalate to a human")
    elif isinstance(outcome, ledger.Refused):
        out.update(code=outcome.code, reason=outcome.reason, next="refused: see docs/errors.md for this code")
    elif isinstance(outcome, ledger.Unresolved):
        out.update(status="unknown", next="outcome unknown: resend the same operation key later, never a new one")
    else:
        out.update(error=str(outcome), next="contextosd unreachable: try the same operation key again later")
    return out


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("refunds", nargs="+", metavar="KEY:ORDER:AMOUNT")
    ap.add_argument("--json", action="store_true", help="one JSON object per refund")
    ap.add_argument("--wait", action="store_true", help='print "ready" and wait for a line on stdin before proposing')
    args = ap.parse_args()
    principal, run = os.environ["AGENT"], os.environ["AGENT_RUN"]
    env = {k: os.environ.get(v) for k, v in (("password", "AGENT_PASSWORD"), ("nkey_file", "AGENT_NKEY"), ("creds_file", "AGENT_CREDS"),
                                               ("tls_ca_file", "CTX_TLSCA"), ("tls_cert_file", "CTX_TLSCERT"), ("tls_key_file", "CTX_TLSKEY"))}
    async with await Client.connect(os.environ.get("CTX_NATS", ledger.DEFAULT_URL), tenant=os.environ["CTX_TENANT"],
                                    principal=principal, **{k: v for k, v in env.items() if v}) as agent:
        if args.wait:
            print("ready", flush=True)
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        for spec in args.refunds:
            key, order, amount = spec.rsplit(":", 2)
            p = Proposal(run, key, "adp_payments.issue_refund", {"order_id": order, "amount_minor": int(amount), "currency": "INR"})
            try:
                outcome: Any = await agent.propose(p, deadline=30)
            except ledger.LedgerError as e:
                outcome = e
            out = handle(key, order, int(amount), outcome)
            if args.json:
                print(json.dumps(out), flush=True)
            else:
                code = f" {out['code']}" if "code" in out else ""
                print(f"{principal} {key}: {out['status']}{code} -> {out['next']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
