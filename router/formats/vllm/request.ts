// Reading vLLM's native token-in/token-out request (`POST /inference/v1/generate`, vLLM
// vllm/entrypoints/scale_out/token_in_token_out/protocol.py `GenerateRequest`, serving.py
// `serve_tokens` at 00a80787): only what the router needs to admit a request and continue it.
// As for SGLang, a value the router cannot use is never refused here: the body goes to one
// worker as written (`unparsed`), and vLLM's own answer reaches the client.
import type { FormatRequest, JsonObject } from '../../core/types.ts';
import { isObject } from '../../core/json.ts';

export interface VllmRequest extends FormatRequest {
  /** `logprobs` (k top alternatives per output token), or null. */
  logprobs: number | null;
  /** The client's stream_options: usage in a final chunk, and on every chunk. */
  includeUsage: boolean;
  continuousUsage: boolean;
}

/** A body vLLM's validation refuses outright (not an object): the router's 400. */
export class VllmMalformedBody extends Error {}

const isTokenId = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;

export function parseVllmRequest(raw: unknown, opts: { lossyNumbers: boolean }): VllmRequest {
  if (!isObject(raw)) throw new VllmMalformedBody('Input should be a valid dictionary or object to extract fields from');
  const body = raw;
  const problems: string[] = [];
  if (opts.lossyNumbers) problems.push('the body holds a number that would not survive re-serialisation');

  const ids = body.token_ids;
  let prompt: FormatRequest['prompt'] = { kind: 'text' };
  if (Array.isArray(ids) && ids.length > 0 && ids.every(isTokenId)) prompt = { kind: 'input_ids', ids: ids as number[] };
  else problems.push('token_ids is not a non-empty list of non-negative token ids');
  if (body.features !== undefined && body.features !== null) problems.push('multimodal features');
  if (body.content_parts !== undefined && body.content_parts !== null) problems.push('multimodal content_parts');

  const spRaw = body.sampling_params;
  let sampling: JsonObject = {};
  if (isObject(spRaw)) sampling = spRaw;
  else if (spRaw !== undefined && spRaw !== null) problems.push('sampling_params is not an object');

  // max_tokens: the key's absence matters (serving.py: the server fills in its own default only
  // when the client omitted it); vLLM requires at least 1.
  let maxNewTokens: number | null | undefined;
  if (!('max_tokens' in sampling)) maxNewTokens = undefined;
  else if (sampling.max_tokens === null) maxNewTokens = null;
  else if (typeof sampling.max_tokens === 'number' && Number.isSafeInteger(sampling.max_tokens) && sampling.max_tokens >= 1) maxNewTokens = sampling.max_tokens;
  else problems.push(`sampling_params.max_tokens is ${JSON.stringify(sampling.max_tokens)}`);
  const min = sampling.min_tokens;
  let minNewTokens = 0;
  if (typeof min === 'number' && Number.isSafeInteger(min) && min >= 0) minNewTokens = min;
  else if (min !== undefined && min !== null) problems.push(`sampling_params.min_tokens is ${JSON.stringify(min)}`);
  if (typeof maxNewTokens === 'number' && minNewTokens > maxNewTokens) problems.push('min_tokens is above max_tokens');
  const lp = sampling.logprobs;
  const logprobs = typeof lp === 'number' && Number.isSafeInteger(lp) ? lp : null;
  if (lp !== undefined && lp !== null && logprobs === null) problems.push(`sampling_params.logprobs is ${JSON.stringify(lp)}`);
  const n = sampling.n;
  if (n !== undefined && n !== null && !(typeof n === 'number' && Number.isSafeInteger(n) && n >= 1)) problems.push(`sampling_params.n is ${JSON.stringify(n)}`);

  const stream = body.stream;
  if (stream !== undefined && typeof stream !== 'boolean') problems.push(`stream is ${JSON.stringify(stream)}`);
  const rid = body.request_id;
  if (rid !== undefined && rid !== null && typeof rid !== 'string') problems.push('request_id is not a string');
  const so = isObject(body.stream_options) ? body.stream_options : null;
  // should_include_usage: continuous usage only together with include_usage.
  const includeUsage = so?.include_usage === true;
  // vLLM answers prompt logprobs only in a unary answer: a unary request that asks for them is
  // served by one worker as written (its stream would never carry them).
  if (stream !== true && sampling.prompt_logprobs !== undefined && sampling.prompt_logprobs !== null) problems.push('prompt_logprobs in a unary request (vLLM streams none)');

  // Frames come one per stream_interval tokens: vllm/v1/engine/output_processor.py
  // `RequestState.from_new_request` takes max(sampling_params.stream_interval, the engine's
  // --stream-interval), and `make_request_output` sends the first token, then one output per
  // interval, and the finish. The engine's value is not advertised: the request's is what is known.
  const k = sampling.stream_interval;
  const framing = { streamInterval: typeof k === 'number' && Number.isFinite(k) && k >= 1 ? Math.ceil(k) : null, heldTokens: 0 };

  return {
    body,
    prompt,
    promptLength: prompt.kind === 'input_ids' ? prompt.ids.length : null,
    stream: stream === true,
    rid: typeof rid === 'string' ? rid : null,
    framing,
    sampling,
    maxNewTokens,
    minNewTokens,
    returnLogprob: logprobs !== null,
    unparsed: problems.length > 0 ? problems.join('; ') : null,
    samples: typeof n === 'number' && n > 1 ? n : 1,
    logprobs,
    includeUsage,
    continuousUsage: includeUsage && so?.continuous_usage_stats === true,
  };
}
