// The client's types against docs/schema: the same codes, the same members.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { CODES, MEMBERS, REFUSALS, refused, Refused } from "../src/index.js";
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
