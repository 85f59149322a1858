// Parsing and validating SGLang's native /generate request body. The router validates what
// SGLang's SamplingParams.verify and GenerateReqInput would refuse, so that a bad request gets
// SGLang's 400 body from the router and is never forwarded (a worker would refuse it anyway,
// and a refused continuation would turn a client mistake into a migration).

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

export type Prompt =
  | { kind: 'input_ids'; ids: number[] }
  | { kind: 'text' }
  | { kind: 'input_embeds' }
  | { kind: 'batch' };

export interface GenerateRequest {
  /** The body as the client sent it; opaque fields pass through untouched. */
  body: JsonObject;
  prompt: Prompt;
  /** Number of prompt tokens when known (token ids), else null. */
  promptLength: number | null;
  stream: boolean;
  rid: string | null;
  sampling: JsonObject;
  /** undefined: absent (worker default applies); null: explicitly unbounded; else the number. */
  maxNewTokens: number | null | undefined;
  minNewTokens: number;
  returnLogprob: boolean;
  logprobStartLen: number;
  topLogprobsNum: number;
}

export class ValidationError extends Error {}

const GRAMMARS = ['json_schema', 'regex', 'ebnf', 'structural_tag'] as const;

function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function isTokenId(v: unknown): v is number {
  return typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= 0x7fffffff;
}

/** A number field of sampling_params: absent or null means "default" (SGLang's rule). */
function num(sp: JsonObject, key: string): number | undefined {
  const v = sp[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || Number.isNaN(v)) throw new ValidationError(`sampling_params.${key} must be a number, got ${JSON.stringify(v)}.`);
  return v;
}

// Integers must be safe integers: beyond 2^53 a JSON number is no longer the one the client
// wrote (1e20 and 100000000000000000001 parse alike), and the router re-serialises the body it
// forwards, so it would silently send the worker a different value. No budget or count is that big.
function int(sp: JsonObject, key: string): number | undefined {
  const v = num(sp, key);
  if (v !== undefined && !Number.isSafeInteger(v)) throw new ValidationError(`sampling_params.${key} must be an integer of at most 2^53 - 1 in size, got ${v}.`);
  return v;
}

function validateSampling(sp: JsonObject): { max: number | null | undefined; min: number } {
  const temperature = num(sp, 'temperature');
  if (temperature !== undefined && (!Number.isFinite(temperature) || temperature < 0)) {
    throw new ValidationError(`temperature must be non-negative, got ${temperature}.`);
  }
  const topP = num(sp, 'top_p');
  if (topP !== undefined && !(topP > 0 && topP <= 1)) throw new ValidationError(`top_p must be in (0, 1], got ${topP}.`);
  const minP = num(sp, 'min_p');
  if (minP !== undefined && !(minP >= 0 && minP <= 1)) throw new ValidationError(`min_p must be in [0, 1], got ${minP}.`);
  const topK = int(sp, 'top_k');
  if (topK !== undefined && !(topK >= 1 || topK === -1)) throw new ValidationError(`top_k must be -1 (disable), or at least 1, got ${topK}.`);
  for (const key of ['frequency_penalty', 'presence_penalty']) {
    const p = num(sp, key);
    if (p !== undefined && !(p >= -2 && p <= 2)) throw new ValidationError(`${key} must be in [-2, 2], got ${p}.`);
  }
  const rep = num(sp, 'repetition_penalty');
  if (rep !== undefined && !(rep > 0 && rep <= 2)) throw new ValidationError(`repetition_penalty must be in (0, 2], got ${rep}.`);
  const n = int(sp, 'n');
  if (n !== undefined && n < 1) throw new ValidationError(`n must be at least 1, got ${n}.`);

  // max_new_tokens: explicit null is meaningful to migration (unbounded), so keep it apart.
  let max: number | null | undefined;
  if (!('max_new_tokens' in sp)) max = undefined;
  else if (sp.max_new_tokens === null) max = null;
  else {
    max = int(sp, 'max_new_tokens');
    if (max !== undefined && max < 0) throw new ValidationError(`max_new_tokens must be at least 0, got ${max}.`);
  }
  const min = int(sp, 'min_new_tokens') ?? 0;
  if (min < 0 || (typeof max === 'number' && min > max)) {
    throw new ValidationError(`min_new_tokens must be in [0, max_new_tokens], got ${min}.`);
  }
  const grammars = GRAMMARS.filter((g) => sp[g] !== undefined && sp[g] !== null);
  if (grammars.length > 1) {
    throw new ValidationError('Only one of regex, json_schema, ebnf, or structural_tag can be set.');
  }
  const stopIds = sp.stop_token_ids;
  if (stopIds !== undefined && stopIds !== null && !(Array.isArray(stopIds) && stopIds.every(isTokenId))) {
    throw new ValidationError('sampling_params.stop_token_ids must be a list of token ids.');
  }
  return { max, min };
}

function optionalInt(body: JsonObject, key: string, fallback: number): number {
  const v = body[key];
  if (v === undefined || v === null) return fallback;
  if (typeof v !== 'number' || !Number.isSafeInteger(v)) throw new ValidationError(`${key} must be an integer of at most 2^53 - 1 in size, got ${JSON.stringify(v)}.`);
  return v;
}

function optionalBool(body: JsonObject, key: string): boolean {
  const v = body[key];
  if (v === undefined || v === null) return false;
  if (typeof v !== 'boolean') throw new ValidationError(`${key} must be a boolean, got ${JSON.stringify(v)}.`);
  return v;
}

function parsePrompt(body: JsonObject): Prompt {
  const given = (['text', 'input_ids', 'input_embeds'] as const).filter((k) => body[k] !== undefined && body[k] !== null);
  if (given.length !== 1) throw new ValidationError('Either text, input_ids or input_embeds should be provided.');
  const key = given[0]!;
  const value = body[key];
  if (key === 'text') {
    if (typeof value === 'string') return { kind: 'text' };
    if (Array.isArray(value) && value.length > 0 && value.every((t) => typeof t === 'string')) return { kind: 'batch' };
    throw new ValidationError('text must be a string or a non-empty list of strings.');
  }
  if (key === 'input_embeds') {
    if (!Array.isArray(value) || value.length === 0) throw new ValidationError('input_embeds must be a non-empty list.');
    return { kind: 'input_embeds' };
  }
  if (!Array.isArray(value) || value.length === 0) throw new ValidationError('input_ids cannot be empty.');
  if (Array.isArray(value[0])) {
    if (!value.every((row) => Array.isArray(row) && row.length > 0 && row.every(isTokenId))) {
      throw new ValidationError('input_ids must be a list of token ids or a list of non-empty lists of token ids.');
    }
    return { kind: 'batch' };
  }
  if (!value.every(isTokenId)) throw new ValidationError('input_ids must be a list of non-negative integer token ids.');
  return { kind: 'input_ids', ids: value as number[] };
}

/** Parse a /generate body (already JSON-decoded). Throws ValidationError with SGLang's wording. */
export function parseGenerateRequest(raw: unknown): GenerateRequest {
  if (!isObject(raw)) throw new ValidationError('The request body must be a JSON object.');
  const body = raw;
  const prompt = parsePrompt(body);

  const spRaw = body.sampling_params;
  let sampling: JsonObject;
  if (spRaw === undefined || spRaw === null) sampling = {};
  else if (isObject(spRaw)) sampling = spRaw;
  else if (Array.isArray(spRaw) && prompt.kind === 'batch' && spRaw.every(isObject)) sampling = {};
  else throw new ValidationError('sampling_params must be an object.');
  const batchParams = Array.isArray(spRaw) ? (spRaw as JsonObject[]) : [sampling];
  let budget = { max: undefined as number | null | undefined, min: 0 };
  for (const sp of batchParams) budget = validateSampling(sp);

  const rid = body.rid;
  if (rid !== undefined && rid !== null && typeof rid !== 'string' && !(prompt.kind === 'batch' && Array.isArray(rid))) {
    throw new ValidationError('rid must be a string.');
  }
  if (typeof rid === 'string' && (rid.length === 0 || rid.length > 256)) throw new ValidationError('rid must be 1 to 256 characters.');

  const promptLength = prompt.kind === 'input_ids' ? prompt.ids.length : null;
  const returnLogprob = optionalBool(body, 'return_logprob');
  const logprobStartLen = optionalInt(body, 'logprob_start_len', -1);
  if (logprobStartLen < -1) throw new ValidationError(`logprob_start_len must be -1 or non-negative, got ${logprobStartLen}.`);
  if (returnLogprob && promptLength !== null && logprobStartLen >= promptLength) {
    throw new ValidationError(`logprob_start_len (${logprobStartLen}) is larger than the number of input tokens (${promptLength}).`);
  }
  const topLogprobsNum = optionalInt(body, 'top_logprobs_num', 0);
  if (topLogprobsNum < 0) throw new ValidationError(`top_logprobs_num must be non-negative, got ${topLogprobsNum}.`);

  return {
    body,
    prompt,
    promptLength,
    stream: optionalBool(body, 'stream'),
    rid: typeof rid === 'string' ? rid : null,
    sampling,
    maxNewTokens: budget.max,
    minNewTokens: budget.min,
    returnLogprob,
    logprobStartLen,
    topLogprobsNum,
  };
}
