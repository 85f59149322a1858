// Admission: decided once, when the request arrives, whether a logical request may migrate.
// A refused request is still served, on one attempt; the reason is recorded so that a user can
// see why a failure reached the client. The rules are migration.md's, in the order written there.
import type { GenerateRequest } from '../format/sglang/request.ts';

export interface AdmissionContext {
  migrationLimit: number;
  migrationMaxSeqLen: number | null;
  /** max_new_tokens the workers advertise (preferred_sampling_params); null when none or they disagree. */
  workerDefaultMaxNewTokens: number | null;
}

export type Admission =
  | { admitted: true; reason: null; budget: number }
  | { admitted: false; reason: string; budget: number | null };

const MULTIMODAL = ['image_data', 'video_data', 'audio_data'];
const GRAMMARS = ['json_schema', 'regex', 'ebnf', 'structural_tag'];
/** Response modes whose pieces the router cannot stitch exactly across attempts. */
const UNSUPPORTED_MODES = ['return_hidden_states', 'return_text_in_logprobs', 'return_routed_experts'];
/** Prefill/decode disaggregation binds a request to one bootstrap room. */
const DISAGGREGATION = ['bootstrap_host', 'bootstrap_port', 'bootstrap_room'];

function present(v: unknown): boolean {
  return v !== undefined && v !== null && v !== false;
}

function refuse(reason: string, budget: number | null = null): Admission {
  return { admitted: false, reason, budget };
}

export function admit(req: GenerateRequest, ctx: AdmissionContext): Admission {
  if (ctx.migrationLimit <= 0) return refuse('migration_disabled');
  const { body, sampling: sp } = req;
  if (req.prompt.kind === 'batch') return refuse('batch');
  if (req.prompt.kind === 'text') return refuse('text_prompt');
  if (req.prompt.kind === 'input_embeds') return refuse('input_embeds');
  if (MULTIMODAL.some((k) => present(body[k]))) return refuse('multimodal');
  const n = sp.n;
  if (typeof n === 'number' && n > 1) return refuse('n_gt_1');

  // Stateful sampling: the result depends on state a continuation cannot rebuild.
  const temperature = typeof sp.temperature === 'number' ? sp.temperature : 1.0;
  if (present(sp.sampling_seed) && temperature >= 1e-6) return refuse('sampling_seed');
  if (typeof sp.frequency_penalty === 'number' && sp.frequency_penalty !== 0) return refuse('frequency_penalty');
  if (typeof sp.presence_penalty === 'number' && sp.presence_penalty !== 0) return refuse('presence_penalty');
  if (typeof sp.repetition_penalty === 'number' && sp.repetition_penalty !== 1) return refuse('repetition_penalty');
  for (const g of GRAMMARS) if (present(sp[g])) return refuse(`grammar_${g}`);
  if (present(body.custom_logit_processor)) return refuse('custom_logit_processor');
  if (present(sp.stop) && !(Array.isArray(sp.stop) && sp.stop.length === 0)) return refuse('stop_strings');
  if (present(sp.stop_regex) && !(Array.isArray(sp.stop_regex) && sp.stop_regex.length === 0)) return refuse('stop_regex');

  for (const k of UNSUPPORTED_MODES) if (present(body[k])) return refuse(k);
  if (present(body.token_ids_logprob)) return refuse('token_ids_logprob');
  if (DISAGGREGATION.some((k) => present(body[k]))) return refuse('disaggregation');

  // Budget: explicit, or a default every worker advertises alike.
  if (req.maxNewTokens === null) return refuse('unbounded_budget');
  const budget = req.maxNewTokens ?? ctx.workerDefaultMaxNewTokens;
  if (budget === null) return refuse('unresolved_budget');

  if (ctx.migrationMaxSeqLen !== null && (req.promptLength ?? 0) > ctx.migrationMaxSeqLen) {
    return refuse('max_seq_len', budget);
  }
  return { admitted: true, reason: null, budget };
}
