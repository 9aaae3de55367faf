// Starts cmd/tlsenv: a TLS-only nats-server verifying client certificates,
// with each principal as a password and an nkey user and a runtime behind
// it, and an operator-mode TLS server with each principal as a creds user.
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createInterface } from "node:readline";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { REPO } from "./daemon.js";

export interface TLSInfo {
  url: string;
  creds_url: string;
  provider: string;
  tenant: string;
  ca_file: string;
  cert_file: string;
  key_file: string;
  passwords: Record<string, string>;
  nkeys: Record<string, string>;
  creds: Record<string, string>;
  stranger_creds: string;
}

export interface TLSEnv {
  info: TLSInfo;
  tls: { caFile: string; certFile: string; keyFile: string };
  restart(): Promise<void>;
  stop(): Promise<void>;
}

export async function startTLSEnv(): Promise<TLSEnv> {
  const dir = mkdtempSync(join(tmpdir(), "contextos-ts-tls-"));
  let bin = process.env.CONTEXTOS_BIN ? resolve(process.env.CONTEXTOS_BIN) : "";
  if (!bin) {
    bin = join(dir, "bin");
    execFileSync("go", ["build", "-o", bin + "/", "./cmd/tlsenv"], {
      cwd: REPO,
      env: { ...process.env, GOTOOLCHAIN: process.env.GOTOOLCHAIN ?? "go1.27.3" },
      stdio: "inherit",
    });
  }
  const p = spawn(join(bin, "tlsenv"), ["--config", join(REPO, "examples/shared-guarantees/contextos.toml"), "--dir", join(dir, "env")], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const lines = createInterface({ input: p.stdout! })[Symbol.asyncIterator]();
  const next = async () => {
    const l = await lines.next();
    if (l.done) throw new Error("tlsenv ended (see its stderr)");
    return l.value;
  };
  const info = JSON.parse(await next()) as TLSInfo;
  return {
    info,
    tls: { caFile: info.ca_file, certFile: info.cert_file, keyFile: info.key_file },
    async restart() {
      p.stdin!.write("restart\n");
      const l = await next();
      if (l !== "restarted") throw new Error(`tlsenv restart: ${l}`);
    },
    async stop() {
      const done = new Promise((r) => p.once("exit", r));
      p.stdin!.end(); // end of input stops it
      await done;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
