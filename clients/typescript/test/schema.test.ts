// The client's types against docs/schema: the same codes, the same members.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { CODES, MEMBERS, REFUSALS, refused, Refused, type Decision, type EvidenceGate } from "../src/index.js";
import { REPO } from "./daemon.js";

const schema = (name: string) => JSON.parse(readFileSync(join(REPO, "docs/schema", name + ".json"), "utf8"));

test("CODES is the catalog of docs/schema/common.json", () => {
  assert.deepEqual([...CODES], schema("common").$defs.code.enum);
  for (const c of CODES) {
    const e = refused(c, "why");
    assert.ok(e instanceof REFUSALS[c] && e instanceof Refused && e.code === c);
  }
  assert.equal(refused("a_code_of_later", "x").constructor, Refused);
});

test("each message type has exactly its schema's members", () => {
  for (const [name, members] of Object.entries(MEMBERS)) {
    const [file, def] = name.split("#");
    const s = def ? schema(file).$defs[def] : schema(file);
    assert.deepEqual([...members].sort(), Object.keys(s.properties).sort(), name);
  }
});

test("a decision's evidence_gate decodes as an EvidenceGate", () => {
  const vector = (dir: string) =>
    JSON.parse(readFileSync(join(REPO, "testdata/context", dir, "want.json"), "utf8")).gate as EvidenceGate;
  const d: Decision = JSON.parse(JSON.stringify({ status: "applied", evidence_gate: vector("conflict_resolved_review") }));
  const g = d.evidence_gate!;
  assert.equal(g.commit_allowed, true);
  assert.equal(g.sufficiency, "sufficient");
  assert.equal(g.conflicts[0].status, "resolved");
  assert.equal(g.conflicts[0].resolution?.kind, "accountable_review");
  const refused = vector("conflict_unresolved");
  assert.equal(refused.commit_allowed, false);
  assert.deepEqual(refused.unresolved, ["order_lookup"]);
  assert.equal(refused.conflicts[0].resolution, undefined);
  // Every member of a vector gate is a member of the type.
  for (const k of Object.keys(refused)) assert.ok((MEMBERS["evidence-gate"] as readonly string[]).includes(k), k);
});
