// Admission: decided once, when the request arrives, whether a logical request may migrate.
// A refused request is still served, on one attempt; the reason is recorded so that a user can
// see why a failure reached the client. The rules are migration.md's, in the order written there;
// the rules that name a format's fields (its stateful sampling, its response modes) are the
// format's own (`AdmissionRules`, formats/<name>/admission.ts).
//
// Workers merge their advertised defaults under the request's (SGLang:
// `{**preferred_sampling_params, **request}`), so a default the workers advertise counts as if
// the client had sent it: an advertised penalty makes a request stateful, an advertised minimum
// is reduced on a continuation like the client's.
import type { Admission, AdmissionContext, FormatRequest, JsonObject } from './types.ts';

export type { Admission, AdmissionContext };

/** What a format tells admission about its own fields. */
export interface AdmissionRules<R extends FormatRequest = FormatRequest> {
  /** The sampling key of the budget and of the minimum, as the worker reads them. */
  budgetKey: string;
  minKey: string;
  /**
   * Whether the worker clamps every budget to the context as SGLang's scheduler does
   * (`min(budget, max_req_len - prompt - 1)`); the answer's `length` then names the clamped value.
   */
  clampsBudget: boolean;
  /** Keys whose effect depends on state a continuation cannot rebuild (a dispute refuses). */
  statefulKeys: readonly string[];
  /** The format's own refusal of a request (stateful sampling, unsupported modes), or null. */
  refusal(req: R, sp: JsonObject): string | null;
}

/**
 * The sampling params a worker would apply: the advertised defaults under the client's own. An
 * explicit null in the request means "the default", so the default shows through.
 */
export function effectiveSampling(req: FormatRequest, defaults: Readonly<Record<string, unknown>>): JsonObject {
  // No advertised default (the common case): the request's own params, read, never written.
  for (const _ in defaults) return merged(req, defaults);
  return req.sampling;
}

function merged(req: FormatRequest, defaults: Readonly<Record<string, unknown>>): JsonObject {
  const out: JsonObject = { ...(defaults as JsonObject) };
  for (const [k, v] of Object.entries(req.sampling)) if (v !== null || !(k in out)) out[k] = v;
  return out;
}

export function admit<R extends FormatRequest>(req: R, ctx: AdmissionContext, rules: AdmissionRules<R>): Admission {
  const sp = effectiveSampling(req, ctx.workerDefaults);
  const explicitBudget = typeof req.maxNewTokens === 'number';
  const defaultBudget = sp[rules.budgetKey];
  let budget: number | null = explicitBudget ? (req.maxNewTokens as number)
    : req.maxNewTokens === undefined && typeof defaultBudget === 'number' && Number.isSafeInteger(defaultBudget) && defaultBudget >= 0 && !ctx.disputedDefaults.has(rules.budgetKey) ? defaultBudget
      : null;
  const budgetFromDefault = !explicitBudget && budget !== null;
  // The worker clamps every budget to the context (SGLang's scheduler, init_req_max_new_tokens:
  // `min(max_new_tokens, max_req_len - len(origin_input_ids) - 1)`): the uninterrupted answer's
  // `length` finish names the clamped value, and a continuation must not ask for more.
  if (rules.clampsBudget && budget !== null && ctx.maxReqLen !== null && req.promptLength !== null) {
    budget = Math.max(0, Math.min(budget, ctx.maxReqLen - req.promptLength - 1));
  }
  const minRaw = sp[rules.minKey];
  const minNewTokens = typeof minRaw === 'number' && Number.isSafeInteger(minRaw) && minRaw > 0 ? minRaw : 0;
  const reason = refusalOf(req, ctx, rules, sp, budget);
  if (reason !== null) return { admitted: false, reason, budget, budgetFromDefault, minNewTokens };
  return { admitted: true, reason: null, budget: budget!, budgetFromDefault, minNewTokens };
}

/** Why a request may not migrate, in the order of migration.md, or null. */
function refusalOf<R extends FormatRequest>(req: R, ctx: AdmissionContext, rules: AdmissionRules<R>, sp: JsonObject, budget: number | null): string | null {
  if (ctx.migrationLimit <= 0) return 'migration_disabled';
  if (req.prompt.kind === 'batch') return 'batch';
  if (req.prompt.kind === 'text') return 'text_prompt';
  if (req.prompt.kind === 'input_embeds') return 'input_embeds';
  if (req.unparsed) return 'unparsed_field';
  if (req.samples > 1) return 'n_gt_1';
  // A default the workers disagree on matters only where the client did not set the key itself.
  if (ctx.disputedDefaults.size > 0) {
    for (const k of rules.statefulKeys) {
      if (ctx.disputedDefaults.has(k) && (req.sampling[k] === undefined || req.sampling[k] === null)) return `worker_defaults_disagree_${k}`;
    }
  }
  const own = rules.refusal(req, sp);
  if (own !== null) return own;

  // Budget: explicit, or a default every worker advertises alike.
  if (req.maxNewTokens === null) return 'unbounded_budget';
  if (budget === null) return 'unresolved_budget';

  if (ctx.migrationMaxSeqLen !== null && (req.promptLength ?? 0) > ctx.migrationMaxSeqLen) return 'max_seq_len';
  return null;
}
