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
import { forcedToolCalls, type ForcedCall } from './forced-tools.ts';
import { ChatAnswerLog, type ChatView } from '../../core/chat-view.ts';
import { ChatParser, reasoningKeys, type ChatParsing, type ParseOut } from '../../parsers/index.ts';

export function openAiError(status: number, message: string, type: string, param: string | null = null): { error: { message: string; type: string; param: string | null; code: number } } {
  return { error: { message, type, param, code: status } };
}

const DONE = { message: 'stream ended ([DONE]) without a finished chunk', evidence: '[DONE] before a finish' };

/** OpenAI's logprob floor: JSON has no -Infinity (vLLM writes -9999.0 too). */
const lp = (x: number): number => (Number.isFinite(x) ? x : -9999);

/** The tail of the output stop_regex searches (SGLang decodes its stop_regex_max_len + 1 last tokens). */
const REGEX_TAIL = 256;

const matchedStop = (end: Ended): string | number | null => (end.reason !== 'stop' ? null : end.matched !== undefined ? end.matched : end.stopReason);

interface Ended {
  /** The worker's (or Baton's stop string's) finish; "tool_calls" is decided when rendering (finishReason). */
  reason: 'stop' | 'length' | 'abort';
  /** vLLM's `stop_reason`: the matched stop string or stop token id (null: EOS or length). */
  stopReason: string | number | null;
  /**
   * SGLang's `matched_stop` (serving_chat.py / serving_completions.py: finish_reason["matched"]):
   * the stop string, or the token id that stopped it, EOS included; absent: null.
   */
  matched?: string | number | null;
}

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

interface LogprobRow {
  id: number;
  /** null: a prompt position without one (the first, or a worker that reported none). */
  logprob: number | null;
  top: { id: number; logprob: number }[];
}

/** A message's tool call. */
const toolCallJson = (t: { id: string; name: string; arguments: string }): JsonObject => ({ id: t.id, type: 'function', function: { name: t.name, arguments: t.arguments } });

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
  /** Character offset of the next token in the completion's text (legacy logprobs' text_offset). */
  private textOffset = 0;
  /** Output tokens of the logical request so far (committed attempts and the current one). */
  private produced = 0;
  /** The text each token added (the dashboard colours it by attempt). */
  private readonly pieces: string[] = [];
  private roleSent = false;
  private textChunk: TextChunk | null = null;
  /** What the chat output parsers separate (the request's, or a forced tool_choice's); null: nothing. */
  private readonly parsing: ChatParsing | null;
  /** The chat output parsers (tool calls, reasoning), when the router has them and the request asks. */
  private readonly parser: ChatParser | null;
  /** The answer as the client got it, for the dashboard (chat only; bounded). */
  private readonly answer: ChatAnswerLog | null;
  /** A forced tool_choice's content, held until the end decides whether it is a call array (forced-tools.ts). */
  private forcedText = '';
  private reasoningChunk: TextChunk | null = null;
  /** The first chunk is out (it carries the role, the echo, the prompt's ids). */
  private echoed = false;
  private ended: Ended | null = null;
  /** return_token_ids: the ids not yet written (a unary answer's all); null when not asked. */
  private tokenIds: number[] | null;
  /** The prompt's logprob rows (logprob null at position 0), once the first attempt reported them. */
  private promptLogprobs: LogprobRow[] | null = null;
  private readonly index: number;
  /** stop_regex's patterns (null: none) and the output's tail text they are searched in. */
  private readonly stopRegex: { source: string; re: RegExp }[] | null;
  private regexTail = '';
  /** The last output token (the one a stop finish ended on). */
  private lastId: number | null = null;
  /** A forced tool_choice's calls read from its JSON array at the end (forced-tools.ts). */
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
    this.created = req.created ?? Math.floor(info.startedAt / 1000);
    this.responseId = req.responseId ?? `${req.kind === 'chat' ? 'chatcmpl' : 'cmpl'}-${info.id}`;
    this.index = req.index ?? 0;
    this.tokenIds = req.returnTokenIds ? [] : null;
    this.stopRegex = req.stopRegex ?? null;
    this.parsing = req.kind !== 'chat' ? null : req.forcedTools ? (req.forcedParsing ?? null) : (req.parsing ?? null);
    this.parser = this.parsing ? new ChatParser(this.parsing, !sink.streaming) : null;
    this.answer = req.chatView ? new ChatAnswerLog() : null;
  }

  chatView(): ChatView | null {
    return this.answer !== null && this.req.chatView ? this.answer.view(this.req.chatView) : null;
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
    if (flush && this.sink.streaming && (!this.req.forcedTools || this.parser !== null) && (this.pendingText.length > 0 || this.pendingLogprobs.length > 0 || (this.tokenIds !== null && this.tokenIds.length > 0))) this.flushChunk(null);
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
    if (this.promptLogprobs !== null || (this.req.promptLogprobs ?? null) === null) return;
    const ids = this.req.promptIds;
    // vLLM and OpenAI: the first prompt token has no logprob (nothing precedes it).
    this.promptLogprobs = ids.map((id, i) => {
      const r = i === 0 ? null : rows[i];
      return r ? { id, logprob: r.logprob, top: r.top } : { id, logprob: null, top: [] };
    });
  }

  /** The worker finished: whatever the decoder and the matcher held back is text now. */
  finishFromWorker(f: TokenFinish): void {
    // The token that stopped it: the worker's word (SGLang names it; vLLM names stop_token_ids
    // only), else the last one, which a stop finish without a string match ends on.
    const matched = f.reason === 'stop' ? (f.matched ?? this.lastId) : null;
    this.finishWith(this.drain() ?? { reason: f.reason, stopReason: f.reason === 'stop' ? this.stopTokenReason(f.matched) : null, matched });
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

  /** A token as a logprob entry names it: its text, or vLLM's "token_id:N" (return_tokens_as_token_ids). */
  private tokenName(id: number): string {
    return this.req.tokensAsIds ? `token_id:${id}` : this.req.tokenizer.tokenText(id);
  }

  /** The prompt's rows for an echo: the worker's, or the bare ids when it reported none. */
  private promptRows(): LogprobRow[] {
    return this.promptLogprobs ?? this.req.promptIds.map((id) => ({ id, logprob: null, top: [] }));
  }

  /** The text that leads the answer: the prompt (completions' echo) or the last message (chat's). */
  private leading(): string {
    if (this.req.kind === 'chat') return this.req.chatEcho ?? '';
    return this.req.echo ? this.req.promptText : '';
  }

  /**
   * OpenAI's logprobs object for some tokens: chat's `content` list, or the completions' lists
   * (led by the prompt's rows when echoed). vLLM's shapes: chat_completion/serving.py
   * _create_chat_logprobs, completion/serving.py _create_completion_logprobs (whose
   * top_logprobs holds the sampled token first, then the alternatives: `logprobs: 0` gives the
   * sampled token alone).
   */
  private logprobsOf(rows: LogprobRow[], withPrompt: boolean): JsonObject | null {
    if (this.req.logprobs === null || (this.sink.streaming && rows.length === 0 && !withPrompt)) return null;
    const tok = this.req.tokenizer;
    const k = this.req.logprobs;
    if (this.req.kind === 'chat') {
      return {
        content: rows.map((r) => ({
          token: this.tokenName(r.id),
          logprob: lp(r.logprob ?? 0),
          bytes: tok.tokenBytes(r.id),
          top_logprobs: r.top.slice(0, k).map((t) => {
            const name = this.tokenName(t.id);
            return { token: name, logprob: lp(t.logprob), bytes: this.req.tokensAsIds ? [...Buffer.from(name)] : tok.tokenBytes(t.id) };
          }),
        })),
      };
    }
    const all = withPrompt ? [...this.promptRows(), ...rows] : rows;
    const tokens: string[] = [];
    const offsets: number[] = [];
    const tokenLps: (number | null)[] = [];
    const top: (Record<string, number> | null)[] = [];
    for (const r of all) {
      const t = this.tokenName(r.id);
      tokens.push(t);
      offsets.push(this.textOffset);
      this.textOffset += t.length;
      if (r.logprob === null) {
        tokenLps.push(null);
        top.push(null);
        continue;
      }
      tokenLps.push(lp(r.logprob));
      const alts: Record<string, number> = { [t]: lp(r.logprob) };
      for (const x of r.top.slice(0, k)) if (x.id !== r.id) alts[this.tokenName(x.id)] = lp(x.logprob);
      top.push(alts);
    }
    return { tokens, token_logprobs: tokenLps, top_logprobs: top, text_offset: offsets };
  }

  /** vLLM's prompt_logprobs: null, then per position {"<id>": {logprob, rank, decoded_token}}. */
  private promptLogprobsJson(): (JsonObject | null)[] | null {
    if ((this.req.promptLogprobs ?? null) === null) return null;
    return this.promptRows().map((r, i) => {
      if (i === 0 || r.logprob === null) return null;
      const o: JsonObject = {};
      const at = r.top.findIndex((t) => t.id === r.id);
      // rank: the token's place among the alternatives the worker reported (1-based), else past them.
      o[String(r.id)] = { logprob: lp(r.logprob), rank: at >= 0 ? at + 1 : r.top.length + 1, decoded_token: this.tokenName(r.id) };
      for (const [j, t] of r.top.slice(0, this.req.promptLogprobs!).entries()) if (t.id !== r.id) o[String(t.id)] = { logprob: lp(t.logprob), rank: j + 1, decoded_token: this.tokenName(t.id) };
      return o;
    });
  }

  private choice(text: string, rows: LogprobRow[], end: Ended | null, first: boolean): JsonObject {
    const c: JsonObject = { index: this.index };
    if (this.req.kind === 'chat') {
      const delta: JsonObject = {};
      if (!this.roleSent) {
        delta.role = this.req.role ?? 'assistant';
        this.roleSent = true;
      }
      if (this.toolCalls) delta.tool_calls = forcedDeltas(this.toolCalls);
      else if (text.length > 0 || end === null) delta.content = text;
      c.delta = delta;
    } else {
      c.text = text;
    }
    c.logprobs = this.logprobsOf(rows, first && this.req.kind === 'completion' && this.req.echo);
    c.finish_reason = end ? this.finishReason(end) : null;
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
    if (this.req.forcedTools) this.holdForced(o, end !== null);
    if (this.answer !== null) {
      this.answer.addReasoning(o.reasoning);
      this.answer.addContent(o.content);
      for (const d of o.calls) this.answer.callDelta(d.index, d.name, d.arguments);
      if (this.toolCalls !== null) this.answer.setCalls(this.toolCalls);
    }
    const req = this.req;
    const rows = this.pendingLogprobs;
    const first = !this.echoed;
    const lead = first ? this.leading() : '';
    if (end === null && o.empty && rows.length === 0 && lead.length === 0) return;
    const keys = reasoningKeys(this.parsing!.reasoningField);
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
    if (this.toolCalls !== null) delta.tool_calls = forcedDeltas(this.toolCalls);
    else if (o.calls.length > 0) {
      // vLLM's DeltaToolCall (exclude_none): id, type and name on a call's first delta only.
      delta.tool_calls = o.calls.map((d): JsonObject => (d.name !== null ? { index: d.index, id: d.id, type: 'function', function: { name: d.name, arguments: d.arguments } } : { index: d.index, function: { arguments: d.arguments } }));
    }
    const c: JsonObject = { index: this.index, delta };
    c.logprobs = this.logprobsOf(rows, false);
    this.pendingLogprobs = [];
    c.finish_reason = end ? this.finishReason(end) : null;
    c.stop_reason = end ? end.stopReason : null;
    if (end) c.matched_stop = matchedStop(end);
    if (this.tokenIds !== null) {
      c.token_ids = this.tokenIds;
      this.tokenIds = [];
    }
    const chunk = this.head();
    chunk.choices = [c];
    if (first && this.tokenIds !== null) chunk.prompt_token_ids = req.promptIds;
    this.writeUsageAndChunk(chunk);
  }

  /**
   * A forced tool_choice's content, held (nothing of it streams): at the end it is the JSON
   * array's calls, or, when the model answered in its own call format (the parser's calls) or
   * wrote no array, content again.
   */
  private holdForced(o: ParseOut, last: boolean): void {
    this.forcedText += o.content;
    o.content = '';
    if (!last) return;
    if (!this.parser!.called) this.toolCalls = this.forcedCalls(this.forcedText);
    // Beside calls in the model's own format, only text that is more than the blank lines around
    // them (the non-streamed answer strips it: ChatParser.parseWhole).
    if (this.toolCalls === null && (!this.parser!.called || /\S/.test(this.forcedText))) o.content = this.forcedText;
    this.forcedText = '';
  }

  /** A forced answer's JSON array of calls (forced-tools.ts), the first only with parallel_tool_calls false. */
  private forcedCalls(text: string): ForcedCall[] | null {
    const calls = forcedToolCalls(text);
    return calls !== null && this.req.parallelToolCalls === false ? calls.slice(0, 1) : calls;
  }

  /** Whether the answer holds tool calls (the parsers', or a forced JSON array's). */
  private get called(): boolean {
    return this.toolCalls !== null || (this.parser !== null && this.parser.called);
  }

  /** SGLang's and vLLM's finish_reason "tool_calls": a call was made and the model stopped. */
  private finishReason(end: Ended): string {
    const reason = end.reason === 'stop' && this.called ? 'tool_calls' : end.reason;
    this.answer?.setFinish(reason);
    return reason;
  }

  /** One streamed chunk with the pending text and logprobs (and the finish, when given). */
  private flushChunk(end: Ended | null): void {
    if (this.parser !== null) return this.flushParsed(end);
    const req = this.req;
    // Most chunks of most streams: text only. Their JSON is a fixed frame around the text.
    if (end === null && req.logprobs === null && this.echoed && (this.roleSent || req.kind !== 'chat') && this.tokenIds === null && req.continuousUsage !== true) {
      this.textChunk ??= new TextChunk(this.head(), req.kind, req.includeUsage, this.index);
      const text = this.pendingText;
      this.pendingText = '';
      this.answer?.addContent(text);
      this.sink.writeJson(this.textChunk.json(text));
      return;
    }
    let text = this.pendingText;
    this.answer?.addContent(text);
    if (end !== null && this.toolCalls !== null) this.answer?.setCalls(this.toolCalls);
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
    this.writeUsageAndChunk(chunk);
  }

  private writeUsageAndChunk(chunk: JsonObject): void {
    const req = this.req;
    // OpenAI: with include_usage every other chunk carries `usage: null`; vLLM's
    // continuous_usage_stats: this choice's usage so far in every one.
    if (req.continuousUsage) {
      const prompt = req.promptIds.length;
      chunk.usage = { prompt_tokens: prompt, completion_tokens: this.produced, total_tokens: prompt + this.produced };
    } else if (req.includeUsage) chunk.usage = null;
    this.sink.writeChunk(chunk);
  }

  private finishWith(end: Ended): void {
    if (this.ended) return;
    if (this.req.forcedTools && this.req.kind === 'chat' && this.parser === null) {
      // No parsers: the whole answer is the array, or content.
      this.toolCalls = this.forcedCalls(this.pendingText);
      if (this.toolCalls) this.pendingText = '';
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
    const req = this.req;
    const rows = this.pendingLogprobs;
    this.pendingLogprobs = [];
    const lead = this.leading();
    const text = lead + this.pendingText;
    this.pendingText = '';
    const choice: JsonObject = { index: this.index };
    if (req.kind === 'chat' && this.toolCalls) {
      choice.message = { role: 'assistant', content: null, tool_calls: this.toolCalls.map(toolCallJson) };
      this.answer?.setCalls(this.toolCalls);
    } else if (this.parser !== null) {
      // SGLang's _build_chat_response: reasoning split first, then the tool calls. A chat echo
      // leads the content unparsed: it is the client's own text, not the model's.
      const m = this.parser.parseWhole(text.slice(lead.length));
      let calls: { id: string; name: string; arguments: string }[] = m.toolCalls;
      let content = m.content;
      if (req.forcedTools && calls.length === 0) {
        // Not in the model's own call format: the JSON array the forced choice's constraint asks for.
        this.toolCalls = this.forcedCalls(content ?? '');
        if (this.toolCalls !== null) {
          calls = this.toolCalls;
          content = null;
        }
      }
      const message: JsonObject = { role: req.role ?? 'assistant', content: lead.length > 0 ? lead + (content ?? '') : content };
      if (this.parsing!.reasoning !== null) for (const k of reasoningKeys(this.parsing!.reasoningField)) message[k] = m.reasoning;
      if (calls.length > 0) message.tool_calls = calls.map(toolCallJson);
      choice.message = message;
      this.answer?.addReasoning(m.reasoning ?? '');
      this.answer?.addContent(content ?? '');
      this.answer?.setCalls(calls);
    } else if (req.kind === 'chat') {
      choice.message = { role: req.role ?? 'assistant', content: text };
      this.answer?.addContent(text.slice(lead.length));
    }
    else choice.text = text;
    choice.logprobs = this.logprobsOf(rows, req.kind === 'completion' && req.echo);
    choice.finish_reason = this.finishReason(end);
    choice.stop_reason = end.stopReason;
    // SGLang's non-streaming _process_tool_calls sets finish_reason["matched"] = None where it
    // turns a stop into "tool_calls"; its stream keeps the matched token (_generate_chat_stream:
    // finish_reason_data.get("matched")), as flushChunk does.
    choice.matched_stop = choice.finish_reason === 'tool_calls' ? null : matchedStop(end);
    const promptLps = this.promptLogprobsJson();
    if (req.kind === 'completion' && promptLps !== null) choice.prompt_logprobs = promptLps;
    if (this.tokenIds !== null) {
      if (req.kind === 'completion') choice.prompt_token_ids = req.promptIds;
      choice.token_ids = this.tokenIds;
    }
    const body: JsonObject = {
      id: this.responseId,
      object: req.kind === 'chat' ? 'chat.completion' : 'text_completion',
      created: this.created,
      model: req.model,
      choices: [choice],
      usage: this.usage(),
    };
    if (req.kind === 'chat' && promptLps !== null) body.prompt_logprobs = promptLps;
    if (req.kind === 'chat' && this.tokenIds !== null) body.prompt_token_ids = req.promptIds;
    sink.json(200, JSON.stringify(body), this.attemptHeaders);
  }
}
