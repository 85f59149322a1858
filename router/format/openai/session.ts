// The OpenAI-compatible front's side of one logical request. The workers see token ids only;
// Baton detokenizes the logical output incrementally (one IncrementalDecoder over every attempt's
// tokens, so a migration boundary is just another split), matches stop strings on that text
// (a match may span chunks and attempts), and renders OpenAI's chunks, answers and usage. The
// text is a pure function of the logical ids, so a migrated answer equals the uninterrupted one.
//
// Tokens are taken one at a time: a stop string ends the output at the token that completes it,
// whatever the frames' batching, as vLLM's detokenizer checks after every token; none can before
// min_tokens output tokens exist (counted over the logical request, so over attempts too).
import type { Failure } from '../../migration/failure.ts';
import { IncrementalDecoder, StopMatcher } from '../../tokenizer/index.ts';
import type { ClientSink } from '../client-sink.ts';
import { JsonFrameAttempt } from '../frames.ts';
import type { AttemptHost, AttemptSpec, FormatAttempt, FormatSession, JsonObject, TokenFinish, TokenLogprob, TokenReader, TokenWorker, WorkerView } from '../types.ts';
import type { OpenAiRequest } from './request.ts';
import { forcedToolCalls, type ForcedCall } from './forced-tools.ts';
import { ChatParser, type ParseOut } from './parsers/index.ts';

export function openAiError(status: number, message: string, type: string, param: string | null = null): { error: { message: string; type: string; param: string | null; code: number } } {
  return { error: { message, type, param, code: status } };
}

const DONE = { message: 'stream ended ([DONE]) without a finished chunk', evidence: '[DONE] before a finish' };

/** OpenAI's logprob floor: JSON has no -Infinity (vLLM writes -9999.0 too). */
const lp = (x: number): number => (Number.isFinite(x) ? x : -9999);

interface Ended {
  reason: 'stop' | 'length' | 'abort' | 'tool_calls';
  /** vLLM's `stop_reason`: the matched stop string or stop token id (null: EOS or length). */
  stopReason: string | number | null;
}

/**
 * The JSON of a streamed chunk that carries text only (no role, logprobs or finish): exactly
 * JSON.stringify of the object flushChunk builds otherwise, written as a fixed prefix and suffix
 * around the text, since it is every chunk of a plain stream (test/openai/session.test.ts holds
 * the two equal).
 */
export class TextChunk {
  private readonly prefix: string;
  private readonly suffix: string;

  constructor(head: JsonObject, kind: OpenAiRequest['kind'], includeUsage: boolean, field = 'content') {
    const h = JSON.stringify(head);
    this.prefix = `${h.slice(0, -1)},"choices":[{"index":0,${kind === 'chat' ? `"delta":{"${field}":` : '"text":'}`;
    this.suffix = `${kind === 'chat' ? '}' : ''},"logprobs":null,"finish_reason":null,"stop_reason":null}]${includeUsage ? ',"usage":null' : ''}}`;
  }

  json(text: string): string {
    return this.prefix + JSON.stringify(text) + this.suffix;
  }
}

/** The session side an attempt feeds (the chat/completions session, the Responses session). */
export interface TokenAbsorber {
  cachedTokens: number | null;
  /** Take an attempt's new tokens; true when a stop string ended the answer. */
  absorb(a: OpenAiAttempt, ids: readonly number[], logprobs: readonly TokenLogprob[] | null): boolean;
  finishFromWorker(f: TokenFinish): void;
}

export class OpenAiAttempt extends JsonFrameAttempt {
  version: string | null = null;

  constructor(
    private readonly session: TokenAbsorber,
    spec: AttemptSpec,
    host: AttemptHost,
    private readonly reader: TokenReader,
  ) {
    super(spec, host, DONE);
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
    const stopped = this.session.absorb(this, f.ids, f.logprobs);
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

interface LogprobRow {
  id: number;
  logprob: number;
  top: { id: number; logprob: number }[];
}

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
  /** Character offset of the next token in the completion's text (legacy logprobs' text_offset). */
  private textOffset = 0;
  /** Output tokens of the logical request so far (committed attempts and the current one). */
  private produced = 0;
  /** The text each token added (the dashboard colours it by attempt). */
  private readonly pieces: string[] = [];
  private roleSent = false;
  private textChunk: TextChunk | null = null;
  /** The chat output parsers (tool calls, reasoning), when the router has them and the request asks. */
  private readonly parser: ChatParser | null;
  private reasoningChunk: TextChunk | null = null;
  private echoed = false;
  private ended: Ended | null = null;
  /** A forced tool_choice's calls, read from the whole answer at its end (forced-tools.ts). */
  private toolCalls: ForcedCall[] | null = null;
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
    this.created = Math.floor(info.startedAt / 1000);
    this.responseId = `${req.kind === 'chat' ? 'chatcmpl' : 'cmpl'}-${info.id}`;
    if (req.echo) this.textOffset = req.promptText.length;
    this.parser = req.kind === 'chat' && req.parsing ? new ChatParser(req.parsing, !sink.streaming) : null;
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
    return new OpenAiAttempt(this, spec, host, this.worker.reader(worker));
  }

  commit(fa: FormatAttempt): void {
    const a = fa as OpenAiAttempt;
    for (const id of a.ids) this.ids.push(id);
  }

  /**
   * Take an attempt's new tokens, one at a time: decode, match stop strings, keep logprobs. True
   * when a stop string matched (the answer is then delivered: the caller cuts the worker off).
   */
  absorb(a: OpenAiAttempt, ids: readonly number[], logprobs: readonly TokenLogprob[] | null): boolean {
    const want = this.req.logprobs !== null;
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i]!;
      a.ids.push(id);
      this.produced++;
      if (want) {
        const e = logprobs?.[i];
        this.pendingLogprobs.push({ id, logprob: e ? e.logprob : 0, top: e ? e.top : [] });
      }
      const piece = this.decoder.pushOne(id);
      this.pieces.push(piece);
      if (this.matcher === null) {
        this.pendingText += piece;
        continue;
      }
      // vLLM searches no stop string until min_tokens output tokens exist (stop.ts).
      const { emit, stop } = this.matcher.push(piece, this.produced > this.req.minTokens);
      this.pendingText += emit;
      if (stop !== null) {
        this.finishWith({ reason: 'stop', stopReason: stop });
        return true;
      }
    }
    // A forced tool_choice's answer is read whole at the end: nothing streams before it.
    if (this.sink.streaming && !this.req.forcedTools && (this.pendingText.length > 0 || this.pendingLogprobs.length > 0)) this.flushChunk(null);
    return false;
  }

  /** The worker finished: whatever the decoder and the matcher held back is text now. */
  finishFromWorker(f: TokenFinish): void {
    this.finishWith(this.drain() ?? { reason: f.reason, stopReason: f.reason === 'stop' ? this.stopTokenReason(f.matched) : null });
  }

  /**
   * vLLM's `stop_reason` for a finish on token `id` (v1 check_stop): null on the tokenizer's own
   * EOS, which vLLM checks apart from stop_token_ids (unless ignore_eos), else the id; the other
   * generation_config EOS ids are stop_token_ids there (SamplingParams.update_from_generation_config).
   * SGLang names the EOS it stopped on; vLLM's worker reports null for it already.
   */
  private stopTokenReason(id: number | null): number | null {
    if (id === null) return null;
    return id === this.req.tokenizer.eosTokenId && !this.req.sampling.ignore_eos ? null : id;
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

  private usage(): JsonObject {
    const prompt = this.req.promptIds.length;
    const u: JsonObject = { prompt_tokens: prompt, total_tokens: prompt + this.produced, completion_tokens: this.produced };
    if (this.cachedTokens !== null) u.prompt_tokens_details = { cached_tokens: Math.min(this.cachedTokens, prompt) };
    return u;
  }

  private head(): JsonObject {
    return { id: this.responseId, object: this.req.kind === 'chat' ? 'chat.completion.chunk' : 'text_completion', created: this.created, model: this.req.model };
  }

  /** OpenAI's logprobs object for some tokens: chat's `content` list, or the completions' lists. */
  private logprobsOf(rows: LogprobRow[]): JsonObject | null {
    if (this.req.logprobs === null || (this.sink.streaming && rows.length === 0)) return null;
    const tok = this.req.tokenizer;
    if (this.req.kind === 'chat') {
      return {
        content: rows.map((r) => ({
          token: tok.tokenText(r.id),
          logprob: lp(r.logprob),
          bytes: tok.tokenBytes(r.id),
          top_logprobs: r.top.slice(0, this.req.logprobs!).map((t) => ({ token: tok.tokenText(t.id), logprob: lp(t.logprob), bytes: tok.tokenBytes(t.id) })),
        })),
      };
    }
    const tokens: string[] = [];
    const offsets: number[] = [];
    const top: (Record<string, number> | null)[] = [];
    for (const r of rows) {
      const t = tok.tokenText(r.id);
      tokens.push(t);
      offsets.push(this.textOffset);
      this.textOffset += t.length;
      const alts: Record<string, number> = {};
      for (const x of r.top.slice(0, this.req.logprobs!)) alts[tok.tokenText(x.id)] = lp(x.logprob);
      top.push(this.req.logprobs! > 0 ? alts : null);
    }
    return { tokens, token_logprobs: rows.map((r) => lp(r.logprob)), top_logprobs: top, text_offset: offsets };
  }

  private choice(text: string, rows: LogprobRow[], end: Ended | null): JsonObject {
    const c: JsonObject = { index: 0 };
    if (this.req.kind === 'chat') {
      const delta: JsonObject = {};
      if (!this.roleSent) {
        delta.role = 'assistant';
        this.roleSent = true;
      }
      if (this.toolCalls) delta.tool_calls = this.toolCalls.map((t, index) => ({ index, id: t.id, type: 'function', function: { name: t.name, arguments: t.arguments } }));
      else if (text.length > 0 || end === null) delta.content = text;
      c.delta = delta;
    } else {
      c.text = text;
    }
    c.logprobs = this.logprobsOf(rows);
    c.finish_reason = end ? end.reason : null;
    c.stop_reason = end ? end.stopReason : null;
    return c;
  }

  /**
   * The parsers' streamed chunk for the pending text (and the finish, when given): the deltas
   * vLLM's and SGLang's chat streams carry (`reasoning_content`, `content`, `tool_calls`), in one
   * chunk; nothing while the parsers hold the text back (a marker may be starting).
   */
  private flushParsed(end: Ended | null): void {
    const parser = this.parser!;
    let o: ParseOut = parser.push(this.pendingText);
    this.pendingText = '';
    if (end !== null) {
      // The end: what the parsers held back is decided now, merged into this last chunk.
      const reasoning = o.reasoning;
      const content = o.content;
      const calls = o.calls;
      o = parser.finish();
      o.reasoning = reasoning + o.reasoning;
      o.content = content + o.content;
      if (calls.length > 0) o.calls = [...calls, ...o.calls];
    }
    const rows = this.pendingLogprobs;
    if (end === null && o.empty && rows.length === 0) return;
    const field = this.req.parsing!.reasoningField;
    if (end === null && rows.length === 0 && this.roleSent && o.calls.length === 0 && (o.reasoning.length === 0) !== (o.content.length === 0)) {
      // Text of one kind only, most chunks of a stream: a fixed frame around the text.
      if (o.content.length > 0) {
        this.textChunk ??= new TextChunk(this.head(), 'chat', this.req.includeUsage);
        this.sink.writeJson(this.textChunk.json(o.content));
      } else {
        this.reasoningChunk ??= new TextChunk(this.head(), 'chat', this.req.includeUsage, field);
        this.sink.writeJson(this.reasoningChunk.json(o.reasoning));
      }
      return;
    }
    const delta: JsonObject = {};
    if (!this.roleSent) {
      delta.role = 'assistant';
      this.roleSent = true;
    }
    if (o.reasoning.length > 0) delta[field] = o.reasoning;
    if (o.content.length > 0) delta.content = o.content;
    if (o.calls.length > 0) {
      // vLLM's DeltaToolCall (exclude_none): id, type and name on a call's first delta only.
      delta.tool_calls = o.calls.map((d): JsonObject => (d.name !== null ? { index: d.index, id: d.id, type: 'function', function: { name: d.name, arguments: d.arguments } } : { index: d.index, function: { arguments: d.arguments } }));
    }
    const c: JsonObject = { index: 0, delta };
    c.logprobs = this.logprobsOf(rows);
    this.pendingLogprobs = [];
    c.finish_reason = end ? this.finishReason(end) : null;
    c.stop_reason = end ? end.stopReason : null;
    const chunk = this.head();
    chunk.choices = [c];
    if (this.req.includeUsage) chunk.usage = null;
    this.sink.writeChunk(chunk);
  }

  /** SGLang's and vLLM's finish_reason "tool_calls": a call was made and the model stopped. */
  private finishReason(end: Ended): string {
    return end.reason === 'stop' && this.parser !== null && this.parser.called ? 'tool_calls' : end.reason;
  }

  /** One streamed chunk with the pending text and logprobs (and the finish, when given). */
  private flushChunk(end: Ended | null): void {
    if (this.parser !== null) return this.flushParsed(end);
    // Most chunks of most streams: text only. Their JSON is a fixed frame around the text.
    if (end === null && this.req.logprobs === null && (this.roleSent || this.req.kind !== 'chat') && (this.echoed || !this.req.echo)) {
      this.textChunk ??= new TextChunk(this.head(), this.req.kind, this.req.includeUsage);
      const text = this.pendingText;
      this.pendingText = '';
      this.sink.writeJson(this.textChunk.json(text));
      return;
    }
    let text = this.pendingText;
    if (this.req.echo && !this.echoed) {
      // vLLM's echo in a stream: the prompt's text leads the first chunk.
      text = this.req.promptText + text;
      this.echoed = true;
    }
    const chunk = this.head();
    chunk.choices = [this.choice(text, this.pendingLogprobs, end)];
    // OpenAI: with include_usage every other chunk carries `usage: null`.
    if (this.req.includeUsage) chunk.usage = null;
    this.pendingText = '';
    this.pendingLogprobs = [];
    this.sink.writeChunk(chunk);
  }

  private finishWith(end: Ended): void {
    if (this.ended) return;
    if (this.req.forcedTools && this.req.kind === 'chat') {
      this.toolCalls = forcedToolCalls(this.pendingText);
      if (this.toolCalls) {
        this.pendingText = '';
        if (end.reason === 'stop') end = { reason: 'tool_calls', stopReason: null };
      }
    }
    this.ended = end;
    const sink = this.sink;
    if (sink.streaming) {
      this.flushChunk(end);
      if (this.req.includeUsage) {
        const u = this.head();
        u.choices = [];
        u.usage = this.usage();
        sink.writeChunk(u);
      }
      sink.endStream();
      return;
    }
    const rows = this.pendingLogprobs;
    this.pendingLogprobs = [];
    const text = (this.req.echo ? this.req.promptText : '') + this.pendingText;
    this.pendingText = '';
    const choice: JsonObject = { index: 0 };
    let reason: string = end.reason;
    if (this.req.kind === 'chat' && this.toolCalls) {
      choice.message = { role: 'assistant', content: null, tool_calls: this.toolCalls.map((t) => ({ id: t.id, type: 'function', function: { name: t.name, arguments: t.arguments } })) };
    } else if (this.parser !== null) {
      // SGLang's _build_chat_response: reasoning split first, then the tool calls.
      const m = this.parser.parseWhole(text);
      const message: JsonObject = { role: 'assistant', content: m.content };
      if (this.req.parsing!.reasoning !== null) message[this.req.parsing!.reasoningField] = m.reasoning;
      if (m.toolCalls.length > 0) {
        message.tool_calls = m.toolCalls.map((t) => ({ id: t.id, type: 'function', function: { name: t.name, arguments: t.arguments } }));
        if (end.reason === 'stop') reason = 'tool_calls';
      }
      choice.message = message;
    } else if (this.req.kind === 'chat') choice.message = { role: 'assistant', content: text };
    else choice.text = text;
    choice.logprobs = this.logprobsOf(rows);
    choice.finish_reason = reason;
    choice.stop_reason = end.stopReason;
    const body: JsonObject = {
      id: this.responseId,
      object: this.req.kind === 'chat' ? 'chat.completion' : 'text_completion',
      created: this.created,
      model: this.req.model,
      choices: [choice],
      usage: this.usage(),
    };
    sink.json(200, JSON.stringify(body), this.attemptHeaders);
  }
}
