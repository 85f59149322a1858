// Admission: decided once, when the request arrives, whether a logical request may migrate.
// A refused request is still served, on one attempt; the reason is recorded so that a user can
// see why a failure reached the client. The rules are migration.md's, in the order written there.
//
// SGLang merges `{**preferred_sampling_params, **request}` (tokenizer_manager.py), so a default
// the workers advertise counts as if the client had sent it: an advertised penalty makes a
// request stateful, an advertised min_new_tokens is reduced on a continuation like the client's.
import type { GenerateRequest, JsonObject } from '../format/sglang/request.ts';

export interface AdmissionContext {
  migrationLimit: number;
  migrationMaxSeqLen: number | null;
  /** Sampling defaults every probed worker advertises alike (preferred_sampling_params). */
  workerDefaults: Readonly<Record<string, unknown>>;
  /** Defaults the workers disagree on (unresolved). */
  disputedDefaults: ReadonlySet<string>;
  /** SGLang's scheduler bound on prompt + output (min over workers); null when unknown. */
  maxReqLen: number | null;
}

export type Admission =
  | { admitted: true; reason: null; budget: number; budgetFromDefault: boolean; minNewTokens: number; sampling: JsonObject }
  | { admitted: false; reason: string; budget: number | null; budgetFromDefault: boolean; minNewTokens: number; sampling: JsonObject };

const MULTIMODAL = ['image_data', 'video_data', 'audio_data'];
const GRAMMARS = ['json_schema', 'regex', 'ebnf', 'structural_tag'];
/** Response modes whose pieces the router cannot stitch exactly across attempts. */
const UNSUPPORTED_MODES = ['return_hidden_states', 'return_text_in_logprobs', 'return_routed_experts'];
/** Prefill/decode disaggregation binds a request to one bootstrap room. */
const DISAGGREGATION = ['bootstrap_host', 'bootstrap_port', 'bootstrap_room'];
/**
 * Sampling keys whose effect depends on state a continuation cannot rebuild; a dispute among the
 * workers over any of them leaves the request unresolved.
 */
const STATEFUL_KEYS = ['sampling_seed', 'frequency_penalty', 'presence_penalty', 'repetition_penalty', 'stop', 'stop_regex',
  'max_thinking_tokens', 'thinking_budget', 'custom_params', 'min_new_tokens', ...GRAMMARS];

function present(v: unknown): boolean {
  return v !== undefined && v !== null && v !== false;
}

function nonEmpty(v: unknown): boolean {
  return present(v) && !(Array.isArray(v) && v.length === 0) && !(typeof v === 'string' && v.length === 0);
}

function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * The sampling params a worker would apply: the advertised defaults under the client's own. An
 * explicit null in the request means "the default" in SGLang, so the default shows through.
 */
export function effectiveSampling(req: GenerateRequest, defaults: Readonly<Record<string, unknown>>): JsonObject {
  const out: JsonObject = { ...(defaults as JsonObject) };
  for (const [k, v] of Object.entries(req.sampling)) if (v !== null || !(k in out)) out[k] = v;
  return out;
}

export function admit(req: GenerateRequest, ctx: AdmissionContext): Admission {
  const sp = effectiveSampling(req, ctx.workerDefaults);
  const explicitBudget = typeof req.maxNewTokens === 'number';
  const defaultBudget = sp.max_new_tokens;
  let budget: number | null = explicitBudget ? (req.maxNewTokens as number)
    : req.maxNewTokens === undefined && typeof defaultBudget === 'number' && Number.isSafeInteger(defaultBudget) && defaultBudget >= 0 && !ctx.disputedDefaults.has('max_new_tokens') ? defaultBudget
      : null;
  const budgetFromDefault = !explicitBudget && budget !== null;
  // The scheduler clamps every budget to the context (scheduler.py, init_req_max_new_tokens:
  // `min(max_new_tokens, max_req_len - len(origin_input_ids) - 1)`): the uninterrupted answer's
  // `length` finish names the clamped value, and a continuation must not ask for more.
  if (budget !== null && ctx.maxReqLen !== null && req.promptLength !== null) {
    budget = Math.max(0, Math.min(budget, ctx.maxReqLen - req.promptLength - 1));
  }
  const minRaw = sp.min_new_tokens;
  const minNewTokens = typeof minRaw === 'number' && Number.isSafeInteger(minRaw) && minRaw > 0 ? minRaw : 0;
  const refuse = (reason: string): Admission => ({ admitted: false, reason, budget, budgetFromDefault, minNewTokens, sampling: sp });

  if (ctx.migrationLimit <= 0) return refuse('migration_disabled');
  const { body } = req;
  if (req.prompt.kind === 'batch') return refuse('batch');
  if (req.prompt.kind === 'text') return refuse('text_prompt');
  if (req.prompt.kind === 'input_embeds') return refuse('input_embeds');
  if (req.unparsed) return refuse('unparsed_field');
  if (MULTIMODAL.some((k) => present(body[k]))) return refuse('multimodal');
  const n = sp.n;
  if (typeof n === 'number' && n > 1) return refuse('n_gt_1');
  // A default the workers disagree on matters only where the client did not set the key itself.
  for (const k of STATEFUL_KEYS) {
    if (ctx.disputedDefaults.has(k) && (req.sampling[k] === undefined || req.sampling[k] === null)) return refuse(`worker_defaults_disagree_${k}`);
  }

  // Stateful sampling: the result depends on state a continuation cannot rebuild.
  const temperature = typeof sp.temperature === 'number' ? sp.temperature : 1.0;
  if (present(sp.sampling_seed) && temperature >= 1e-6) return refuse('sampling_seed');
  if (typeof sp.frequency_penalty === 'number' && sp.frequency_penalty !== 0) return refuse('frequency_penalty');
  if (typeof sp.presence_penalty === 'number' && sp.presence_penalty !== 0) return refuse('presence_penalty');
  if (typeof sp.repetition_penalty === 'number' && sp.repetition_penalty !== 1) return refuse('repetition_penalty');
  for (const g of GRAMMARS) if (present(sp[g])) return refuse(`grammar_${g}`);
  if (present(body.custom_logit_processor) || present(sp.custom_logit_processor)) return refuse('custom_logit_processor');
  if (nonEmpty(sp.stop)) return refuse('stop_strings');
  if (nonEmpty(sp.stop_regex)) return refuse('stop_regex');
  // The session lives on one worker; a thinking budget would be granted again on a continuation.
  if (present(body.session_params)) return refuse('session_params');
  if (present(body.max_thinking_tokens) || present(sp.max_thinking_tokens) || present(sp.thinking_budget)
    || (isObject(sp.custom_params) && present(sp.custom_params.thinking_budget))) return refuse('thinking_budget');

  for (const k of UNSUPPORTED_MODES) if (present(body[k])) return refuse(k);
  if (present(body.token_ids_logprob)) return refuse('token_ids_logprob');
  if (DISAGGREGATION.some((k) => present(body[k]))) return refuse('disaggregation');

  // Budget: explicit, or a default every worker advertises alike.
  if (req.maxNewTokens === null) return refuse('unbounded_budget');
  if (budget === null) return refuse('unresolved_budget');

  if (ctx.migrationMaxSeqLen !== null && (req.promptLength ?? 0) > ctx.migrationMaxSeqLen) return refuse('max_seq_len');
  return { admitted: true, reason: null, budget, budgetFromDefault, minNewTokens, sampling: sp };
}
