// The ctx.v1 wire contract's messages (docs/wire.md), typed after the JSON
// Schemas of docs/schema/; test/schema.test.ts holds these types to them.

/** The stable refusal codes of the kernel's catalog (docs/errors.md). */
export const CODES = [
  "request_malformed",
  "capability_not_surfaced",
  "authority_denied",
  "policy_denied",
  "approval_required",
  "approval_mismatch",
  "approval_redeemed",
  "approval_expired",
  "evidence_insufficient",
  "run_budget_exhausted",
  "executor_fenced",
  "kill_switch_engaged",
  "shared_guarantee_resource_invalid",
  "shared_guarantee_amount_invalid",
  "shared_guarantee_exceeded",
  "shared_guarantee_definition_mismatch",
  "shared_guarantee_definition_invalid",
  "shared_guarantee_contention",
  "shared_guarantee_receipts_saturated",
  "shared_guarantee_attempt_closed",
  "shared_guarantee_attempt_known",
  "shared_guarantee_attempt_unknown",
  "shared_guarantee_dispatch_active",
  "shared_guarantee_unresolved_attempt",
  "shared_guarantee_not_started",
  "shared_guarantee_absence_unproven",
  "observation_contradicts_seal",
  "operation_key_conflict",
  "context_invalid",
  "run_already_admitted",
  "evidence_record_conflict",
  "audit_not_found",
  "audit_not_checkpointed",
  "projection_unavailable",
  "ledger_unavailable",
  "overloaded",
  "circuit_breaker_open",
  "approval_denied",
  "stored_event_refused",
  "rate_limited",
  "reply_too_large",
  "enforcement_domain_mismatch",
  "log_integrity_failed",
  "log_unwitnessed",
  "operator_scope_denied",
  "second_operator_required",
  "pack_version_conflict",
  "pack_unknown",
  "pack_versions_exhausted",
  "release_gate_failed",
  "shared_guarantee_import_conflict",
  "shared_guarantee_imports_saturated",
  "context_too_large",
  "guardrail_refused",
  "request_expired",
] as const;

/** A stable refusal code. */
export type Code = (typeof CODES)[number];

/** What a decision says about an operation. */
export type Status = "applied" | "not_applied" | "pending" | "unknown" | "refused";

/** An attempt's observed outcome. */
export type Outcome = "applied" | "not_applied" | "pending" | "unknown" | "partial";

/** The body of ctx.v1.<tenant>.<principal>.propose (schema/proposal.json). */
export interface Proposal {
  run_id: string;
  operation_key: string;
  capability_id: string;
  arguments: Record<string, unknown>;
  evidence_refs?: string[] | null;
  approval_id?: string | null;
}

/** One guarantee's balances in a decision. */
export interface GuaranteeRow {
  guarantee_id: string;
  resource: string;
  limit: number;
  committed: number;
  held: number;
  available: number;
  /** What the guarantees this one replaces committed and held on the resource; it counts against the limit. */
  carried?: number;
}

/** The reply to a proposal (schema/decision.json). */
export interface Decision {
  status: Status;
  code?: Code;
  reason?: string;
  operation_id?: string;
  attempt_id?: string;
  action_digest?: string;
  resource?: string;
  limit?: number;
  committed?: number;
  held?: number;
  available?: number;
  guarantees?: GuaranteeRow[];
  evidence_gate?: EvidenceGate;
}

/** How a resolved conflict was resolved (schema/conflict-marker.json#/$defs/resolution). */
export interface ConflictResolution {
  resolution_ref: string;
  selected_evidence_refs: string[];
  /** Absent: a resolution made outside the pack's rules. */
  kind?: "source_priority" | "authoritative_refresh" | "accountable_review";
  /** The reviewer of an accountable review. */
  resolved_by?: string;
  /** The pack rule of a source_priority or authoritative_refresh resolution. */
  rule_id?: string;
}

/** Evidence refs that disagree on (subject, predicate) (schema/conflict-marker.json). */
export interface EvidenceConflictMarker {
  conflict_id: string;
  evidence_refs: string[];
  requirements: string[];
  status: "unresolved" | "resolved";
  subject: string;
  predicate: string;
  values: string[];
  resolution?: ConflictResolution;
}

/**
 * The evidence gate of the capability's decision (schema/evidence-gate.json,
 * docs/context.md): commit_allowed is true exactly when sufficiency is
 * "sufficient"; unresolved is required minus satisfied.
 */
export interface EvidenceGate {
  decision_key: string;
  required: string[];
  satisfied: string[];
  unresolved: string[];
  conflicts: EvidenceConflictMarker[];
  sufficiency: "sufficient" | "insufficient";
  commit_allowed: boolean;
}

/**
 * The body of ctx.v1.<tenant>.<principal>.context: the run, the capability
 * whose context pack and decision govern the next step, and the evidence
 * refs a proposal would name (docs/context.md).
 */
export interface ContextRequest {
  run_id: string;
  capability_id: string;
  evidence_refs?: string[];
}

/** One tool of a compiled context's derived exposure; reason says why it is not exposed or not dispatchable. */
export interface ToolExposure {
  capability_id: string;
  exposed: boolean;
  gated_by?: string;
  dispatch_allowed: boolean;
  reason?: string;
  version?: string;
}

/**
 * A run's compiled context (schema/compiled-context.json, docs/context.md):
 * the gate and the tool exposure typed; the other stages as the schema
 * gives them.
 */
export interface CompiledContext {
  schema: "compiled_context.v1";
  run: { tenant: string; principal: string; run_id: string; decision_key: string; [member: string]: unknown };
  dependencies: Record<string, unknown>;
  eligibility: Record<string, unknown>[];
  conflicts: EvidenceConflictMarker[];
  payload: Record<string, unknown>[];
  negative_state: Record<string, unknown>;
  requirements: Record<string, unknown>[];
  tools: ToolExposure[];
  gate: EvidenceGate;
  stage_hashes: Record<string, string>;
  digest: string;
  inputs?: Record<string, unknown>[];
}

/** The reply to a compile request: the compiled context and its digest, or a refusal with its code. */
export interface ContextReply {
  status: "compiled" | "refused";
  code?: string;
  reason?: string;
  digest?: string;
  context?: CompiledContext;
}

/** One resource's balances (the exposure verb). */
export interface ExposureRow {
  tenant: string;
  guarantee_id: string;
  resource: string;
  open_attempts: number;
  limit: number;
  committed: number;
  held: number;
  available: number;
  /** What the guarantees this one replaces committed and held on the resource; it counts against the limit. */
  carried?: number;
  /** The calendar window this ledger counts. */
  window?: string;
  /** When a rolling window's oldest committed amount leaves it, and how much. */
  capacity_returns_at?: string;
  capacity_returns?: number;
  archived_receipts?: { committed?: number; committed_amount?: number; released?: number };
  /** Reservations made over the limit in observe mode. */
  over_limit?: number;
  /** The SHA-256 of a resource id over 256 bytes, shown shortened in resource. */
  resource_digest?: string;
}

/** An open attempt with its next safe step (the attempts verb). */
export interface AttemptRow {
  attempt_id: string;
  operation_id: string;
  principal: string;
  run_id: string;
  guarantee_id: string;
  resource: string;
  amount: number;
  state: string;
  last_observation?: Outcome;
  /** What the last provider call or query reported. */
  last_reason?: string;
  next_safe_step: string;
  /** When the attempt was reserved. */
  reserved_at?: string;
  /** The SHA-256 of each value over 256 bytes, shown shortened. */
  resource_digest?: string;
  run_id_digest?: string;
  last_reason_digest?: string;
}

/** What an operator action did to one attempt. */
export interface SettleRow {
  attempt_id: string;
  outcome?: Outcome;
  status?: Status;
  code?: Code;
  reason?: string;
  reason_digest?: string;
}

/** A run's budget (the run and admit-run verbs). */
export interface Run {
  run_id: string;
  parent_run_id?: string;
  principal?: string;
  admitted: boolean;
  calls: number;
  amount: number;
  used_calls: number;
  used_amount: number;
  delegated_calls: number;
  delegated_amount: number;
  children?: string[] | null;
  /** The context pack version the run pins. */
  pack?: PackRef | null;
}

/** A published context pack version. */
export interface PackRef {
  pack_id: string;
  version: string;
  digest: string;
}

/** What approve grants. */
export interface Approval {
  approval_id: string;
  action_digest: string;
  risk: "low" | "medium" | "high";
  expires_at: string;
}

/** What grant and revoke recorded. */
export interface AuthorityChange {
  principal: string;
  capability_id: string;
  granted: boolean;
  recorded: boolean;
}

/** The reply of an operator verb (schema/op-reply.json). */
export interface OpReply {
  ok: boolean;
  code?: Code;
  reason?: string;
  exposure?: ExposureRow[];
  attempts?: AttemptRow[];
  settled?: SettleRow[];
  kill_switch?: boolean;
  data?: Record<string, unknown>;
  approvals?: PendingApproval[];
  incidents?: Incident[];
  versions?: VersionRow[];
  /** The cursor of a list verb's next page; absent on the last. */
  next_cursor?: string;
  /** The tenant's circuit breakers (the breaker verb). */
  breakers?: BreakerRow[];
  /** An export verb's page: records, checkpoints or events.jsonl lines, each standard base64. */
  items?: string[];
  /** Where the next export page starts. */
  next?: number;
  /** No more items now. */
  done?: boolean;
  /** A file verb's file (keys.json, proof.json, consistency.json, view.json), standard base64. */
  file?: string;
  /** The decisions verb's rows (schema op-reply.json#/$defs/decision_row). */
  decisions?: Record<string, unknown>[];
  /** guarantee-import: one result a row, in order (schema op-reply.json#/$defs/import_result). */
  imports?: Record<string, unknown>[];
  /** report: outcomes per guarantee and window (schema op-reply.json#/$defs/outcome_row). */
  outcomes?: Record<string, unknown>[];
}

/** One capability's circuit breaker (the breaker verb): its rule, and what tripped it while it is open. */
export interface BreakerRow {
  capability_id: string;
  open: boolean;
  threshold: number;
  window_ms: number;
  trip?: {
    capability_id: string;
    failures: number;
    threshold: number;
    window_ms: number;
    first_failure: string;
    last_failure: string;
    last_reason: string;
  };
}

/**
 * A proposal waiting for an approval (the approvals verb). Values over 256
 * bytes are shortened with their SHA-256 beside them; arguments keep their
 * shape with long strings shortened, or are null when too large even so.
 */
export interface PendingApproval {
  operation_id: string;
  operation_key: string;
  run_id: string;
  principal: string;
  capability_id: string;
  action_digest: string;
  arguments: Record<string, unknown> | null;
  requested_at: string;
  operation_key_digest?: string;
  run_id_digest?: string;
  arguments_digest?: string;
  arguments_bytes?: number;
}

/** An incident (the incidents verb). */
export interface Incident {
  kind: string;
  attempt_id: string;
  operation_id: string;
  code: string;
  reason: string;
  at: string;
  reason_digest?: string;
}

/** One page of a list verb: its rows, and the cursor of the next page ("" after the last). */
export interface Page<T> {
  rows: T[];
  next_cursor: string;
}

/** What a list verb's page asks for: at most limit rows (0: the daemon's default), after cursor. */
export interface PageRequest {
  limit?: number;
  cursor?: string;
}

/** The daemon's page sizes (docs/wire.md) and the most rows a call that pages through collects. */
export const DEFAULT_PAGE_LIMIT = 100;
export const MAX_PAGE_LIMIT = 500;
export const MAX_LIST_ROWS = 10000;

/** One version of a guarantee (guarantee-set-limit, guarantee-history): version 1 is its pin. */
export interface VersionRow {
  version: number;
  at?: string;
  operator?: string;
  reason?: string;
  resource?: string;
  limit?: number;
  mode?: "enforce" | "observe";
  resource_digest?: string;
  reason_digest?: string;
}

/** The members of each message, for the test that holds the types to the schemas. */
export const MEMBERS = {
  proposal: ["run_id", "operation_key", "capability_id", "arguments", "evidence_refs", "approval_id"],
  decision: ["status", "code", "reason", "operation_id", "attempt_id", "action_digest", "resource", "limit", "committed", "held", "available", "guarantees", "evidence_gate"],
  "compiled-context": ["schema", "run", "dependencies", "eligibility", "conflicts", "payload", "negative_state", "requirements", "tools", "inputs", "gate", "stage_hashes", "digest"],
  "evidence-gate": ["decision_key", "required", "satisfied", "unresolved", "conflicts", "sufficiency", "commit_allowed"],
  "conflict-marker": ["conflict_id", "evidence_refs", "requirements", "status", "subject", "predicate", "values", "resolution"],
  "conflict-marker#resolution": ["resolution_ref", "selected_evidence_refs", "kind", "resolved_by", "rule_id"],
  "op-reply": ["ok", "code", "reason", "exposure", "attempts", "settled", "versions", "approvals", "incidents", "decisions", "kill_switch", "data", "next_cursor", "breakers", "items", "next", "done", "file", "imports", "outcomes"],
  "op-reply#exposure_row": ["tenant", "guarantee_id", "resource", "resource_digest", "open_attempts", "limit", "committed", "held", "available", "carried", "window", "capacity_returns_at", "capacity_returns", "archived_receipts", "over_limit"],
  "op-reply#attempt_row": ["attempt_id", "operation_id", "principal", "run_id", "guarantee_id", "resource", "amount", "state", "last_observation", "resource_digest", "run_id_digest", "last_reason_digest", "last_reason", "next_safe_step", "reserved_at"],
  "op-reply#version_row": ["version", "at", "operator", "reason", "resource", "limit", "mode", "resource_digest", "reason_digest"],
  "op-reply#settle_row": ["attempt_id", "outcome", "status", "code", "reason", "reason_digest"],
  "op-reply#approval_row": ["operation_id", "operation_key", "run_id", "principal", "capability_id", "action_digest", "arguments", "requested_at", "operation_key_digest", "run_id_digest", "arguments_digest", "arguments_bytes"],
  "op-reply#incident_row": ["kind", "attempt_id", "operation_id", "code", "reason", "at", "reason_digest"],
  "op-reply#breaker_row": ["capability_id", "open", "threshold", "window_ms", "trip"],
  "op-reply#approval_data": ["approval_id", "action_digest", "risk", "expires_at"],
  "op-reply#authority_data": ["principal", "capability_id", "granted", "recorded"],
} as const satisfies Record<string, readonly string[]>;

// Compile-time checks that MEMBERS lists exactly each interface's keys.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const assertTrue = <T extends true>(): T => true as T;
void assertTrue<Same<(typeof MEMBERS)["proposal"][number], keyof Proposal>>();
void assertTrue<Same<(typeof MEMBERS)["decision"][number], keyof Decision>>();
void assertTrue<Same<(typeof MEMBERS)["evidence-gate"][number], keyof EvidenceGate>>();
void assertTrue<Same<(typeof MEMBERS)["compiled-context"][number], keyof CompiledContext>>();
void assertTrue<Same<(typeof MEMBERS)["conflict-marker"][number], keyof EvidenceConflictMarker>>();
void assertTrue<Same<(typeof MEMBERS)["conflict-marker#resolution"][number], keyof ConflictResolution>>();
void assertTrue<Same<(typeof MEMBERS)["op-reply"][number], keyof OpReply>>();
void assertTrue<Same<(typeof MEMBERS)["op-reply#exposure_row"][number], keyof ExposureRow>>();
void assertTrue<Same<(typeof MEMBERS)["op-reply#attempt_row"][number], keyof AttemptRow>>();
void assertTrue<Same<(typeof MEMBERS)["op-reply#settle_row"][number], keyof SettleRow>>();
void assertTrue<Same<(typeof MEMBERS)["op-reply#version_row"][number], keyof VersionRow>>();
void assertTrue<Same<(typeof MEMBERS)["op-reply#approval_row"][number], keyof PendingApproval>>();
void assertTrue<Same<(typeof MEMBERS)["op-reply#incident_row"][number], keyof Incident>>();
void assertTrue<Same<(typeof MEMBERS)["op-reply#breaker_row"][number], keyof BreakerRow>>();
void assertTrue<Same<(typeof MEMBERS)["op-reply#approval_data"][number], keyof Approval>>();
void assertTrue<Same<(typeof MEMBERS)["op-reply#authority_data"][number], keyof AuthorityChange>>();
