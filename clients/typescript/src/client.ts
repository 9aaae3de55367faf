import { errors, type NatsConnection } from "@nats-io/transport-node";
import { DEFAULT_URL, InsecureTransport, openConnection, type TransportOptions } from "./connection.js";
import { LedgerError, refused, retryOf, Unreachable, Unresolved } from "./errors.js";
import { MAX_LIST_ROWS, MAX_PAGE_LIMIT } from "./wire.js";
import type {
  Approval,
  AttemptRow,
  AuthorityChange,
  CompiledContext,
  ContextReply,
  ContextRequest,
  Decision,
  ExposureRow,
  Incident,
  OpReply,
  Page,
  PageRequest,
  PendingApproval,
  Proposal,
  Run,
  SettleRow,
  VersionRow,
} from "./wire.js";

export { DEFAULT_URL };
/** How long propose resends when no deadline is given, in milliseconds. */
export const DEFAULT_PROPOSE_DEADLINE_MS = 120_000;

/** The only inbox a principal may subscribe to. */
export const inboxPrefix = (tenant: string, principal: string) => `_INBOX.${tenant}.${principal}`;
/** Where an agent publishes proposals. */
export const proposeSubject = (tenant: string, principal: string) => `ctx.v1.${tenant}.${principal}.propose`;
/** Where an agent asks for its run's compiled context. */
export const contextSubject = (tenant: string, principal: string) => `ctx.v1.${tenant}.${principal}.context`;
/** Where an operator sends a verb. */
export const opSubject = (tenant: string, verb: string, operator: string) => `ctx.v1.${tenant}.ops.${verb}.${operator}`;

/**
 * Who connects, and how (TransportOptions): one credential (`password` of
 * the NATS user `<tenant>.<principal>`, `token`, `nkeyFile` or
 * `credsFile`), `tls` (CA file, client certificate; or a tls:// URL),
 * `allowPlaintext`, `reconnect`.
 */
export interface ConnectOptions extends TransportOptions {
  tenant: string;
  principal: string;
  /** One request's timeout in milliseconds (default 5000); proposals resend past it. */
  timeoutMs?: number;
  /** Called before each resend of a proposal with the resends so far and why. */
  onResend?: (resends: number, why: unknown) => void | Promise<void>;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * Decodes a decision reply as propose reads it: refused throws the code's
 * Refused class, except overloaded (refused before anything was stored),
 * which propose resends as it resends unknown. An unknown whose code's
 * retry class is "never" (stored_event_refused after the dispatch) throws
 * the code's Refused class too: resending cannot learn that outcome.
 */
export function readDecision(raw: Uint8Array): Decision {
  const d = JSON.parse(decoder.decode(raw)) as Decision;
  if (d.status === "refused" && d.code !== "overloaded") {
    throw refused(d.code ?? "", d.reason ?? "", d);
  }
  if (d.status === "unknown" && retryOf(d.code ?? "") === "never") {
    throw refused(d.code ?? "", d.reason ?? "", d);
  }
  return d;
}

/** The compiled context a compile request returned, with its digest. */
export interface CompiledContextReply {
  digest: string;
  context: CompiledContext;
}

/** Decodes a compile reply as compileContext reads it: the compiled context, or the code's Refused class thrown. */
export function readContext(raw: Uint8Array): CompiledContextReply {
  const r = JSON.parse(decoder.decode(raw)) as ContextReply;
  if (r === null || typeof r !== "object" || typeof r.status !== "string") {
    throw new TypeError(`not a compile reply: ${decoder.decode(raw).slice(0, 200)}`);
  }
  if (r.status !== "compiled") {
    throw refused(r.code ?? "", r.reason ?? "");
  }
  if (typeof r.digest !== "string" || r.context === null || typeof r.context !== "object") {
    throw new TypeError(`a compiled reply without its context: ${decoder.decode(raw).slice(0, 200)}`);
  }
  return { digest: r.digest, context: r.context };
}

/** Decodes an operator reply as op reads it: the reply once it says ok, else the code's Refused class is thrown. */
export function readOpReply<T extends OpReply = OpReply>(raw: Uint8Array): T {
  const r = JSON.parse(decoder.decode(raw)) as T;
  if (!r.ok) {
    const e = refused(r.code ?? "", r.reason ?? "");
    e.data = r.data;
    throw e;
  }
  return r;
}

/** The members of an operator reply that hold a list verb's rows. */
export type ListMember = "exposure" | "attempts" | "approvals" | "incidents" | "versions";

/** The page of a list verb's reply whose rows are in member. */
export function pageOf<K extends ListMember>(r: OpReply, member: K): Page<NonNullable<OpReply[K]>[number]> {
  return { rows: (r[member] ?? []) as NonNullable<OpReply[K]>[number][], next_cursor: r.next_cursor ?? "" };
}

/** A connection of one principal (agent or operator) to contextosd. */
export class Client {
  private constructor(
    readonly nc: NatsConnection,
    readonly tenant: string,
    readonly principal: string,
    readonly timeoutMs: number,
    readonly onResend?: ConnectOptions["onResend"],
  ) {}

  /**
   * Connects as `<tenant>.<principal>` through its inbox. Throws
   * InsecureTransport instead of exposing a secret (the server asks for TLS
   * and no TLS settings were given, TLS settings were given and the server
   * has no TLS, or a password or token would cross plain TCP to a host that
   * is not loopback without `allowPlaintext`), AuthorityDenied when the
   * server refuses the credentials, Unreachable when it cannot be reached,
   * and TypeError for a tenant or principal that is not one subject token
   * or more than one credential. A lost connection is re-established as
   * `reconnect` says (on by default), under the same inbox prefix.
   */
  static async connect(o: ConnectOptions): Promise<Client> {
    for (const id of [o.tenant, o.principal]) {
      if (!id || /[.*>\s]/.test(id)) {
        throw new TypeError(`${JSON.stringify(id)} is not a tenant or principal id: one subject token, no '.', '*', '>' or space`);
      }
    }
    const timeoutMs = o.timeoutMs ?? 5000;
    try {
      const nc = await openConnection(o, `${o.tenant}.${o.principal}`, inboxPrefix(o.tenant, o.principal), timeoutMs);
      return new Client(nc, o.tenant, o.principal, timeoutMs, o.onResend);
    } catch (e) {
      if (e instanceof InsecureTransport || e instanceof TypeError) throw e;
      if (e instanceof errors.AuthorizationError) {
        throw refused("authority_denied", `the NATS server refused the credentials of ${o.tenant}.${o.principal}`);
      }
      throw new Unreachable(`connect ${o.url ?? DEFAULT_URL}: ${String(e)}`, { cause: e });
    }
  }

  /** Closes the connection. */
  async close(): Promise<void> {
    await this.nc.close();
  }

  private async request(subject: string, body: Uint8Array, timeout: number): Promise<Uint8Array> {
    try {
      const m = await this.nc.request(subject, body, { timeout });
      return m.data;
    } catch (e) {
      const pv = permission(e);
      if (pv) {
        throw refused("authority_denied", `the NATS server refused the publish: ${pv.message}`);
      }
      throw e;
    }
  }

  /**
   * Sends a proposal and returns its decision. Resends the same bytes (same
   * run id and operation key: the daemon answers from the operation it
   * already opened and never dispatches twice) when no reply comes in time,
   * the reply is unknown or the daemon refused it overloaded (before storing
   * anything), waiting longer each time, for at most
   * deadlineMs. applied, not_applied and pending return the decision;
   * refused, and unknown with a code that resending cannot help
   * (readDecision), throw the code's Refused class (its decision has the
   * balances); at the deadline Unresolved is thrown.
   */
  async propose(p: Proposal, deadlineMs = DEFAULT_PROPOSE_DEADLINE_MS): Promise<Decision> {
    const body = encoder.encode(JSON.stringify(p));
    const subject = proposeSubject(this.tenant, this.principal);
    const end = Date.now() + deadlineMs;
    let wait = this.timeoutMs;
    let backoff = 50;
    let last: Decision | undefined;
    for (let resends = 0; ; ) {
      let why: unknown;
      try {
        const raw = await this.request(subject, body, Math.max(1, Math.min(wait, end - Date.now())));
        const d = readDecision(raw);
        if (d.status === "applied" || d.status === "not_applied" || d.status === "pending") {
          return d;
        }
        last = d;
        why = new Error(`status ${d.status}: ${d.reason ?? ""}`);
      } catch (e) {
        if (e instanceof LedgerError) throw e;
        if (!isNoReply(e)) throw new Unreachable(`propose: ${String(e)}`, { cause: e });
        why = e;
      }
      if (Date.now() + backoff >= end) {
        throw new Unresolved(`outcome unknown after ${resends} resends (${String(why)}); resend the same operation key to learn it`, last, resends);
      }
      await new Promise((r) => setTimeout(r, backoff));
      resends++;
      await this.onResend?.(resends, why);
      backoff = Math.min(2 * backoff, 2000);
      wait = Math.min(2 * wait, 30_000);
    }
  }

  /**
   * Asks for the compiled context of the agent's run (docs/context.md):
   * payload blocks by bucket, the evidence gate of the capability's
   * decision, omissions, negative state and the derived tool exposure. It
   * stores nothing and grants nothing, and it is one request, never resent.
   * A refusal throws the code's Refused class (rate_limited and overloaded
   * included: it spends the same rate as a proposal); no reply in time
   * throws Unreachable.
   */
  async compileContext(req: ContextRequest): Promise<CompiledContextReply> {
    const body: ContextRequest = { run_id: req.run_id, capability_id: req.capability_id };
    if (req.evidence_refs?.length) body.evidence_refs = [...req.evidence_refs];
    let raw: Uint8Array;
    try {
      raw = await this.request(contextSubject(this.tenant, this.principal), encoder.encode(JSON.stringify(body)), this.timeoutMs);
    } catch (e) {
      if (e instanceof LedgerError) throw e;
      throw new Unreachable(`compile context: ${String(e)}`, { cause: e });
    }
    return readContext(raw);
  }

  /**
   * Sends an operator verb and returns its reply once it says ok; a refusal
   * throws the code's Refused class. Operator verbs are never resent: on
   * Unreachable the outcome is unknown.
   */
  async op<T extends OpReply = OpReply>(verb: string, body: Record<string, unknown> = {}): Promise<T> {
    let raw: Uint8Array;
    try {
      raw = await this.request(opSubject(this.tenant, verb, this.principal), encoder.encode(JSON.stringify(body)), this.timeoutMs);
    } catch (e) {
      if (e instanceof LedgerError) throw e;
      throw new Unreachable(`${verb}: ${String(e)}`, { cause: e });
    }
    return readOpReply<T>(raw);
  }

  private async data<T>(verb: string, body: Record<string, unknown>): Promise<T> {
    return ((await this.op(verb, body)).data ?? {}) as T;
  }

  // One call per operator verb (docs/wire.md).

  // The list verbs answer a page at a time: xPage reads one page, x pages
  // through to the end (collect, at most maxRows rows).

  /** One page of balances; a resource over 256 bytes is shown shortened, resource_digest selects it. */
  async exposurePage(req: { guarantee_id?: string; resource?: string; resource_digest?: string } & PageRequest = {}): Promise<Page<ExposureRow>> {
    const r = await this.op("exposure", { ...req });
    return pageOf(r, "exposure");
  }
  async exposure(filter: { guarantee_id?: string; resource?: string; resource_digest?: string } = {}, maxRows = MAX_LIST_ROWS): Promise<ExposureRow[]> {
    return collect((p) => this.exposurePage({ ...filter, ...p }), maxRows);
  }
  /** One page of the open attempts, in attempt id order. */
  async attemptsPage(req: PageRequest = {}): Promise<Page<AttemptRow>> {
    const r = await this.op("attempts", { ...req });
    return pageOf(r, "attempts");
  }
  async attempts(maxRows = MAX_LIST_ROWS): Promise<AttemptRow[]> {
    return collect((p) => this.attemptsPage(p), maxRows);
  }
  async reconcile(attemptId?: string): Promise<SettleRow[]> {
    return (await this.op("reconcile", attemptId ? { attempt_id: attemptId } : { all: true })).settled ?? [];
  }
  async closeAttempt(req: { attempt_id: string; guarantee_id?: string; resource?: string; resource_digest?: string; reason?: string }): Promise<OpReply> {
    return this.op("close-attempt", req);
  }
  async assertAbsence(attemptId: string, artifactRef: string): Promise<SettleRow[]> {
    return (await this.op("assert-absence", { attempt_id: attemptId, artifact_ref: artifactRef })).settled ?? [];
  }
  /**
   * Confirms another operator's request that the tenant's two-person rule
   * held (the request_id in the data of the SecondOperatorRequired it was
   * refused with) and returns the reply of the action it carries out. The
   * requester cannot confirm its own request, and the confirming operator
   * needs the scope of its verb.
   */
  async confirm(requestId: string): Promise<OpReply> {
    return this.op("confirm", { request_id: requestId });
  }
  async killSwitch(engaged?: boolean, reason?: string): Promise<boolean> {
    const body: Record<string, unknown> = {};
    if (engaged !== undefined) body.engaged = engaged;
    if (reason) body.reason = reason;
    return (await this.op("kill-switch", body)).kill_switch === true;
  }
  async admitRun(req: { run_id: string; principal: string; calls: number; amount: number; parent_run_id?: string; pack?: string }): Promise<Run> {
    return (await this.data<{ run: Run }>("admit-run", req)).run;
  }
  async run(runId: string): Promise<Run> {
    return (await this.data<{ run: Run }>("run", { run_id: runId })).run;
  }
  async grant(principal: string, capabilityId: string, reason?: string): Promise<AuthorityChange> {
    return this.data("grant", { principal, capability_id: capabilityId, ...(reason ? { reason } : {}) });
  }
  async revoke(principal: string, capabilityId: string, reason?: string): Promise<AuthorityChange> {
    return this.data("revoke", { principal, capability_id: capabilityId, ...(reason ? { reason } : {}) });
  }
  async approve(req: { action_digest: string; risk: "low" | "medium" | "high"; expires_in: string; reason?: string }): Promise<Approval> {
    return this.data("approve", req);
  }
  /** Answers a pending approval request no (action_digest and risk), or withdraws an unused approval (approval_id). */
  async deny(req: { reason: string } & ({ action_digest: string; risk: "low" | "medium" | "high" } | { approval_id: string })): Promise<Record<string, unknown>> {
    return this.data("deny", req);
  }
  async evidence(req: { candidate: Record<string, unknown> } | { marker: Record<string, unknown> }): Promise<Record<string, unknown>> {
    return this.data("evidence", req);
  }
  /** One page of the proposals waiting for an approval, oldest first. */
  async approvalsPage(req: PageRequest = {}): Promise<Page<PendingApproval>> {
    const r = await this.op("approvals", { ...req });
    return pageOf(r, "approvals");
  }
  async approvals(maxRows = MAX_LIST_ROWS): Promise<PendingApproval[]> {
    return collect((p) => this.approvalsPage(p), maxRows);
  }
  /** One page of the incidents, oldest first. */
  async incidentsPage(req: PageRequest = {}): Promise<Page<Incident>> {
    const r = await this.op("incidents", { ...req });
    return pageOf(r, "incidents");
  }
  async incidents(maxRows = MAX_LIST_ROWS): Promise<Incident[]> {
    return collect((p) => this.incidentsPage(p), maxRows);
  }
  /** One page of a guarantee's versions, its pin first. */
  async guaranteeHistoryPage(guaranteeId: string, req: PageRequest = {}): Promise<Page<VersionRow>> {
    const r = await this.op("guarantee-history", { guarantee_id: guaranteeId, ...req });
    return pageOf(r, "versions");
  }
  async guaranteeHistory(guaranteeId: string, maxRows = MAX_LIST_ROWS): Promise<VersionRow[]> {
    return collect((p) => this.guaranteeHistoryPage(guaranteeId, p), maxRows);
  }
}

/** Thrown by collect when it reached maxRows before the end of a list: rows are those read, nextCursor continues. */
export class MoreRows<T = unknown> extends Error {
  constructor(
    readonly rows: T[],
    readonly nextCursor: string,
  ) {
    super(`stopped after ${rows.length} rows, more remain (continue from cursor ${nextCursor})`);
    this.name = "MoreRows";
  }
}

/**
 * Pages through a list with page from cursor to its end and returns every
 * row, at most maxRows; past the bound it throws MoreRows. A daemon that
 * answers a cursor with itself is an error, never a loop.
 */
export async function collect<T>(page: (req: PageRequest) => Promise<Page<T>>, maxRows = MAX_LIST_ROWS, cursor = ""): Promise<T[]> {
  const rows: T[] = [];
  for (;;) {
    const req: PageRequest = { limit: Math.min(maxRows - rows.length, MAX_PAGE_LIMIT) };
    if (cursor) req.cursor = cursor;
    const p = await page(req);
    rows.push(...p.rows);
    if (!p.next_cursor) return rows;
    if (p.next_cursor === cursor) throw new Error(`the daemon answered cursor ${cursor} with itself`);
    if (rows.length >= maxRows) throw new MoreRows(rows, p.next_cursor);
    cursor = p.next_cursor;
  }
}

function permission(e: unknown): InstanceType<typeof errors.PermissionViolationError> | undefined {
  for (let x: unknown = e; x instanceof Error; x = x.cause) {
    if (x instanceof errors.PermissionViolationError) return x;
  }
  return undefined;
}

// isNoReply: a timeout or no responders, after which a proposal is resent.
function isNoReply(e: unknown): boolean {
  for (let x: unknown = e; x instanceof Error; x = x.cause) {
    if (x instanceof errors.TimeoutError || x instanceof errors.NoRespondersError) return true;
  }
  return false;
}
