// The two-person rule's confirmation through the TypeScript client.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { RequestMalformed, SecondOperatorRequired, type Client } from "../src/index.js";
import { PASSWORDS, startDaemon, type Daemon } from "./daemon.js";

const GUARANTEE = "refunds-per-order";

// The example's daemon with tenant acme under the two-person rule for limit
// raises, and a second operator, ops_bob.
let d: Daemon;
before(async () => {
  d = await startDaemon((cfg) => {
    const tenant = 'id = "acme"\n';
    const ops = "  [[tenants.operators]]\n";
    assert.ok(cfg.includes(tenant) && cfg.includes(ops), "the example's configuration has no tenant acme with an operator");
    return cfg
      .replace(tenant, tenant + 'two_person = ["limit_raise"]\n')
      .replace(ops, ops + `  id = "ops_bob"\n  password = "${PASSWORDS.ops_bob}"\n\n` + ops);
  });
});
after(async () => {
  await d?.stop();
});

async function limit(ops: Client): Promise<number | undefined> {
  return (await ops.guaranteeHistory(GUARANTEE)).at(-1)?.limit;
}

test("confirm: a held limit raise is carried out by a second operator's confirmation, never the requester's", async () => {
  const alice = await d.connect("ops_alice");
  const bob = await d.connect("ops_bob");
  try {
    const before = await limit(alice);
    assert.equal(typeof before, "number");
    const held = await alice.op("guarantee-set-limit", { guarantee_id: GUARANTEE, limit: before! + 5000, reason: "season" }).then(
      () => assert.fail("a limit raise under the two-person rule applied at once"),
      (e: unknown) => e,
    );
    assert.ok(held instanceof SecondOperatorRequired, String(held));
    const requestId = held.data?.request_id;
    assert.ok(typeof requestId === "string" && requestId !== "", JSON.stringify(held.data));
    assert.equal(await limit(alice), before);
    await assert.rejects(alice.confirm(requestId), SecondOperatorRequired);
    assert.equal(await limit(alice), before);
    assert.equal((await bob.confirm(requestId)).ok, true);
    assert.equal(await limit(alice), before! + 5000);
    await assert.rejects(bob.confirm(requestId), RequestMalformed);
  } finally {
    await alice.close();
    await bob.close();
  }
});
