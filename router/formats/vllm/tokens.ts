// vLLM's worker side as plain tokens, for the OpenAI front (../openai/): a native
// /inference/v1/generate request built from token ids and explicit sampling values, and its
// frames (choices[0].token_ids deltas, logprobs.content in either shape) read as new ids,
// logprobs and a finish.
import { isObject } from '../../core/json.ts';
import type { JsonObject, TokenConstraint, TokenFrame, TokenLogprob, TokenReader, TokenRequest, TokenWorker } from '../../core/types.ts';
import { classifyVllmError, classifyVllmFinish } from './failure.ts';
import { parseVllmRequest } from './request.ts';

/** vLLM's SamplingParams names for the front's explicit values. */
function samplingParams(t: TokenRequest): JsonObject {
  const s = t.sampling;
  const sp: JsonObject = { temperature: s.temperature, top_p: s.top_p };
  if (s.top_k !== null) sp.top_k = s.top_k;
  if (t.maxTokens !== null) sp.max_tokens = t.maxTokens;
  if (t.minTokens > 0) sp.min_tokens = t.minTokens;
  if (s.stop_token_ids.length > 0) sp.stop_token_ids = s.stop_token_ids;
  if (s.ignore_eos) sp.ignore_eos = true;
  if (s.seed !== null) sp.seed = s.seed;
  if (s.frequency_penalty !== 0) sp.frequency_penalty = s.frequency_penalty;
  if (s.presence_penalty !== 0) sp.presence_penalty = s.presence_penalty;
  if (s.repetition_penalty !== null) sp.repetition_penalty = s.repetition_penalty;
  if (s.logit_bias !== null) sp.logit_bias = s.logit_bias;
  if (t.logprobs !== null) sp.logprobs = t.logprobs;
  if (t.constraint) sp.structured_outputs = structuredOutputs(t.constraint);
  return sp;
}

/**
 * vLLM's sampling_params.structured_outputs (sampling_params.py StructuredOutputsParams: exactly
 * one of json, regex, choice, grammar, json_object, structural_tag, plus its options), as
 * chat_completion/protocol.py builds it from response_format and structured_outputs.
 */
export function structuredOutputs(c: TokenConstraint): JsonObject {
  const so: JsonObject = {};
  if (c.kind === 'json') so.json = c.schema;
  else if (c.kind === 'json_object') so.json_object = true;
  else if (c.kind === 'regex') so.regex = c.pattern;
  else if (c.kind === 'choice') so.choice = c.choices;
  else if (c.kind === 'grammar') so.grammar = c.grammar;
  else so.structural_tag = c.tag;
  if (c.options) Object.assign(so, c.options);
  return so;
}

/** A logprob entry's token id: the newer integer `token_id`, or the older `"token_id:N"`. */
function idOf(e: JsonObject): number | null {
  if (typeof e.token_id === 'number') return e.token_id;
  if (typeof e.token === 'string' && e.token.startsWith('token_id:')) return Number(e.token.slice(9));
  return null;
}

/** `usage.prompt_tokens_details.cached_tokens`, which vLLM sends only in the usage chunk after the finish. */
function cachedOf(chunk: JsonObject): number | null {
  const usage = chunk.usage;
  return isObject(usage) && isObject(usage.prompt_tokens_details) && typeof usage.prompt_tokens_details.cached_tokens === 'number' ? usage.prompt_tokens_details.cached_tokens : null;
}

class VllmTokenReader implements TokenReader {
  /** Every attempt asks for include_usage: the usage chunk follows the finish (serving.py). */
  readonly trailer = true;

  read(chunk: JsonObject): TokenFrame {
    if (chunk.error !== undefined && !Array.isArray(chunk.choices)) return { kind: 'failed', failure: classifyVllmError(chunk.error) };
    const choice = Array.isArray(chunk.choices) ? chunk.choices.find(isObject) : undefined;
    if (!choice) return isObject(chunk.usage) ? { kind: 'usage', cachedTokens: cachedOf(chunk) } : { kind: 'skip' };
    const reason = typeof choice.finish_reason === 'string' ? choice.finish_reason : null;
    if (reason !== null) {
      const failure = classifyVllmFinish(reason);
      if (failure) return { kind: 'failed', failure };
    }
    const ids = Array.isArray(choice.token_ids) ? (choice.token_ids.filter((x) => typeof x === 'number') as number[]) : [];
    let logprobs: TokenLogprob[] | null = null;
    const content = isObject(choice.logprobs) && Array.isArray(choice.logprobs.content) ? choice.logprobs.content : null;
    if (content) {
      logprobs = content.filter(isObject).map((e) => ({
        logprob: typeof e.logprob === 'number' ? e.logprob : 0,
        top: Array.isArray(e.top_logprobs) ? e.top_logprobs.filter(isObject).flatMap((t) => {
          const id = idOf(t);
          return id === null ? [] : [{ id, logprob: typeof t.logprob === 'number' ? t.logprob : 0 }];
        }) : [],
      }));
    }
    const spans = Array.isArray(choice.weight_versions) ? choice.weight_versions.filter(isObject) : [];
    const last = spans.at(-1);
    return {
      kind: 'tokens',
      ids,
      logprobs,
      finish: reason === null ? null : { reason: reason === 'length' ? 'length' : 'stop', matched: typeof choice.stop_reason === 'number' ? choice.stop_reason : null },
      weightVersion: last && typeof last.version === 'string' ? last.version : null,
      // Read on the finish only: a unary body (a worker that answered unary) carries its usage there.
      cachedTokens: reason === null ? null : cachedOf(chunk),
    };
  }
}

export const VLLM_TOKENS: TokenWorker = {
  request(t) {
    return parseVllmRequest({ token_ids: t.promptIds, sampling_params: samplingParams(t), stream: t.stream }, { lossyNumbers: false });
  },
  reader: () => new VllmTokenReader(),
};
