// Starts a real contextosd (embedded NATS with JetStream) and the synthetic
// payment provider from binaries built out of this repository (or taken
// from $CONTEXTOS_BIN), with the shared-guarantees example's configuration.
import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync, existsSync, rmSync, openSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Client, Unreachable } from "../src/index.js";

export const REPO = resolve(fileURLToPath(import.meta.url), "../../../../..");
export const PASSWORDS: Record<string, string> = {
  agent_email: "email-demo-secret",
  agent_chat: "chat-demo-secret",
  agent_phone: "phone-demo-secret",
  ops_alice: "alice-demo-secret",
  ops_bob: "bob-demo-secret-pw",
};

export interface Daemon {
  url: string;
  provider: string;
  stats(): Promise<{ calls: number }>;
  connect(principal: string, o?: { timeoutMs?: number; onResend?: (n: number, why: unknown) => void | Promise<void> }): Promise<Client>;
  stop(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function freePort(): Promise<number> {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.on("error", fail);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => ok(port));
    });
  });
}

async function waitFile(path: string, ms: number): Promise<string> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (existsSync(path)) {
      const s = readFileSync(path, "utf8");
      if (s) return s;
    }
    await sleep(50);
  }
  throw new Error(`${path} did not appear`);
}

/**
 * Starts the daemon; edit, when given, rewrites the example's configuration
 * (dir is the daemon's own temporary directory, for files it names).
 */
export async function startDaemon(edit?: (cfg: string, dir: string) => string): Promise<Daemon> {
  const dir = mkdtempSync(join(tmpdir(), "contextos-ts-"));
  let bin = process.env.CONTEXTOS_BIN ? resolve(process.env.CONTEXTOS_BIN) : "";
  if (!bin) {
    bin = join(dir, "bin");
    execFileSync("go", ["build", "-o", bin + "/", "./cmd/contextosd", "./cmd/demo-provider"], {
      cwd: REPO,
      env: { ...process.env, GOTOOLCHAIN: process.env.GOTOOLCHAIN ?? "go1.27.3" },
      stdio: "inherit",
    });
  }
  const log = openSync(join(dir, "logs.txt"), "a");
  const procs: ChildProcess[] = [];
  procs.push(spawn(join(bin, "demo-provider"), ["--port-file", join(dir, "provider.addr")], { stdio: ["ignore", log, log] }));
  const provider = "http://" + (await waitFile(join(dir, "provider.addr"), 10_000));
  const listen = `127.0.0.1:${await freePort()}`;
  let cfg = readFileSync(join(REPO, "examples/shared-guarantees/contextos.toml"), "utf8")
    .replaceAll("{{DATA}}", join(dir, "data"))
    .replaceAll("{{LISTEN}}", listen)
    .replaceAll("{{PROVIDER}}", provider);
  if (edit) cfg = edit(cfg, dir);
  writeFileSync(join(dir, "contextos.toml"), cfg);
  procs.push(spawn(join(bin, "contextosd"), ["--config", join(dir, "contextos.toml")], { stdio: ["ignore", log, log] }));
  const url = "nats://" + listen;
  const d: Daemon = {
    url,
    provider,
    async stats() {
      const r = await fetch(provider + "/admin/stats");
      return (await r.json()) as { calls: number };
    },
    connect(principal, o = {}) {
      return Client.connect({ url, tenant: "acme", principal, password: PASSWORDS[principal], ...o });
    },
    async stop() {
      for (const p of procs.reverse()) {
        const done = new Promise((r) => p.once("exit", r));
        p.kill("SIGTERM");
        await Promise.race([done, sleep(10_000)]);
        p.kill("SIGKILL");
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
  const end = Date.now() + 30_000;
  for (;;) {
    try {
      const c = await d.connect("ops_alice", { timeoutMs: 1000 });
      try {
        await c.exposure();
        return d;
      } finally {
        await c.close();
      }
    } catch (e) {
      if (!(e instanceof Unreachable) || Date.now() > end) {
        await d.stop();
        throw e;
      }
      await sleep(100);
    }
  }
}
