// vLLM's upstream request of an attempt. Every attempt streams (vLLM's unary answer is
// FINAL_ONLY: a worker that dies mid-answer would lose it all), asks for usage on every chunk
// (to count the worker's tokens and cache hits as they come), and names its own request_id. A
// continuation appends the replayed tokens to `token_ids` and asks for the explicit remainder:
// `max_tokens` is always sent, because vLLM's default when the key is absent (max_model_len −
// prompt, serving.py) would grant the whole budget again.
import type { AttemptSpec, JsonObject } from '../../core/types.ts';
import type { VllmRequest } from './request.ts';

export function vllmAttemptBody(req: VllmRequest, promptIds: readonly number[], spec: AttemptSpec, minNewTokens: number): string {
  const body: JsonObject = {
    ...req.body,
    request_id: spec.rid,
    stream: true,
    stream_options: { include_usage: true, continuous_usage_stats: true },
  };
  if (spec.remaining !== null) {
    const sampling: JsonObject = { ...req.sampling, max_tokens: spec.remaining };
    if (minNewTokens > 0 || (req.sampling.min_tokens !== undefined && req.sampling.min_tokens !== null)) sampling.min_tokens = spec.minTokens;
    if (spec.replayed.length > 0) {
      // The client holds attempt 0's prompt logprobs; a continuation's would cover replayed tokens.
      if ('prompt_logprobs' in sampling) sampling.prompt_logprobs = null;
    }
    body.sampling_params = sampling;
    body.token_ids = spec.replayed.length === 0 ? (promptIds as number[]) : promptIds.concat(spec.replayed);
    // The prompt echo (return_token_ids) is attempt 0's; a continuation's would include replay.
    if (spec.replayed.length > 0 && body.return_token_ids === true) body.return_token_ids = false;
  }
  return JSON.stringify(body);
}
