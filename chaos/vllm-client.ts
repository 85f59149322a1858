// The campaign client's vLLM plug-in (client.ts is the core): the router's
// `POST /inference/v1/generate`, read as a vLLM client would, checking vLLM's framing on the way
// (serving.py `serve_tokens_stream_generator`): every chunk names the logical request
// (`generate-tokens-<id>`), carries one choice of token-id deltas, logprobs exactly when asked,
// usage exactly as `stream_options` asked (continuous: the counts so far on every chunk; final:
// one `{choices: [], usage}` chunk after the finishing one), a finish_reason only on the last
// choice chunk, then `[DONE]`.

import type { ClientFormat, ClientResult, StreamFold, VllmAnswer } from './client.ts';
import type { RequestSpec, UsageMode } from './traffic.ts';

type Obj = Record<string, unknown>;

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const isIdList = (v: unknown): v is number[] => Array.isArray(v) && v.every((t) => typeof t === 'number' && Number.isInteger(t) && t >= 0);

/** vLLM's name for a request: `generate-tokens-<X-Request-Id or request_id>`. */
export function engineId(id: string): string {
  return `generate-tokens-${id}`;
}

/** vLLM's part of the client: one choice of token ids, usage and logprobs as asked. */
export const vllmClient: ClientFormat = {
  name: 'vLLM',
  finishingChunk: 'finishing chunk',
  strict: true,
  readAnswer,
  fold(spec, _inputs, problems) {
    const shape = { logprobs: spec.vllm?.logprobs ?? null, usage: spec.vllm?.usage ?? 'none', promptLength: spec.prompt.length };
    return new VllmStreamAssembler(spec.id, shape, problems);
  },
};

/** A usage object's counts, or the problem with them. */
function usageProblem(u: unknown, prompt: number, completion: number): string | null {
  if (!isObj(u)) return `usage is ${JSON.stringify(u)}, not an object`;
  if (u.prompt_tokens !== prompt || u.completion_tokens !== completion || u.total_tokens !== prompt + completion) {
    return `usage ${JSON.stringify({ prompt_tokens: u.prompt_tokens, completion_tokens: u.completion_tokens, total_tokens: u.total_tokens })}, want prompt ${prompt}, completion ${completion}, total ${prompt + completion}`;
  }
  return null;
}

/**
 * The problem with a finishing choice's weight_versions, or null: spans `{version, start, end}`,
 * contiguous, non-empty, ending at the answer's length, all of `version`. A null, or spans that
 * start after 0, are well-formed here: whether the answer may name only its last attempt's
 * tokens is the trace check's business (spansStart).
 */
export function spansProblem(wv: unknown, n: number, version = 'default'): string | null {
  if (wv === null || wv === undefined) return null;
  if (!Array.isArray(wv) || wv.length === 0) return `weight_versions ${JSON.stringify(wv)} is not a list of spans`;
  let at: number | null = null;
  for (const s of wv) {
    if (!isObj(s) || typeof s.start !== 'number' || typeof s.end !== 'number' || s.start >= s.end || s.start < 0) return `weight_versions span ${JSON.stringify(s)} is malformed`;
    if (s.version !== version) return `weight_versions span ${JSON.stringify(s)} names weights other than ${version}`;
    if (at !== null && s.start !== at) return `weight_versions spans ${JSON.stringify(wv)} are not contiguous`;
    at = s.end;
  }
  if (at !== n) return `weight_versions spans ${JSON.stringify(wv)} end at ${at}, not at the answer's ${n} tokens`;
  return null;
}

/** Where a finishing choice's weight_versions start: 0 when they name every token, null when absent. */
export function spansStart(wv: unknown): number | null {
  if (!Array.isArray(wv) || wv.length === 0 || !isObj(wv[0]) || typeof wv[0].start !== 'number') return null;
  return wv[0].start;
}

/** Folds a vLLM stream's chunks into one answer, checking each on the way. */
export class VllmStreamAssembler implements StreamFold {
  ids: number[] = [];
  logprobs: unknown[] = [];
  finish: unknown = null;
  finished = false;
  usage: Obj | null = null;
  weightVersions: unknown = null;
  /** Chunks with a choice (what a cancel counts). */
  choiceChunks = 0;
  private sawUsageChunk = false;
  private chunks = 0;
  /** Each kind of problem is reported once per stream, at the first chunk that shows it. */
  private readonly reported = new Set<string>();

  constructor(
    private readonly id: string,
    private readonly shape: { logprobs: number | null; usage: UsageMode; promptLength: number },
    private readonly problems: string[],
  ) {}

  /** Only chunks with a choice count toward a cancel (not the final usage chunk). */
  get counted(): number {
    return this.choiceChunks;
  }

  private once(kind: string, message: string): void {
    if (this.reported.has(kind)) return;
    this.reported.add(kind);
    this.problems.push(message);
  }

  absorb(chunk: Obj): void {
    const n = ++this.chunks;
    if (chunk.request_id !== engineId(this.id)) this.once('request_id', `chunk ${n} (the first of the stream to) has request_id ${JSON.stringify(chunk.request_id)}, not ${JSON.stringify(engineId(this.id))}`);
    const choices = chunk.choices;
    if (!Array.isArray(choices)) {
      this.problems.push(`chunk ${n} has no choices list`);
      return;
    }
    if (choices.length === 0) {
      // The usage chunk of include_usage: after the finishing chunk, once.
      if (!this.finished) this.problems.push(`chunk ${n}: a usage-only chunk before the finishing chunk`);
      if (this.shape.usage === 'none') this.problems.push(`chunk ${n}: a usage chunk the client did not ask for`);
      if (this.sawUsageChunk) this.problems.push(`chunk ${n}: a second usage chunk`);
      this.sawUsageChunk = true;
      const p = usageProblem(chunk.usage, this.shape.promptLength, this.ids.length);
      if (p) this.problems.push(`chunk ${n} (final usage): ${p}`);
      this.usage = isObj(chunk.usage) ? chunk.usage : null;
      return;
    }
    if (this.finished || this.sawUsageChunk) this.problems.push(`chunk ${n}: a choice after the finishing chunk`);
    if (choices.length !== 1) this.problems.push(`chunk ${n} has ${choices.length} choices`);
    const c = choices[0];
    if (!isObj(c)) {
      this.problems.push(`chunk ${n}: the choice is not an object`);
      return;
    }
    this.choiceChunks++;
    if (c.index !== 0) this.problems.push(`chunk ${n}: choice index ${JSON.stringify(c.index)}`);
    const finish = c.finish_reason ?? null;
    const ids = c.token_ids;
    if (!isIdList(ids)) {
      this.problems.push(`chunk ${n}: token_ids is not a list of token ids`);
      return;
    }
    // vLLM skips outputs without new tokens, except the finishing one.
    if (ids.length === 0 && finish === null) this.problems.push(`chunk ${n}: no new tokens and no finish`);
    for (const t of ids) this.ids.push(t);
    const lp = c.logprobs;
    if (this.shape.logprobs === null) {
      if (lp !== null && lp !== undefined) this.once('unasked logprobs', `chunk ${n} (the first of the stream to): logprobs though none were asked for`);
    } else if (!isObj(lp) || !Array.isArray(lp.content) || lp.content.length !== ids.length) {
      this.once('logprobs', `chunk ${n} (the first of the stream to): logprobs.content does not hold one entry per token (${ids.length} tokens)`);
    } else for (const e of lp.content) this.logprobs.push(e);
    if (this.shape.usage === 'continuous') {
      const p = usageProblem(chunk.usage, this.shape.promptLength, this.ids.length);
      if (p) this.once('continuous usage', `chunk ${n} (continuous usage, the first wrong chunk of the stream): ${p}`);
    } else if (chunk.usage !== null && chunk.usage !== undefined) this.once('unasked usage', `chunk ${n} (the first of the stream to): usage ${JSON.stringify(chunk.usage)} though the client did not ask for it on every chunk`);
    if (finish !== null) {
      this.finished = true;
      this.finish = finish;
      this.weightVersions = c.weight_versions ?? null;
    } else if (c.weight_versions !== null && c.weight_versions !== undefined) {
      this.problems.push(`chunk ${n}: weight_versions before the finishing chunk`);
    }
  }

  /** The stream ended with [DONE] after the finishing chunk: what the client holds. */
  answer(): VllmAnswer {
    if (this.shape.usage !== 'none' && !this.sawUsageChunk) this.problems.push('no final usage chunk though the client asked for usage');
    return { format: 'vllm', token_ids: this.ids, finish_reason: this.finish, logprobs: this.shape.logprobs === null ? null : this.logprobs, usage: this.usage, weight_versions: this.weightVersions };
  }
}

/** A unary 200 GenerateResponse: one choice of token_ids, named for the logical request. */
function readAnswer(body: unknown, text: string, spec: RequestSpec, r: ClientResult): void {
  const c = isObj(body) && Array.isArray(body.choices) && body.choices.length === 1 && isObj(body.choices[0]) ? body.choices[0] : null;
  if (!isObj(body) || !c || !isIdList(c.token_ids)) {
    r.problems.push(`unary 200 answer without one choice of token_ids: ${text.slice(0, 120)}`);
    return;
  }
  if (body.request_id !== engineId(spec.id)) r.problems.push(`the answer has request_id ${JSON.stringify(body.request_id)}, not ${JSON.stringify(engineId(spec.id))}`);
  if (c.index !== 0) r.problems.push(`the answer's choice has index ${JSON.stringify(c.index)}`);
  const lp = c.logprobs;
  let logprobs: unknown[] | null = null;
  if (isObj(lp) && Array.isArray(lp.content)) logprobs = lp.content;
  else if (lp !== null && lp !== undefined) r.problems.push(`the answer's logprobs ${JSON.stringify(lp).slice(0, 80)} have no content list`);
  r.answer = { format: 'vllm', token_ids: c.token_ids, finish_reason: c.finish_reason ?? null, logprobs, usage: isObj(body.usage) ? body.usage : null, weight_versions: c.weight_versions ?? null };
  r.partialIds = c.token_ids;
}
