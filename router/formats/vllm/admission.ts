// vLLM's admission rules (vLLM vllm/sampling_params.py): the stateful or non-exact
// sampling of vLLM's SamplingParams, and the request fields that bind a request to one worker.
// Stateless per-token controls (logit_bias, allowed_token_ids, stop_token_ids) stay admitted.
import type { AdmissionRules } from '../../core/admission.ts';
import type { VllmRequest } from './request.ts';

function present(v: unknown): boolean {
  return v !== undefined && v !== null && v !== false;
}

function nonEmpty(v: unknown): boolean {
  return present(v) && !(Array.isArray(v) && v.length === 0) && !(typeof v === 'string' && v.length === 0);
}

export const VLLM_ADMISSION: AdmissionRules<VllmRequest> = {
  budgetKey: 'max_tokens',
  minKey: 'min_tokens',
  // vLLM validates an explicit max_tokens against max_model_len; it has no scheduler clamp to follow.
  clampsBudget: false,
  statefulKeys: ['seed', 'presence_penalty', 'frequency_penalty', 'repetition_penalty', 'structured_outputs', 'thinking_token_budget', 'repetition_detection', 'bad_words', 'stop', 'min_tokens'],
  refusal(req, sp) {
    const { body } = req;
    // The sampling RNG restarts on a continuation: a seeded draw would differ.
    const temperature = typeof sp.temperature === 'number' ? sp.temperature : 1.0;
    if (present(sp.seed) && temperature > 0) return 'sampling_seed';
    if (typeof sp.frequency_penalty === 'number' && sp.frequency_penalty !== 0) return 'frequency_penalty';
    if (typeof sp.presence_penalty === 'number' && sp.presence_penalty !== 0) return 'presence_penalty';
    if (typeof sp.repetition_penalty === 'number' && sp.repetition_penalty !== 1) return 'repetition_penalty';
    if (present(sp.structured_outputs)) return 'structured_outputs';
    if (present(sp.thinking_token_budget)) return 'thinking_budget';
    if (present(sp.repetition_detection)) return 'repetition_detection';
    if (nonEmpty(sp.bad_words)) return 'bad_words';
    if (nonEmpty(sp.stop)) return 'stop_strings';
    if (present(body.kv_transfer_params) || present(body.ec_transfer_params)) return 'disaggregation';
    if (body.output_mode === 'text') return 'text_output';
    return null;
  },
};
