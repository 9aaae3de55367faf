// compileContext against a real contextosd whose refund capability is
// governed by a context pack.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { AuthorityDenied, CapabilityNotSurfaced, contextSubject, RequestMalformed } from "../src/index.js";
import { startDaemon, type Daemon } from "./daemon.js";

// A decision that requires no evidence (its gate is sufficient) gating the refund tool.
const REFUND_PACK = {
  schema: "context_pack.v1",
  pack_id: "refunds",
  version: "1",
  buckets: [{ name: "evidence", max_tokens: 100 }],
  decisions: [{ decision_key: "refund.issue" }],
  tools: [{ capability_id: "adp_payments.issue_refund", gated_by: "refund.issue" }],
};
const REFUND = "adp_payments.issue_refund";

let d: Daemon;
before(async () => {
  d = await startDaemon((cfg, dir) => {
    const pack = join(dir, "refunds-pack.json");
    writeFileSync(pack, JSON.stringify(REFUND_PACK));
    const cap = `id = "${REFUND}"\n`;
    if (!cfg.includes(cap)) throw new Error("the example's configuration has no refund capability");
    return cfg.replace(cap, `${cap}decision_key = "refund.issue"\ncontext_pack = ${JSON.stringify(pack)}\n`);
  });
});
after(async () => {
  await d?.stop();
});

test("compileContext: the run's compiled context, its gate and tool exposure; refusals by code", async () => {
  const agent = await d.connect("agent_email");
  try {
    const cc = await agent.compileContext({ run_id: "run_ctx", capability_id: REFUND });
    assert.match(cc.digest, /^[0-9a-f]{64}$/);
    assert.equal(cc.context.digest, cc.digest);
    assert.equal(cc.context.schema, "compiled_context.v1");
    assert.equal(cc.context.run.principal, "agent_email");
    assert.equal(cc.context.run.run_id, "run_ctx");
    assert.equal(cc.context.gate.decision_key, "refund.issue");
    assert.equal(cc.context.gate.sufficiency, "sufficient");
    assert.equal(cc.context.gate.commit_allowed, true);
    assert.deepEqual(cc.context.tools, [{ capability_id: REFUND, exposed: true, gated_by: "refund.issue", version: "1", dispatch_allowed: true }]);

    await assert.rejects(agent.compileContext({ run_id: "run_ctx", capability_id: "no.such" }), (e: unknown) => {
      assert.ok(e instanceof CapabilityNotSurfaced && e.code === "capability_not_surfaced" && e.reason !== "", String(e));
      return true;
    });
    await assert.rejects(agent.compileContext({ run_id: "run_ctx", capability_id: REFUND, evidence_refs: [""] }), RequestMalformed);
  } finally {
    await agent.close();
  }
});

test("an agent cannot ask on another agent's context subject", async () => {
  const other = await d.connect("agent_chat");
  try {
    // The client's own request path, aimed at agent_email's subject: the
    // server refuses the publish at once and no context comes back.
    const raw = other as unknown as { request(subject: string, body: Uint8Array, timeout: number): Promise<Uint8Array> };
    const body = new TextEncoder().encode(JSON.stringify({ run_id: "run_ctx", capability_id: REFUND }));
    const start = Date.now();
    await assert.rejects(raw.request(contextSubject("acme", "agent_email"), body, 5000), AuthorityDenied);
    assert.ok(Date.now() - start < 3000);
    // Its own subject answers with its own context.
    const own = await other.compileContext({ run_id: "run_ctx", capability_id: REFUND });
    assert.equal(own.context.run.principal, "agent_chat");
  } finally {
    await other.close();
  }
});
