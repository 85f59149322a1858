// Turning a POST /inference/v1/generate body into a request, with vLLM's validation in vLLM's
// three places (docs/simulator.md, "Simulated vLLM workers", cites the source):
//
// 1. The body schema (pydantic: GenerateRequest, SamplingParams.__post_init__ / _verify_args):
//    FastAPI's RequestValidationError, rendered by vLLM's validation handler as
//    400 {"error":{"message":"1 validation error:\n  {...}","type":"Bad Request","param",code:400}}
//    before any stream starts.                                     -> ValidationFailure
// 2. ServingTokens.serve_tokens before the generator is returned (model name, tokens-only stop
//    strings, output_mode): create_error_response, 400/404 {"error":{...,"type":"BadRequestError"}},
//    also before any stream starts.                                -> ServingError
// 3. The engine's input processor (prompt length, vocabulary, SamplingParams.verify: logprobs,
//    logit_bias, stop ids, allowed ids, structured outputs, priority): raised while the response
//    generator runs, so a stream has already sent its 200 and gets an in-band error frame; a
//    unary call gets 400 from the exception handler.               -> EngineError
//
// Pure: no sockets, no clocks.

import { randomUUID } from 'node:crypto';
import { pyRepr } from '../request.ts';
import type { VllmSampling } from './model.ts';

/** A pydantic-level refusal (step 1). */
export class ValidationFailure extends Error {
  constructor(readonly errors: PydanticError[]) {
    super(formatValidation(errors));
  }
  /** vLLM's validation handler: the VLLMValidationError's parameter, else the first error's cleaned loc. */
  get param(): string | null {
    for (const e of this.errors) if (e.parameter !== undefined) return e.parameter;
    const first = this.errors[0];
    if (!first || first.loc === undefined) return null;
    return first.loc.map(String).join('.');
  }
}

/** serve_tokens' create_error_response (step 2). */
export class ServingError extends Error {
  constructor(message: string, readonly status: number, readonly type: string, readonly param: string | null = null) {
    super(message);
  }
}

/** A VLLMValidationError raised by the engine's input processor (step 3). */
export class EngineError extends Error {
  constructor(message: string, readonly param: string | null = null) {
    super(message);
  }
}

/** One entry of pydantic's errors(), as vLLM's handler prints it. */
export interface PydanticError {
  type: string;
  loc?: (string | number)[];
  msg: string;
  input?: unknown;
  /** The VLLMValidationError's `parameter`, when one raised the error. */
  parameter?: string;
  /** A bare string error (validate_json_request's media-type error). */
  raw?: string;
}

/** Python's repr() of a JSON value. */
export function pyValue(v: unknown): string {
  if (v === null || v === undefined) return 'None';
  if (v === true) return 'True';
  if (v === false) return 'False';
  if (typeof v === 'number') return Number.isFinite(v) ? String(v) : v > 0 ? 'inf' : v < 0 ? '-inf' : 'nan';
  if (typeof v === 'string') return pyRepr(v);
  if (Array.isArray(v)) return '[' + v.map(pyValue).join(', ') + ']';
  if (typeof v === 'object') return '{' + Object.entries(v as Record<string, unknown>).map(([k, x]) => `${pyRepr(k)}: ${pyValue(x)}`).join(', ') + '}';
  return String(v);
}

function formatValidation(errors: PydanticError[]): string {
  const label = errors.length === 1 ? 'error' : 'errors';
  let out = `${errors.length} validation ${label}:\n`;
  for (const e of errors) {
    if (e.raw !== undefined) {
      out += `  ${e.raw}\n`;
      continue;
    }
    const loc = e.loc ? `(${e.loc.map((p) => (typeof p === 'string' ? pyRepr(p) : String(p))).join(', ')}${e.loc.length === 1 ? ',' : ''})` : '()';
    out += `  {'type': ${pyRepr(e.type)}, 'loc': ${loc}, 'msg': ${pyRepr(e.msg)}, 'input': ${pyValue(e.input)}}\n`;
  }
  return out.trimEnd();
}

export interface VllmSettings {
  /** The served model name (vLLM's --served-model-name, default the model path). */
  modelName: string;
  vocabSize: number;
  eosTokenId: number;
  maxModelLen: number;
  /** --max-logprobs (vLLM default 20). */
  maxLogprobs: number;
  /** --scheduling-policy: non-zero priorities need "priority". */
  schedulingPolicy: 'fcfs' | 'priority';
  /** --max-num-seqs (vLLM default 256): the bound on n. */
  maxNumSeqs: number;
}

export interface VllmRequest {
  /** The engine's (external) request id: `generate-tokens-<X-Request-Id or request_id>`. */
  requestId: string;
  promptIds: number[];
  sampling: VllmSampling;
  stream: boolean;
  includeUsage: boolean;
  continuousUsage: boolean;
  returnTokenIds: boolean;
  cacheSalt: string | null;
  priority: number;
  /** A refusal of the engine's input processor: the stream has started when it surfaces. */
  engineError: EngineError | null;
  /** sampling_params.structured_outputs as sent (null: none), for stats().constraints. */
  structuredOutputs: Record<string, unknown> | null;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isInt = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v);
const isNum = (v: unknown): v is number => typeof v === 'number';

/** SamplingParams fields and their JSON types (msgspec's conversion), for type errors. */
const FLOAT_FIELDS = ['presence_penalty', 'frequency_penalty', 'repetition_penalty', 'temperature', 'top_p', 'min_p'] as const;
const INT_FIELDS = ['n', 'top_k', 'min_tokens', 'routed_experts_prompt_start'] as const;
const OPT_INT_FIELDS = ['seed', 'max_tokens', 'logprobs', 'prompt_logprobs', 'stream_interval', 'prompt_logprob_start', 'thinking_token_budget'] as const;
const BOOL_FIELDS = ['ignore_eos', 'detokenize', 'skip_special_tokens', 'spaces_between_special_tokens', 'include_stop_str_in_output', 'flat_logprobs'] as const;
const INT_LIST_FIELDS = ['stop_token_ids', 'allowed_token_ids', 'logprob_token_ids', 'prompt_logprob_token_ids', 'trace_decode_token_ids'] as const;

/**
 * Parses and validates a generate body. `headers` are the request's (lower-case) headers;
 * `contentType` is checked like validate_json_request.
 */
export function parseVllmGenerate(raw: unknown, headers: Record<string, string | string[] | undefined>, s: VllmSettings): VllmRequest {
  if (!isObject(raw)) throw new ValidationFailure([{ type: 'model_attributes_type', loc: ['body'], msg: 'Input should be a valid dictionary or object to extract fields from', input: raw }]);
  const errors: PydanticError[] = [];
  const fail = (e: PydanticError) => errors.push(e);

  // GenerateRequest fields, in declaration order (pydantic reports them in that order).
  const requestIdRaw = raw.request_id;
  if (requestIdRaw !== undefined && typeof requestIdRaw !== 'string') fail({ type: 'string_type', loc: ['body', 'request_id'], msg: 'Input should be a valid string', input: requestIdRaw });
  const tokenIds = raw.token_ids;
  if (tokenIds === undefined) fail({ type: 'missing', loc: ['body', 'token_ids'], msg: 'Field required', input: raw });
  else if (!Array.isArray(tokenIds)) fail({ type: 'list_type', loc: ['body', 'token_ids'], msg: 'Input should be a valid list', input: tokenIds });
  else {
    const bad = tokenIds.findIndex((t) => !isInt(t));
    if (bad >= 0) fail({ type: 'int_type', loc: ['body', 'token_ids', bad], msg: 'Input should be a valid integer', input: tokenIds[bad] });
    else if (tokenIds.length === 0)
      fail({ type: 'too_short', loc: ['body', 'token_ids'], msg: 'List should have at least 1 item after validation, not 0', input: tokenIds });
    else if (tokenIds.some((t: number) => t < 0))
      fail({ type: 'value_error', loc: ['body', 'token_ids'], msg: 'Value error, token_ids must not contain negative values', input: tokenIds });
  }
  if (raw.features !== undefined && raw.features !== null && raw.content_parts !== undefined && raw.content_parts !== null) {
    fail({ type: 'value_error', loc: ['body'], msg: 'Value error, content_parts and features are mutually exclusive', input: raw });
  }
  let sampling: VllmSampling | null = null;
  const spRaw = raw.sampling_params;
  let detokenize = true;
  let stopStrings: string[] = [];
  let structured = false;
  let thinkingBudget: number | null = null;
  let logprobTokenIds: number[] | null = null;
  let promptLogprobTokenIds: number[] | null = null;
  const maxTokensProvided = isObject(spRaw) && 'max_tokens' in spRaw;
  if (spRaw === undefined) fail({ type: 'missing', loc: ['body', 'sampling_params'], msg: 'Field required', input: raw });
  else if (!isObject(spRaw)) fail({ type: 'dict_type', loc: ['body', 'sampling_params'], msg: 'Input should be a valid dictionary', input: spRaw });
  else {
    try {
      const r = samplingFromJson(spRaw);
      sampling = r.sampling;
      detokenize = r.detokenize;
      stopStrings = r.stop;
      structured = r.structured;
      thinkingBudget = r.thinkingBudget;
      logprobTokenIds = r.logprobTokenIds;
      promptLogprobTokenIds = r.promptLogprobTokenIds;
    } catch (err) {
      if (!(err instanceof SamplingError)) throw err;
      fail({ type: err.kind, loc: ['body', 'sampling_params', ...(err.field ? [err.field] : [])], msg: err.kind === 'value_error' ? `Value error, ${err.message}` : err.message, input: err.kind === 'value_error' ? spRaw : spRaw[err.field ?? ''], ...(err.parameter ? { parameter: err.parameter } : {}) });
    }
  }
  const model = raw.model;
  if (model !== undefined && model !== null && typeof model !== 'string') fail({ type: 'string_type', loc: ['body', 'model'], msg: 'Input should be a valid string', input: model });
  const returnTokenIds = raw.return_token_ids;
  if (returnTokenIds !== undefined && returnTokenIds !== null && typeof returnTokenIds !== 'boolean') fail({ type: 'bool_type', loc: ['body', 'return_token_ids'], msg: 'Input should be a valid boolean', input: returnTokenIds });
  const outputMode = raw.output_mode ?? 'tokens';
  if (outputMode !== 'tokens' && outputMode !== 'text') fail({ type: 'literal_error', loc: ['body', 'output_mode'], msg: "Input should be 'tokens' or 'text'", input: outputMode });
  const stream = raw.stream;
  if (stream !== undefined && stream !== null && typeof stream !== 'boolean') fail({ type: 'bool_type', loc: ['body', 'stream'], msg: 'Input should be a valid boolean', input: stream });
  const so = raw.stream_options;
  let includeUsage = false;
  let continuousUsage = false;
  if (so !== undefined && so !== null) {
    if (!isObject(so)) fail({ type: 'model_type', loc: ['body', 'stream_options'], msg: 'Input should be a valid dictionary or instance of StreamOptions', input: so });
    else {
      for (const key of ['include_usage', 'continuous_usage_stats'] as const) {
        const v = so[key];
        if (v !== undefined && v !== null && typeof v !== 'boolean') fail({ type: 'bool_type', loc: ['body', 'stream_options', key], msg: 'Input should be a valid boolean', input: v });
      }
      // should_include_usage: continuous usage only together with include_usage.
      includeUsage = so.include_usage === true;
      continuousUsage = includeUsage && so.continuous_usage_stats === true;
    }
  }
  const cacheSalt = raw.cache_salt;
  if (cacheSalt !== undefined && cacheSalt !== null) {
    if (typeof cacheSalt !== 'string') fail({ type: 'string_type', loc: ['body', 'cache_salt'], msg: 'Input should be a valid string', input: cacheSalt });
    else if (cacheSalt.length < 1) fail({ type: 'string_too_short', loc: ['body', 'cache_salt'], msg: 'String should have at least 1 character', input: cacheSalt });
    else if (cacheSalt.length > 1024) fail({ type: 'string_too_long', loc: ['body', 'cache_salt'], msg: 'String should have at most 1024 characters', input: cacheSalt });
  }
  const priority = raw.priority ?? 0;
  if (!isInt(priority)) fail({ type: 'int_type', loc: ['body', 'priority'], msg: 'Input should be a valid integer', input: priority });
  for (const key of ['kv_transfer_params', 'ec_transfer_params'] as const) {
    const v = raw[key];
    if (v !== undefined && v !== null && !isObject(v)) fail({ type: 'dict_type', loc: ['body', key], msg: 'Input should be a valid dictionary', input: v });
  }
  // GenerateRequest._check_output_mode_detokenizes
  if (errors.length === 0 && outputMode !== 'tokens' && !detokenize) {
    fail({ type: 'value_error', loc: ['body'], msg: `Value error, output_mode=${pyRepr(String(outputMode))} requires sampling_params.detokenize to be true`, input: raw });
  }
  if (errors.length > 0) throw new ValidationFailure(errors);
  const sp = sampling!;

  // ServingTokens.serve_tokens (step 2), in its order.
  if (typeof model === 'string' && model !== '' && model !== s.modelName) {
    throw new ServingError(`The model \`${model}\` does not exist.`, 404, 'NotFoundError', 'model');
  }
  if (sp.n > s.maxNumSeqs) throw new ServingError(`sampling_params.n must be at most the server's max_num_seqs (${s.maxNumSeqs}), got ${sp.n}.`, 400, 'BadRequestError');
  if (stream === true && promptLogprobTokenIds !== null) throw new ServingError('prompt_logprob_token_ids are not available when stream=true.', 400, 'BadRequestError');
  if (stopStrings.length > 0) {
    throw new ServingError(
      'stop strings are not supported on a --tokens-only server because detokenization is disabled. Check stop strings on the coordinator, or use stop_token_ids.',
      400,
      'BadRequestError',
    );
  }
  if (outputMode !== 'tokens') {
    throw new ServingError(
      `output_mode=${pyRepr(String(outputMode))} requires a tokenizer, but this server does not load one (--tokens-only or --skip-tokenizer-init). Send the request to a server that loads a tokenizer, or use output_mode='tokens'.`,
      400,
      'BadRequestError',
    );
  }

  const header = (name: string) => {
    const v = headers[name];
    return Array.isArray(v) ? v[0] : v;
  };
  // _base_request_id: X-Request-Id, else the body's request_id (a uuid by default).
  const base = header('x-request-id') ?? (typeof requestIdRaw === 'string' ? requestIdRaw : randomUUID().replace(/-/g, ''));
  const promptIds = tokenIds as number[];

  // max_tokens: the server fills in get_max_tokens only when the key is absent; an explicit null
  // is filled by the input processor with the same value (max_model_len - prompt length).
  if (!maxTokensProvided || sp.max_tokens <= 0) sp.max_tokens = Math.max(0, s.maxModelLen - promptIds.length);

  return {
    requestId: `generate-tokens-${base}`,
    promptIds,
    sampling: sp,
    stream: stream === true,
    includeUsage,
    continuousUsage,
    returnTokenIds: returnTokenIds === true,
    cacheSalt: typeof cacheSalt === 'string' ? cacheSalt : null,
    priority: priority as number,
    structuredOutputs: structured && isObject(spRaw) && isObject(spRaw.structured_outputs) ? spRaw.structured_outputs : null,
    engineError: engineCheck(promptIds, sp, s, { structured, thinkingBudget, logprobTokenIds, promptLogprobTokenIds, priority: priority as number, dpRank: header('x-data-parallel-rank') }),
  };
}

class SamplingError extends Error {
  constructor(message: string, readonly kind: string, readonly field?: string, readonly parameter?: string) {
    super(message);
  }
}

const valueError = (message: string, parameter?: string) => new SamplingError(message, 'value_error', undefined, parameter);

/** SamplingParams from JSON: msgspec's conversion, from_optional's logit_bias, __post_init__ and _verify_args. */
function samplingFromJson(sp: Record<string, unknown>) {
  const get = (k: string) => (sp[k] === null ? undefined : sp[k]);
  for (const k of FLOAT_FIELDS) {
    const v = get(k);
    if (v !== undefined && !isNum(v)) throw new SamplingError('Input should be a valid number', 'float_type', k);
  }
  for (const k of [...INT_FIELDS, ...OPT_INT_FIELDS]) {
    const v = get(k);
    if (v !== undefined && !isInt(v) && !(typeof v === 'boolean' && (k === 'logprobs' || k === 'prompt_logprobs')))
      throw new SamplingError('Input should be a valid integer', 'int_type', k);
  }
  for (const k of BOOL_FIELDS) {
    const v = get(k);
    if (v !== undefined && typeof v !== 'boolean') throw new SamplingError('Input should be a valid boolean', 'bool_type', k);
  }
  for (const k of INT_LIST_FIELDS) {
    const v = get(k);
    if (v !== undefined && !(Array.isArray(v) && v.every(isInt))) throw new SamplingError('Input should be a valid list of integers', 'list_type', k);
  }
  const stopRaw = get('stop');
  if (stopRaw !== undefined && typeof stopRaw !== 'string' && !(Array.isArray(stopRaw) && stopRaw.every((x) => typeof x === 'string')))
    throw new SamplingError('Input should be a valid string or list of strings', 'union_type', 'stop');
  const badWords = get('bad_words');
  if (badWords !== undefined && !(Array.isArray(badWords) && badWords.every((x) => typeof x === 'string'))) throw new SamplingError('Input should be a valid list of strings', 'list_type', 'bad_words');

  // from_optional: logit_bias keys to int, values clamped to [-100, 100].
  let logitBias: Record<string, number> | null = null;
  const lb = get('logit_bias');
  if (lb !== undefined) {
    if (!isObject(lb)) throw new SamplingError('Input should be a valid dictionary', 'dict_type', 'logit_bias');
    const invalid = Object.keys(lb).filter((k) => !/^\s*[-+]?\d+\s*$/.test(k));
    if (invalid.length > 0) throw valueError(`logit_bias contains key(s) that cannot be converted to integer token IDs: ${pyValue(invalid)}`, 'logit_bias');
    logitBias = {};
    for (const [k, v] of Object.entries(lb)) {
      if (!isNum(v)) throw new SamplingError('Input should be a valid number', 'float_type', 'logit_bias');
      logitBias[String(parseInt(k, 10))] = Math.min(100, Math.max(-100, v));
    }
  }

  const num = (k: string, d: number) => (get(k) as number | undefined) ?? d;
  const n = num('n', 1);
  const presence = num('presence_penalty', 0);
  const frequency = num('frequency_penalty', 0);
  const repetition = num('repetition_penalty', 1);
  let temperature = num('temperature', 1);
  let topP = num('top_p', 1);
  let topK = num('top_k', 0);
  let minP = num('min_p', 0);
  let seed = (get('seed') as number | undefined) ?? null;
  const maxTokensRaw = sp.max_tokens === undefined ? 16 : (sp.max_tokens as number | null);
  const minTokens = num('min_tokens', 0);
  let logprobs = (get('logprobs') as number | boolean | undefined) ?? null;
  let promptLogprobs = (get('prompt_logprobs') as number | boolean | undefined) ?? null;
  const streamInterval = (get('stream_interval') as number | undefined) ?? null;
  const detokenize = (get('detokenize') as boolean | undefined) ?? true;
  const stop = stopRaw === undefined ? [] : typeof stopRaw === 'string' ? [stopRaw] : (stopRaw as string[]);
  const stopTokenIds = [...new Set((get('stop_token_ids') as number[] | undefined) ?? [])];

  // __post_init__
  if (temperature > 0 && temperature < 1e-2) temperature = 1e-2;
  if (seed === -1) seed = null;
  const tb = get('thinking_token_budget') as number | undefined;
  if (tb !== undefined && tb !== -1 && tb < 0) throw valueError('`thinking_token_budget` must be a non-negative integer or -1 for unlimited.', 'thinking_token_budget');
  const thinkingBudget = tb === undefined || tb === -1 ? null : tb;
  if (logprobs === true) logprobs = 1;
  if (logprobs === false) logprobs = 0;
  if (promptLogprobs === true) promptLogprobs = 1;
  if (promptLogprobs === false) promptLogprobs = 0;

  // _verify_args
  if (n < 1) throw valueError(`n must be at least 1, got ${n}.`);
  if (!(presence >= -2 && presence <= 2)) throw valueError(`presence_penalty must be in [-2, 2], got ${pyFloat(presence)}.`);
  if (!(frequency >= -2 && frequency <= 2)) throw valueError(`frequency_penalty must be in [-2, 2], got ${pyFloat(frequency)}.`);
  if (!Number.isFinite(repetition)) throw valueError(`repetition_penalty must be a finite number, got ${pyFloat(repetition)}.`);
  if (repetition <= 0) throw valueError(`repetition_penalty must be greater than zero, got ${pyFloat(repetition)}.`);
  if (!Number.isFinite(temperature)) throw valueError(`temperature must be a finite number, got ${pyFloat(temperature)}.`, 'temperature');
  if (temperature < 0) throw valueError(`temperature must be non-negative, got ${pyFloat(temperature)}.`, 'temperature');
  if (temperature > 2) throw valueError(`temperature must be in [0, 2], got ${pyFloat(temperature)}.`, 'temperature');
  if (!(topP > 0 && topP <= 1)) throw valueError(`top_p must be in (0, 1], got ${pyFloat(topP)}.`, 'top_p');
  if (topK < -1) throw valueError(`top_k must be 0 (disable), or at least 1, got ${topK}.`);
  if (!(minP >= 0 && minP <= 1)) throw valueError(`min_p must be in [0, 1], got ${pyFloat(minP)}.`);
  if (maxTokensRaw !== null && maxTokensRaw < 1) throw valueError(`max_tokens must be at least 1, got ${maxTokensRaw}.`, 'max_tokens');
  if (minTokens < 0) throw valueError(`min_tokens must be greater than or equal to 0, got ${minTokens}.`);
  if (maxTokensRaw !== null && minTokens > maxTokensRaw) throw valueError(`min_tokens must be less than or equal to max_tokens=${maxTokensRaw}, got ${minTokens}.`);
  if (streamInterval !== null && streamInterval < 1) throw valueError(`stream_interval must be at least 1, got ${streamInterval}.`, 'stream_interval');
  if (logprobs !== null && logprobs !== -1 && logprobs < 0) throw valueError(`logprobs must be non-negative or -1, got ${logprobs}.`, 'logprobs');
  if (promptLogprobs !== null && promptLogprobs !== -1 && promptLogprobs < 0) throw valueError(`prompt_logprobs must be non-negative or -1, got ${promptLogprobs}.`, 'prompt_logprobs');
  if (stop.some((x) => x === '')) throw valueError('stop cannot contain an empty string.');
  if (stop.length > 0 && !detokenize) throw valueError('stop strings are only supported when detokenize is True. Set detokenize=True to use stop.');
  if (badWords !== undefined && (badWords as string[]).some((w) => w === '')) throw valueError(`bad_words cannot contain an empty string. Got bad_words=${pyValue(badWords)}`);

  // Greedy: temperature < _SAMPLING_EPS resets top_p/top_k/min_p; n must be 1.
  if (temperature < 1e-5) {
    topP = 1;
    topK = 0;
    minP = 0;
    if (n > 1) throw valueError(`n must be 1 when using greedy sampling, got ${n}.`);
  }

  // Nested structures validate in their own __post_init__.
  let structured = false;
  const so = get('structured_outputs');
  if (so !== undefined) {
    if (!isObject(so)) throw new SamplingError('Input should be a valid dictionary', 'dict_type', 'structured_outputs');
    const count = ['json', 'regex', 'choice', 'grammar', 'json_object', 'structural_tag'].filter((k) => so[k] !== undefined && so[k] !== null).length;
    if (count > 1) throw valueError(`You can only use one kind of structured outputs constraint but multiple are specified: ${pyValue(so)}`);
    if (count < 1) throw valueError(`You must use one kind of structured outputs constraint but none are specified: ${pyValue(so)}`);
    structured = true;
  }
  let repetitionDetection: VllmSampling['repetition_detection'] = null;
  const rd = get('repetition_detection');
  if (rd !== undefined) {
    if (!isObject(rd)) throw new SamplingError('Input should be a valid dictionary', 'dict_type', 'repetition_detection');
    const max = (rd.max_pattern_size as number | undefined) ?? 0;
    const min = (rd.min_pattern_size as number | undefined) ?? 0;
    const count = (rd.min_count as number | undefined) ?? 0;
    if (max < 0 || min < 0 || min > max)
      throw valueError('max_pattern_size, min_pattern_size must be >=0, with min_pattern_size <= max_pattern_size. Set both to 0 to disable repetitive pattern detection.');
    if (max > 0 && count < 2)
      throw valueError('min_count must be >= 2 to detect repetitive patterns in engine output. If you do not wish to detect repetitive patterns, set max_pattern_size to 0.');
    if (max > 0) repetitionDetection = { max_pattern_size: max, min_pattern_size: min, min_count: count };
  }

  const sampling: VllmSampling = {
    n,
    temperature,
    top_p: topP,
    top_k: topK,
    min_p: minP,
    seed,
    stop_token_ids: stopTokenIds,
    ignore_eos: (get('ignore_eos') as boolean | undefined) ?? false,
    // null (explicit) is resolved by the caller; 0 marks "fill in".
    max_tokens: maxTokensRaw ?? 0,
    min_tokens: minTokens,
    logprobs: logprobs as number | null,
    prompt_logprobs: promptLogprobs as number | null,
    logit_bias: logitBias,
    allowed_token_ids: (get('allowed_token_ids') as number[] | undefined) ?? null,
    repetition_detection: repetitionDetection,
  };
  return {
    sampling,
    detokenize,
    stop,
    structured,
    thinkingBudget,
    logprobTokenIds: (get('logprob_token_ids') as number[] | undefined) ?? null,
    promptLogprobTokenIds: (get('prompt_logprob_token_ids') as number[] | undefined) ?? null,
  };
}

/** Python's repr() of a float value (JSON numbers that are integral print as `N.0`). */
function pyFloat(x: number): string {
  if (!Number.isFinite(x)) return x > 0 ? 'inf' : x < 0 ? '-inf' : 'nan';
  return Number.isInteger(x) ? `${x}.0` : String(x);
}

/**
 * The engine-side checks (InputProcessor.process_inputs: _validate_params -> SamplingParams.verify,
 * data_parallel_rank, _validate_model_inputs), in that order; null when the request passes.
 */
function engineCheck(
  prompt: number[],
  sp: VllmSampling,
  s: VllmSettings,
  extra: { structured: boolean; thinkingBudget: number | null; logprobTokenIds: number[] | null; promptLogprobTokenIds: number[] | null; priority: number; dpRank: string | undefined },
): EngineError | null {
  const V = s.vocabSize;
  const oov = (ids: readonly number[]) => ids.filter((t) => t < 0 || t >= V);
  // _validate_logprobs
  if (sp.logprobs) {
    const k = sp.logprobs === -1 ? V : sp.logprobs;
    if (k > s.maxLogprobs) return new EngineError(`Requested sample logprobs of ${k}, which is greater than max allowed: ${s.maxLogprobs}`, 'logprobs');
  }
  if (extra.logprobTokenIds !== null) {
    const ids = extra.logprobTokenIds;
    if (ids.length > 128) return new EngineError(`Requested logprob_token_ids of length ${ids.length}, which is greater than max allowed: 128`, 'logprob_token_ids');
    const bad = oov(ids);
    if (bad.length > 0) return new EngineError(`token_id(s) ${pyValue(bad)} in logprob_token_ids contain out-of-vocab token ids. Vocabulary size: ${V}`, 'logprob_token_ids');
    if (sp.logprobs !== null && sp.logprobs !== ids.length)
      return new EngineError(
        `When both logprobs and logprob_token_ids are set, logprobs must equal len(logprob_token_ids). Got logprobs=${sp.logprobs}, len(logprob_token_ids)=${ids.length}.`,
        'logprob_token_ids',
      );
  }
  if (sp.prompt_logprobs) {
    const k = sp.prompt_logprobs === -1 ? V : sp.prompt_logprobs;
    if (k > s.maxLogprobs) return new EngineError(`Requested prompt logprobs of ${k}, which is greater than max allowed: ${s.maxLogprobs}`, 'prompt_logprobs');
  }
  // _validate_logit_bias
  if (sp.logit_bias) {
    const bad = oov(Object.keys(sp.logit_bias).map(Number));
    if (bad.length > 0) return new EngineError(`token_id(s) ${pyValue(bad)} in logit_bias contain out-of-vocab token ids. Vocabulary size: ${V}`, 'logit_bias');
  }
  // _validate_stop_token_ids
  {
    const bad = oov(sp.stop_token_ids);
    if (bad.length > 0) return new EngineError(`token_id(s) ${pyValue(bad)} in stop_token_ids contain out-of-vocab token ids. Vocabulary size: ${V}`, 'stop_token_ids');
  }
  // _validate_allowed_token_ids
  if (sp.allowed_token_ids !== null) {
    if (sp.allowed_token_ids.length === 0) return new EngineError('allowed_token_ids is not None and empty!', 'allowed_token_ids');
    if (oov(sp.allowed_token_ids).length > 0) return new EngineError('allowed_token_ids contains out-of-vocab token id!', 'allowed_token_ids');
  }
  // _validate_structured_outputs: a tokens-only server has no tokenizer.
  if (extra.structured) return new EngineError("Structured outputs requires a tokenizer so it can't be used with 'skip_tokenizer_init'");
  if (extra.thinkingBudget !== null)
    return new EngineError('thinking_token_budget is set but reasoning_config is not configured. Please set --reasoning-parser and/or --reasoning-config to use thinking_token_budget.');
  // process_inputs: the data-parallel rank header (one rank here).
  if (extra.dpRank !== undefined && /^\s*[-+]?\d+\s*$/.test(extra.dpRank)) {
    const rank = parseInt(extra.dpRank, 10);
    if (rank !== 0) return new EngineError(`data_parallel_rank ${rank} is out of range [0, 1).`);
  }
  // _validate_prompt_len
  if (prompt.length > s.maxModelLen)
    return new EngineError(
      `The decoder prompt (length ${prompt.length}) is longer than the maximum model length of ${s.maxModelLen}. Make sure that \`max_model_len\` is no smaller than the number of text tokens.`,
    );
  if (prompt.length === s.maxModelLen)
    return new EngineError(
      `The decoder prompt (length ${prompt.length}) plus the number of requested output tokens (at least 1) is longer than the maximum model length of ${s.maxModelLen}. Make sure that \`max_model_len\` is no smaller than the number of text tokens (prompt + requested output tokens).`,
    );
  // _validate_model_input: ids past the vocabulary (vLLM checks this only when it has a tokenizer).
  let maxId = 0;
  for (const t of prompt) if (t > maxId) maxId = t;
  if (maxId > V - 1) return new EngineError(`Token id ${maxId} is out of vocabulary`);
  // The scheduler refuses priorities without priority scheduling.
  if (extra.priority !== 0 && s.schedulingPolicy !== 'priority') return new EngineError(`Got priority ${extra.priority} but Priority scheduling is not enabled.`);
  return null;
}

/**
 * The resolved sampling params of a `sampling_params` object, as a server with these settings
 * runs them for a prompt of `promptLen` tokens (max_tokens defaulted like serve_tokens). Throws a
 * ValidationFailure for params the body schema refuses. For tests and reference answers.
 */
export function resolveSampling(spJson: Record<string, unknown>, promptLen: number, s: Pick<VllmSettings, 'maxModelLen'>): VllmSampling {
  let r;
  try {
    r = samplingFromJson(spJson);
  } catch (err) {
    if (err instanceof SamplingError) throw new ValidationFailure([{ type: err.kind, loc: ['body', 'sampling_params'], msg: err.message, input: spJson }]);
    throw err;
  }
  const sp = r.sampling;
  if (!('max_tokens' in spJson) || sp.max_tokens <= 0) sp.max_tokens = Math.max(0, s.maxModelLen - promptLen);
  return sp;
}
