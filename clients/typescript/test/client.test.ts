// The TypeScript client against a real contextosd.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import {
  AuthorityDenied,
  CapabilityNotSurfaced,
  Client,
  ContextInvalid,
  inboxPrefix,
  MoreRows,
  Refused,
  RequestMalformed,
  RunAlreadyAdmitted,
  SharedGuaranteeAttemptUnknown,
  SharedGuaranteeExceeded,
  Unreachable,
  type Decision,
  type Proposal,
} from "../src/index.js";
import { startDaemon, type Daemon } from "./daemon.js";

let d: Daemon;
before(async () => {
  d = await startDaemon();
});
after(async () => {
  await d?.stop();
});

const refund = (run: string, key: string, order: string, amount: number): Proposal => ({
  run_id: run,
  operation_key: key,
  capability_id: "adp_payments.issue_refund",
  arguments: { order_id: order, amount_minor: amount, currency: "INR" },
});

async function admit(run: string, principal: string) {
  const ops = await d.connect("ops_alice");
  try {
    await ops.admitRun({ run_id: run, principal, calls: 5, amount: 200000 });
  } finally {
    await ops.close();
  }
}

test("seed race: two clients at once, one applied, one shared_guarantee_exceeded, one provider call", async () => {
  await admit("ts_run_email", "agent_email");
  await admit("ts_run_chat", "agent_chat");
  const before = (await d.stats()).calls;
  const [email, chat] = [await d.connect("agent_email"), await d.connect("agent_chat")];
  try {
    const results = await Promise.allSettled([
      email.propose(refund("ts_run_email", "refund-ts_881", "ts_ord_881", 80000)),
      chat.propose(refund("ts_run_chat", "refund-ts_881", "ts_ord_881", 80000)),
    ]);
    const applied = results.filter((r): r is PromiseFulfilledResult<Decision> => r.status === "fulfilled" && r.value.status === "applied");
    const exceeded = results.filter((r): r is PromiseRejectedResult => r.status === "rejected" && r.reason instanceof SharedGuaranteeExceeded);
    assert.equal(applied.length, 1, JSON.stringify(results));
    assert.equal(exceeded.length, 1, JSON.stringify(results));
    assert.equal((exceeded[0].reason as Refused).decision?.available, 20000);
    assert.equal(applied[0].value.committed, 80000);
    assert.equal((await d.stats()).calls, before + 1);
  } finally {
    await email.close();
    await chat.close();
  }
});

test("resend after a lost reply: the same operation, one provider call", async () => {
  await admit("ts_run_lost", "agent_email");
  const before = (await d.stats()).calls;
  const ops = await d.connect("ops_alice");
  let resends = 0;
  const agent = await d.connect("agent_email", {
    // Let the lost request finish before resending, so that the resend
    // finds the operation settled, not in flight.
    async onResend() {
      resends++;
      const end = Date.now() + 10_000;
      while (Date.now() < end) {
        const rows = await ops.exposure({ resource: "ts_ord_lost" });
        if (rows.length === 1 && rows[0].committed === 30000) return;
        await new Promise((r) => setTimeout(r, 10));
      }
      throw new Error("the lost request never settled");
    },
  });
  // The first request reaches the daemon, but its reply goes to an inbox
  // nobody waits on: a lost reply.
  const inner = agent as unknown as { request(s: string, b: Uint8Array, t: number): Promise<Uint8Array> };
  const real = inner.request.bind(agent);
  let lost = false;
  inner.request = async (s, b, t) => {
    if (!lost) {
      lost = true;
      agent.nc.publish(s, b, { reply: inboxPrefix("acme", "agent_email") + ".lost" });
      await agent.nc.flush();
      const { errors } = await import("@nats-io/transport-node");
      throw new errors.TimeoutError();
    }
    return real(s, b, t);
  };
  try {
    const first = await agent.propose(refund("ts_run_lost", "op-lost", "ts_ord_lost", 30000));
    assert.equal(first.status, "applied");
    assert.equal(resends, 1);
    const again = await agent.propose(refund("ts_run_lost", "op-lost", "ts_ord_lost", 30000));
    assert.deepEqual([again.operation_id, again.attempt_id], [first.operation_id, first.attempt_id]);
    assert.equal((await d.stats()).calls, before + 1);
  } finally {
    await agent.close();
    await ops.close();
  }
});

test("typed errors", async () => {
  const agent = await d.connect("agent_phone");
  try {
    await assert.rejects(agent.propose({ run_id: "r", operation_key: "k", capability_id: "no.such", arguments: {} }), CapabilityNotSurfaced);
    const start = Date.now();
    await assert.rejects(agent.exposure(), AuthorityDenied); // the server refuses an agent's publish on an operator subject
    assert.ok(Date.now() - start < 3000);
  } finally {
    await agent.close();
  }
  await assert.rejects(Client.connect({ url: d.url, tenant: "acme", principal: "agent_phone", password: "wrong" }), AuthorityDenied);
  await assert.rejects(Client.connect({ url: d.url, tenant: "acme", principal: "ops.alice", password: "x" }), TypeError);
  await assert.rejects(Client.connect({ url: "nats://127.0.0.1:1", tenant: "acme", principal: "agent_phone", password: "x", timeoutMs: 1000 }), Unreachable);
});

test("compileContext for a capability under no context pack: context_invalid", async () => {
  const agent = await d.connect("agent_phone");
  try {
    await assert.rejects(agent.compileContext({ run_id: "run_ctx", capability_id: "adp_payments.issue_refund" }), ContextInvalid);
  } finally {
    await agent.close();
  }
});

test("operator calls", async () => {
  const ops = await d.connect("ops_alice");
  const agent = await d.connect("agent_phone");
  try {
    const run = await ops.admitRun({ run_id: "ts_run_ops", principal: "agent_phone", calls: 2, amount: 5000 });
    assert.equal(run.admitted, true);
    await assert.rejects(ops.admitRun({ run_id: "ts_run_ops", principal: "agent_phone", calls: 3, amount: 5000 }), RunAlreadyAdmitted);
    assert.equal((await ops.revoke("agent_phone", "adp_payments.issue_refund")).granted, false);
    await assert.rejects(agent.propose(refund("ts_run_ops", "k1", "ts_ord_ops", 100)), AuthorityDenied);
    assert.equal((await ops.grant("agent_phone", "adp_payments.issue_refund")).granted, true);
    assert.equal((await agent.propose(refund("ts_run_ops", "k2", "ts_ord_ops", 100))).status, "applied");
    assert.equal((await ops.run("ts_run_ops")).used_calls, 1);
    assert.ok((await ops.exposure()).some((r) => r.resource === "ts_ord_ops"));
    assert.ok(Array.isArray(await ops.attempts()));
    await assert.rejects(ops.closeAttempt({ attempt_id: "nope" }), SharedGuaranteeAttemptUnknown);
    assert.equal(await ops.killSwitch(), false);
  } finally {
    await agent.close();
    await ops.close();
  }
});

test("paged lists: pages by next_cursor, collect with a bound, a resource selected by its digest", async () => {
  await admit("ts_run_pages", "agent_email");
  const orders = ["ts_pg_1", "ts_pg_2", "ts_pg_3"];
  const agent = await d.connect("agent_email");
  const ops = await d.connect("ops_alice");
  try {
    for (const [i, order] of orders.entries()) {
      assert.equal((await agent.propose(refund("ts_run_pages", `pg${i}`, order, 10))).status, "applied");
    }
    const seen: string[] = [];
    let cursor = "";
    let pages = 0;
    for (;;) {
      const page = await ops.exposurePage({ limit: 2, ...(cursor ? { cursor } : {}) });
      assert.ok(page.rows.length <= 2);
      seen.push(...page.rows.map((r) => r.resource));
      pages++;
      if (!page.next_cursor) break;
      cursor = page.next_cursor;
    }
    assert.ok(pages >= 2);
    assert.equal(new Set(seen).size, seen.length);
    for (const o of orders) assert.ok(seen.includes(o));
    assert.deepEqual(
      (await ops.exposure()).map((r) => r.resource),
      seen,
    );
    await assert.rejects(ops.exposure({}, 1), (e: unknown) => e instanceof MoreRows && e.rows.length === 1 && e.nextCursor !== "");
    const one = await ops.exposure({ resource_digest: createHash("sha256").update("ts_pg_2").digest("hex") });
    assert.equal(one.length, 1);
    assert.equal(one[0].resource, "ts_pg_2");
    assert.equal(one[0].committed, 10);
    await assert.rejects(ops.attemptsPage({ cursor: "not a cursor" }), RequestMalformed);
  } finally {
    await agent.close();
    await ops.close();
  }
});
