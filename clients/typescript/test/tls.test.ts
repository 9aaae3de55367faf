// The TypeScript client the way production connects: TLS with a private CA
// and client certificates, nkey, password, token and creds-file users
// (cmd/tlsenv), a server restart, and the refusals that keep a secret off
// plain TCP.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server } from "node:net";
import { AuthorityDenied, Client, InsecureTransport, Unresolved, type Proposal } from "../src/index.js";
import { startTLSEnv, type TLSEnv } from "./tlsenv.js";

let env: TLSEnv;
before(async () => {
  env = await startTLSEnv();
});
after(async () => {
  await env?.stop();
});

const refund = (run: string, key: string, order: string, amount: number): Proposal => ({
  run_id: run,
  operation_key: key,
  capability_id: "adp_payments.issue_refund",
  arguments: { order_id: order, amount_minor: amount, currency: "INR" },
});

test("TLS with nkey and password users; the client reconnects after the server restarts", async () => {
  const ops = await Client.connect({ url: env.info.url, tenant: "acme", principal: "ops_alice", password: env.info.passwords.ops_alice, tls: env.tls });
  try {
    await ops.admitRun({ run_id: "ts_tls_run", principal: "agent_email", calls: 5, amount: 100000 });
  } finally {
    await ops.close();
  }
  const agent = await Client.connect({
    url: env.info.url, tenant: "acme", principal: "agent_email", nkeyFile: env.info.nkeys.agent_email, tls: env.tls,
    reconnect: { timeWaitMs: 200 },
  });
  let reconnects = 0;
  void (async () => {
    for await (const s of agent.nc.status()) if (s.type === "reconnect") reconnects++;
  })();
  try {
    assert.equal((await agent.propose(refund("ts_tls_run", "ts-tls-1", "ts_tls_ord", 1000))).status, "applied");
    await env.restart();
    const d = await agent.propose(refund("ts_tls_run", "ts-tls-2", "ts_tls_ord", 1000), 60_000);
    assert.equal(d.status, "applied");
    assert.equal(d.committed, 2000);
    assert.ok(reconnects >= 1);
  } finally {
    await agent.close();
  }
});

test("creds file over TLS: accepted (nobody answers there), an untrusted account refused", async () => {
  const c = await Client.connect({ url: env.info.creds_url, tenant: "acme", principal: "agent_chat", credsFile: env.info.creds.agent_chat, tls: env.tls, timeoutMs: 1000 });
  try {
    // A request timeout the TLS handshake fits in on a loaded machine, and
    // a deadline that leaves room for resends.
    await assert.rejects(c.propose(refund("r", "k", "o", 1), 4000), (e) => e instanceof Unresolved && e.resends > 0);
  } finally {
    await c.close();
  }
  await assert.rejects(Client.connect({ url: env.info.creds_url, tenant: "acme", principal: "agent_chat", credsFile: env.info.stranger_creds, tls: env.tls }), AuthorityDenied);
  await assert.rejects(Client.connect({ url: env.info.url, tenant: "acme", principal: "agent_chat", password: "wrong", tls: env.tls }), AuthorityDenied);
  await assert.rejects(Client.connect({ url: env.info.url, tenant: "acme", principal: "agent_chat", password: "x", credsFile: "y", tls: env.tls }), TypeError);
});

// A loopback NATS server that records what clients send: INFO (with
// tls_required as said), PONG to each PING; it never speaks TLS.
class FakeServer {
  connections = 0;
  received = "";
  server!: Server;
  constructor(readonly tlsRequired: boolean) {}
  start(): Promise<this> {
    this.server = createServer((sock) => {
      this.connections++;
      sock.on("error", () => {});
      sock.write(`INFO ${JSON.stringify({ server_id: "fake", version: "2.12.0", proto: 1, headers: true, max_payload: 1048576, tls_required: this.tlsRequired })}\r\n`);
      sock.on("data", (b) => {
        this.received += b.toString("latin1");
        if (/PING\r\n/.test(b.toString("latin1"))) sock.write("PONG\r\n");
      });
    });
    return new Promise((ok) => this.server.listen(0, "127.0.0.1", () => ok(this)));
  }
  get port() {
    return (this.server.address() as { port: number }).port;
  }
  connects(): Record<string, unknown>[] {
    return this.received.split("\r\n").filter((l) => l.startsWith("CONNECT ")).map((l) => JSON.parse(l.slice(8)));
  }
  close() {
    this.server.close();
  }
}

const SECRET = "s3cret-password";

test("refuses to send a secret in clear", async () => {
  const tlsFake = await new FakeServer(true).start();
  const plain = await new FakeServer(false).start();
  try {
    // A server asking for TLS, no TLS settings: no CONNECT, no password.
    await assert.rejects(Client.connect({ url: `nats://127.0.0.1:${tlsFake.port}`, tenant: "acme", principal: "agent_email", password: SECRET, timeoutMs: 2000 }), InsecureTransport);
    assert.ok(tlsFake.connections >= 1);
    assert.deepEqual(tlsFake.connects(), []);
    assert.ok(!tlsFake.received.includes(SECRET));
    // The real TLS server, no TLS settings.
    await assert.rejects(Client.connect({ url: env.info.url, tenant: "acme", principal: "agent_email", password: env.info.passwords.agent_email }), InsecureTransport);
    // TLS settings, a plain server.
    await assert.rejects(Client.connect({ url: `nats://127.0.0.1:${plain.port}`, tenant: "acme", principal: "agent_email", password: SECRET, tls: env.tls }), InsecureTransport);
    assert.ok(!plain.received.includes(SECRET));
    // A password or token to a host that is not loopback (0.0.0.0, which the
    // kernel routes here, so a mistake would show): refused before dialling.
    const seen = plain.connections;
    for (const cred of [{ password: SECRET }, { token: SECRET }]) {
      await assert.rejects(Client.connect({ url: `nats://0.0.0.0:${plain.port}`, tenant: "acme", principal: "agent_email", ...cred }), InsecureTransport);
    }
    assert.equal(plain.connections, seen);
    // Unless told to.
    const sent: Record<string, unknown>[] = [];
    for (const cred of [{ password: SECRET }, { token: SECRET }]) {
      const c = await Client.connect({ url: `nats://0.0.0.0:${plain.port}`, tenant: "acme", principal: "agent_email", allowPlaintext: true, ...cred });
      await c.close();
      sent.push(plain.connects().at(-1)!);
    }
    assert.equal(sent[0].user, "acme.agent_email");
    assert.equal(sent[0].pass, SECRET);
    assert.equal(sent[1].auth_token, SECRET);
  } finally {
    tlsFake.close();
    plain.close();
  }
});
