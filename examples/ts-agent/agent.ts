// A scripted refund agent on the TypeScript client (no model key needed).
//
// It proposes each refund of its script through contextos-ledger and handles
// every status and refusal as an agent should. The connection comes from the
// environment: CTX_NATS (default nats://127.0.0.1:4222), CTX_TENANT, AGENT
// (the principal), one credential (AGENT_PASSWORD, AGENT_NKEY or
// AGENT_CREDS), CTX_TLSCA, CTX_TLSCERT and CTX_TLSKEY for TLS, and AGENT_RUN
// (the run an operator admitted). Each argument is KEY:ORDER:AMOUNT (amount
// in minor units); with --json it prints one JSON object per refund.
//
//   AGENT=agent_phone AGENT_PASSWORD=... AGENT_RUN=run_1 CTX_TENANT=acme \
//     node agent.js refund-ord_990:ord_990:30000
import {
  ApprovalRequired,
  AuthorityDenied,
  Client,
  DEFAULT_URL,
  KillSwitchEngaged,
  LedgerError,
  PolicyDenied,
  Refused,
  RunBudgetExhausted,
  SharedGuaranteeExceeded,
  Unresolved,
  type Decision,
} from "contextos-ledger";

type Result = Record<string, unknown>;

const next: Record<string, string> = {
  applied: "done: the provider refunded",
  not_applied: "the provider did not refund; a new attempt needs a new operation key",
  pending: "the provider will settle it; resend the same key later to learn the outcome",
};

// handle is what the agent does with each answer: the status, and the next step.
function handle(key: string, order: string, amount: number, outcome: Decision | unknown): Result {
  const out: Result = { operation_key: key, order_id: order, amount_minor: amount };
  if (!(outcome instanceof Error)) {
    const d = outcome as Decision;
    return { ...out, status: d.status, attempt_id: d.attempt_id, operation_id: d.operation_id, available: d.available, next: next[d.status] };
  }
  if (outcome instanceof SharedGuaranteeExceeded) {
    return { ...out, status: "refused", code: outcome.code, available: outcome.decision?.available, next: "the order's refund ceiling is reached: tell the customer, do not retry" };
  }
  if (outcome instanceof ApprovalRequired) {
    return { ...out, status: "refused", code: outcome.code, action_digest: outcome.decision?.action_digest,
      next: `ask an operator: ctx approve --digest ${outcome.decision?.action_digest}; then propose again under a new operation key with approval_id` };
  }
  if (outcome instanceof KillSwitchEngaged) {
    return { ...out, status: "refused", code: outcome.code, next: "the tenant's kill switch is engaged: stop and hand over to a human" };
  }
  if (outcome instanceof RunBudgetExhausted) {
    return { ...out, status: "refused", code: outcome.code, next: "this run has no budget left: ask an operator to admit a run" };
  }
  if (outcome instanceof AuthorityDenied || outcome instanceof PolicyDenied) {
    return { ...out, status: "refused", code: outcome.code, next: "not allowed: escalate to a human" };
  }
  if (outcome instanceof Refused) {
    return { ...out, status: "refused", code: outcome.code, reason: outcome.reason, next: "refused: see docs/errors.md for this code" };
  }
  if (outcome instanceof Unresolved) {
    return { ...out, status: "unknown", next: "outcome unknown: resend the same operation key later, never a new one" };
  }
  return { ...out, status: "error", error: String(outcome), next: "contextosd unreachable: try the same operation key again later" };
}

async function main(): Promise<number> {
  const args = process.argv.slice(2);
  const json = args.includes("--json");
  const refunds = args.filter((a) => !a.startsWith("--"));
  const env = (k: string) => {
    const v = process.env[k];
    if (!v) throw new Error(`$${k} is required`);
    return v;
  };
  const principal = env("AGENT");
  const e = process.env;
  const tls = e.CTX_TLSCA || e.CTX_TLSCERT ? { caFile: e.CTX_TLSCA, certFile: e.CTX_TLSCERT, keyFile: e.CTX_TLSKEY } : undefined;
  const agent = await Client.connect({ url: e.CTX_NATS ?? DEFAULT_URL, tenant: env("CTX_TENANT"), principal,
    password: e.AGENT_PASSWORD, nkeyFile: e.AGENT_NKEY, credsFile: e.AGENT_CREDS, tls });
  try {
    for (const spec of refunds) {
      const [key, order, amount] = spec.split(":");
      let outcome: Decision | unknown;
      try {
        outcome = await agent.propose({ run_id: env("AGENT_RUN"), operation_key: key, capability_id: "adp_payments.issue_refund",
          arguments: { order_id: order, amount_minor: Number(amount), currency: "INR" } }, 30_000);
      } catch (e) {
        if (!(e instanceof LedgerError)) throw e;
        outcome = e;
      }
      const out = handle(key, order, Number(amount), outcome);
      console.log(json ? JSON.stringify(out) : `${principal} ${key}: ${out.status}${out.code ? " " + out.code : ""} -> ${out.next}`);
    }
  } finally {
    await agent.close();
  }
  return 0;
}

process.exitCode = await main();
