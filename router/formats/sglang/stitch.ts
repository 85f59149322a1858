// Stitching the attempts of one logical request into one SGLang answer. The client must not be
// able to tell that a migration happened: output_ids and output logprobs are concatenated across
// attempts, the counters and id are the logical request's, the prompt-side logprobs and cache
// hits come from the attempt that prefilled the original prompt, and a `length` finish names the
// original budget (a continuation's worker only knows the remainder it was asked for).
import type { Json, JsonObject } from './request.ts';
import { appendAll, isObject } from '../../core/json.ts';
import { SglangDetokenizer, type TextFinish } from './detokenize.ts';

/** Output-side lists that SGLang extends per token (and slices in incremental mode). */
const OUTPUT_LISTS = ['output_token_logprobs', 'output_top_logprobs', 'output_token_ids_logprobs'] as const;
/** Prompt-side lists: the client keeps attempt 0's; a continuation's cover replayed tokens too. */
const INPUT_LISTS = ['input_token_logprobs', 'input_top_logprobs', 'input_token_ids_logprobs'] as const;

type OutputList = (typeof OUTPUT_LISTS)[number];

/**
 * P/D: the prefill leg's input logprobs in front of the decode leg's, in every chunk that carries
 * them, as sgl-model-gateway does (pd_router.rs `merge_logprobs_in_json` for a unary answer,
 * `merge_streaming_logprobs` for each stream chunk). The gateway merges input_token_logprobs only;
 * Baton merges input_top_logprobs and input_token_ids_logprobs the same way, so the answer equals
 * an aggregated worker's whatever the client asked (SGLang's decode leg computes no prompt
 * logprobs: its lists are empty).
 */
export function mergePrefillInput(prefill: JsonObject, chunk: JsonObject): void {
  const meta = chunk.meta_info;
  if (!isObject(meta)) return;
  for (const key of INPUT_LISTS) {
    const p = prefill[key];
    const d = meta[key];
    if (Array.isArray(p) && Array.isArray(d)) meta[key] = d.length === 0 ? p : p.concat(d);
  }
}

/**
 * Counters the router does not own that grow with an attempt's output: the client sees the sum
 * over attempts (each attempt's worker counts only its own tokens). See docs/trace-rows.md,
 * "meta_info keys across a migration", for every key.
 */
export const SUMMED_COUNTERS = ['reasoning_tokens', 'num_retractions', 'spec_verify_ct', 'spec_accepted_tokens'] as const;

export function metaOf(chunk: JsonObject): JsonObject {
  const m = chunk.meta_info;
  return isObject(m) ? m : {};
}

export function finishReasonOf(chunk: JsonObject): JsonObject | null {
  const f = metaOf(chunk).finish_reason;
  return isObject(f) ? f : null;
}

/** The output of one attempt, as far as it got. */
export class AttemptOutput {
  ids: number[] = [];
  lists: Partial<Record<OutputList, Json[]>> = {};
  /** How many of this attempt's tokens the client has been sent (incremental client mode). */
  sent = 0;
  completionTokens = 0;
  cachedTokens: number | null = null;
  input: Partial<Record<(typeof INPUT_LISTS)[number], Json>> = {};
  sawText = false;
  /** The latest value of each summed counter this attempt reported (cumulative per attempt). */
  counters: Partial<Record<(typeof SUMMED_COUNTERS)[number], number>> = {};
  /** meta_info.weight_version, as the worker reported it. */
  weightVersion: string | null = null;
  /** Text mode (a worker without --skip-tokenizer-init): the attempt's text so far. */
  text = '';
  textSent = 0;

  /** `incremental` is the worker's probed mode; null (unknown) is learnt from the chunks. */
  constructor(
    public incremental: boolean | null,
    readonly replayed: number,
  ) {}

  /** Take in one parsed chunk of this attempt (cumulative: replaces; incremental: appends). */
  absorb(chunk: JsonObject): void {
    const ids = chunk.output_ids;
    const meta = metaOf(chunk);
    if (typeof chunk.text === 'string') this.sawText = true;
    if (this.incremental === null && Array.isArray(ids) && typeof meta.completion_tokens === 'number') {
      // A cumulative chunk carries every output token so far; a delta fewer than the count.
      // The first chunk looks the same either way, and replacing equals appending there.
      if (ids.length < meta.completion_tokens) this.incremental = true;
      else if (this.ids.length > 0) this.incremental = false;
    }
    const append = this.incremental === true;
    if (typeof chunk.text === 'string') this.text = append ? this.text + chunk.text : chunk.text;
    if (Array.isArray(ids)) {
      if (append) for (const t of ids) this.ids.push(t as number);
      else this.ids = ids as number[];
    }
    for (const key of OUTPUT_LISTS) {
      const v = meta[key];
      if (!Array.isArray(v)) continue;
      if (append) appendAll((this.lists[key] ??= []), v);
      else this.lists[key] = v;
    }
    for (const key of INPUT_LISTS) if (meta[key] !== undefined && this.input[key] === undefined) this.input[key] = meta[key];
    if (typeof meta.completion_tokens === 'number') this.completionTokens = meta.completion_tokens;
    if (typeof meta.cached_tokens === 'number' && this.cachedTokens === null) this.cachedTokens = meta.cached_tokens;
    if (typeof meta.weight_version === 'string') this.weightVersion = meta.weight_version;
    for (const key of SUMMED_COUNTERS) {
      const c = meta[key];
      if (typeof c === 'number') this.counters[key] = c;
    }
  }
}

export interface LogicalInfo {
  id: string;
  /** The original prompt's length; null when the router does not know it (a text prompt). */
  promptTokens: number | null;
  /** The original budget, to restore in a `length` finish; null when unknown. */
  budget: number | null;
  startedAt: number; // epoch ms
  /** The client's streaming mode: the mode of attempt 0's worker. */
  clientIncremental: boolean;
}

/**
 * Baton's own `text` (it has the model's tokenizer): SGLang's detokenizer run over the logical
 * output, one step per token (SGLang's default stream_interval), as the uninterrupted worker
 * would have run it. `always`: every chunk's text is Baton's (the client sent a text prompt,
 * which Baton tokenized); otherwise only continuations' (a worker's text covers only its own
 * tokens, while the client must see the whole answer's).
 */
export interface TextRendering {
  detokenizer: SglangDetokenizer;
  always: boolean;
  noStopTrim: boolean;
}

/** The committed output of the attempts that ended, and what the client must keep from them. */
export class LogicalOutput {
  ids: number[] = [];
  lists: Partial<Record<OutputList, Json[]>> = {};
  input: Partial<Record<(typeof INPUT_LISTS)[number], Json>> = {};
  cachedTokens: number | null = null;
  sawText = false;
  /** Sums of the summed counters over the attempts that ended. */
  counters: Partial<Record<(typeof SUMMED_COUNTERS)[number], number>> = {};
  /** Logical ids fed to the text rendering's detokenizer. */
  private fed = 0;
  /** Characters of the answer's text the client holds (attempt 0's worker text, or Baton's). */
  private textSent = 0;

  constructor(
    readonly info: LogicalInfo,
    readonly text: TextRendering | null = null,
  ) {}

  /** Whether `text` in a chunk of attempt `a` is Baton's to write. */
  rendersText(a: AttemptOutput): boolean {
    return this.text !== null && (this.text.always || a.replayed > 0);
  }

  /**
   * Feed the detokenizer up to the end of `a` (or of the committed output), one step per token as
   * SGLang's default stream_interval does; the text so far (the finish's, when given).
   */
  private renderedText(a: AttemptOutput | null, finish: JsonObject | null): string {
    const r = this.text!;
    const committed = this.ids.length;
    const total = committed + (a ? a.ids.length : 0);
    const end: TextFinish | null = finish ? { type: typeof finish.type === 'string' ? finish.type : '', matched: finish.matched } : null;
    if (this.fed >= total) {
      if (end) r.detokenizer.step([], end, r.noStopTrim);
      return r.detokenizer.text;
    }
    while (this.fed < total) {
      const k = this.fed++;
      const id = k < committed ? this.ids[k]! : a!.ids[k - committed]!;
      r.detokenizer.step([id], this.fed === total ? end : null, r.noStopTrim);
    }
    return r.detokenizer.text;
  }

  /** Append an ended attempt's output. */
  commit(a: AttemptOutput): void {
    if (a.replayed === 0) {
      // This attempt prefilled the original prompt: its prompt logprobs and cache hits are the
      // logical request's (an attempt that produced nothing leaves these unset for the next).
      if (a.ids.length > 0 || a.cachedTokens !== null) {
        this.input = a.input;
        this.cachedTokens = a.cachedTokens;
      }
    }
    appendAll(this.ids, a.ids);
    for (const key of OUTPUT_LISTS) {
      const v = a.lists[key];
      if (v) appendAll((this.lists[key] ??= []), v);
    }
    for (const key of SUMMED_COUNTERS) {
      const c = a.counters[key];
      if (c !== undefined) this.counters[key] = (this.counters[key] ?? 0) + c;
    }
    this.sawText ||= a.sawText;
    // Attempt 0's text went to the client as its worker wrote it.
    if (a.replayed === 0 && this.text && !this.text.always) this.textSent = Math.max(this.textSent, a.text.length);
  }

  /**
   * Rewrite one chunk of attempt `a` (already absorbed) into the chunk the client would have
   * seen without a failure. `cumulative` forces a whole-answer rendering (unary assembly).
   */
  render(chunk: JsonObject, a: AttemptOutput, cumulative: boolean): JsonObject {
    const info = this.info;
    const incrementalOut = !cumulative && info.clientIncremental;
    const out: JsonObject = { ...chunk };
    const meta: JsonObject = { ...metaOf(chunk) };
    out.meta_info = meta;

    if (this.rendersText(a)) {
      const f = meta.finish_reason;
      const full = this.renderedText(a, isObject(f) ? f : null);
      out.text = incrementalOut ? full.slice(this.textSent) : full;
      this.textSent = Math.max(this.textSent, full.length);
    } else if (typeof chunk.text === 'string') {
      // Without the tokenizer, text is never stitched across replayed tokens (the loop stops a
      // migration once text was returned); only re-shaped.
      out.text = incrementalOut ? a.text.slice(a.textSent) : a.text;
      a.textSent = a.text.length;
    }
    if (incrementalOut) {
      out.output_ids = a.ids.slice(a.sent);
      for (const key of OUTPUT_LISTS) if (meta[key] !== undefined) meta[key] = (a.lists[key] ?? []).slice(a.sent);
      a.sent = a.ids.length;
    } else {
      out.output_ids = this.ids.length === 0 ? a.ids.slice() : this.ids.concat(a.ids);
      for (const key of OUTPUT_LISTS) {
        if (meta[key] === undefined) continue;
        const prior = this.lists[key];
        const mine = a.lists[key] ?? [];
        meta[key] = prior ? prior.concat(mine) : mine.slice();
      }
    }
    if (a.replayed > 0) {
      for (const key of INPUT_LISTS) {
        if (meta[key] === undefined) continue;
        if (this.input[key] !== undefined) meta[key] = this.input[key]!;
        else delete meta[key];
      }
    }
    meta.id = info.id;
    // A queued abort has no prompt_tokens (SGLang omits them): keep what the worker wrote. So
    // does a text prompt, which the router does not tokenize (and which never migrates).
    if (info.promptTokens !== null && (meta.prompt_tokens !== undefined || chunk.meta_info === undefined)) meta.prompt_tokens = info.promptTokens;
    meta.completion_tokens = a.replayed + a.completionTokens;
    for (const key of SUMMED_COUNTERS) {
      const c = meta[key];
      if (typeof c === 'number') meta[key] = (this.counters[key] ?? 0) + c;
    }
    if (typeof meta.output_token_logprobs_length === 'number') {
      meta.output_token_logprobs_length = (this.lists.output_token_logprobs?.length ?? 0) + meta.output_token_logprobs_length;
    }
    const cached = a.replayed === 0 ? a.cachedTokens : this.cachedTokens;
    if (meta.cached_tokens !== undefined || cached !== null) {
      const prompt = info.promptTokens ?? (typeof meta.prompt_tokens === 'number' ? meta.prompt_tokens : Infinity);
      meta.cached_tokens = Math.min(cached ?? 0, prompt);
    }
    const finish = meta.finish_reason;
    if (isObject(finish) && finish.type === 'length' && info.budget !== null) {
      meta.finish_reason = { ...finish, length: info.budget };
    }
    if (meta.e2e_latency !== undefined) meta.e2e_latency = (Date.now() - info.startedAt) / 1000;
    return out;
  }

  /**
   * The answer of a request aborted by the router's /abort_request when no attempt could say it
   * itself: SGLang's finish for an aborted request (scheduler FINISH_ABORT defaults).
   */
  renderAbort(cumulative: boolean): JsonObject {
    return this.renderLocalFinish(cumulative, null, { type: 'abort', message: 'Aborted', status_code: null, err_type: null });
  }

  /** The answer of a request whose budget ran out at a failure: no further worker call. */
  renderLocalFinish(cumulative: boolean, template: JsonObject | null, finish: JsonObject | null = null): JsonObject {
    const info = this.info;
    const base: JsonObject = template ? { ...template } : {};
    const meta: JsonObject = template ? { ...metaOf(template) } : {};
    const incrementalOut = !cumulative && info.clientIncremental;
    base.output_ids = incrementalOut ? [] : this.ids.slice();
    if (this.text && (this.text.always || typeof base.text === 'string')) {
      const full = this.renderedText(null, finish ?? { type: 'length' });
      base.text = incrementalOut ? full.slice(this.textSent) : full;
      this.textSent = Math.max(this.textSent, full.length);
    }
    for (const key of OUTPUT_LISTS) {
      if (meta[key] === undefined && this.lists[key] === undefined) continue;
      meta[key] = incrementalOut ? [] : (this.lists[key] ?? []).slice();
    }
    for (const key of INPUT_LISTS) if (this.input[key] !== undefined) meta[key] = this.input[key]!;
    for (const key of SUMMED_COUNTERS) if (meta[key] !== undefined || this.counters[key] !== undefined) meta[key] = this.counters[key] ?? 0;
    if (meta.output_token_logprobs_length !== undefined) meta.output_token_logprobs_length = this.lists.output_token_logprobs?.length ?? 0;
    Object.assign(meta, {
      id: info.id,
      finish_reason: finish ?? { type: 'length', length: info.budget },
      prompt_tokens: info.promptTokens ?? 0,
      completion_tokens: this.ids.length,
      cached_tokens: Math.min(this.cachedTokens ?? 0, info.promptTokens ?? 0),
      e2e_latency: (Date.now() - info.startedAt) / 1000,
    });
    base.meta_info = meta;
    return base;
  }
}
