// Reading SGLang's native /generate body: only what the router needs to admit a request and to
// continue it (the prompt's kind and ids, stream, rid, the budget, the logprob options, and the
// sampling values admission reads). Everything else is the worker's to judge, and its answer
// reaches the client as the worker wrote it.
//
// Three outcomes, after what SGLang itself does with a body (docs/sglang-fidelity.md):
// - MalformedBody: a field the router reads has a type FastAPI's validation of GenerateReqInput
//   refuses for certain (rid: 5, stream: {}, input_ids: "x", ...). The router answers SGLang's
//   400 {"object": "error", ..., "type": "Bad Request"} itself, as the worker would.
// - `unparsed` set: the router cannot use a value it needs (max_new_tokens "x", an empty prompt,
//   a temperature SGLang would refuse, a number that would not survive re-serialisation, a
//   value pydantic might coerce, ...). It never refuses these: the body goes to one worker as the
//   client wrote it, the worker answers, and the request never migrates.
// - otherwise: a request the router understands (and admission decides whether it may migrate).

import { validationMessage, type PydanticError } from './errors.ts';

import type { FormatRequest, Json, JsonObject } from '../../core/types.ts';
import type { Tokenizer } from '../../tokenizer/types.ts';
import { isObject } from '../../core/json.ts';

export type { Json, JsonObject };

export type Prompt = FormatRequest['prompt'];

/** SGLang's /generate request: the neutral fields (FormatRequest: `rid` is the body's rid when it
 * is a string: a single request's, or the prefix of a batch's rids) and SGLang's own. */
export interface GenerateRequest extends FormatRequest {
  logprobStartLen: number;
  topLogprobsNum: number;
  /** The model's tokenizer, when the router has it (--tokenizer): Baton can render `text`. */
  tokenizer?: Tokenizer | null;
  /** The client sent `text`, which Baton tokenized: every chunk's `text` is Baton's. */
  textPrompt?: boolean;
  /**
   * The body's bytes as the client sent them, when the router has them: attempt 0's body is
   * these bytes with the rid and stream appended (continuation.ts), not a re-serialisation.
   * Null when the router changed the body (a text prompt it tokenized).
   */
  raw: Buffer | null;
}

/** A body FastAPI's validation would refuse: the router answers SGLang's 400 with these errors. */
export class MalformedBody extends Error {
  constructor(readonly errors: PydanticError[]) {
    super(validationMessage(errors));
  }
}

const GRAMMARS = ['json_schema', 'regex', 'ebnf', 'structural_tag'] as const;
/** SamplingParams treats a temperature below this as greedy (sampling_params.py). */
const SAMPLING_EPS = 1e-6;

// --- pydantic's lax rules, for the fields the router reads ------------------------------------
// 'ok': the plain JSON type. 'coercible': pydantic's lax mode may convert it (the router does not
// guess how: the worker decides). 'bad': pydantic refuses it whatever happens.

type Verdict = 'ok' | 'coercible' | 'bad';
const BOOL_WORDS = new Set(['0', 'off', 'f', 'false', 'n', 'no', '1', 'on', 't', 'true', 'y', 'yes']);

function boolVerdict(v: unknown): Verdict {
  if (typeof v === 'boolean') return 'ok';
  if (typeof v === 'number') return v === 0 || v === 1 ? 'coercible' : 'bad';
  if (typeof v === 'string') return BOOL_WORDS.has(v.trim().toLowerCase()) ? 'coercible' : 'bad';
  return 'bad';
}

function intVerdict(v: unknown): Verdict {
  if (typeof v === 'number') return Number.isInteger(v) ? (Number.isSafeInteger(v) ? 'ok' : 'coercible') : 'bad';
  if (typeof v === 'boolean') return 'coercible';
  if (typeof v === 'string') return /^\s*[+-]?\d+(\.0*)?\s*$/.test(v) ? 'coercible' : 'bad';
  return 'bad';
}

function boolError(loc: (string | number)[], v: unknown): PydanticError {
  return typeof v === 'string' || typeof v === 'number'
    ? { type: 'bool_parsing', loc, msg: 'Input should be a valid boolean, unable to interpret input', input: v }
    : { type: 'bool_type', loc, msg: 'Input should be a valid boolean', input: v };
}

function intError(loc: (string | number)[], v: unknown): PydanticError {
  if (typeof v === 'number') return { type: 'int_from_float', loc, msg: 'Input should be a valid integer, got a number with a fractional part', input: v };
  if (typeof v === 'string') return { type: 'int_parsing', loc, msg: 'Input should be a valid integer, unable to parse string as an integer', input: v };
  return { type: 'int_type', loc, msg: 'Input should be a valid integer', input: v };
}

const stringError = (loc: (string | number)[], v: unknown): PydanticError => ({ type: 'string_type', loc, msg: 'Input should be a valid string', input: v });
const listError = (loc: (string | number)[], v: unknown): PydanticError => ({ type: 'list_type', loc, msg: 'Input should be a valid list', input: v });
const dictError = (loc: (string | number)[], v: unknown): PydanticError => ({ type: 'dict_type', loc, msg: 'Input should be a valid dictionary', input: v });

/**
 * A field's type as pydantic judges it: the verdict, and the error pydantic reports when the
 * verdict is 'bad'. Two functions, so that a field that passes (every field of nearly every
 * request) builds no error object: the error is made only when a body is refused.
 */
interface Member {
  name: string;
  verdict: (v: unknown) => Verdict;
  error: (v: unknown, loc: (string | number)[]) => PydanticError;
}

const BOOL: Member = { name: 'bool', verdict: boolVerdict, error: (v, loc) => boolError(loc, v) };
const INT: Member = { name: 'int', verdict: intVerdict, error: (v, loc) => intError(loc, v) };
const STR: Member = { name: 'str', verdict: (v) => (typeof v === 'string' ? 'ok' : 'bad'), error: (v, loc) => stringError(loc, v) };
const DICT: Member = { name: 'dict[str,any]', verdict: (v) => (isObject(v) ? 'ok' : 'bad'), error: (v, loc) => dictError(loc, v) };

/** A list of items judged one by one: the worst verdict; the error is the first bad item's. */
const listOf = (m: Member): Member => ({
  name: `list[${m.name}]`,
  verdict: (v) => {
    if (!Array.isArray(v)) return 'bad';
    let verdict: Verdict = 'ok';
    for (let i = 0; i < v.length; i++) {
      const r = m.verdict(v[i]);
      if (r === 'bad') return 'bad';
      if (r === 'coercible') verdict = 'coercible';
    }
    return verdict;
  },
  error: (v, loc) => {
    if (Array.isArray(v)) for (let i = 0; i < v.length; i++) if (m.verdict(v[i]) === 'bad') return m.error(v[i], [...loc, i]);
    return listError(loc, v);
  },
});
const INT_LIST = listOf(INT);

/**
 * An `Optional[Union[...]]` field of GenerateReqInput: null/absent is fine; otherwise the best
 * verdict over the members, and, when every member refuses, pydantic's error for each (its loc
 * names the member, as pydantic's does for a union).
 */
function unionField(body: JsonObject, key: string, members: Member[], errors: PydanticError[], optional = true): Verdict {
  const v = body[key];
  if (v === undefined) return 'ok';
  if (v === null) {
    if (optional) return 'ok';
    errors.push(members[0]!.error(v, ['body', key]));
    return 'bad';
  }
  let best: Verdict = 'bad';
  for (const m of members) {
    const r = m.verdict(v);
    if (r === 'ok') return 'ok';
    if (r === 'coercible') best = 'coercible';
  }
  if (best === 'coercible') return 'coercible';
  for (const m of members) errors.push(m.error(v, members.length > 1 ? ['body', key, m.name] : ['body', key]));
  return 'bad';
}

// --- sampling values admission and continuation read ---------------------------------------

// Per-request code here makes no named closures (a `const f = () => ...` inside a function): the
// router runs through tsx, whose esbuild transform keeps function names, and each one costs a
// defineProperty call (~0.3 µs) every time it is created. Helpers are module functions instead.

/** A sampling value as a finite number, undefined when absent or null, 'bad' otherwise. */
function num(sp: JsonObject, key: string): number | undefined | 'bad' {
  const v = sp[key];
  if (v === undefined || v === null) return undefined;
  return typeof v === 'number' && Number.isFinite(v) ? v : 'bad';
}

const SAMPLING_RANGES: [string, (x: number) => boolean][] = [
  ['temperature', (x) => x >= 0],
  ['top_p', (x) => x > 0 && x <= 1],
  ['min_p', (x) => x >= 0 && x <= 1],
  ['frequency_penalty', (x) => x >= -2 && x <= 2],
  ['presence_penalty', (x) => x >= -2 && x <= 2],
  ['repetition_penalty', (x) => x > 0 && x <= 2],
];

/** Why a sampling_params object holds a value the router cannot use, or null. */
function samplingProblem(sp: JsonObject): string | null {
  for (const [key, ok] of SAMPLING_RANGES) {
    const v = num(sp, key);
    if (v === 'bad' || (v !== undefined && !ok(v))) return `sampling_params.${key} is ${JSON.stringify(sp[key])}`;
  }
  const temperature = num(sp, 'temperature');
  const topK = num(sp, 'top_k');
  // Greedy sampling sets top_k itself before the check (sampling_params.py), so any top_k goes.
  const greedy = typeof temperature === 'number' && temperature < SAMPLING_EPS;
  if (topK === 'bad' || (topK !== undefined && !Number.isInteger(topK)) || (topK !== undefined && !greedy && !(topK >= 1 || topK === -1))) {
    return `sampling_params.top_k is ${JSON.stringify(sp.top_k)}`;
  }
  const n = num(sp, 'n');
  if (n === 'bad' || (n !== undefined && !(Number.isSafeInteger(n) && n >= 1))) return `sampling_params.n is ${JSON.stringify(sp.n)}`;
  const seed = sp.sampling_seed;
  if (seed !== undefined && seed !== null && !(typeof seed === 'number' && Number.isSafeInteger(seed))) return `sampling_params.sampling_seed is ${JSON.stringify(seed)}`;
  let grammars = 0;
  for (const g of GRAMMARS) if (sp[g] !== undefined && sp[g] !== null) grammars++;
  if (grammars > 1) return 'more than one of regex, json_schema, ebnf, structural_tag';
  return null;
}

// --- sampling keys SGLang takes ------------------------------------------------------------
// The tokenizer manager builds `SamplingParams(**{**preferred_sampling_params, **sampling_params})`
// (tokenizer_manager.py `_create_tokenized_object`); a key SamplingParams does not take raises a
// TypeError there, which http_server.py `generate_request` does not catch (it catches ValueError):
// a unary request gets Starlette's 500, a stream is cut after its 200 headers. Every worker fails
// such a request the same way, so the router refuses it before any worker sees it.
//
// The keys: the union of SamplingParams' parameters over the SGLang versions Baton supports (a key
// any of them takes passes), from python/sglang/srt/sampling/sampling_params.py:
// - the plain class of 2025 (`def __init__`, read at 0bebedd8): max_new_tokens ... logit_bias;
//   later plain versions add stop_regex and sampling_seed;
// - the msgspec Struct of 2026 (kw_only, read at 00c17caf): the same API fields, and its internal
//   fields, which its generated __init__ takes as keywords too.
const SAMPLING_FIELDS: ReadonlySet<string> = new Set([
  'max_new_tokens', 'stop', 'stop_token_ids', 'stop_regex', 'temperature', 'top_p', 'top_k', 'min_p',
  'frequency_penalty', 'presence_penalty', 'repetition_penalty', 'min_new_tokens', 'n', 'json_schema',
  'regex', 'ebnf', 'structural_tag', 'ignore_eos', 'skip_special_tokens', 'spaces_between_special_tokens',
  'no_stop_trim', 'custom_params', 'stream_interval', 'logit_bias', 'sampling_seed',
  // msgspec-era internal fields (stop/stop_regex are copied into them by __post_init__).
  'stop_strs', 'stop_regex_strs', 'stop_str_max_len', 'stop_regex_max_len', 'is_normalized',
]);

/**
 * SGLang's TypeError for the first sampling key SamplingParams does not take (Python names the
 * first unexpected keyword, in the dict's order), or for a number as stop_token_ids, or null. The wording is the plain class's
 * (`SamplingParams.__init__() got an unexpected keyword argument 'max_tokens'`); the msgspec
 * Struct says `Unexpected keyword argument 'max_tokens'`.
 */
export function unknownSamplingKey(sp: unknown): string | null {
  const list = Array.isArray(sp) ? sp : [sp];
  for (const one of list) {
    if (!isObject(one)) continue;
    for (const key in one) {
      if (!SAMPLING_FIELDS.has(key)) return `SamplingParams.__init__() got an unexpected keyword argument '${key}'`;
    }
    // Construction then iterates a truthy stop_token_ids (`set(stop_token_ids)` in the plain
    // class, a set comprehension in the Struct's __post_init__): a number is a TypeError too.
    const stopIds = one.stop_token_ids;
    if ((typeof stopIds === 'number' && stopIds !== 0) || stopIds === true) {
      return `'${typeof stopIds === 'boolean' ? 'bool' : Number.isInteger(stopIds) ? 'int' : 'float'}' object is not iterable`;
    }
  }
  return null;
}

/**
 * What spaces this request's frames (the stall deadline, stall-watch.ts): its stream_interval
 * (SGLang reads `req.sampling_params.stream_interval or <the server's>`: 0 and null fall back),
 * and in text mode its stop strings, whose prefix holds frames back (schedule_batch.py
 * `check_match_stop_str_prefix`) for at most the longest one's tokens, which its characters bound.
 */
function framingOf(sp: JsonObject): { streamInterval: number | null; heldTokens: number } {
  const k = sp.stream_interval;
  const streamInterval = typeof k === 'number' && Number.isFinite(k) && k >= 1 ? Math.ceil(k) : null;
  let held = 0;
  const stop = sp.stop;
  if (typeof stop === 'string') held = stop.length;
  else if (Array.isArray(stop)) for (const x of stop) if (typeof x === 'string' && x.length > held) held = x.length;
  return { streamInterval, heldTokens: held };
}

/** The budget: max_new_tokens and min_new_tokens, or why the router cannot use them. */
function budgetOf(sp: JsonObject): { max: number | null | undefined; min: number; problem: string | null } {
  let max: number | null | undefined;
  if (!('max_new_tokens' in sp)) max = undefined;
  else if (sp.max_new_tokens === null) max = null;
  else if (typeof sp.max_new_tokens === 'number' && Number.isSafeInteger(sp.max_new_tokens) && sp.max_new_tokens >= 0) max = sp.max_new_tokens;
  else return { max: undefined, min: 0, problem: `sampling_params.max_new_tokens is ${JSON.stringify(sp.max_new_tokens)}` };
  const m = sp.min_new_tokens;
  if (m === undefined || m === null) return { max, min: 0, problem: null };
  if (typeof m === 'number' && Number.isSafeInteger(m) && m >= 0 && (typeof max !== 'number' || m <= max)) return { max, min: m, problem: null };
  return { max, min: 0, problem: `sampling_params.min_new_tokens is ${JSON.stringify(m)}` };
}

// --- the prompt --------------------------------------------------------------------------------

const isTokenId = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;

/**
 * The prompt as SGLang reads it (io_struct.py `_validate_inputs`, `_determine_batch_size`;
 * tokenizer_manager.py takes input_ids before text): `text` with `input_ids` is served from the
 * ids. Returns the prompt, or why the router cannot use it (SGLang answers those itself).
 */
function unusable(problem: string): { prompt: Prompt; problem: string | null } {
  return { prompt: { kind: 'text' }, problem };
}

function promptOf(body: JsonObject): { prompt: Prompt; problem: string | null } {
  const text = body.text;
  const ids = body.input_ids;
  const embeds = body.input_embeds;
  const hasText = text !== undefined && text !== null;
  const hasIds = ids !== undefined && ids !== null;
  const hasEmbeds = embeds !== undefined && embeds !== null;
  if (!hasText && !hasIds && !hasEmbeds) return unusable('no text, input_ids or input_embeds');
  if (hasText && hasIds && hasEmbeds) return unusable('text, input_ids and input_embeds together');
  if (hasIds) {
    const list = ids as Json[];
    if (list.length === 0) return unusable('input_ids is empty');
    const batchIds = Array.isArray(list[0]);
    if (hasText && (typeof text === 'string') === batchIds) return unusable('text and input_ids differ in batch shape');
    if (batchIds) return { prompt: { kind: 'batch' }, problem: null };
    // Ids the router cannot replay exactly (or that would make every worker fail in turn: a
    // negative id is never a token) are the worker's to refuse, on one worker.
    if (!list.every(isTokenId)) return unusable('input_ids holds a value that is not a token id');
    return { prompt: { kind: 'input_ids', ids: list as number[] }, problem: null };
  }
  if (hasText) return { prompt: typeof text === 'string' ? { kind: 'text' } : { kind: 'batch' }, problem: null };
  if (!Array.isArray(embeds) || embeds.length === 0 || !Array.isArray(embeds[0])) return unusable('input_embeds is not a list of lists');
  return { prompt: Array.isArray((embeds[0] as Json[])[0]) ? { kind: 'batch' } : { kind: 'input_embeds' }, problem: null };
}

/** The fields the router reads, their types as GenerateReqInput declares them, and whether None is allowed. */
const FIELDS: [string, Member[], boolean][] = [
  ['rid', [STR, listOf(STR)], true],
  ['text', [listOf(STR), STR], true],
  ['input_ids', [listOf(INT_LIST), INT_LIST], true],
  ['sampling_params', [listOf(DICT), DICT], true],
  ['return_logprob', [listOf(BOOL), BOOL], true],
  ['logprob_start_len', [INT_LIST, INT], true],
  ['top_logprobs_num', [INT_LIST, INT], true],
  // `stream: bool = False`: not Optional, so an explicit null is refused too.
  ['stream', [BOOL], false],
];

/** A single request's field that is a list (only a batch's may be). */
function single(body: JsonObject, key: string, prompt: Prompt, problems: string[]): Json | undefined {
  const v = body[key];
  if (Array.isArray(v) && prompt.kind !== 'batch') problems.push(`${key} is a list for a single prompt`);
  return v;
}

export interface ParseOptions {
  /** The body holds a number JSON.parse cannot keep exactly (an integer beyond 2^53, 1e999). */
  lossyNumbers?: boolean;
  /** The bytes `raw` was parsed from (the client's body), kept for attempt 0 (GenerateRequest.raw). */
  raw?: Buffer;
}

/**
 * Read a /generate body (already JSON-decoded). Throws MalformedBody only where FastAPI would
 * refuse the body; any other problem the router has with it is recorded in `unparsed`.
 */
export function parseGenerateRequest(raw: unknown, opts: ParseOptions = {}): GenerateRequest {
  if (!isObject(raw)) {
    throw new MalformedBody([{ type: 'dataclass_type', loc: ['body'], msg: 'Input should be a dictionary or an instance of GenerateReqInput', input: raw, ctx: { class_name: 'GenerateReqInput' } }]);
  }
  const body = raw;
  const errors: PydanticError[] = [];
  const problems: string[] = [];
  for (const [key, members, optional] of FIELDS) {
    if (unionField(body, key, members, errors, optional) === 'coercible') problems.push(`${key} is ${JSON.stringify(body[key])}, which only pydantic's coercion could read`);
  }
  if (errors.length > 0) throw new MalformedBody(errors);

  if (opts.lossyNumbers) problems.push('the body holds a number that would not survive re-serialisation');

  const { prompt, problem: promptProblem } = problems.length > 0 && problems.some((p) => p.startsWith('input_ids') || p.startsWith('text')) ? { prompt: { kind: 'text' } as Prompt, problem: null } : promptOf(body);
  if (promptProblem) problems.push(promptProblem);

  const spRaw = body.sampling_params;
  let sampling: JsonObject = {};
  let budget = { max: undefined as number | null | undefined, min: 0, problem: null as string | null };
  if (isObject(spRaw)) {
    sampling = spRaw;
    budget = budgetOf(spRaw);
    if (budget.problem) problems.push(budget.problem);
    const sp = samplingProblem(spRaw);
    if (sp) problems.push(sp);
  } else if (Array.isArray(spRaw) && prompt.kind !== 'batch') {
    problems.push('sampling_params is a list for a single prompt');
  }

  const rid = single(body, 'rid', prompt, problems);
  const returnLogprob = single(body, 'return_logprob', prompt, problems) === true;
  const startLen = single(body, 'logprob_start_len', prompt, problems);
  const topNum = single(body, 'top_logprobs_num', prompt, problems);

  return {
    body,
    prompt,
    promptLength: prompt.kind === 'input_ids' ? prompt.ids.length : null,
    stream: body.stream === true,
    rid: typeof rid === 'string' ? rid : null,
    sampling,
    maxNewTokens: budget.max,
    minNewTokens: budget.min,
    returnLogprob,
    logprobStartLen: typeof startLen === 'number' && Number.isSafeInteger(startLen) ? startLen : -1,
    topLogprobsNum: typeof topNum === 'number' && Number.isSafeInteger(topNum) ? topNum : 0,
    unparsed: problems.length > 0 ? problems.join('; ') : null,
    samples: typeof sampling.n === 'number' && Number.isSafeInteger(sampling.n) && sampling.n > 1 ? sampling.n : 1,
    raw: opts.raw ?? null,
    refusal: unknownSamplingKey(spRaw),
    framing: framingOf(sampling),
  };
}

/**
 * The rids a request holds at a worker, as SGLang names them (io_struct.py `_normalize_rid`):
 * a single request's rid; a batch's list of rids, or `<rid>_<i>` for each of its
 * batch × n items when the rid is one string. Empty when the worker makes them up (no rid).
 */
export function workerRids(req: GenerateRequest): string[] {
  const rid = req.body.rid;
  if (req.prompt.kind !== 'batch' && !(typeof req.sampling.n === 'number' && req.sampling.n > 1)) return typeof rid === 'string' ? [rid] : [];
  if (Array.isArray(rid)) return rid.filter((r): r is string => typeof r === 'string');
  if (typeof rid !== 'string') return [];
  const size = batchSize(req.body);
  const n = typeof req.sampling.n === 'number' && Number.isSafeInteger(req.sampling.n) && req.sampling.n > 1 ? req.sampling.n : 1;
  if (size === null || size * n > 100_000) return [];
  return Array.from({ length: size * n }, (_, i) => `${rid}_${i}`);
}

function batchSize(body: JsonObject): number | null {
  for (const k of ['text', 'input_ids', 'input_embeds']) {
    const v = body[k];
    if (v === undefined || v === null) continue;
    if (typeof v === 'string') return 1;
    if (Array.isArray(v)) return k === 'text' ? v.length : Array.isArray(v[0]) ? (k === 'input_embeds' && !Array.isArray((v[0] as Json[])[0]) ? 1 : v.length) : 1;
    return null;
  }
  return null;
}
