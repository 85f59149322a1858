// The fault-free answer of a campaign request, from the simulated model alone (no worker, no
// router): what the client must receive, field for field, whatever failed on the way. A worker
// serving other weights answers differently; `weights` (sim/model.ts weightsSalt) gives the
// reference of those weights. A vLLM request's reference is vLLM's uninterrupted answer
// (sim/vllm/reference.ts vllmReference: token ids, logprobs.content entries, finish_reason, usage).

import { DEFAULT_MODEL, DEFAULT_WEIGHTS, promptLogprobs, runModel, type FinishReason } from '../sim/model.ts';
import { vllmReference, type VllmReference } from '../sim/vllm/reference.ts';
import { VLLM_MAX_MODEL_LEN, type RequestSpec } from './traffic.ts';

export type { VllmReference };

/** The reference of either format. */
export type AnyReference = Reference | VllmReference;

export function isVllmReference(ref: AnyReference): ref is VllmReference {
  return 'token_ids' in ref;
}

/** The output token ids of a reference of either format. */
export function referenceIds(ref: AnyReference): number[] {
  return isVllmReference(ref) ? ref.token_ids : ref.output_ids;
}

/** The fault-free vLLM answer of a vLLM request (its sampling_params as the client sent them). */
export function vllmReferenceAnswer(spec: RequestSpec, weights: number = DEFAULT_WEIGHTS): VllmReference {
  const sp = (spec.body.sampling_params ?? {}) as Record<string, unknown>;
  return vllmReference(spec.prompt, sp, { weights, maxModelLen: VLLM_MAX_MODEL_LEN });
}

/** The fault-free answer of a request of either format. */
export function referenceFor(spec: RequestSpec, weights: number = DEFAULT_WEIGHTS): AnyReference {
  return spec.format === 'vllm' ? vllmReferenceAnswer(spec, weights) : referenceAnswer(spec, weights);
}

type Triple = [number | null, number, null];

export interface Reference {
  output_ids: number[];
  finish_reason: FinishReason;
  prompt_tokens: number;
  completion_tokens: number;
  /** Present exactly when the request asked for logprobs. */
  output_token_logprobs?: Triple[];
  output_top_logprobs?: Triple[][];
  input_token_logprobs?: Triple[];
  input_top_logprobs?: (Triple[] | null)[];
}

/**
 * SGLang's first prompt position with logprobs: logprob_start_len −1 (the default) with
 * return_logprob means none (the prompt length; scheduler.py handle_generate_request).
 */
export function promptLogprobStart(spec: RequestSpec): number {
  return spec.logprobStartLen < 0 ? spec.prompt.length : spec.logprobStartLen;
}

export function referenceAnswer(spec: RequestSpec, weights: number = DEFAULT_WEIGHTS): Reference {
  const run = runModel(spec.prompt, spec.decode, DEFAULT_MODEL, weights);
  const ref: Reference = {
    output_ids: run.output_ids,
    finish_reason: run.finish_reason,
    prompt_tokens: spec.prompt.length,
    completion_tokens: run.output_ids.length,
  };
  if (spec.returnLogprob) {
    ref.output_token_logprobs = run.output_ids.map((id, i) => [run.output_logprobs[i]!, id, null]);
    const start = promptLogprobStart(spec);
    const input = promptLogprobs(spec.prompt, start, spec.topLogprobsNum, DEFAULT_MODEL, weights);
    ref.input_token_logprobs = input.logprobs.map((lp, i) => [lp, spec.prompt[start + i]!, null]);
    if (spec.topLogprobsNum > 0) {
      ref.output_top_logprobs = run.output_top_logprobs.map((top) => top.map(([lp, id]) => [lp, id, null] as Triple));
      ref.input_top_logprobs = input.tops.map((t) => (t === null ? null : t.map(([lp, id]) => [lp, id, null] as Triple)));
    }
  }
  return ref;
}
