// The wire vectors (testdata/wire) read with the client's own decoding: no daemon.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { CODES, MEMBERS, pageOf, readDecision, readOpReply, REFUSALS, RETRY, Refused, retryOf, type Code, type ListMember } from "../src/index.js";
import { REPO } from "./daemon.js";

interface Vector {
  schema: string;
  status?: string;
  code?: Code;
  retry?: string;
  verb?: string;
  member?: string;
  rows?: number;
  message: Record<string, unknown>;
}

const DIR = join(REPO, "testdata/wire");
const VECTORS: [string, Vector][] = (readdirSync(DIR, { recursive: true }) as string[])
  .filter((f) => f.endsWith(".json"))
  .sort()
  .map((f) => [relative(DIR, join(DIR, f)), JSON.parse(readFileSync(join(DIR, f), "utf8")) as Vector]);
const bytes = (v: Vector) => new TextEncoder().encode(JSON.stringify(v.message));

type Members = keyof typeof MEMBERS;

// Every member of value is one the client's type of it declares (MEMBERS),
// and so are the members of the objects it nests.
function holdsTo(name: string, value: unknown, type: Members): void {
  assert.ok(value !== null && typeof value === "object" && !Array.isArray(value), `${name}: not an object`);
  const allowed = MEMBERS[type] as readonly string[];
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    assert.ok(allowed.includes(k), `${name}: member ${k} is not in MEMBERS["${type}"]`);
    const nested = NESTED[`${type}.${k}`];
    if (nested === undefined) continue;
    for (const [i, item] of (Array.isArray(v) ? v : [v]).entries()) holdsTo(`${name}.${k}[${i}]`, item, nested);
  }
}

const NESTED: Record<string, Members> = {
  "decision.evidence_gate": "evidence-gate",
  "evidence-gate.conflicts": "conflict-marker",
  "conflict-marker.resolution": "conflict-marker#resolution",
  "op-reply.exposure": "op-reply#exposure_row",
  "op-reply.attempts": "op-reply#attempt_row",
  "op-reply.settled": "op-reply#settle_row",
  "op-reply.versions": "op-reply#version_row",
  "op-reply.approvals": "op-reply#approval_row",
  "op-reply.incidents": "op-reply#incident_row",
  "op-reply.breakers": "op-reply#breaker_row",
};

test("the vectors hold every status and every code", () => {
  assert.ok(VECTORS.length > 0, `no vectors in ${DIR}`);
  const decisions = VECTORS.filter(([, v]) => v.schema === "decision").map(([, v]) => v);
  assert.deepEqual(new Set(decisions.map((v) => v.status)), new Set(["applied", "not_applied", "pending", "unknown", "refused"]));
  assert.deepEqual(new Set(decisions.flatMap((v) => (v.code ? [v.code] : []))), new Set(CODES));
});

test("every code has its retry class", () => {
  assert.deepEqual(Object.keys(RETRY), [...CODES]);
  assert.equal(retryOf("approval_required"), "operator");
  assert.equal(retryOf("no_such_code"), "");
  assert.equal(new Refused("no_such_code").retry, "");
});

test("proposals have the members of Proposal", () => {
  for (const [name, v] of VECTORS.filter(([, v]) => v.schema === "proposal")) holdsTo(name, v.message, "proposal");
});

test("decisions decode as propose reads them", () => {
  for (const [name, v] of VECTORS.filter(([, v]) => v.schema === "decision")) {
    holdsTo(name, v.message, "decision");
    if ((v.status === "refused" && v.code !== "overloaded") || (v.status === "unknown" && v.retry === "never")) {
      assert.throws(() => readDecision(bytes(v)), (e: unknown) => {
        assert.ok(e instanceof Refused && e instanceof REFUSALS[v.code!], `${name}: ${String(e)}`);
        assert.equal(e.code, v.code, name);
        assert.equal(e.retry, v.retry, name);
        assert.equal(e.reason, v.message.reason, name);
        assert.deepEqual(e.decision, v.message, name);
        return true;
      });
      continue;
    }
    // unknown (but for a code never retried), and overloaded (refused before anything was stored), come back for propose to resend.
    const d = readDecision(bytes(v));
    assert.equal(d.status, v.status, name);
    assert.deepEqual(d, v.message, name);
    if (d.evidence_gate) assert.equal(d.evidence_gate.commit_allowed, d.evidence_gate.sufficiency === "sufficient", name);
  }
});

test("operator replies decode as op reads them, pages with their rows and cursor", () => {
  for (const [name, v] of VECTORS.filter(([, v]) => v.schema === "op-reply")) {
    holdsTo(name, v.message, "op-reply");
    if (v.code) {
      assert.throws(() => readOpReply(bytes(v)), (e: unknown) => e instanceof REFUSALS[v.code!] && (e as Refused).code === v.code && (e as Refused).retry === v.retry && (e as Refused).decision === undefined, name);
      continue;
    }
    const r = readOpReply(bytes(v));
    assert.deepEqual(r, v.message, name);
    if (v.verb === "approve") holdsTo(name, r.data, "op-reply#approval_data");
    if (v.member && ["exposure", "attempts", "approvals", "incidents", "versions"].includes(v.member)) {
      const p = pageOf(r, v.member as ListMember);
      assert.equal(p.rows.length, v.rows ?? 0, name);
      assert.equal(p.next_cursor, v.message.next_cursor ?? "", name);
      assert.equal(name.endsWith("-page.json"), p.next_cursor !== "", name);
    }
  }
});
