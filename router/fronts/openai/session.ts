// The OpenAI-compatible front's side of one logical request. The workers see token ids only;
// Baton detokenizes the logical output incrementally (one IncrementalDecoder over every attempt's
// tokens, so a migration boundary is just another split), matches stop strings on that text
// (a match may span chunks and attempts), and renders OpenAI's chunks, answers and usage. The
// text is a pure function of the logical ids, so a migrated answer equals the uninterrupted one.
//
// Tokens are taken one at a time: a stop string ends the output at the token that completes it,
// whatever the frames' batching, as vLLM's detokenizer checks after every token; none can before
// min_tokens output tokens exist (counted over the logical request, so over attempts too).
import type { Failure } from '../../core/failure.ts';
import { IncrementalDecoder, StopMatcher } from '../../tokenizer/index.ts';
import type { ClientSink } from '../../core/client-sink.ts';
import { JsonFrameAttempt } from '../../core/frames.ts';
import type { AttemptHost, AttemptSpec, FormatAttempt, FormatSession, JsonObject, TokenFinish, TokenLogprob, TokenReader, TokenWorker, WorkerView } from '../../core/types.ts';
import type { OpenAiRequest } from './request.ts';
import type { ForcedCall } from './forced-tools.ts';
import type { ChatView } from '../../core/chat-view.ts';
import { reasoningKeys } from '../../parsers/index.ts';
import { ChatOutput } from './chat-output.ts';
import { matchedStop, stopTokenReason, usageOf, writeWithUsage, type Ended } from './finish.ts';
import { OpenAiLogprobs, type LogprobRow } from './logprobs.ts';
import { unaryAnswer } from './unary.ts';

export function openAiError(status: number, message: string, type: string, param: string | null = null): { error: { message: string; type: string; param: string | null; code: number } } {
  return { error: { message, type, param, code: status } };
}

const DONE = { message: 'stream ended ([DONE]) without a finished chunk', evidence: '[DONE] before a finish' };

/** The tail of the output stop_regex searches (SGLang decodes its stop_regex_max_len + 1 last tokens). */
const REGEX_TAIL = 256;

/**
 * The JSON of a streamed chunk that carries text only (no role, logprobs or finish): exactly
 * JSON.stringify of the object flushChunk builds otherwise, written as a fixed prefix and suffix
 * around the text, since it is every chunk of a plain stream (test/openai/session.test.ts holds
 * the two equal). A chat delta may carry the text under several keys (the reasoning under both
 * `reasoning_content` and `reasoning`): the text is serialized once.
 */
export class TextChunk {
  private readonly prefix: string;
  private readonly suffix: string;
  /** `,"key":` before each further copy of the text. */
  private readonly more: readonly string[];

  constructor(head: JsonObject, kind: OpenAiRequest['kind'], includeUsage: boolean, index = 0, fields: readonly string[] = ['content']) {
    const h = JSON.stringify(head);
    this.prefix = `${h.slice(0, -1)},"choices":[{"index":${index},${kind === 'chat' ? `"delta":{"${fields[0]}":` : '"text":'}`;
    this.more = kind === 'chat' ? fields.slice(1).map((f) => `,"${f}":`) : [];
    this.suffix = `${kind === 'chat' ? '}' : ''},"logprobs":null,"finish_reason":null,"stop_reason":null}]${includeUsage ? ',"usage":null' : ''}}`;
  }

  json(text: string): string {
    const t = JSON.stringify(text);
    if (this.more.length === 0) return this.prefix + t + this.suffix;
    let out = this.prefix + t;
    for (const m of this.more) out += m + t;
    return out + this.suffix;
  }
}

/** The session side an attempt feeds (the chat/completions session, the Responses session). */
export interface TokenAbsorber {
  cachedTokens: number | null;
  /**
   * Take an attempt's new tokens; true when a stop string ended the answer. `flush` false: the
   * frame also finishes, and its text goes out with the finish.
   */
  absorb(a: OpenAiAttempt, ids: readonly number[], logprobs: readonly TokenLogprob[] | null, flush?: boolean): boolean;
  finishFromWorker(f: TokenFinish): void;
  /** The prompt's logprobs, which the first attempt's first frame carries when asked (absent: never asked). */
  notePromptLogprobs?(rows: readonly (TokenLogprob | null)[]): void;
}

export class OpenAiAttempt extends JsonFrameAttempt {
  version: string | null = null;

  constructor(
    private readonly session: TokenAbsorber,
    spec: AttemptSpec,
    host: AttemptHost,
    private readonly reader: TokenReader,
    /** The client asked for the prompt's logprobs (prompt_logprobs, echo with logprobs). */
    private readonly wantsPrompt = false,
  ) {
    super(spec, host, DONE);
  }

  /** P/D: the prompt's logprobs come from the prefill leg (stitch.ts mergePrefillInput). */
  get awaitsPrefill(): boolean {
    return this.wantsPrompt && this.spec.prefillLeg === true && this.spec.replayed.length === 0 && this.reader.prefillAnswered !== undefined;
  }

  prefillAnswered(meta: JsonObject | null): void {
    this.reader.prefillAnswered?.(meta);
  }

  get weightVersion(): string | null {
    return this.version;
  }

  /** A worker finish held for the frame after it (TokenReader.trailer: vLLM's usage chunk). */
  private heldFinish: TokenFinish | null = null;

  private noteCached(cached: number | null): void {
    if (cached === null || this.cached !== null) return;
    this.cached = cached;
    // The attempt that prefills the original prompt reports the logical request's cache hits.
    if (this.spec.replayed.length === 0) this.session.cachedTokens ??= cached;
  }

  protected override deliverHeld(): void {
    this.session.finishFromWorker(this.heldFinish!);
  }

  protected onChunk(chunk: JsonObject): void {
    const f = this.reader.read(chunk);
    if (this.holding) {
      // The frame after the finish: vLLM's usage chunk, with the cache hits it alone reports.
      if (f.kind === 'usage') this.noteCached(f.cachedTokens);
      this.release();
      return;
    }
    if (f.kind === 'skip' || f.kind === 'usage') return;
    if (f.kind === 'failed') {
      this.fail(f.failure);
      return;
    }
    if (this.frames === 0) {
      if (!this.host.accept(f.weightVersion)) {
        this.ended = true;
        return;
      }
      this.host.firstFrame();
    }
    this.frames++;
    if (f.weightVersion !== null) this.version = f.weightVersion;
    if (f.cachedTokens !== null) this.noteCached(f.cachedTokens);
    if (f.prompt) this.session.notePromptLogprobs?.(f.prompt);
    // The frame that finishes: its text goes out with the finish (vLLM's last chunk carries both).
    const stopped = this.session.absorb(this, f.ids, f.logprobs, f.finish === null);
    if (stopped) {
      this.ended = true;
      this.finish = 'stop';
      this.host.stopped();
      return;
    }
    if (f.finish) {
      this.finish = f.finish.reason;
      if (this.reader.trailer) {
        this.heldFinish = f.finish;
        this.holding = true;
        return;
      }
      this.ended = true;
      this.session.finishFromWorker(f.finish);
      this.host.finished();
    }
  }
}

/** A forced answer's calls in one delta (each call's first and only delta). */
const forcedDeltas = (calls: ForcedCall[]): JsonObject[] => calls.map((t, index) => ({ index, id: t.id, type: 'function', function: { name: t.name, arguments: t.arguments } }));

export class OpenAiSession implements FormatSession {
  ids: number[] = [];
  cachedTokens: number | null = null;
  readonly sawText = false;
  readonly canFinishLocally = true;
  /** The workers' text, if any, is never read: Baton detokenizes. */
  readonly rendersOwnText = true;
  attemptHeaders: Record<string, string> = {};
  private readonly decoder: IncrementalDecoder;
  private readonly matcher: StopMatcher | null;
  /**
   * Text decided but not yet written to a streaming client (a unary answer's whole text), and
   * its tokens' logprobs.
   */
  private pendingText = '';
  private pendingLogprobs: LogprobRow[] = [];
  /** Output tokens of the logical request so far (committed attempts and the current one). */
  private produced = 0;
  /** The text each token added (the dashboard colours it by attempt). */
  private readonly pieces: string[] = [];
  private roleSent = false;
  private textChunk: TextChunk | null = null;
  /** The chat output parsers' plumbing (tool calls, reasoning, a forced tool_choice) and the answer log. */
  private readonly chat: ChatOutput;
  private readonly logprobs: OpenAiLogprobs;
  private reasoningChunk: TextChunk | null = null;
  /** The first chunk is out (it carries the role, the echo, the prompt's ids). */
  private echoed = false;
  private ended: Ended | null = null;
  /** return_token_ids: the ids not yet written (a unary answer's all); null when not asked. */
  private tokenIds: number[] | null;
  private readonly index: number;
  /** stop_regex's patterns (null: none) and the output's tail text they are searched in. */
  private readonly stopRegex: { source: string; re: RegExp }[] | null;
  private regexTail = '';
  /** The last output token (the one a stop finish ended on). */
  private lastId: number | null = null;
  readonly created: number;
  readonly responseId: string;

  constructor(
    readonly req: OpenAiRequest,
    private readonly worker: TokenWorker,
    private readonly info: { id: string; budget: number | null; startedAt: number },
    readonly sink: ClientSink,
  ) {
    // vLLM's detokenizers never apply clean_up_tokenization_spaces (docs/tokenizer.md): the text
    // an OpenAI client gets from vLLM or SGLang for the same ids.
    this.decoder = new IncrementalDecoder(req.tokenizer, { skipSpecialTokens: req.skipSpecialTokens, spacesBetweenSpecialTokens: req.spacesBetweenSpecialTokens, cleanUpTokenizationSpaces: false });
    this.matcher = req.stops.length > 0 ? new StopMatcher(req.stops, { includeStop: req.includeStopStr }) : null;
    this.created = req.created ?? Math.floor(info.startedAt / 1000);
    this.responseId = req.responseId ?? `${req.kind === 'chat' ? 'chatcmpl' : 'cmpl'}-${info.id}`;
    this.index = req.index ?? 0;
    this.tokenIds = req.returnTokenIds ? [] : null;
    this.stopRegex = req.stopRegex ?? null;
    this.chat = new ChatOutput(req, sink.streaming);
    this.logprobs = new OpenAiLogprobs(req, sink.streaming);
  }

  chatView(): ChatView | null {
    return this.chat.chatView();
  }

  get budget(): number | null {
    return this.info.budget;
  }

  tokenTexts(): string[] {
    // Held-back bytes that the end flushed belong to the last token.
    if (this.pieces.length > 0 && this.ids.length === this.pieces.length) {
      const shown = this.pieces.join('');
      const all = this.decoder.text;
      if (all.length > shown.length && all.startsWith(shown)) this.pieces[this.pieces.length - 1] += all.slice(shown.length);
    }
    return this.pieces.slice(0, this.ids.length);
  }

  attempt(spec: AttemptSpec, worker: WorkerView, host: AttemptHost, _forwardRaw: boolean, headers: Record<string, string>): OpenAiAttempt {
    this.attemptHeaders = headers;
    return new OpenAiAttempt(this, spec, host, this.worker.reader(worker), (this.req.promptLogprobs ?? null) !== null);
  }

  commit(fa: FormatAttempt): void {
    const a = fa as OpenAiAttempt;
    for (const id of a.ids) this.ids.push(id);
  }

  /**
   * Take an attempt's new tokens, one at a time: decode, match stop strings, keep logprobs. True
   * when a stop string matched (the answer is then delivered: the caller cuts the worker off).
   */
  absorb(a: OpenAiAttempt, ids: readonly number[], logprobs: readonly TokenLogprob[] | null, flush = true): boolean {
    const want = this.req.logprobs !== null && !this.req.echoOnly;
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i]!;
      a.ids.push(id);
      this.produced++;
      this.lastId = id;
      if (this.req.echoOnly) {
        // vLLM's echo with max_tokens 0: the engine's one token is counted, never shown.
        this.pieces.push('');
        continue;
      }
      if (this.tokenIds !== null) this.tokenIds.push(id);
      if (want) {
        const e = logprobs?.[i];
        this.pendingLogprobs.push({ id, logprob: e ? e.logprob : 0, top: e ? e.top : [] });
      }
      const piece = this.decoder.pushOne(id);
      this.pieces.push(piece);
      if (this.matcher === null) {
        this.pendingText += piece;
        if (this.stopRegex !== null && this.regexStop(piece)) return true;
        continue;
      }
      // vLLM searches no stop string until min_tokens output tokens exist (stop.ts).
      const { emit, stop } = this.matcher.push(piece, this.produced > this.req.minTokens);
      this.pendingText += emit;
      if (stop !== null) {
        this.finishWith({ reason: 'stop', stopReason: stop });
        return true;
      }
      if (this.stopRegex !== null && this.regexStop(piece)) return true;
    }
    // A forced tool_choice's answer without parsers is read whole at the end: nothing streams
    // before it (with parsers, the thought streams and the content is held: flushParsed).
    if (flush && this.sink.streaming && (!this.req.forcedTools || this.chat.parser !== null) && (this.pendingText.length > 0 || this.pendingLogprobs.length > 0 || (this.tokenIds !== null && this.tokenIds.length > 0))) this.flushChunk(null);
    return false;
  }

  /**
   * SGLang's stop_regex (schedule_batch.py Req.check_finished: `re.search` over the decoded tail
   * of the output, FINISHED_MATCHED_REGEX with `matched` the pattern): searched after each token
   * in the last REGEX_TAIL characters. SGLang trims a finish's text at `output.find(matched)`
   * (detokenizer_manager.py trim_matched_stop), which a pattern seldom is literally: the text
   * through the matching token stays, as here. True when it ended the output.
   */
  private regexStop(piece: string): boolean {
    this.regexTail = (this.regexTail + piece).slice(-REGEX_TAIL);
    // SGLang checks no stop before min_new_tokens output tokens (Req.check_finished).
    if (this.produced < this.req.minTokens) return false;
    for (const r of this.stopRegex!) {
      if (!r.re.test(this.regexTail)) continue;
      if (this.matcher !== null) this.pendingText += this.matcher.flush();
      this.finishWith({ reason: 'stop', stopReason: r.source, matched: r.source });
      return true;
    }
    return false;
  }

  /** The prompt's logprobs, from the first attempt that reports them. */
  notePromptLogprobs(rows: readonly (TokenLogprob | null)[]): void {
    this.logprobs.notePrompt(rows);
  }

  /** The worker finished: whatever the decoder and the matcher held back is text now. */
  finishFromWorker(f: TokenFinish): void {
    // The token that stopped it: the worker's word (SGLang names it; vLLM names stop_token_ids
    // only), else the last one, which a stop finish without a string match ends on.
    const matched = f.reason === 'stop' ? (f.matched ?? this.lastId) : null;
    this.finishWith(this.drain() ?? { reason: f.reason, stopReason: f.reason === 'stop' ? stopTokenReason(this.req, f.matched) : null, matched });
  }

  /**
   * The end of the output: the decoder's held-back bytes become text, and the matcher's held-back
   * text is released, unless that completes a stop string (then the answer ends with it).
   */
  private drain(): Ended | null {
    const rest = this.decoder.flush();
    if (this.matcher === null) {
      this.pendingText += rest;
      return null;
    }
    const { emit, stop } = this.matcher.push(rest, this.produced > this.req.minTokens);
    this.pendingText += emit;
    if (stop !== null) return { reason: 'stop', stopReason: stop };
    this.pendingText += this.matcher.flush();
    return null;
  }

  finishLocally(headers: Record<string, string>): void {
    this.attemptHeaders = headers;
    this.finishWith(this.drain() ?? { reason: 'length', stopReason: null });
  }

  finishAborted(headers: Record<string, string>): void {
    this.attemptHeaders = headers;
    this.drain();
    this.finishWith({ reason: 'abort', stopReason: null });
  }

  passThrough(_a: FormatAttempt, failure: Failure): void {
    const err = openAiError(failure.status, failure.message, failure.status === 404 ? 'NotFoundError' : 'BadRequestError');
    if (this.sink.streaming && this.sink.started) this.sink.endStreamWithError(err);
    else this.sink.json(failure.status, JSON.stringify(err));
  }

  // --- rendering ------------------------------------------------------------------------------

  private head(): JsonObject {
    return { id: this.responseId, object: this.req.kind === 'chat' ? 'chat.completion.chunk' : 'text_completion', created: this.created, model: this.req.model };
  }

  /** The text that leads the answer: the prompt (completions' echo) or the last message (chat's). */
  private leading(): string {
    if (this.req.kind === 'chat') return this.req.chatEcho ?? '';
    return this.req.echo ? this.req.promptText : '';
  }

  private choice(text: string, rows: LogprobRow[], end: Ended | null, first: boolean): JsonObject {
    const c: JsonObject = { index: this.index };
    if (this.req.kind === 'chat') {
      const delta: JsonObject = {};
      if (!this.roleSent) {
        delta.role = this.req.role ?? 'assistant';
        this.roleSent = true;
      }
      if (this.chat.toolCalls) delta.tool_calls = forcedDeltas(this.chat.toolCalls);
      else if (text.length > 0 || end === null) delta.content = text;
      c.delta = delta;
    } else {
      c.text = text;
    }
    c.logprobs = this.logprobs.of(rows, first && this.req.kind === 'completion' && this.req.echo);
    c.finish_reason = end ? this.chat.finishReason(end) : null;
    c.stop_reason = end ? end.stopReason : null;
    if (end) c.matched_stop = matchedStop(end);
    if (this.tokenIds !== null) {
      // vLLM: the prompt's ids with the first chunk (a completion's choice; chat's top level).
      if (this.req.kind === 'completion') c.prompt_token_ids = first ? this.req.promptIds : null;
      c.token_ids = this.tokenIds;
      this.tokenIds = [];
    }
    return c;
  }

  /**
   * The parsers' streamed chunk for the pending text (and the finish, when given): the deltas
   * vLLM's and SGLang's chat streams carry (`reasoning_content`, `content`, `tool_calls`), in one
   * chunk; nothing while the parsers hold the text back (a marker may be starting).
   */
  private flushParsed(end: Ended | null): void {
    const o = this.chat.parse(this.pendingText, end !== null);
    this.pendingText = '';
    const req = this.req;
    const rows = this.pendingLogprobs;
    const first = !this.echoed;
    const lead = first ? this.leading() : '';
    if (end === null && o.empty && rows.length === 0 && lead.length === 0) return;
    const keys = reasoningKeys(this.chat.parsing!.reasoningField);
    if (end === null && rows.length === 0 && !first && this.roleSent && o.calls.length === 0 && (o.reasoning.length === 0) !== (o.content.length === 0) && this.tokenIds === null && req.continuousUsage !== true) {
      // Text of one kind only, most chunks of a stream: a fixed frame around the text.
      if (o.content.length > 0) {
        this.textChunk ??= new TextChunk(this.head(), 'chat', req.includeUsage, this.index);
        this.sink.writeJson(this.textChunk.json(o.content));
      } else {
        this.reasoningChunk ??= new TextChunk(this.head(), 'chat', req.includeUsage, this.index, keys);
        this.sink.writeJson(this.reasoningChunk.json(o.reasoning));
      }
      return;
    }
    this.echoed = true;
    const delta: JsonObject = {};
    if (!this.roleSent) {
      delta.role = req.role ?? 'assistant';
      this.roleSent = true;
    }
    if (o.reasoning.length > 0) for (const k of keys) delta[k] = o.reasoning;
    // A chat echo leads the content unparsed: it is the client's own text, not the model's.
    if (lead.length > 0 || o.content.length > 0) delta.content = lead + o.content;
    if (this.chat.toolCalls !== null) delta.tool_calls = forcedDeltas(this.chat.toolCalls);
    else if (o.calls.length > 0) {
      // vLLM's DeltaToolCall (exclude_none): id, type and name on a call's first delta only.
      delta.tool_calls = o.calls.map((d): JsonObject => (d.name !== null ? { index: d.index, id: d.id, type: 'function', function: { name: d.name, arguments: d.arguments } } : { index: d.index, function: { arguments: d.arguments } }));
    }
    const c: JsonObject = { index: this.index, delta };
    c.logprobs = this.logprobs.of(rows, false);
    this.pendingLogprobs = [];
    c.finish_reason = end ? this.chat.finishReason(end) : null;
    c.stop_reason = end ? end.stopReason : null;
    if (end) c.matched_stop = matchedStop(end);
    if (this.tokenIds !== null) {
      c.token_ids = this.tokenIds;
      this.tokenIds = [];
    }
    const chunk = this.head();
    chunk.choices = [c];
    if (first && this.tokenIds !== null) chunk.prompt_token_ids = req.promptIds;
    writeWithUsage(this.sink, this.req, this.produced, chunk);
  }

  /** One streamed chunk with the pending text and logprobs (and the finish, when given). */
  private flushChunk(end: Ended | null): void {
    if (this.chat.parser !== null) return this.flushParsed(end);
    const req = this.req;
    // Most chunks of most streams: text only. Their JSON is a fixed frame around the text.
    if (end === null && req.logprobs === null && this.echoed && (this.roleSent || req.kind !== 'chat') && this.tokenIds === null && req.continuousUsage !== true) {
      this.textChunk ??= new TextChunk(this.head(), req.kind, req.includeUsage, this.index);
      const text = this.pendingText;
      this.pendingText = '';
      this.chat.answer?.addContent(text);
      this.sink.writeJson(this.textChunk.json(text));
      return;
    }
    let text = this.pendingText;
    this.chat.answer?.addContent(text);
    if (end !== null && this.chat.toolCalls !== null) this.chat.answer?.setCalls(this.chat.toolCalls);
    const first = !this.echoed;
    if (first) {
      // vLLM's echo in a stream: the prompt's text (chat: the last message's) leads the first chunk.
      text = this.leading() + text;
      this.echoed = true;
    }
    const chunk = this.head();
    chunk.choices = [this.choice(text, this.pendingLogprobs, end, first)];
    if (first && this.tokenIds !== null && req.kind === 'chat') chunk.prompt_token_ids = req.promptIds;
    this.pendingText = '';
    this.pendingLogprobs = [];
    writeWithUsage(this.sink, this.req, this.produced, chunk);
  }

  private finishWith(end: Ended): void {
    if (this.ended) return;
    if (this.req.forcedTools && this.req.kind === 'chat' && this.chat.parser === null) {
      // No parsers: the whole answer is the array, or content.
      this.chat.toolCalls = this.chat.forcedCalls(this.pendingText);
      if (this.chat.toolCalls) this.pendingText = '';
    }
    this.ended = end;
    const sink = this.sink;
    if (sink.streaming) {
      this.flushChunk(end);
      // include_usage: a last chunk with no choices and the usage.
      if (this.req.includeUsage) sink.writeChunk({ ...this.head(), choices: [], usage: usageOf(this.req, this.produced, this.cachedTokens) });
      sink.endStream();
      return;
    }
    const rows = this.pendingLogprobs;
    this.pendingLogprobs = [];
    const lead = this.leading();
    const text = lead + this.pendingText;
    this.pendingText = '';
    const usage = usageOf(this.req, this.produced, this.cachedTokens);
    const parts = { req: this.req, responseId: this.responseId, created: this.created, index: this.index, lead, text, rows, chat: this.chat, logprobs: this.logprobs, tokenIds: this.tokenIds, usage };
    sink.json(200, unaryAnswer(parts, end), this.attemptHeaders);
  }
}
