// Turning a /generate body into per-sample requests, with SGLang's validation: the same checks,
// in the same order, with messages worded like SGLang's. Pure: no sockets, no clocks.
//
// Two kinds of refusal, because SGLang has two:
// - BodyError: the body does not fit the request schema (FastAPI rejects it before the handler):
//   always a 400 `{"object":"error",...}`, also for stream requests.
// - RequestError: SGLang's ValueError inside the generate handler: a 400 `{"error":{"message"}}`
//   for unary requests, but for stream requests the 200 headers have already gone out, so it
//   becomes an in-band `data: {"error":...}` frame followed by `data: [DONE]`.
//
// The order of the checks is SGLang's (docs/simulator.md cites the source): the input fields
// (io_struct.py GenerateReqInput.normalize_batch_and_arguments), the rids (_init_req_state), then
// per request the prompt (_tokenize_one_request), its length and feature flags
// (_validate_one_request), then the sampling params (SamplingParams.normalize, then .verify).

import { randomUUID } from 'node:crypto';
import type { TextStops } from './detokenizer.ts';
import type { DecodeParams } from './model.ts';
import type { SimTokenizer } from './vocab.ts';

export class BodyError extends Error {}
export class RequestError extends Error {}
/**
 * SGLang's TypeError for a sampling key SamplingParams does not take: the tokenizer manager
 * builds `SamplingParams(**sampling_kwargs)` (tokenizer_manager.py `_create_tokenized_object`)
 * and http_server.py `generate_request` catches only ValueError, so the exception escapes the
 * handler: a unary request gets Starlette's 500, a stream is cut after its 200 headers.
 */
export class SamplingTypeError extends Error {}

/**
 * The keyword arguments SamplingParams takes (SP: the class's fields; the msgspec Struct of 2026
 * also takes its internal fields as keywords). Any other key is a TypeError.
 */
const SAMPLING_FIELDS = new Set([
  'max_new_tokens', 'stop', 'stop_token_ids', 'stop_regex', 'temperature', 'top_p', 'top_k', 'min_p',
  'frequency_penalty', 'presence_penalty', 'repetition_penalty', 'min_new_tokens', 'n', 'json_schema',
  'regex', 'ebnf', 'structural_tag', 'ignore_eos', 'skip_special_tokens', 'spaces_between_special_tokens',
  'no_stop_trim', 'custom_params', 'stream_interval', 'logit_bias', 'sampling_seed',
  'stop_strs', 'stop_regex_strs', 'stop_str_max_len', 'stop_regex_max_len', 'is_normalized',
]);

/**
 * The plain class of 2025 (sampling_params.py `def __init__`, read at 0bebedd8), before
 * `stop_regex` and `sampling_seed` were added: those are a TypeError on such a worker, though a
 * router that knows every supported version lets them through.
 */
const LEGACY_SAMPLING_FIELDS = new Set([...SAMPLING_FIELDS].filter((k) => !['stop_regex', 'sampling_seed', 'stop_strs', 'stop_regex_strs', 'stop_str_max_len', 'stop_regex_max_len', 'is_normalized'].includes(k)));

export interface RequestSettings {
  /** Text mode: text prompts, stop strings and `text` in answers. Otherwise token-only. */
  text: boolean;
  /** The built-in word list or a real tokenizer (sim/vocab.ts). */
  vocab: SimTokenizer;
  vocabSize: number;
  contextLength: number;
  preferred: Record<string, unknown> | null;
  /** SamplingParams of SGLang 2025 (LEGACY_SAMPLING_FIELDS): newer keys are a TypeError. */
  legacySampling?: boolean;
  /** --enable-custom-logit-processor: accept (and ignore) custom_logit_processor. */
  enableCustomLogitProcessor?: boolean;
  /** --enable-return-hidden-states: accept return_hidden_states. */
  enableReturnHiddenStates?: boolean;
}

export interface SampleRequest {
  rid: string;
  /** Position in the answer: batch item × n + sample. */
  index: number;
  /** The batch item (prompt) it samples. */
  item: number;
  promptIds: number[];
  decode: DecodeParams;
  returnLogprob: boolean;
  /**
   * First prompt position with logprobs; the prompt length means none (SGLang's default −1 with
   * return_logprob, and an explicit start equal to the prompt length).
   */
  logprobStart: number;
  topLogprobsNum: number;
  /** token_ids_logprob (null: not asked for): their logprobs at every position. */
  tokenIdsLogprob: number[] | null;
  /** SGLang accepts logprob_start_len > prompt length and then aborts the request in the scheduler. */
  startError: string | null;
  returnTextInLogprobs: boolean;
  /** stop, stop_regex and stop_str_max_len (text mode). */
  stops: TextStops;
  noStopTrim: boolean;
  /** SamplingParams.skip_special_tokens and spaces_between_special_tokens (default true): how `text` is decoded. */
  skipSpecialTokens: boolean;
  spacesBetweenSpecialTokens: boolean;
  streamInterval: number;
  /**
   * The grammar fields the request carried (json_schema, regex, ebnf, structural_tag), or null.
   * Recorded in stats().constraints; the simulated model cannot enforce a grammar.
   */
  constraint: Record<string, unknown> | null;
}

export interface GenerateRequest {
  stream: boolean;
  /** A list answer (batch input or n > 1) rather than a single object. */
  batch: boolean;
  samples: SampleRequest[];
}

const SAMPLING_DEFAULTS = {
  temperature: 1.0,
  top_p: 1.0,
  top_k: -1,
  min_p: 0.0,
  frequency_penalty: 0.0,
  presence_penalty: 0.0,
  repetition_penalty: 1.0,
  min_new_tokens: 0,
  n: 1,
} as const;

/** The constraint fields a request carries, as sent (null: none). */
function grammarFields(sp: Record<string, unknown>): Record<string, unknown> | null {
  const out: Record<string, unknown> = {};
  for (const k of [...GRAMMARS, 'structural_tag']) if (sp[k] !== undefined && sp[k] !== null) out[k] = sp[k];
  return Object.keys(out).length > 0 ? out : null;
}

/** The grammars SamplingParams.verify counts (structural_tag is not among them). */
const GRAMMARS = ['json_schema', 'regex', 'ebnf'] as const;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isInt = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v);

function field<T>(body: Record<string, unknown>, name: string, check: (v: unknown) => v is T, what: string): T | undefined {
  const v = body[name];
  if (v === undefined || v === null) return undefined;
  if (!check(v)) throw new BodyError(`1 validation error for GenerateReqInput\n${name}\n  Input should be ${what} [input_value=${JSON.stringify(v)}]`);
  return v;
}

const isBool = (v: unknown): v is boolean => typeof v === 'boolean';
const isString = (v: unknown): v is string => typeof v === 'string';
const isIntList = (v: unknown): v is number[] => Array.isArray(v) && v.every(isInt);
const isIds = (v: unknown): v is number[] | number[][] => Array.isArray(v) && (isIntList(v) || v.every(isIntList));
const isTextInput = (v: unknown): v is string | string[] => isString(v) || (Array.isArray(v) && v.every(isString));
const isRid = (v: unknown): v is string | string[] => isTextInput(v);
const isSampling = (v: unknown): v is Record<string, unknown> | Record<string, unknown>[] => isObject(v) || (Array.isArray(v) && v.every(isObject));

/** Python's repr() of a str, as SGLang's f-strings print one (`{x!r}`, lists). */
export function pyRepr(s: string): string {
  const quote = s.includes("'") && !s.includes('"') ? '"' : "'";
  let out = quote;
  for (const ch of s) {
    if (ch === '\\') out += '\\\\';
    else if (ch === quote) out += '\\' + ch;
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (ch === '\t') out += '\\t';
    else if (ch < ' ' || ch === '\x7f') out += '\\x' + ch.charCodeAt(0).toString(16).padStart(2, '0');
    else out += ch;
  }
  return out + quote;
}

/** Python's repr() of a list of str or int. */
export const pyList = (xs: readonly (string | number)[]) => '[' + xs.map((x) => (typeof x === 'string' ? pyRepr(x) : String(x))).join(', ') + ']';

/** Parses and validates a /generate body. `inFlight` tells whether a rid is already running. */
export function parseGenerate(raw: unknown, s: RequestSettings, inFlight: (rid: string) => boolean): GenerateRequest {
  if (!isObject(raw)) throw new BodyError('1 validation error for GenerateReqInput\n  Input should be a valid dictionary');
  const text = field(raw, 'text', isTextInput, 'a valid string or list of strings');
  const ids = field(raw, 'input_ids', isIds, 'a valid list of integers or list of lists of integers');
  const embeds = raw.input_embeds ?? undefined;
  const stream = field(raw, 'stream', isBool, 'a valid boolean') ?? false;
  const returnLogprob = field(raw, 'return_logprob', isBool, 'a valid boolean') ?? false;
  const startLen = field(raw, 'logprob_start_len', isInt, 'a valid integer') ?? -1;
  const topNum = field(raw, 'top_logprobs_num', isInt, 'a valid integer') ?? 0;
  const tokenIdsRaw = raw.token_ids_logprob ?? undefined;
  const textInLogprobs = field(raw, 'return_text_in_logprobs', isBool, 'a valid boolean') ?? false;
  // A boolean, or in newest SGLang a mode ("last", "full") or a list of them; false/null: not asked.
  const hiddenStates = raw.return_hidden_states !== undefined && raw.return_hidden_states !== null && raw.return_hidden_states !== false;
  const customProcessor = raw.custom_logit_processor ?? undefined;
  const ridField = field(raw, 'rid', isRid, 'a valid string or list of strings');
  const sampling = field(raw, 'sampling_params', isSampling, 'a valid dictionary or list of dictionaries');

  // io_struct.py _validate_inputs: none of the three, or all three, is an error; two are not.
  if ((text === undefined && ids === undefined && embeds === undefined) || (text !== undefined && ids !== undefined && embeds !== undefined)) {
    throw new RequestError('Either text, input_ids or input_embeds should be provided.');
  }
  // Text decides single-or-batch and drops input_embeds; input_ids, when also given, is what the
  // tokenizer manager serves (it only tokenizes text when input_ids is absent).
  if (ids !== undefined && ids.length === 0) throw new RequestError('input_ids cannot be empty.');
  const embedsOnly = ids === undefined && text === undefined;

  const single = text !== undefined ? typeof text === 'string' : isIntList(ids);
  const items: (number[] | string)[] = embedsOnly
    ? [[]]
    : ids !== undefined ? (isIntList(ids) ? [ids] : (ids as number[][])) : typeof text === 'string' ? [text] : (text as string[]);
  if (items.length === 0) throw new RequestError('input_ids cannot be empty.');

  const params = (i: number): Record<string, unknown> => {
    const sp = Array.isArray(sampling) ? sampling[i] : sampling;
    return { ...(s.preferred ?? {}), ...(sp ?? {}) };
  };
  const n = numberParam(params(0), 'n') ?? 1;
  if (!Number.isInteger(n) || n < 1) throw new RequestError(`n must be a positive integer, got ${n}.`);
  const batch = !single || n > 1;
  const count = items.length * n;

  let rids: string[];
  if (n > 1) rids = Array.from({ length: count }, () => randomUUID().replace(/-/g, ''));
  else if (ridField === undefined) rids = Array.from({ length: count }, () => randomUUID().replace(/-/g, ''));
  else if (typeof ridField === 'string') rids = single ? [ridField] : items.map((_, i) => `${ridField}_${i}`);
  else if (ridField.length !== count) throw new RequestError('The specified rids length mismatch with the batch_size for batch processing.');
  else rids = ridField;
  // io_struct.py _validate_rid_uniqueness, then tokenizer_manager.py _init_req_state.
  const counts = new Map<string, number>();
  for (const rid of rids) counts.set(rid, (counts.get(rid) ?? 0) + 1);
  const repeated = [...counts].filter(([, c]) => c > 1).map(([rid]) => rid);
  if (repeated.length > 0) throw new RequestError(`Duplicate request IDs detected within the request: ${pyList(repeated)}`);
  const originalRids = typeof ridField === 'string' ? [ridField] : (ridField ?? []);
  for (const rid of [...originalRids, ...rids]) if (inFlight(rid)) throw new RequestError(`Duplicate request ID detected: ${rid}`);

  // tokenizer_manager.py _tokenize_one_request: input_embeds needs --disable-radix-cache.
  if (embedsOnly) {
    throw new RequestError(
      'input_embeds is provided while disable_radix_cache is False. Please add `--disable-radix-cache` when you launch the server if you want to use input_embeds as inputs.',
    );
  }

  const tokenIdsFor = (b: number): number[] | null => {
    if (tokenIdsRaw === undefined) return null;
    const v = Array.isArray(tokenIdsRaw) && tokenIdsRaw.length > 0 && tokenIdsRaw.every(Array.isArray) ? (tokenIdsRaw as unknown[])[b] : tokenIdsRaw;
    if (v === undefined || v === null || (Array.isArray(v) && v.length === 0)) return null;
    if (!Array.isArray(v) || !v.every(isInt)) throw new RequestError('token_ids_logprob must be a flat list of integers.');
    for (const id of v) {
      if (id < 0 || id >= s.vocabSize) throw new RequestError(`token_ids_logprob contains out-of-vocabulary token id ${id}; valid range is [0, ${s.vocabSize}).`);
    }
    return v;
  };

  const samples: SampleRequest[] = [];
  items.forEach((item, b) => {
    const promptIds = typeof item === 'string' ? tokenize(item, s) : item;
    if (promptIds.length === 0) throw new RequestError('input_ids cannot be empty.');
    for (const id of promptIds) {
      if (id < 0 || id >= s.vocabSize) throw new RequestError(`The input_ids ${pyList(promptIds)} contains values greater than the vocab size (${s.vocabSize}).`);
    }
    validateLength(promptIds.length, (sampling && (Array.isArray(sampling) ? sampling[b] : sampling))?.max_new_tokens, s.contextLength);
    const tokenIds = tokenIdsFor(b);
    if (hiddenStates && !s.enableReturnHiddenStates) {
      throw new RequestError(
        'The server is not configured to return hidden states. Please set `--return-hidden-states-mode last`, `--return-hidden-states-mode full`, or the legacy `--enable-return-hidden-states` flag.',
      );
    }
    if (customProcessor !== undefined && customProcessor !== '' && !s.enableCustomLogitProcessor) {
      throw new RequestError('The server is not configured to enable custom logit processor. Please set `--enable-custom-logit-processor` to enable this feature.');
    }
    const sp = params(b);
    const resolved = resolveSampling(sp, promptIds.length, s);
    // scheduler.py handle_generate_request: −1 with return_logprob starts at the prompt length
    // (no prompt logprobs); a start past the prompt is an abort with status 400.
    const start = !returnLogprob || startLen === -1 ? promptIds.length : startLen;
    const startError =
      returnLogprob && start > promptIds.length
        ? `req.logprob_start_len=${start} is higher than the number of input tokens len(req.origin_input_ids)=${promptIds.length}. Please use a smaller logprob_start_len.`
        : null;
    for (let j = 0; j < n; j++) {
      const index = b * n + j;
      const decode: DecodeParams = { ...resolved.decode, top_logprobs_num: returnLogprob ? Math.max(0, topNum) : 0 };
      if (returnLogprob && tokenIds) decode.token_ids_logprob = tokenIds;
      samples.push({
        rid: rids[index]!,
        index,
        item: b,
        promptIds,
        decode,
        returnLogprob,
        logprobStart: startError ? promptIds.length : Math.max(0, start),
        topLogprobsNum: returnLogprob ? Math.max(0, topNum) : 0,
        tokenIdsLogprob: returnLogprob ? tokenIds : null,
        startError,
        returnTextInLogprobs: s.text && textInLogprobs,
        stops: resolved.stops,
        noStopTrim: resolved.noStopTrim,
        skipSpecialTokens: resolved.skipSpecialTokens,
        spacesBetweenSpecialTokens: resolved.spacesBetweenSpecialTokens,
        streamInterval: resolved.streamInterval,
        constraint: grammarFields(sp),
      });
    }
  });
  return { stream, batch, samples };
}

function tokenize(text: string, s: RequestSettings): number[] {
  if (!s.text) {
    throw new RequestError(
      'The engine initialized with skip_tokenizer_init=True cannot accept text prompts. Please provide input_ids or re-initialize the engine with skip_tokenizer_init=False.',
    );
  }
  // tokenizer_manager.py _tokenize_texts: self.tokenizer(texts), so HF's default add_special_tokens=True (Llama's BOS).
  return s.vocab.encode(text);
}

function validateLength(promptLen: number, maxNew: unknown, context: number): void {
  if (promptLen >= context) throw new RequestError(`The input (${promptLen} tokens) is longer than the model's context length (${context} tokens).`);
  if (typeof maxNew === 'number' && maxNew + promptLen > context) {
    throw new RequestError(
      `Requested token count exceeds the model's maximum context length of ${context} tokens. You requested a total of ${maxNew + promptLen} tokens: ${promptLen} tokens from the input messages and ${maxNew} tokens for the completion. Please reduce the number of tokens in the input messages or the completion to fit within the limit.`,
    );
  }
}

function numberParam(sp: Record<string, unknown>, name: string): number | undefined {
  const v = sp[name];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number') throw new RequestError(`${name} must be a number, got ${JSON.stringify(v)}.`);
  return v;
}

function stringList(sp: Record<string, unknown>, name: string): string[] {
  const v = sp[name];
  if (v === undefined || v === null) return [];
  if (typeof v === 'string') return [v];
  if (Array.isArray(v) && v.every(isString)) return v;
  throw new RequestError(`${name} must be a string or a list of strings.`);
}

function resolveSampling(sp: Record<string, unknown>, promptLen: number, s: RequestSettings) {
  // SamplingParams(**sampling_kwargs) comes before normalize and verify; Python names the first
  // unexpected keyword in the dict's order.
  const fields = s.legacySampling === true ? LEGACY_SAMPLING_FIELDS : SAMPLING_FIELDS;
  for (const key of Object.keys(sp)) {
    if (!fields.has(key)) throw new SamplingTypeError(`SamplingParams.__init__() got an unexpected keyword argument '${key}'`);
  }
  // Construction then iterates a truthy stop_token_ids (`set(stop_token_ids)` in the plain class,
  // `{int(t) for t in self.stop_token_ids ...}` in the Struct's __post_init__): a number is a
  // TypeError too, before any ValueError of verify.
  const stopIdsArg = sp.stop_token_ids;
  if ((typeof stopIdsArg === 'number' && stopIdsArg !== 0) || stopIdsArg === true) {
    const pyType = typeof stopIdsArg === 'boolean' ? 'bool' : Number.isInteger(stopIdsArg) ? 'int' : 'float';
    throw new SamplingTypeError(`'${pyType}' object is not iterable`);
  }
  const num = (name: keyof typeof SAMPLING_DEFAULTS) => numberParam(sp, name) ?? SAMPLING_DEFAULTS[name];
  let temperature = num('temperature');
  let topK = num('top_k');
  // SamplingParams.__post_init__: a near-zero temperature becomes greedy (top_k 1, temperature
  // 1.0) before verify looks at top_k, so temperature 0 with top_k 0 is accepted.
  if (temperature >= 0 && temperature < 1e-6) {
    temperature = 1.0;
    topK = 1;
  }
  const topP = num('top_p');
  const minP = num('min_p');
  const freq = num('frequency_penalty');
  const presence = num('presence_penalty');
  const repetition = num('repetition_penalty');
  const minNew = num('min_new_tokens');
  // Absent: the class default 128. Explicit null: no budget but the context (SGLang's None).
  const maxNewRaw = 'max_new_tokens' in sp ? sp.max_new_tokens : 128;
  if (maxNewRaw !== null && typeof maxNewRaw !== 'number') throw new RequestError(`max_new_tokens must be an integer, got ${JSON.stringify(maxNewRaw)}.`);
  const maxNew = maxNewRaw;

  // SamplingParams.normalize runs before verify: the tokenizer-dependent stops fail first.
  const stopStrings = stringList(sp, 'stop');
  const stopRegexSources = stringList(sp, 'stop_regex');
  if (!s.text && stopStrings.length > 0) {
    throw new RequestError(`stop=${pyList(stopStrings)} is unavailable when skip_tokenizer_init=True (requires tokenizer to decode tokens to text for matching).`);
  }
  if (!s.text && stopRegexSources.length > 0) {
    throw new RequestError(`stop_regex=${pyList(stopRegexSources)} is unavailable when skip_tokenizer_init=True (requires tokenizer to decode tokens to text for matching).`);
  }
  // (SGLang also refuses min_new_tokens > 0 here in token-only mode; the simulator does not, see
  // docs/simulator.md: continuations carry a reduced min_new_tokens.)

  if (!Number.isFinite(temperature) || temperature < 0) throw new RequestError(`temperature must be a non-negative finite number, got ${temperature}.`);
  if (!(topP > 0 && topP <= 1)) throw new RequestError(`top_p must be in (0, 1], got ${topP}.`);
  if (!(minP >= 0 && minP <= 1)) throw new RequestError(`min_p must be in [0, 1], got ${minP}.`);
  if (topK < 1 && topK !== -1) throw new RequestError(`top_k must be -1 (disable) or at least 1, got ${topK}.`);
  if (!(freq >= -2 && freq <= 2)) throw new RequestError(`frequency_penalty must be in [-2, 2], got ${freq}.`);
  if (!(presence >= -2 && presence <= 2)) throw new RequestError(`presence_penalty must be in [-2, 2], got ${presence}.`);
  if (!(repetition > 0 && repetition <= 2)) throw new RequestError(`repetition_penalty must be in (0, 2] (1.0 = no penalty), got ${repetition}.`);
  if (!(minNew >= 0)) throw new RequestError(`min_new_tokens must be in [0, max_new_tokens], got ${minNew}.`);
  if (maxNew !== null) {
    if (maxNew < 0) throw new RequestError(`max_new_tokens must be at least 0, got ${maxNew}.`);
    if (minNew > maxNew) throw new RequestError(`min_new_tokens must be in [0, max_new_tokens(${maxNew})], got ${minNew}.`);
  }
  const bias = sp.logit_bias;
  let logitBias: Record<string, number> | undefined;
  if (isObject(bias)) {
    for (const [key, value] of Object.entries(bias)) {
      const id = Number(key);
      if (!(Number.isInteger(id) && id >= 0 && id < s.vocabSize)) throw new RequestError(`logit_bias must has keys in [0, ${s.vocabSize - 1}], got ${key}.`);
      if (typeof value !== 'number' || !Number.isFinite(value)) throw new RequestError(`logit_bias values must be numbers, got ${JSON.stringify(value)} for ${key}.`);
    }
    logitBias = bias as Record<string, number>;
  }
  if (GRAMMARS.filter((g) => sp[g] !== undefined && sp[g] !== null).length > 1) throw new RequestError('Only one of regex, json_schema, or ebnf can be set.');

  const stopRegex = stopRegexSources.map((src) => {
    try {
      return { source: src, re: new RegExp(src) };
    } catch (err) {
      throw new RequestError(`Invalid stop_regex ${JSON.stringify(src)}: ${(err as Error).message}`);
    }
  });
  const stopIdsRaw = sp.stop_token_ids;
  if (stopIdsRaw !== undefined && stopIdsRaw !== null && !isIntList(stopIdsRaw)) throw new RequestError('stop_token_ids must be a list of integers.');
  const seed = numberParam(sp, 'sampling_seed');
  const streamInterval = numberParam(sp, 'stream_interval') ?? 1;

  // The scheduler's clamp: the budget never runs past the context.
  const budget = Math.min(maxNew ?? 1 << 30, s.contextLength - promptLen - 1);
  const decode: DecodeParams = {
    max_new_tokens: Math.max(0, budget),
    min_new_tokens: minNew,
    ignore_eos: sp.ignore_eos === true,
    stop_token_ids: stopIdsRaw ?? [],
    temperature,
    top_k: topK,
  };
  if (topP < 1) decode.top_p = topP;
  if (minP > 0) decode.min_p = minP;
  if (logitBias) decode.logit_bias = logitBias;
  if (seed !== undefined) decode.sampling_seed = seed;
  // SamplingParams.normalize: stop_str_max_len counts tokens, encoded without special tokens.
  const maxTokens = stopStrings.reduce((n, stop) => Math.max(n, s.vocab.encode(stop, { addSpecialTokens: false }).length), 0);
  return {
    decode,
    stops: { strings: stopStrings, regex: stopRegex, maxTokens },
    noStopTrim: truthy(sp.no_stop_trim, false),
    skipSpecialTokens: truthy(sp.skip_special_tokens, true),
    spacesBetweenSpecialTokens: truthy(sp.spaces_between_special_tokens, true),
    streamInterval: Math.max(1, Math.floor(streamInterval)),
  };
}

/** A sampling param read as Python reads a value in `if x:` (SamplingParams keeps what it is given); absent or null: the default. */
function truthy(v: unknown, fallback: boolean): boolean {
  if (v === undefined || v === null) return fallback;
  if (Array.isArray(v)) return v.length > 0;
  if (typeof v === 'object') return Object.keys(v).length > 0;
  return Boolean(v);
}
