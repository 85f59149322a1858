// SGLang's admission rules: which of its request fields make a request stateful or unstitchable
// (migration.md, "Admission"). The shared rules and the budget are core/admission.ts's.
import type { AdmissionRules } from '../../core/admission.ts';
import type { GenerateRequest } from './request.ts';
import { isObject } from '../../core/json.ts';

const MULTIMODAL = ['image_data', 'video_data', 'audio_data'];
const GRAMMARS = ['json_schema', 'regex', 'ebnf', 'structural_tag'];
/** Response modes whose pieces the router cannot stitch exactly across attempts. */
const UNSUPPORTED_MODES = ['return_hidden_states', 'return_text_in_logprobs', 'return_routed_experts'];
/** Prefill/decode disaggregation binds a request to one bootstrap room. */
const DISAGGREGATION = ['bootstrap_host', 'bootstrap_port', 'bootstrap_room'];

function present(v: unknown): boolean {
  return v !== undefined && v !== null && v !== false;
}

function nonEmpty(v: unknown): boolean {
  return present(v) && !(Array.isArray(v) && v.length === 0) && !(typeof v === 'string' && v.length === 0);
}

export const SGLANG_ADMISSION: AdmissionRules<GenerateRequest> = {
  budgetKey: 'max_new_tokens',
  minKey: 'min_new_tokens',
  clampsBudget: true,
  statefulKeys: ['sampling_seed', 'frequency_penalty', 'presence_penalty', 'repetition_penalty', 'stop', 'stop_regex',
    'max_thinking_tokens', 'thinking_budget', 'custom_params', 'min_new_tokens', ...GRAMMARS],
  refusal(req, sp) {
    const { body } = req;
    if (MULTIMODAL.some((k) => present(body[k]))) return 'multimodal';
    // Stateful sampling: the result depends on state a continuation cannot rebuild.
    const temperature = typeof sp.temperature === 'number' ? sp.temperature : 1.0;
    if (present(sp.sampling_seed) && temperature >= 1e-6) return 'sampling_seed';
    if (typeof sp.frequency_penalty === 'number' && sp.frequency_penalty !== 0) return 'frequency_penalty';
    if (typeof sp.presence_penalty === 'number' && sp.presence_penalty !== 0) return 'presence_penalty';
    if (typeof sp.repetition_penalty === 'number' && sp.repetition_penalty !== 1) return 'repetition_penalty';
    for (const g of GRAMMARS) if (present(sp[g])) return `grammar_${g}`;
    if (present(body.custom_logit_processor) || present(sp.custom_logit_processor)) return 'custom_logit_processor';
    if (nonEmpty(sp.stop)) return 'stop_strings';
    if (nonEmpty(sp.stop_regex)) return 'stop_regex';
    // The session lives on one worker; a thinking budget would be granted again on a continuation.
    if (present(body.session_params)) return 'session_params';
    if (present(body.max_thinking_tokens) || present(sp.max_thinking_tokens) || present(sp.thinking_budget)
      || (isObject(sp.custom_params) && present(sp.custom_params.thinking_budget))) return 'thinking_budget';
    for (const k of UNSUPPORTED_MODES) if (present(body[k])) return k;
    if (present(body.token_ids_logprob)) return 'token_ids_logprob';
    if (DISAGGREGATION.some((k) => present(body[k]))) return 'disaggregation';
    return null;
  },
};
