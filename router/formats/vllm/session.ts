// vLLM's side of one logical request: reading an attempt's stream (`data:` frames of
// `choices[0].token_ids` deltas, serving.py `serve_tokens_stream_generator` at 00a80787), and
// rendering the one answer the client sees. Every frame is parsed and rendered again: each
// carries the upstream request_id and the usage Baton asked for (continuous, to count tokens),
// which the client sees as its own request's, or not at all if it did not ask.
import type { Failure } from '../../core/failure.ts';
import type { ClientSink } from '../../core/client-sink.ts';
import type { AttemptHost, AttemptSpec, FormatAttempt, FormatSession, Json, JsonObject, WorkerView } from '../../core/types.ts';
import { JsonFrameAttempt } from '../../core/frames.ts';
import { classifyVllmError, classifyVllmFinish } from './failure.ts';
import type { VllmRequest } from './request.ts';
import { appendAll, isObject } from '../../core/json.ts';

const ENGINE_PREFIX = 'generate-tokens-';
/**
 * [DONE] before a terminal finish_reason: the attempt did not finish (vLLM skips chunks without
 * new tokens, so an abort with none reaches [DONE] with no finish at all).
 */
const DONE = { message: 'stream ended ([DONE]) without a finished choice', evidence: '[DONE] before a choice with a finish_reason' };

export class VllmAttempt extends JsonFrameAttempt {
  logprobs: Json[] = [];
  lastChunk: JsonObject | null = null;
  /** `weight_versions` spans of this attempt (token offsets within it). */
  spans: JsonObject[] = [];
  /** The error frame of a refusal, to pass through (parsed, and the bytes as the worker wrote them). */
  errorFrame: JsonObject | null = null;
  errorRaw: Buffer | null = null;

  constructor(
    private readonly session: VllmSession,
    spec: AttemptSpec,
    host: AttemptHost,
    private readonly headers: Record<string, string>,
  ) {
    super(spec, host, DONE);
  }

  get weightVersion(): string | null {
    const last = this.spans.at(-1);
    return last && typeof last.version === 'string' ? last.version : null;
  }

  /**
   * The finishing frame, held until the frame after it: with `include_usage` (which every attempt
   * asks for) vLLM's serve_tokens_stream_generator sends, after the last choice chunk, one
   * `{choices: [], usage}` chunk, the only one whose usage has `prompt_tokens_details.cached_tokens`
   * (with --enable-prompt-tokens-details), then `[DONE]`.
   */
  private heldChunk: JsonObject | null = null;
  private heldChoice: JsonObject | null = null;

  /** `usage.prompt_tokens_details.cached_tokens` of a frame (read on the finish and its trailer only). */
  private readCached(chunk: JsonObject): void {
    const usage = chunk.usage;
    if (isObject(usage) && isObject(usage.prompt_tokens_details) && typeof usage.prompt_tokens_details.cached_tokens === 'number') {
      this.cached = usage.prompt_tokens_details.cached_tokens;
    }
  }

  protected override deliverHeld(): void {
    this.session.deliverFinal(this, this.heldChunk!, this.heldChoice!, this.headers);
  }

  protected onChunk(chunk: JsonObject, buf: Buffer, start: number, end: number): void {
    if (this.holding) {
      // The frame after the finish: the usage chunk (or, from a server that sends none, [DONE],
      // an error frame or the call's end, which deliver without it: JsonFrameAttempt.fail).
      this.readCached(chunk);
      this.release();
      return;
    }
    if (chunk.error !== undefined && !Array.isArray(chunk.choices)) {
      const f = classifyVllmError(chunk.error);
      if (f.kind === 'validation') {
        this.errorFrame = chunk;
        this.errorRaw = buf.subarray(start, end);
      }
      this.fail(f);
      return;
    }
    const choices = Array.isArray(chunk.choices) ? chunk.choices : [];
    const choice = choices.find((c) => isObject(c)) as JsonObject | undefined;
    if (!choice) return; // a chunk without a choice before the finish: nothing to read
    const finish = typeof choice.finish_reason === 'string' ? choice.finish_reason : null;
    if (finish !== null) {
      const f = classifyVllmFinish(finish);
      if (f) {
        this.fail(f);
        return;
      }
    }
    if (this.frames === 0 && !this.host.accept(null)) {
      this.ended = true;
      return;
    }
    const delta = Array.isArray(choice.token_ids) ? (choice.token_ids as number[]) : [];
    appendAll(this.ids, delta);
    const lp = isObject(choice.logprobs) && Array.isArray(choice.logprobs.content) ? choice.logprobs.content : null;
    if (lp) appendAll(this.logprobs, lp);
    if (Array.isArray(choice.weight_versions)) for (const s of choice.weight_versions) if (isObject(s)) this.spans.push(s);
    this.lastChunk = chunk;
    if (this.frames++ === 0) this.host.firstFrame();
    const session = this.session;
    if (finish !== null) {
      this.finish = finish;
      // A unary body (a worker that answered unary) carries its usage in the same object.
      this.readCached(chunk);
      this.heldChunk = chunk;
      this.heldChoice = choice;
      this.holding = true;
      // A streaming client gets the finishing chunk now; its usage chunk and the end wait for the trailer.
      if (session.sink.streaming) session.sink.writeRaw(session.frame(session.renderChunk(this, chunk, choice)));
      return;
    }
    if (session.sink.streaming) this.host.write(session.frame(session.renderChunk(this, chunk, choice)));
  }
}

export class VllmSession implements FormatSession {
  ids: number[] = [];
  logprobs: Json[] = [];
  spans: JsonObject[] = [];
  cached: number | null = null;
  private template: JsonObject | null = null;
  /** The model the answer names (the serving worker's, as probed). */
  private model: string | null = null;
  private readonly engineId: string;
  private readonly created = Math.floor(Date.now() / 1000);

  constructor(
    readonly req: VllmRequest,
    readonly info: { id: string; budget: number | null; startedAt: number },
    readonly sink: ClientSink,
  ) {
    // vLLM names a request `generate-tokens-<X-Request-Id or request_id>` (serving.py).
    this.engineId = `${ENGINE_PREFIX}${info.id}`;
  }

  get cachedTokens(): number | null {
    return this.cached;
  }

  get sawText(): boolean {
    return false;
  }

  get budget(): number | null {
    return this.info.budget;
  }

  get canFinishLocally(): boolean {
    return this.template !== null;
  }

  attempt(spec: AttemptSpec, worker: WorkerView, host: AttemptHost, _forwardRaw: boolean, headers: Record<string, string>): VllmAttempt {
    this.model = worker.modelPath;
    return new VllmAttempt(this, spec, host, headers);
  }

  commit(fa: FormatAttempt): void {
    const a = fa as VllmAttempt;
    if (a.spec.replayed.length === 0 && a.cached !== null && this.cached === null) this.cached = a.cached;
    const offset = this.ids.length;
    appendAll(this.ids, a.ids);
    appendAll(this.logprobs, a.logprobs);
    for (const s of a.spans) this.spans.push(shiftSpan(s, offset));
    if (a.lastChunk !== null) this.template = a.lastChunk;
  }

  frame(chunk: JsonObject): string {
    return `data: ${JSON.stringify(chunk)}\n\n`;
  }

  /**
   * The logical request's usage, in the shape of the worker's own (`like`: its keys, nulls and
   * order; serving.py's UsageInfo), with the original prompt and every attempt's tokens.
   */
  private usage(completion: number, like: JsonObject | null = null): JsonObject {
    const prompt = this.req.promptLength ?? 0;
    const u: JsonObject = like ? { ...like } : {};
    u.prompt_tokens = prompt;
    u.total_tokens = prompt + completion;
    u.completion_tokens = completion;
    if (this.cached !== null) u.prompt_tokens_details = { ...(isObject(u.prompt_tokens_details) ? u.prompt_tokens_details : {}), cached_tokens: Math.min(this.cached, prompt) };
    return u;
  }

  /**
   * The final usage-only chunk (`model_dump_json(exclude_none=True)` in serving.py): the keys of
   * the worker's own chunks in their order, without nulls, no choices, the logical usage.
   */
  private usageChunk(like: JsonObject, completion: number): JsonObject {
    const out: JsonObject = {};
    for (const [k, v] of Object.entries(like)) {
      if (k === 'choices') out.choices = [];
      else if (k === 'usage') out.usage = withoutNulls(this.usage(completion, isObject(v) ? v : null));
      else if (k === 'request_id') out.request_id = this.engineId;
      else if (v !== null) out[k] = v;
    }
    out.usage ??= withoutNulls(this.usage(completion));
    out.choices ??= [];
    return out;
  }

  /**
   * The answer's `weight_versions`: the spans of every attempt at their logical offsets. vLLM
   * names spans only on a choice's last chunk, so an attempt that failed left none: its tokens
   * are given the version of the earliest span known (a continuation runs on the same model),
   * and neighbouring spans of one version are merged, as an uninterrupted run reports them.
   */
  private logicalSpans(a: VllmAttempt): JsonObject[] {
    const all = this.spans.concat(a.spans.map((s) => shiftSpan(s, a.spec.replayed.length)));
    if (all.length === 0) return all;
    const first = all[0]!;
    if (typeof first.start === 'number' && first.start > 0) all.unshift({ ...first, start: 0, end: first.start });
    const merged: JsonObject[] = [];
    for (const s of all) {
      const prev = merged.at(-1);
      if (prev && prev.version === s.version && prev.end === s.start) prev.end = s.end!;
      else merged.push({ ...s });
    }
    return merged;
  }

  /** One running chunk of attempt `a`, as an uninterrupted run would have sent it. */
  renderChunk(a: VllmAttempt, chunk: JsonObject, choice: JsonObject): JsonObject {
    const out: JsonObject = { ...chunk, request_id: this.engineId };
    const c: JsonObject = { ...choice, index: 0 };
    if (Array.isArray(choice.weight_versions)) c.weight_versions = this.logicalSpans(a);
    out.choices = [c];
    // Usage was asked for upstream on every chunk; the client sees it only as it asked.
    if (this.req.continuousUsage) out.usage = this.usage(a.spec.replayed.length + a.ids.length, isObject(chunk.usage) ? chunk.usage : null);
    else if ('usage' in out) out.usage = null;
    return out;
  }

  /**
   * After the finishing chunk (written when it came) and the worker's usage chunk: the usage chunk
   * the client asked for and the stream's end, or the whole unary answer.
   */
  deliverFinal(a: VllmAttempt, chunk: JsonObject, choice: JsonObject, headers: Record<string, string>): void {
    const sink = this.sink;
    const total = a.spec.replayed.length + a.ids.length;
    // The attempt that prefilled the original prompt reports the logical prompt's cache hits (commit keeps them too).
    if (a.spec.replayed.length === 0 && a.cached !== null && this.cached === null) this.cached = a.cached;
    if (sink.streaming) {
      if (this.req.includeUsage) sink.writeRaw(this.frame(this.usageChunk(chunk, total)));
      sink.endStream();
      return;
    }
    // Unary: vLLM's GenerateResponse, assembled from the logical output (every attempt streamed).
    const ids = this.ids.concat(a.ids);
    const logprobs = this.logprobs.concat(a.logprobs);
    const spans = this.logicalSpans(a);
    sink.json(200, JSON.stringify(this.unary(chunk, choice, ids, logprobs, spans, a.finish ?? 'stop')), headers);
  }

  /**
   * vLLM's unary GenerateResponse, from the logical output. Its keys follow the protocol the
   * worker speaks, read off its stream: newer servers (protocol.py GenerateTokensResponse: their
   * chunks carry `output_mode`) answer with more fields than older ones (GenerateResponse).
   */
  private unary(chunk: JsonObject | null, last: JsonObject | null, ids: number[], logprobs: Json[], spans: JsonObject[], finish: string): JsonObject {
    const newer = chunk !== null && 'output_mode' in chunk;
    const lp = this.req.logprobs === null ? null : { content: logprobs };
    const c: JsonObject = {};
    // The choice's keys as the worker's own stream choice has them, in its order.
    for (const k of Object.keys(last ?? { index: 0, logprobs: null, finish_reason: null, token_ids: null, routed_experts: null })) c[k] = last ? last[k]! : null;
    Object.assign(c, { index: 0, finish_reason: finish, token_ids: ids, logprobs: lp });
    if ('routed_experts' in c) c.routed_experts = null;
    if ('weight_versions' in c || spans.length > 0) c.weight_versions = spans.length > 0 ? spans : null;
    const usage: JsonObject = { ...this.usage(ids.length) };
    usage.prompt_tokens_details ??= null;
    if (newer) {
      // UsageInfo.model_dump() of the newer protocol (serve/engine/protocol.py @ f1bf7bd0): every
      // field, None as null; the stream's usage chunk (exclude_none) dropped the null ones.
      const d = usage.prompt_tokens_details;
      if (isObject(d)) usage.prompt_tokens_details = { cached_tokens: d.cached_tokens ?? null, created_cache_tokens: d.created_cache_tokens ?? null, multimodal_tokens: d.multimodal_tokens ?? null };
      usage.completion_tokens_details = null;
    }
    return newer
      ? {
          request_id: this.engineId, model: this.model, created: this.created, usage,
          prompt_logprobs: null, prompt_token_id_logprobs: null, prompt_token_ids: null, mm_placeholders: null, metrics: null,
          kv_transfer_params: null, ec_transfer_params: null, output_mode: chunk!.output_mode ?? 'tokens', choices: [c],
        }
      : { request_id: this.engineId, model: this.model, created: this.created, choices: [c], usage, prompt_logprobs: null, kv_transfer_params: null };
  }

  private finishWith(finish: string, headers: Record<string, string>): void {
    const sink = this.sink;
    if (!sink.streaming) {
      sink.json(200, JSON.stringify(this.unary(this.template, this.lastChoice(), this.ids, this.logprobs, this.spans, finish)), headers);
      return;
    }
    // The terminal chunk of a stream: no new tokens, the finish reason (and usage if asked).
    const like = this.template ?? { request_id: null, usage: null, choices: null };
    const last = this.lastChoice();
    const c: JsonObject = { ...(last ?? { index: 0 }), index: 0, finish_reason: finish, token_ids: [] };
    if ('logprobs' in c) c.logprobs = null;
    if ('weight_versions' in c) c.weight_versions = null;
    const out: JsonObject = { ...like, request_id: this.engineId, choices: [c] };
    out.usage = this.req.continuousUsage ? this.usage(this.ids.length) : null;
    sink.writeRaw(this.frame(out));
    if (this.req.includeUsage) sink.writeRaw(this.frame(this.usageChunk(like, this.ids.length)));
    sink.endStream();
  }

  private lastChoice(): JsonObject | null {
    const cs = this.template?.choices;
    return Array.isArray(cs) && isObject(cs[0]) ? cs[0] : null;
  }

  finishLocally(headers: Record<string, string>): void {
    this.finishWith('length', headers);
  }

  finishAborted(headers: Record<string, string>): void {
    this.finishWith('abort', headers);
  }

  passThrough(fa: FormatAttempt, failure: Failure): void {
    const a = fa as VllmAttempt;
    const sink = this.sink;
    if (sink.streaming && (sink.started || a.errorFrame)) {
      // After the 200 vLLM reports an error in band: one error frame (as the worker wrote it), then [DONE].
      if (a.errorRaw) {
        sink.writeRaw(a.errorRaw);
        sink.endStream();
      } else sink.endStreamWithError({ error: { message: failure.message, type: 'BadRequestError', param: null, code: failure.status } });
      return;
    }
    if (failure.body) {
      sink.json(failure.status, failure.body, failure.contentType ? { 'content-type': failure.contentType } : {});
      return;
    }
    const e = a.errorFrame?.error;
    sink.json(failure.status, JSON.stringify({ error: isObject(e) ? e : { message: failure.message, type: 'BadRequestError', param: null, code: failure.status } }));
  }
}

/** `model_dump_json(exclude_none=True)`: no null members, at any depth of an object. */
function withoutNulls(o: JsonObject): JsonObject {
  const out: JsonObject = {};
  for (const [k, v] of Object.entries(o)) if (v !== null) out[k] = isObject(v) ? withoutNulls(v) : v;
  return out;
}

/** A `weight_versions` span moved `by` tokens later (a continuation's offsets start at its replay). */
function shiftSpan(s: JsonObject, by: number): JsonObject {
  if (by === 0) return s;
  const out: JsonObject = { ...s };
  if (typeof s.start === 'number') out.start = s.start + by;
  if (typeof s.end === 'number') out.end = s.end + by;
  return out;
}
