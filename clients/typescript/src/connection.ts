// The NATS connection of a principal: TLS, authenticators, reconnection,
// and the rules that keep a secret off plain TCP.
import { readFileSync } from "node:fs";
import {
  connect,
  credsAuthenticator,
  errors,
  nkeyAuthenticator,
  tokenAuthenticator,
  usernamePasswordAuthenticator,
  type Authenticator,
  type NatsConnection,
  type NodeConnectionOptions,
} from "@nats-io/transport-node";
import { LedgerError } from "./errors.js";

export const DEFAULT_URL = "nats://127.0.0.1:4222";

/**
 * A connection refused because it would expose a secret: the server asks
 * for TLS and no TLS settings were given, TLS settings were given and the
 * server has no TLS, or a password or token would cross plain TCP to a
 * host that is not loopback without `allowPlaintext`.
 */
export class InsecureTransport extends LedgerError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "InsecureTransport";
  }
}

/** TLS for the connection; any member (or a tls:// URL) turns TLS on. */
export interface TLSOptions {
  /** PEM CA bundle the server's certificate is checked against, instead of the system roots. */
  caFile?: string;
  /** Client certificate and key (PEM), for servers that verify clients; together. */
  certFile?: string;
  keyFile?: string;
}

/** What happens when the connection is lost (nats.js reconnects and resubscribes the inbox). */
export interface ReconnectOptions {
  /** false: a lost connection stays lost (default true). */
  enabled?: boolean;
  /** Attempts per server before giving up (default 60; -1 never gives up). */
  maxAttempts?: number;
  /** Wait between attempts to one server, in milliseconds (default 2000). */
  timeWaitMs?: number;
  /** How often the server is PINGed, in milliseconds (default 20000). */
  pingIntervalMs?: number;
  /** Unanswered PINGs after which the connection is lost (default 3). */
  maxPingOut?: number;
}

/** How a principal connects: one credential, TLS, reconnection. */
export interface TransportOptions {
  /** A server URL, or a cluster's, comma-separated. */
  url?: string;
  /** The password of the NATS user `<tenant>.<principal>`. */
  password?: string;
  /** A server token. */
  token?: string;
  /** A user nkey seed file ("SU..."). */
  nkeyFile?: string;
  /** A NATS credentials file (JWT and seed). */
  credsFile?: string;
  /** TLS settings; `true` uses the system roots. */
  tls?: TLSOptions | true;
  /** Let a password or token cross plain TCP to a host that is not loopback. */
  allowPlaintext?: boolean;
  reconnect?: ReconnectOptions;
}

const loopback = (host: string) => {
  const h = host.replace(/^\[|\]$/g, "").toLowerCase();
  return h === "localhost" || h === "::1" || /^127\.\d+\.\d+\.\d+$/.test(h);
};

function servers(url: string): URL[] {
  return url
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "")
    .map((s) => new URL(s.includes("://") ? s : "nats://" + s));
}

/**
 * Connects as user with o's credential and TLS under inboxPrefix. Throws
 * InsecureTransport before sending a secret where it could be read,
 * TypeError for more than one credential or half a client certificate,
 * and nats.js's errors otherwise.
 */
export async function openConnection(o: TransportOptions, user: string, inboxPrefix: string, timeoutMs: number): Promise<NatsConnection> {
  const url = o.url ?? DEFAULT_URL;
  const given = (["password", "token", "nkeyFile", "credsFile"] as const).filter((k) => o[k]);
  if (given.length > 1) throw new TypeError(`give one credential, not ${given.join(" and ")}`);
  const list = servers(url);
  const tls = o.tls === true || o.tls !== undefined || list.some((u) => u.protocol === "tls:") ? (o.tls === true ? {} : (o.tls ?? {})) : undefined;
  if (tls && !!tls.certFile !== !!tls.keyFile) throw new TypeError("a client certificate needs both certFile and keyFile");
  const secret = !!(o.password || o.token);
  if (!tls && secret && !o.allowPlaintext) {
    for (const u of list) {
      if (!loopback(u.hostname)) {
        throw new InsecureTransport(`a password or token would cross plain TCP to ${u.host}: give TLS settings (tls.caFile, a tls:// URL) or allowPlaintext`);
      }
    }
  }
  let authenticator: Authenticator | undefined;
  if (o.password !== undefined) authenticator = usernamePasswordAuthenticator(user, o.password);
  else if (o.token) authenticator = tokenAuthenticator(o.token);
  else if (o.nkeyFile) authenticator = nkeyAuthenticator(new TextEncoder().encode(readFileSync(o.nkeyFile, "utf8").trim()));
  else if (o.credsFile) authenticator = credsAuthenticator(readFileSync(o.credsFile));
  const r = o.reconnect ?? {};
  const opts: NodeConnectionOptions = {
    servers: list.map((u) => u.host),
    authenticator,
    inboxPrefix,
    name: "contextos-ledger-ts",
    timeout: timeoutMs,
    reconnect: r.enabled ?? true,
    maxReconnectAttempts: r.maxAttempts ?? 60,
    reconnectTimeWait: r.timeWaitMs ?? 2000,
    pingInterval: r.pingIntervalMs ?? 20_000,
    maxPingOut: r.maxPingOut ?? 3,
    // Without TLS settings nats.js would still upgrade when the server asks
    // for TLS, trusting the system roots; null makes it refuse instead
    // (its documented meaning), before any CONNECT.
    tls: tls ?? null,
    // A password in clear goes to the listed (loopback) servers only, not
    // to those a cluster names.
    ignoreClusterUpdates: !tls && secret,
  };
  try {
    return await connect(opts);
  } catch (e) {
    if (!tls && serverWantsTLS(e)) {
      throw new InsecureTransport(`the server at ${url} asks for TLS and no TLS settings were given (tls.caFile, tls.certFile, or tls: true for the system roots)`, { cause: e });
    }
    if (tls && /does not support 'tls'/.test(String(e))) {
      throw new InsecureTransport(`TLS settings were given and the server at ${url} does not speak TLS`, { cause: e });
    }
    throw e;
  }
}

// serverWantsTLS: nats.js with tls null fails the upgrade a server asked
// for while loading its (absent) TLS settings.
function serverWantsTLS(e: unknown): boolean {
  for (let x: unknown = e; x instanceof Error; x = x.cause) {
    if (x instanceof errors.ConnectionError && x.cause instanceof TypeError) return true;
  }
  return false;
}
